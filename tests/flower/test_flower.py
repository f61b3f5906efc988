"""A cell through Flower equals the in-process round loop: the same per-round updates, metrics, β and byte counts,
on Flower's simulation engine and on a real deployment on this machine (a SuperLink and one SuperNode process per
site, each reading only its own file). Sites that drop out follow the dropout policy; bad updates are rejected.
The client-state and plain methods' equivalence cases are in test_flower_client_state.py; what both share is in
flower_cases.py."""

import json
import os
import re
import shutil
import subprocess

import pytest
import torch
import yaml

flwr = pytest.importorskip("flwr", reason='Flower is not installed (uv pip install -e ".[flower]")')

from flower_cases import (  # noqa: E402
    EXPERIMENT,
    EXPORTED,
    SEED,
    SIMULATED,
    TARGET,
    WITH_AUXILIARY_LABELS,
    _assert_same_rounds,
    _in_process,
    _problem,
    _without_timings,
)

from fdabench.config import load_params  # noqa: E402
from fdabench.core import paths  # noqa: E402
from fdabench.federation.problem import ClientData  # noqa: E402
from fdabench.flower import deploy, simulation, transport  # noqa: E402
from fdabench.flower.faults import Fault  # noqa: E402
from fdabench.flower.messages import RejectedReply, check_update  # noqa: E402
from fdabench.flower.site_files import load_site, read_manifest  # noqa: E402
from fdabench.flower.transport import SiteFailure  # noqa: E402
from workflows import workflow_environment  # noqa: E402


@pytest.fixture(scope="module")
def exported(tiny_inputs, tmp_path_factory):
    """The tiny suite's EXPORTED cells as site files (all but fedgp added to the suite for this test; fdann
    trains the target on all its inputs, the oracle on all its labelled and unlabelled samples, so a target's hello
    must report the samples its method's `roles.target` trains on)."""
    root, params = tiny_inputs
    folders = {}
    here = os.getcwd()
    os.chdir(root)
    try:
        for method in EXPORTED:
            folder = tmp_path_factory.mktemp(method)
            simulation.export_cell(_with_auto(params), EXPERIMENT, method, TARGET, SEED, folder)
            folders[method] = folder
    finally:
        os.chdir(here)
    return root, _with_auto(params), folders


def _with_auto(params):
    from fdabench.config import validate_params

    raw = json.loads(json.dumps(params.raw))
    raw["suites"]["tiny"]["methods"] = ["source_only", *EXPORTED]
    raw["suites"]["tiny"]["train"]["target_batch_size"] = 4  # several target steps: auto-weighting's estimates
    return validate_params(raw)


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


def test_error_replies_read_as_one_line():
    assert transport.error_reason("<class 'RuntimeError'>:<'disk full'>") == "RuntimeError: disk full"
    ray = (
        "\x1b[36mray::ClientAppActor.run()\x1b[39m\n  File x\nException ClientAppException occurred. Message: s1 left'>"
    )
    assert transport.error_reason(ray) == "s1 left"
    assert transport.error_reason("plain") == "plain"


def test_updates_of_the_wrong_shape_or_with_non_finite_values_are_rejected():
    good = torch.zeros(5)
    assert check_update(good, 5, "s1", 0) is good
    with pytest.raises(RejectedReply, match=r"round 3: s1 sent an update of shape \(4,\); the model has 5 parameters"):
        check_update(torch.zeros(4), 5, "s1", 2)
    with pytest.raises(RejectedReply, match="round 1: s2 sent an update with 2 non-finite values"):
        check_update(torch.tensor([0.0, float("nan"), float("inf"), 1.0, 2.0]), 5, "s2", 0)
    with pytest.raises(RejectedReply, match="torch.float64 update"):
        check_update(torch.zeros(5, dtype=torch.float64), 5, "s2", 0)
    assert Fault.parse("s1:2:drop:3") == Fault("s1", 2, "drop", 3)
    assert Fault.parse("s1:2:drop-eval") == Fault("s1", 2, "drop-eval")
    for bad in ("s1:0:drop", "s1:2:explode", "s1:2", "s1:2:nan:0"):
        with pytest.raises(ValueError, match="SITE:ROUND:KIND"):
            Fault.parse(bad)


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
    history = simulation.simulate(folders[method], tmp_path / "result.json", timeout=120)
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
    history = simulation.simulate(tmp_path / "sites", tmp_path / "result.json", timeout=120)
    _assert_same_rounds(history, expected)


