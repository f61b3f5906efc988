"""The per-round series DVC plots: one CSV per experiment and method (β: and source), means over targets and
seeds, folders replaced as a whole."""

import json

import pandas as pd
import pytest

from fdabench.report.dvc_plots import betas_series, rounds_series, write_dvc_plots, write_series


def _cell(tmp_path, method, target, seed, accuracies, betas=None):
    rounds = [
        {"round": r, "phase": "fda", "accuracy": a, **({"betas": betas[r]} if betas else {})}
        for r, a in enumerate(accuracies)
    ]
    payload = {
        "format": "fdabench.cell/1",
        "status": "complete",
        "cell": {"suite": "s", "experiment": "e", "dataset": "d", "method": method, "target": target, "seed": seed},
        "config": {"method": method, "algorithm": method, "target": target, "seed": seed},
        "metric": "accuracy",
        "final": accuracies[-1],
        "sources": {"a": ["b", "c"], "b": ["a", "c"]}[target],
        "rounds": rounds,
    }
    path = tmp_path / f"{method}-{target}-{seed}.json"
    path.write_text(json.dumps(payload))
    return str(path)


def test_rounds_are_means_over_targets_and_seeds(tmp_path):
    paths = [
        _cell(tmp_path, "fedgp", "a", 0, [0.2, 0.4]),
        _cell(tmp_path, "fedgp", "a", 1, [0.4, 0.6]),
        _cell(tmp_path, "fedgp", "b", 0, [0.6, 0.8]),
    ]
    series = rounds_series(paths)
    assert list(series) == ["e/fedgp"]
    # per round: the mean of the three runs, in %
    assert series["e/fedgp"] == [(1, pytest.approx(40.0)), (2, pytest.approx(60.0))]


def test_betas_per_source_over_the_targets_it_serves(tmp_path):
    paths = [
        _cell(tmp_path, "fedgp_auto", "a", 0, [0.5], betas=[[0.2, 0.6]]),  # sources b, c
        _cell(tmp_path, "fedgp_auto", "b", 0, [0.5], betas=[[0.4, 0.8]]),  # sources a, c
    ]
    series = betas_series(paths)
    assert series == {
        "e/fedgp_auto/b": [(1, pytest.approx(0.2))],
        "e/fedgp_auto/c": [(1, pytest.approx(0.7))],  # a source of both targets
        "e/fedgp_auto/a": [(1, pytest.approx(0.4))],
    }


def test_written_files_and_whole_folder_replacement(tmp_path):
    paths = [_cell(tmp_path, "fedgp", "a", 0, [0.2, 0.4]), _cell(tmp_path, "source_only", "a", 0, [0.1, 0.3])]
    rounds, betas = tmp_path / "plots/rounds", tmp_path / "plots/betas"
    rounds.mkdir(parents=True)
    (rounds / "stale.csv").write_text("from an earlier run\n")
    assert write_dvc_plots(paths, rounds, betas) == (2, 0)
    assert sorted(p.relative_to(rounds).as_posix() for p in rounds.rglob("*.csv")) == [
        "e/fedgp.csv",
        "e/source_only.csv",
    ]
    frame = pd.read_csv(rounds / "e/fedgp.csv")
    assert list(frame.columns) == ["round", "target_test_metric"] and frame["target_test_metric"].tolist() == [20, 40]
    assert betas.is_dir() and not any(betas.iterdir())  # no auto method: an empty folder, still an output
    write_series(rounds, {}, ["round", "beta"])
    assert not any(rounds.iterdir()) and not (tmp_path / "plots/rounds.partial").exists()
