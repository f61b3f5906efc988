"""A cell through Flower equals the in-process round loop: the same per-round updates, metrics, β and byte counts,
on Flower's simulation engine and on a real deployment on this machine (a SuperLink and one SuperNode process per
site, each reading only its own file). The client-state and plain methods' equivalence cases are in
test_flower_client_state.py, dropout policies and bad updates in test_flower_faults.py; what they share is in
flower_cases.py and conftest.py."""

import json
import os
import shutil
import subprocess

import pytest
import torch
import yaml

flwr = pytest.importorskip("flwr", reason='Flower is not installed (uv pip install -e ".[flower]")')

from flower_cases import (  # noqa: E402
    EXPERIMENT,
    SEED,
    SIMULATED,
    TARGET,
    WITH_AUXILIARY_LABELS,
    _assert_same_rounds,
    _in_process,
    _problem,
    simulate,
)

from fdabench.config import load_params  # noqa: E402
from fdabench.core import paths  # noqa: E402
from fdabench.federation.problem import ClientData  # noqa: E402
from fdabench.flower import deploy, simulation, transport  # noqa: E402
from fdabench.flower.site_files import load_site, read_manifest  # noqa: E402
from workflows import workflow_environment  # noqa: E402


def test_site_files_hold_each_site_and_nothing_else(exported, monkeypatch):
    root, params, folders = exported
    monkeypatch.chdir(root)
    _, problem = _problem(params, "fedgp")
    manifest = read_manifest(folders["fedgp"])
    assert [site["name"] for site in manifest["sites"]] == [s.name for s in problem.sources] + ["target"]
    assert len(problem.source_validation) == len(problem.sources)  # the partition holds source samples out
    for site, source, held in zip(manifest["sites"][:-1], problem.sources, problem.source_validation, strict=True):
        data = load_site(folders["fedgp"] / site["file"])
        assert (data.role, data.index, data.samples) == ("source", site["index"], len(source))
        assert torch.equal(data.data.x, source.x) and torch.equal(data.data.y, source.y)
        # its held-out validation samples stay with it
        assert site["validation"] == data.validation_samples == len(held) > 0
        assert torch.equal(data.validation.x, held.x) and torch.equal(data.validation.y, held.y)
    target = load_site(folders["fedgp"] / "target.pt")
    _assert_target_splits(target, problem)
    assert target.validation is None and manifest["sites"][-1]["validation"] == 0  # this cell keeps none
    # a source's file has only its own samples: its training and validation splits
    first = torch.load(folders["fedgp"] / manifest["sites"][0]["file"], weights_only=True)
    assert first["x"].shape[0] == len(problem.sources[0]) and "labelled.x" not in first
    assert first["validation.x"].shape[0] == len(problem.source_validation[0])
    assert not [key for key in first if key.split(".")[0] in ("labelled", "unlabelled", "test")]
    # the target's file has no source's samples
    assert not {"x", "y", "validation.x"} & set(torch.load(folders["fedgp"] / "target.pt", weights_only=True))


def _assert_target_splits(target, problem):
    """The target's file holds the problem's target splits (its validation split where the cell keeps one)."""
    for split in ("labelled", "unlabelled", "test", "validation"):
        mine, theirs = getattr(target, split), getattr(problem, f"target_{split}")
        if theirs is None:
            assert mine is None
            continue
        assert isinstance(mine, ClientData) and torch.equal(mine.x, theirs.x) and torch.equal(mine.y, theirs.y)
        assert mine.noise_std == theirs.noise_std


def _received_updates(monkeypatch):
    """Every update the Flower server accepts, per call, in source order (the ServerApp runs in this process in
    simulation; replies arrive in any order)."""
    received = []
    source_reply, target_reply = transport.FlowerSites._source_reply, transport.FlowerSites._target_reply

    def record_source(self, site, content):
        result = source_reply(self, site, content)
        if site.role == "source":
            if not received or received[-1][0] != ("source", self.round_index):
                received.append([("source", self.round_index), {}])
            received[-1][1][site.index] = result[0].update.clone()
        return result

    def record_target(self, site, content):
        result = target_reply(self, site, content)
        received.append([("target", self.round_index), {site.index: result[0].update.clone()}])
        return result

    monkeypatch.setattr(transport.FlowerSites, "_source_reply", record_source)
    monkeypatch.setattr(transport.FlowerSites, "_target_reply", record_target)
    return received


