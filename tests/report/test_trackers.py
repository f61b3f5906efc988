"""The cells as trackers' runs, and what each exporter wrote read back with the tracker's own library: DVCLive's
files, a local MLflow store through MLflow's client, TensorBoard event files through TensorBoard's EventAccumulator."""

from __future__ import annotations

import importlib.util
import json
import sys

import pandas as pd
import pytest

from fdabench.cell.digest import seal
from fdabench.cell.result import cell_result
from fdabench.cli import main
from fdabench.report.trackers import MissingExtraError, round_series, tracked_runs


def _missing(module: str) -> bool:
    return importlib.util.find_spec(module) is None


needs_mlflow = pytest.mark.skipif(_missing("mlflow"), reason="the mlflow extra is not installed")
needs_tensorboard = pytest.mark.skipif(_missing("tensorboard"), reason="the tensorboard extra is not installed")

SOURCES = ["+90", "0"]


def _cell(target: str = "-90", seed: int = 0, accuracies=(0.5, 0.6, 0.8), betas=((0.2, 0.8), (0.4, 0.6), (0.5, 0.5))):
    config = {
        "suite": "s",
        "experiment": "rotated",
        "dataset": "colored_digits",
        "method": "fedgp_auto",
        "algorithm": "fedgp",
        "target": target,
        "seed": seed,
    }
    rounds = [
        {
            "round": index,
            "phase": "fda",
            "accuracy": accuracy,
            "loss": 1 - accuracy,
            "bytes_uplink": 100,
            "bytes_downlink": 50,
            "seconds": 0.1 * index,
            "betas": list(beta),
        }
        for index, (accuracy, beta) in enumerate(zip(accuracies, betas))
    ]
    history = {"rounds": rounds, "metric": "accuracy", "model_size": 10, "sources": SOURCES}
    return seal(cell_result(config, history, final_rounds=2, run={"family": "gradient_projection"}))


def _write(tmp_path, *cells) -> list[str]:
    paths = []
    for cell in cells:
        path = tmp_path / f"{cell['cell']['target']}-seed{cell['cell']['seed']}.json"
        path.write_text(json.dumps(cell))
        paths.append(str(path))
    return paths


def test_series_are_the_rounds_metrics_numbered_from_one_with_each_source_beta():
    series = round_series(_cell())
    assert series == {
        "accuracy": [(1, 0.5), (2, 0.6), (3, 0.8)],
        "loss": [(1, 0.5), (2, pytest.approx(0.4)), (3, pytest.approx(0.2))],
        "beta/+90": [(1, 0.2), (2, 0.4), (3, 0.5)],  # the first source's β, in the order of the cell's sources
        "beta/0": [(1, 0.8), (2, 0.6), (3, 0.5)],
    }  # bytes and seconds are the cell's accounting, not metrics


def test_a_run_is_named_as_the_cell_and_carries_its_finals_and_identity(tmp_path):
    (run,) = tracked_runs(_write(tmp_path, _cell()))
    assert run.name == "rotated/fedgp_auto/-90/seed0"
    assert run.finals == {"final/accuracy": pytest.approx(0.7), "final/loss": pytest.approx(0.3)}  # last two rounds
    assert run.identity["method"] == "fedgp_auto" and run.identity["seed"] == 0
    assert run.identity["family"] == "gradient_projection" and run.identity["metric"] == "accuracy"


