"""Model selection over a sweep's cells: rules read validation only, the oracle is marked, intervals and tests are
scipy's, and the command writes every table, test and diagram."""

import base64
import math
import re

import matplotlib
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fdabench.cli import main
from fdabench.core import paths
from fdabench.core.io import write_json_atomic
from fdabench.report import sweep
from fdabench.report.style import method_styles


def cell(method, target, trial, draw, test, source_val, target_val, fold=None, rounds=6, final_rounds=2, mse=False):
    """A finished cell whose rounds hold constant metrics (`test` etc. may be per-round lists)."""
    metric = "mse" if mse else "accuracy"

    def series(value):
        return value if isinstance(value, list) else [value] * rounds

    records = [
        {"round": r, "phase": "fda", metric: t, f"source_val_{metric}": s, f"target_val_{metric}": v}
        for r, (t, s, v) in enumerate(zip(series(test), series(source_val), series(target_val)))
    ]
    config = {
        "experiment": "exp",
        "method": f"{method}.draw{draw}",
        "target": target,
        "seed": trial,
        "sweep": {"method": method, "draw": draw, "values": {}},
    }
    if fold is not None:
        config["validation"] = {"target_folds": 2, "target_fold": fold}
    tail = [record[metric] for record in records[-final_rounds:]]
    return {
        "format": "fdabench.cell/1",
        "status": "complete",
        "config": config,
        "metric": metric,
        "higher_is_better": not mse,
        "final": sum(tail) / len(tail),
        "final_rounds": final_rounds,
        "rounds": records,
    }


def disagreeing_cells():
    """Draw 1 validates best but tests worst; draw 2 tests best but validates worst; draw 0 in between."""
    cells = []
    for target in ("a", "b"):
        for trial in (0, 1, 2):
            shift = 0.01 * trial
            cells += [
                cell("m", target, trial, 0, 0.50 + shift, 0.50, 0.50),
                cell("m", target, trial, 1, 0.30 + shift, 0.90, 0.80),
                cell("m", target, trial, 2, 0.90 + shift, 0.10, 0.20),
            ]
    return cells


@pytest.mark.parametrize(
    "rule, draw, value",
    [("source_val", 1, 0.30), ("target_val", 1, 0.30), ("last", 0, 0.50), ("oracle", 2, 0.90)],
)
def test_each_rule_picks_by_what_it_reads_and_reports_the_test_metric(rule, draw, value):
    selected = sweep.select(sweep.sweep_frame(disagreeing_cells(), rule), rule)
    assert set(selected["draw"]) == {draw}
    assert np.allclose(selected["test"], value + 0.01 * selected["trial"])


def test_validation_rules_never_read_the_test_split():
    cells = disagreeing_cells()
    scrambled = [dict(c, rounds=[{**r, "accuracy": 1.0 - r["accuracy"]} for r in c["rounds"]]) for c in cells]
    for c in scrambled:
        c["final"] = 1.0 - c["final"]
    for rule in ("source_val", "target_val", "last"):
        for early in (False, True):
            first = sweep.select(sweep.sweep_frame(cells, rule, early), rule)
            second = sweep.select(sweep.sweep_frame(scrambled, rule, early), rule)
            assert first["draw"].tolist() == second["draw"].tolist(), (rule, early)
    oracle = sweep.select(sweep.sweep_frame(scrambled, "oracle"), "oracle")
    assert set(oracle["draw"]) == {1}  # the oracle does follow the test metric


def test_lower_is_better_for_mse_and_ties_go_to_the_lowest_draw():
    cells = [
        cell("m", "a", 0, d, test, val, val, mse=True) for d, test, val in [(0, 2.0, 1.0), (1, 1.0, 0.5), (2, 3.0, 0.5)]
    ]
    selected = sweep.select(sweep.sweep_frame(cells, "source_val"), "source_val")
    assert selected["draw"].tolist() == [1] and selected["test"].tolist() == [1.0]


def test_early_stopping_reports_the_test_metric_at_the_best_validation_round():
    c = cell("m", "a", 0, 0, [0.1, 0.2, 0.9, 0.3, 0.4, 0.5], 0.5, [0.1, 0.7, 0.2, 0.7, 0.3, 0.3])
    assert sweep.cell_scores(c, "target_val", early_stopping=True) == (0.7, 0.2)  # first best round
    assert sweep.cell_scores(c, "target_val", early_stopping=False) == (0.3, 0.45)  # the last 2 rounds
    assert sweep.cell_scores(c, "oracle", early_stopping=True) == (0.9, 0.9)