@pytest.mark.parametrize("method", SIMULATED)
def test_simulation_equals_the_in_process_loop(exported, method, monkeypatch, tmp_path):
    root, params, folders = exported
    monkeypatch.chdir(root)
    expected, expected_updates = _in_process(params, method)
    received = _received_updates(monkeypatch)
    history = simulate(folders[method], tmp_path / "result.json", timeout=120)
    _assert_same_rounds(history, expected)  # metrics (validation metrics too), β, fdabench's bytes
    assert all("source_val_accuracy" in record and "source_val_loss" in record for record in history["rounds"])
    updates = [[by_site[index] for index in sorted(by_site)] for _, by_site in received]
    assert len(updates) == len(expected_updates)
    for theirs, ours in zip(updates, expected_updates, strict=True):
        for a, b in zip(theirs, ours, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    for record in history["rounds"]:  # Flower's own count: fdabench's messages plus headers, settings, evaluation
        assert record["flower_bytes_uplink"] > record["bytes_uplink"] > 0
        assert record["flower_bytes_downlink"] > record["bytes_downlink"] > 0
        assert record["flower_events"] == []


@pytest.fixture(scope="module")
def heart_inputs(tmp_path_factory, repo_root):
    """A Fed-Heart suite with sex and age decade as auxiliary labels (the weakly-supervised methods' data), its
    partition built by the workflow from the mirror (skipped without one)."""
    if not os.environ.get("FDABENCH_DATA_MIRROR"):
        pytest.skip("no dataset mirror: set FDABENCH_DATA_MIRROR (Fed-Heart's raw files)")
    root = tmp_path_factory.mktemp("heart_flower")
    shutil.copy(repo_root / "Snakefile", root / "Snakefile")
    shutil.copytree(repo_root / "workflow", root / "workflow")
    suite = {
        "seeds": [SEED],
        "methods": WITH_AUXILIARY_LABELS,
        "train": {"model": "mlp", "model_options": {"hidden": [16]}, "rounds": 3, "target_batch_size": 8},
        "experiments": {
            "weak": {"dataset": "fed_heart", "dataset_options": {"auxiliary": ["sex", "age_decade"]}, "targets": ["va"]}
        },
        "tables": {"weak": {"experiments": ["weak"]}},
    }
    (root / "params.yaml").write_text(yaml.safe_dump({"suite": "heart", "device": "cpu", "suites": {"heart": suite}}))
    partition = paths.fill(paths.PARTITION, data="data", suite="heart", experiment="weak", target="va", seed=SEED)
    result = subprocess.run(
        ["snakemake", "--cores", "1", partition],
        cwd=root,
        env=workflow_environment(root),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return root, load_params(root / "params.yaml")


@pytest.mark.parametrize("method", WITH_AUXILIARY_LABELS)
def test_auxiliary_heads_over_flower_equal_the_in_process_loop(heart_inputs, method, monkeypatch, tmp_path):
    """The weakly-supervised methods with auxiliary heads: each source's auxiliary labels travel in its site file and
    train its heads there; the records equal the in-process loop's."""
    root, params = heart_inputs
    monkeypatch.chdir(root)
    simulation.export_cell(params, "weak", method, "va", SEED, tmp_path / "sites")
    expected, _ = _in_process(params, method, "weak", "va")
    history = simulate(tmp_path / "sites", tmp_path / "result.json", timeout=120)
    _assert_same_rounds(history, expected)


def test_target_and_source_validation_over_flower_equal_the_in_process_loop(exported, monkeypatch, tmp_path):
    """A cell that keeps target samples for validation: the target's file holds them apart from its labelled
    samples, and the rounds' `target_val_*` and `source_val_*` over Flower are the in-process loop's."""
    root, params, _ = exported
    monkeypatch.chdir(root)
    validated = _with_target_validation(params)
    folder = tmp_path / "cell"
    manifest = simulation.export_cell(validated, EXPERIMENT, "fedgp", TARGET, SEED, folder)
    _, problem = _problem(validated, "fedgp")
    assert len(problem.target_validation) == 4 and manifest["sites"][-1]["validation"] == 4
    target = load_site(folder / "target.pt")
    _assert_target_splits(target, problem)
    assert target.samples == len(problem.target_labelled) == manifest["sites"][-1]["samples"]

    expected, _ = _in_process(validated, "fedgp")
    history = simulation.simulate(folder, tmp_path / "result.json", timeout=120)  # a site process per CPU
    _assert_same_rounds(history, expected)
    keys = ("target_val_accuracy", "target_val_loss", "source_val_accuracy", "source_val_loss")
    for mine, reference in zip(history["rounds"], expected["rounds"], strict=True):
        assert [mine[key] for key in keys] == pytest.approx([reference[key] for key in keys], rel=1e-6, abs=1e-9)
        assert mine["flower_events"] == []


def _with_target_validation(params):
    """The cells keep 4 of the target's labelled samples for validation (`config["validation"]`)."""
    from fdabench.config import validate_params

    raw = json.loads(json.dumps(params.raw))
    raw["suites"]["tiny"]["validation"] = {"target_holdout": 4}
    validated = validate_params(raw)
    assert validated.cell(EXPERIMENT, "fedgp", TARGET, SEED).config["validation"] == {"target_holdout": 4}
    return validated


def test_local_deployment_equals_the_in_process_loop(exported, monkeypatch, tmp_path):
    """Separate processes: a SuperLink, a SuperNode per site (each told only its own file), `flwr run`."""
    root, params, folders = exported
    monkeypatch.chdir(root)
    short = _shorter(params)
    folder = tmp_path / "cell"
    simulation.export_cell(short, EXPERIMENT, "fedgp_auto", TARGET, SEED, folder)
    expected, _ = _in_process(short, "fedgp_auto")
    history = deploy.deploy_locally(folder, tmp_path / "result.json", timeout=120, seconds=600, work=tmp_path / "logs")
    _assert_same_rounds(history, expected)
    traffic = history["flower_network_traffic"]  # what the SuperLink counted on the wire
    assert traffic["total-bytes"] >= sum(r["bytes_uplink"] + r["bytes_downlink"] for r in history["rounds"])
    logs = {path.name: path.read_text() for path in (tmp_path / "logs").glob("supernode-*.log")}
    assert len(logs) == len(read_manifest(folder)["sites"])  # one process per site


def _shorter(params):
    from fdabench.config import validate_params

    raw = json.loads(json.dumps(params.raw))
    raw["suites"]["tiny"]["train"]["rounds"] = 1  # one warm-up and one FDA round: each costs seconds of polling
    return validate_params(raw)


def test_cli_exports_a_cell_and_says_what_is_missing(tiny_inputs, tmp_path, monkeypatch, capsys):
    from fdabench.cli import main

    root, _ = tiny_inputs
    monkeypatch.chdir(root)
    assert main(["flower", "export", "tiny", "colored_digits", "fedgp", "--output", str(tmp_path / "cell")]) == 0
    printed = capsys.readouterr().out
    assert f"{tmp_path / 'cell'}/target.pt: target target" in printed and printed.count("source") == 2
    assert main(["flower", "export", "tiny", "colored_digits"]) == 2
    assert "flower export takes SUITE EXPERIMENT METHOD" in capsys.readouterr().err
    assert main(["flower", "simulate", str(tmp_path / "cell")]) == 2
    assert "flower simulate needs --result" in capsys.readouterr().err
    assert main(["flower", "app", str(tmp_path / "cell"), "--result", "r.json"]) == 2
    assert "needs --result and --output" in capsys.readouterr().err
    assert main(["flower", "app", str(tmp_path / "cell"), "--result", "r.json", "--output", str(tmp_path / "app")]) == 0
    app = (tmp_path / "app" / "pyproject.toml").read_text()
    assert 'serverapp = "fdabench.flower.apps:server_app"' in app and "site-files" not in app
    assert main(["flower", "simulate", str(tmp_path / "cell"), "--result", "r.json", "--fault", "s1:0:drop"]) == 1
    assert "a fault is SITE:ROUND:KIND" in capsys.readouterr().err


def test_a_stacked_cell_is_not_exported(tiny_inputs, tmp_path):
    """`batching: stacked` computes a cell's clients together in one process; over Flower each site trains its own:
    the export refuses it before writing anything, rather than run it with other numbers."""
    from fdabench.config import validate_params

    root, params = tiny_inputs
    raw = json.loads(json.dumps(params.raw))
    raw["suites"]["tiny"]["train"]["batching"] = "stacked"
    here = os.getcwd()
    os.chdir(root)
    try:
        with pytest.raises(ValueError, match="batching: stacked computes a cell's clients together"):
            simulation.export_cell(validate_params(raw), EXPERIMENT, "fedgp", TARGET, SEED, tmp_path / "out")
    finally:
        os.chdir(here)
    assert not (tmp_path / "out").exists()