def test_dvclive_writes_each_cells_finals_and_per_round_series(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # DVCLive looks for a DVC repository from the working folder: there is none here
    paths = _write(tmp_path, _cell(), _cell(seed=1, accuracies=(0.1, 0.2, 0.3)))
    assert main(["export", "dvclive", *paths, "--output", str(tmp_path / "live")]) == 0
    metrics = json.loads((tmp_path / "live/metrics.json").read_text())
    assert metrics["rotated"]["fedgp_auto"]["-90"]["seed1"]["final"] == {
        "accuracy": pytest.approx(0.25),
        "loss": pytest.approx(0.75),
    }
    assert metrics["rotated"]["fedgp_auto"]["-90"]["seed0"]["final"]["accuracy"] == pytest.approx(0.7)
    assert metrics["step"] == 3
    curve = pd.read_csv(tmp_path / "live/plots/metrics/rotated/fedgp_auto/-90/seed1/accuracy.tsv", sep="\t")
    assert curve.to_dict("list") == {"step": [1, 2, 3], "accuracy": [0.1, 0.2, 0.3]}
    beta = pd.read_csv(tmp_path / "live/plots/metrics/rotated/fedgp_auto/-90/seed0/beta/+90.tsv", sep="\t")
    assert beta["+90"].tolist() == [0.2, 0.4, 0.5]  # DVCLive names the column by the last part of the name
    assert not (tmp_path / "live/dvc.yaml").exists() and not (tmp_path / "dvc.yaml").exists()  # the stage declares

    # a second export replaces the folder: a cell no longer given leaves nothing behind
    assert main(["export", "dvclive", paths[0], "--output", str(tmp_path / "live")]) == 0
    assert list(json.loads((tmp_path / "live/metrics.json").read_text())["rotated"]["fedgp_auto"]["-90"]) == ["seed0"]
    assert not (tmp_path / "live/plots/metrics/rotated/fedgp_auto/-90/seed1").exists()


@needs_mlflow
def test_mlflow_runs_read_back_with_the_client_and_a_second_export_adds_only_new_cells(tmp_path):
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    paths = _write(tmp_path, _cell(), _cell(seed=1, accuracies=(0.1, 0.2, 0.3)))
    assert main(["export", "mlflow", *paths, "--tracking-uri", uri]) == 0
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("s")  # the cells' suite
    runs = {run.info.run_name: run for run in client.search_runs([experiment.experiment_id])}
    assert set(runs) == {"rotated/fedgp_auto/-90/seed0", "rotated/fedgp_auto/-90/seed1"}
    run = runs["rotated/fedgp_auto/-90/seed1"]
    assert run.info.status == "FINISHED"
    assert run.data.params["method"] == "fedgp_auto" and run.data.params["seed"] == "1"
    assert run.data.metrics["final/accuracy"] == pytest.approx(0.25)
    history = client.get_metric_history(run.info.run_id, "accuracy")
    assert sorted((metric.step, metric.value) for metric in history) == [(1, 0.1), (2, 0.2), (3, 0.3)]
    beta = client.get_metric_history(run.info.run_id, "beta/_90")  # MLflow refuses "+" in a name
    assert sorted(metric.value for metric in beta) == [0.2, 0.4, 0.5]

    # again, with one cell rerun (another digest): only that cell is a new run
    (tmp_path / "rerun").mkdir()
    rerun = _write(tmp_path / "rerun", _cell(seed=1, accuracies=(0.3, 0.4, 0.5)))
    assert main(["export", "mlflow", paths[0], *rerun, "--tracking-uri", uri]) == 0
    names = sorted(run.info.run_name for run in client.search_runs([experiment.experiment_id]))
    assert names == ["rotated/fedgp_auto/-90/seed0", "rotated/fedgp_auto/-90/seed1", "rotated/fedgp_auto/-90/seed1"]


def test_mlflow_refuses_a_store_that_is_no_store_in_one_line(tmp_path, capsys):
    paths = _write(tmp_path, _cell())
    if _missing("mlflow"):
        pytest.skip("the mlflow extra is not installed")
    assert main(["export", "mlflow", *paths, "--tracking-uri", f"sqlite:///{paths[0]}"]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "not a usable MLflow tracking store" in error and paths[0] in error


@needs_tensorboard
def test_tensorboard_events_read_back_with_the_event_accumulator(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    paths = _write(tmp_path, _cell(), _cell(seed=1, accuracies=(0.1, 0.2, 0.3)))
    logdir = tmp_path / "tb"
    for _ in range(2):  # exported twice: the folder is replaced, so no point is drawn twice
        assert main(["export", "tensorboard", *paths, "--logdir", str(logdir)]) == 0
    events = EventAccumulator(str(logdir / "rotated/fedgp_auto/-90/seed1")).Reload()
    assert [(event.step, pytest.approx(event.value)) for event in events.Scalars("accuracy")] == [
        (1, 0.1),
        (2, 0.2),
        (3, 0.3),
    ]
    assert [event.value for event in events.Scalars("beta/+90")] == pytest.approx([0.2, 0.4, 0.5])
    (final,) = events.Scalars("final/accuracy")
    assert (final.step, final.value) == (3, pytest.approx(0.25))
    assert events.PluginTagToContent("hparams")  # the identity, in the HParams dashboard
    assert sorted(path.name for path in (logdir / "rotated/fedgp_auto/-90").iterdir()) == ["seed0", "seed1"]


@pytest.mark.parametrize("tracker, module", [("mlflow", "mlflow"), ("tensorboard", "tensorboard")])
def test_an_absent_extra_is_one_line_naming_it(tmp_path, capsys, monkeypatch, tracker, module):
    paths = _write(tmp_path, _cell())
    monkeypatch.setitem(sys.modules, module, None)  # `import module` raises ImportError
    monkeypatch.delitem(sys.modules, "torch.utils.tensorboard", raising=False)  # imported again, so it fails too
    monkeypatch.chdir(tmp_path)
    option = ["--logdir", str(tmp_path / "tb")] if tracker == "tensorboard" else []
    assert main(["export", tracker, *paths, *option]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and f"pip install 'fdabench[{tracker}]'" in error, error
    assert not (tmp_path / "tb").exists() and not (tmp_path / "mlflow.db").exists()


def test_require_names_the_extra(monkeypatch):
    from fdabench.report.trackers import require

    monkeypatch.setitem(sys.modules, "mlflow", None)
    with pytest.raises(MissingExtraError, match=r"needs the 'mlflow' extra .*fdabench\[mlflow\]"):
        require("mlflow", "mlflow", "fdabench export mlflow")