def test_k_fold_averages_validation_and_test_over_the_folds():
    cells = [
        cell("m", "a", 0, 0, 0.6, 0.5, 0.4, fold=0),
        cell("m", "a", 0, 0, 0.8, 0.5, 0.8, fold=1),  # mean validation 0.6, test 0.7
        cell("m", "a", 0, 1, 0.9, 0.5, 0.9, fold=0),
        cell("m", "a", 0, 1, 0.1, 0.5, 0.2, fold=1),  # mean validation 0.55
    ]
    frame = sweep.sweep_frame(cells, "target_val")
    assert frame["folds"].tolist() == [2, 2]
    selected = sweep.select(frame, "target_val")
    assert selected["draw"].tolist() == [0] and selected["test"].tolist() == pytest.approx([0.7])


def test_a_rule_without_its_validation_is_refused():
    cells = disagreeing_cells()
    for c in cells:
        for r in c["rounds"]:
            del r["target_val_accuracy"]
    with pytest.raises(sweep.SelectionError, match="record no target_val_accuracy"):
        sweep.sweep_frame(cells, "target_val")


def test_intervals_agree_with_scipy():
    values = np.array([0.61, 0.64, 0.58, 0.70, 0.66])
    mean, low, high = sweep.interval(values)
    expected = stats.t.interval(0.95, 4, loc=values.mean(), scale=stats.sem(values))
    assert mean == pytest.approx(values.mean()) and (low, high) == pytest.approx(expected)
    assert math.isnan(sweep.interval(np.array([0.5]))[1])


def _blocked(values: dict[str, list[float]]) -> pd.DataFrame:
    rows = []
    for method, column in values.items():
        for block, value in enumerate(column):
            rows.append(
                {
                    "experiment": "e",
                    "target": str(block // 3),
                    "trial": block % 3,
                    "method": method,
                    "test": value,
                    "higher_is_better": True,
                    "draw": 0,
                    "draws": 1,
                    "metric": "accuracy",
                }
            )
    return pd.DataFrame(rows)


def test_paired_tests_and_ranks_agree_with_scipy_and_scikit_posthocs():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.5, 0.7, 9)
    values = {
        "ref": base.tolist(),
        "better": (base + 0.05 + rng.uniform(0.0, 0.05, 9)).tolist(),
        "noise": (base + rng.normal(0, 0.01, 9)).tolist(),
        "worse": (base - 0.05).tolist(),
    }
    selected = _blocked(values)
    tests = sweep.paired_tests(selected, "ref").set_index("method")
    for method in ("better", "noise", "worse"):
        difference = np.array(values[method]) - np.array(values["ref"])
        assert tests.loc[method, "mean_difference"] == pytest.approx(difference.mean())
        assert tests.loc[method, "wilcoxon_p"] == pytest.approx(stats.wilcoxon(values[method], values["ref"]).pvalue)
    from statsmodels.stats.multitest import multipletests

    assert tests["holm_p"].tolist() == pytest.approx(multipletests(tests["wilcoxon_p"], method="holm")[1].tolist())
    ranks, friedman, nemenyi = sweep.average_ranks(selected)
    assert friedman == pytest.approx(stats.friedmanchisquare(*values.values()).pvalue)
    assert ranks["better"] == 1.0 and ranks["worse"] == 4.0  # better wins every block, worse loses every one
    expected_ranks = stats.rankdata(-np.array(list(values.values())).T, axis=1).mean(axis=0)
    assert ranks[list(values)].tolist() == pytest.approx(expected_ranks.tolist())
    assert nemenyi.shape == (4, 4) and nemenyi.loc["better", "worse"] < 0.05


