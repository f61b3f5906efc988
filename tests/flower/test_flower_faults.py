"""Faults over Flower: sites that drop out follow the dropout policy (fail, wait, skip), a source that misses an
evaluation is left out of that round's validation metrics, bad updates and a missing site file stop the run with a
clear message. The equivalence of a cell over Flower with the in-process loop is in test_flower.py."""

import re
import shutil

import pytest
import torch

flwr = pytest.importorskip("flwr", reason='Flower is not installed (uv pip install -e ".[flower]")')

from flower_cases import _assert_same_rounds, _in_process, _without_timings, simulate  # noqa: E402

from fdabench.flower import transport  # noqa: E402
from fdabench.flower.faults import Fault  # noqa: E402
from fdabench.flower.messages import RejectedReply, check_update  # noqa: E402
from fdabench.flower.site_files import read_manifest  # noqa: E402
from fdabench.flower.transport import SiteFailure  # noqa: E402


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


def test_dropout_policies(exported, monkeypatch, tmp_path):
    """A source that drops out in round 2: fail stops the run naming it; wait asks again and ends as if nothing
    happened; skip leaves it out of that round. A missing target fails even under skip."""
    root, params, folders = exported
    monkeypatch.chdir(root)
    folder = folders["fedgp_auto"]
    source = read_manifest(folder)["sites"][0]["name"]
    clean, _ = _in_process(params, "fedgp_auto")  # what the same cell over Flower gives without a fault (above)

    with pytest.raises(
        SiteFailure, match=rf"round 2 \(dropout policy fail\): {re.escape(source)}: error reply .*planned"
    ):
        simulate(folder, tmp_path / "fail.json", timeout=120, faults=[Fault(source, 2, "drop")])

    waited = simulate(
        folder, tmp_path / "wait.json", "wait", timeout=120, wait_seconds=60, faults=[Fault(source, 2, "drop", 2)]
    )
    _assert_same_rounds(waited, clean)
    assert [event["site"] for event in waited["rounds"][1]["flower_events"]] == [source, source]

    skipped = simulate(folder, tmp_path / "skip.json", "skip", timeout=120, faults=[Fault(source, 2, "drop")])
    dropped = skipped["rounds"][1]
    assert [event["site"] for event in dropped["flower_events"]] == [source]
    assert len(dropped["betas"]) == len(clean["rounds"][1]["betas"]) - 1
    assert dropped["bytes_uplink"] < clean["rounds"][1]["bytes_uplink"]
    _assert_same_rounds({"rounds": skipped["rounds"][:1]}, {"rounds": clean["rounds"][:1]})  # the rounds before

    with pytest.raises(SiteFailure, match="round 2 .*target: error reply"):
        simulate(folder, tmp_path / "target.json", "skip", timeout=120, faults=[Fault("target", 2, "drop")])


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
    skipped = simulate(folder, tmp_path / "skip.json", "skip", timeout=120, faults=[Fault(source, 3, "drop-eval")])
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
        simulate(folder, tmp_path / "fail.json", timeout=120, faults=[Fault(source, 3, "drop-eval")])


@pytest.mark.parametrize(
    ("kind", "message"), [("nan", "update with 1 non-finite values"), ("shape", "update of shape")]
)
def test_bad_updates_stop_the_run_with_a_clear_message(exported, monkeypatch, tmp_path, kind, message):
    root, params, folders = exported
    monkeypatch.chdir(root)
    source = read_manifest(folders["fedgp"])["sites"][1]["name"]
    site = re.escape(source)
    with pytest.raises(SiteFailure, match=rf"round 3 .*{site}: rejected: round 3: {site} sent an {message}"):
        simulate(folders["fedgp"], tmp_path / "bad.json", timeout=300, faults=[Fault(source, 3, kind)])


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
        simulate(folder, tmp_path / "result.json", timeout=120)