def test_dropout_policies(exported, monkeypatch, tmp_path):
    """A source that drops out in round 2: fail stops the run naming it; wait asks again and ends as if nothing
    happened; skip leaves it out of that round. A missing target fails even under skip."""
    root, params, folders = exported
    monkeypatch.chdir(root)
    folder = folders["fedgp_auto"]
    source = read_manifest(folder)["sites"][0]["name"]
    clean = simulation.simulate(folder, tmp_path / "clean.json", timeout=120)

    with pytest.raises(
        SiteFailure, match=rf"round 2 \(dropout policy fail\): {re.escape(source)}: error reply .*planned"
    ):
        simulation.simulate(folder, tmp_path / "fail.json", timeout=120, faults=[Fault(source, 2, "drop")])

    waited = simulation.simulate(
        folder, tmp_path / "wait.json", "wait", timeout=120, wait_seconds=60, faults=[Fault(source, 2, "drop", 2)]
    )
    assert _without_timings(waited) == _without_timings(clean)
    assert [event["site"] for event in waited["rounds"][1]["flower_events"]] == [source, source]

    skipped = simulation.simulate(
        folder, tmp_path / "skip.json", "skip", timeout=120, faults=[Fault(source, 2, "drop")]
    )
    dropped = skipped["rounds"][1]
    assert [event["site"] for event in dropped["flower_events"]] == [source]
    assert len(dropped["betas"]) == len(clean["rounds"][1]["betas"]) - 1
    assert dropped["bytes_uplink"] < clean["rounds"][1]["bytes_uplink"]
    assert _without_timings(skipped)[0] == _without_timings(clean)[0]  # the rounds before are untouched

    with pytest.raises(SiteFailure, match="round 2 .*target: error reply"):
        simulation.simulate(folder, tmp_path / "target.json", "skip", timeout=120, faults=[Fault("target", 2, "drop")])


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
    history = simulation.simulate(folder, tmp_path / "result.json", timeout=120)
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


def test_a_source_missing_an_evaluation_under_skip(exported, monkeypatch, tmp_path):
    """Under `skip`, a source that does not answer a round's evaluation is left out of that round's `source_val_*`
    (the mean over the sources that answered) and the drop is recorded; the training and the target's metrics
    are untouched. Under `fail` the run stops naming it."""
    root, params, folders = exported
    monkeypatch.chdir(root)
    folder = folders["fedgp"]
    source, other = (site["name"] for site in read_manifest(folder)["sites"][:2])
    scores = []
    reply = transport.FlowerSites._evaluation_reply

    def record(self, site, content):
        metrics = reply(self, site, content)
        scores.append((self.round_index, site.name, metrics))
        return metrics

    monkeypatch.setattr(transport.FlowerSites, "_evaluation_reply", record)
    expected, _ = _in_process(params, "fedgp")
    skipped = simulation.simulate(
        folder, tmp_path / "skip.json", "skip", timeout=120, faults=[Fault(source, 3, "drop-eval")]
    )
    dropped = skipped["rounds"][2]
    assert [(event["round"], event["site"]) for event in dropped["flower_events"]] == [(2, source)]
    assert "error reply" in dropped["flower_events"][0]["event"]
    answered = {name: metrics for round_index, name, metrics in scores if round_index == 2}
    assert set(answered) == {"target", other}
    held_out = {key: value for key, value in dropped.items() if key.startswith("source_val_")}
    assert held_out == {f"source_val_{name}": value for name, value in answered[other]["validation"].items()}
    assert {"source_val_accuracy", "source_val_loss"} <= set(held_out)
    # the rest is the in-process loop's: the training, the target's metrics, the other rounds' source_val_*
    reference = _without_timings(expected)
    reference[2].update(held_out)
    _assert_same_rounds(skipped, {"rounds": reference})

    with pytest.raises(
        SiteFailure, match=rf"round 3 \(dropout policy fail\): {re.escape(source)}: error reply .*evaluation"
    ):
        simulation.simulate(folder, tmp_path / "fail.json", timeout=120, faults=[Fault(source, 3, "drop-eval")])


@pytest.mark.parametrize(
    ("kind", "message"), [("nan", "update with 1 non-finite values"), ("shape", "update of shape")]
)
def test_bad_updates_stop_the_run_with_a_clear_message(exported, monkeypatch, tmp_path, kind, message):
    root, params, folders = exported
    monkeypatch.chdir(root)
    source = read_manifest(folders["fedgp"])["sites"][1]["name"]
    site = re.escape(source)
    with pytest.raises(SiteFailure, match=rf"round 3 .*{site}: rejected: round 3: {site} sent an {message}"):
        simulation.simulate(folders["fedgp"], tmp_path / "bad.json", timeout=300, faults=[Fault(source, 3, kind)])


def test_a_site_without_its_file_is_named_at_the_hello(exported, monkeypatch, tmp_path):
    root, _, folders = exported
    monkeypatch.chdir(root)
    folder = tmp_path / "cell"
    shutil.copytree(folders["fedgp"], folder)
    missing = folder / read_manifest(folder)["sites"][0]["file"]
    missing.unlink()
    with pytest.raises(
        SiteFailure, match=rf"2 of 3 sites answered the hello .*site file {re.escape(str(missing))} does"
    ):
        simulation.simulate(folder, tmp_path / "result.json", timeout=120)


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