def test_the_command_writes_every_table_and_marks_the_oracle(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    files = []
    for index, c in enumerate(
        disagreeing_cells() + [cell("n", t, k, 0, 0.4, 0.5, 0.5) for t in "ab" for k in range(3)]
    ):
        path = tmp_path / "cells" / f"{index}.json"
        write_json_atomic(path, c)
        files.append(str(path))
    assert main(["sweep", *files, "--suite", "s", "--reference", "n"]) == 0
    for output in paths.sweep_outputs("s", ["source_val", "target_val", "last", "oracle"]):
        assert (tmp_path / output).stat().st_size > 0, output
    oracle = pd.read_csv(tmp_path / "results/s/sweep_oracle.csv")
    assert (
        oracle["upper_bound"].all()
        and not pd.read_csv(tmp_path / "results/s/sweep_source_val.csv")["upper_bound"].any()
    )
    assert "UPPER BOUND" in (tmp_path / "results/s/sweep_oracle.md").read_text()
    # every table's title line says what its cells are
    convention = "each cell: mean ± half-width of the 95% t-interval over trials"
    assert (tmp_path / "results/s/sweep_last.md").read_text().splitlines()[0] == f"### s — last — {convention}"
    assert f"s — last — {convention}</caption>" in (tmp_path / "results/s/sweep_last.html").read_text()
    assert f"(Avg over targets) — {convention}" in (tmp_path / "results/s/sweep_rules.md").read_text().splitlines()[0]
    assert f"(Avg over targets) — {convention}</caption>" in (tmp_path / "results/s/sweep_rules.html").read_text()
    assert "UPPER BOUND" not in (tmp_path / "results/s/sweep_target_val.md").read_text()
    summary = (tmp_path / "results/s/sweep_rules.md").read_text()
    assert "oracle (upper bound)" in summary and "source_val: n" in summary and "oracle: m" in summary
    table = pd.read_csv(tmp_path / "results/s/sweep_source_val.csv")
    row = table[(table["method"] == "m") & (table["target"] == "Avg")].iloc[0]
    assert row["n_trials"] == 3 and row["n_draws"] == 3 and row["mean"] == pytest.approx(0.31)
    # the page embeds its CD diagram and learning curves (the report shows it from a data: URI, where no relative
    # path resolves)
    page = (tmp_path / "results/s/sweep_source_val.html").read_text()
    images = [base64.b64decode(uri) for uri in re.findall(r'<img src="data:image/png;base64,([^"]+)"', page)]
    assert images == [
        (tmp_path / f"results/s/figures/sweep_source_val_{kind}.png").read_bytes() for kind in ("curves", "cd")
    ]


def test_the_command_refuses_to_overwrite_a_cell(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    clash = tmp_path / "results/s/sweep_last.csv"
    write_json_atomic(clash, cell("m", "a", 0, 0, 0.5, 0.5, 0.5))
    before = clash.read_bytes()
    assert main(["sweep", str(clash), "--suite", "s"]) == 2
    assert "would overwrite the input" in capsys.readouterr().err
    assert clash.read_bytes() == before


def test_the_bayesian_comparison_is_baycomps_signed_rank_test_with_the_rope_in_points():
    import baycomp

    rng = np.random.default_rng(1)
    base = rng.uniform(0.5, 0.7, 9)
    values = {"ref": base.tolist(), "close": (base + rng.normal(0, 0.002, 9)).tolist(), "ahead": (base + 0.04).tolist()}
    tests = sweep.bayesian_tests(_blocked(values), "ref", rope=1.0).set_index("method")
    for method in ("close", "ahead"):
        worse, equivalent, better = baycomp.SignedRankTest.probs(
            np.array(values["ref"]), np.array(values[method]), 0.01, nsamples=sweep.BAYES_SAMPLES, random_state=0
        )
        row = tests.loc[method]
        assert (row.p_better, row.p_equivalent, row.p_worse) == pytest.approx((better, equivalent, worse))
    assert tests.loc["close", "p_equivalent"] > 0.9 and tests.loc["ahead", "p_better"] > 0.9
    # lower is better (mse): a method with the smaller error is the better one
    lower = _blocked(values).assign(higher_is_better=False, metric="mse")
    flipped = sweep.bayesian_tests(lower, "ref", rope=0.001).set_index("method")
    assert flipped.loc["ahead", "p_worse"] > 0.9


def test_a_negative_rope_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "cells" / "a.json"
    write_json_atomic(path, cell("m", "a", 0, 0, 0.5, 0.5, 0.5))
    assert main(["sweep", str(path), "--suite", "s", "--rope", "-1"]) == 2
    assert "--rope must be >= 0" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


def test_the_cd_diagram_takes_the_family_colours_and_starts_at_rank_one():
    ranks = pd.Series({"fedgp": 1.2, "fedda": 2.1, "source_only": 2.7})
    nemenyi = pd.DataFrame(0.5, index=ranks.index, columns=ranks.index)
    families = {"source_only": "baseline", "fedda": "fda", "fedgp": "fda"}
    styles = method_styles(families)
    for test in (nemenyi, None):  # with the Nemenyi test, and the ranks alone
        figure = sweep.draw_critical_difference(ranks, test, "t", families)
        axis = figure.axes[0]
        assert axis.get_xlim() == pytest.approx((1, 3))
        colours = {
            text.get_text().split(" (")[0].split(") ")[-1]: matplotlib.colors.to_rgb(text.get_color())
            for text in axis.texts
        }
        if test is None:
            colours = {
                label.get_text(): matplotlib.colors.to_rgb(label.get_color()) for label in axis.get_yticklabels()
            }
        assert colours == {method: styles[method].colour for method in ranks.index}
        figure.clf()


def test_sweep_families_are_the_cells_own():
    cells = [cell("m", "a", 0, 0, 0.5, 0.5, 0.5), cell("n", "a", 0, 0, 0.5, 0.5, 0.5)]
    assert sweep.sweep_families(cells) is None  # cells from before cells recorded families: no colours
    cells[0]["family"], cells[1]["family"] = "fda", "baseline"
    assert sweep.sweep_families(cells) == {"m": "fda", "n": "baseline"}
