"""The round loop with `cohort: on` equals the one-by-one loop for every round-loop family: the same updates
and metrics to float tolerance where the sources can train as a cohort, bit for bit where they cannot
(custom source loss, proximal term), and `auto` trains one by one. Sources of unequal sizes train in one cohort
per size."""

import pytest
import torch

from fdabench.federation import cohort
from fdabench.federation.cohort import train_cohort, use_cohort
from fdabench.federation.problem import FederatedProblem
from fdabench.federation.rounds import run_rounds
from fdabench.federation.settings import TrainSettings
from fdabench.methods import get_method
from fdabench.models import build_model
from tiny import AUX_TRAIN, aux_client

SETTINGS = {**AUX_TRAIN, "rounds": 3, "warmup_rounds": 1, "optimizer": "sgd", "source_lr": 0.05, "target_lr": 0.05}


def _problem(sizes=(40, 40, 40)) -> FederatedProblem:
    return FederatedProblem(
        "classification",
        2,
        (5,),
        [aux_client(f"s{index}", size, index) for index, size in enumerate(sizes)],
        aux_client("t", 16, 10),
        aux_client("u", 10, 11),
        aux_client("test", 30, 12),
        aux_classes={"sex": 2, "age_decade": 5},
    )


def _run(name, mode, problem=None, **hparams):
    settings = TrainSettings.from_dict({**SETTINGS, "cohort": mode})
    return run_rounds(get_method(name, hparams), problem or _problem(), settings, 0, torch.device("cpu"))


def _records(history):
    """The per-round records without their timing."""
    return [{key: value for key, value in record.items() if key != "seconds"} for record in history["rounds"]]


def _curve(history):
    return [record["accuracy"] for record in history["rounds"]], [record.get("betas") for record in history["rounds"]]


# one method per round-loop family whose sources can train as a cohort; and sources of two sizes (two cohorts: the
# two sources of 40 samples together, the one of 30 alone)
@pytest.mark.parametrize(
    ("name", "hparams", "sizes", "cohorts"),
    [
        ("source_only", {}, (40, 40, 40), [3]),
        ("fedda", {"beta": 0.5}, (40, 40, 40), [3]),
        ("fedgp", {"beta": 0.5}, (40, 40, 40), [3]),
        ("fedgp_auto", {}, (40, 40, 40), [3]),
        ("fedda_auto", {}, (40, 40, 40), [3]),
        ("fedgp", {"beta": 0.5}, (40, 30, 40), [2]),
    ],
)
def test_cohort_rounds_equal_one_by_one(name, hparams, sizes, cohorts, monkeypatch):
    calls = []
    counted = lambda space, start, clients, *rest: (
        calls.append(len(clients)) or train_cohort(space, start, clients, *rest)
    )
    monkeypatch.setattr(cohort, "train_cohort", counted)
    alone = _run(name, "off", _problem(sizes), **hparams)
    auto = _run(name, "auto", _problem(sizes), **hparams)
    assert not calls and _records(auto) == _records(alone)  # auto: one by one
    together = _run(name, "on", _problem(sizes), **hparams)
    assert calls == cohorts * len(together["rounds"])  # the sources trained in cohorts in every round
    (accuracy_alone, betas_alone), (accuracy_together, betas_together) = _curve(alone), _curve(together)
    assert accuracy_together == pytest.approx(accuracy_alone, abs=1e-6)  # 30 test samples: no prediction flips
    for a, b in zip(betas_alone, betas_together, strict=True):
        assert (a is None) == (b is None) and (a is None or b == pytest.approx(a, rel=1e-4))
    # the same messages cross the boundary
    bytes_alone = [(r["bytes_uplink"], r["bytes_downlink"]) for r in alone["rounds"]]
    assert [(r["bytes_uplink"], r["bytes_downlink"]) for r in together["rounds"]] == bytes_alone


# families whose sources cannot train as a cohort run one by one whatever the setting: bit for bit the same
@pytest.mark.parametrize(
    ("name", "hparams", "problem"),
    [
        ("fedprox", {"mu": 0.1}, None),  # proximal term
        ("auxinfo", {}, None),  # multi-task source loss
        ("fedgp", {"beta": 0.5}, _problem((40, 30, 20))),  # no two sources of one size
    ],
)
def test_ineligible_sources_train_one_by_one(name, hparams, problem):
    assert _records(_run(name, "off", problem, **hparams)) == _records(_run(name, "on", problem, **hparams))


def test_auto_is_one_by_one_until_measured_faster_and_on_uses_a_cohort_where_it_can():
    model, clients = build_model("mlp", (5,), 2), _problem().sources
    for device in ("cpu", "cuda"):  # the decision only; nothing runs on CUDA
        assert not use_cohort("auto", torch.device(device), model, clients)
        assert not use_cohort("off", torch.device(device), model, clients)
        assert use_cohort("on", torch.device(device), model, clients)
    assert not use_cohort("on", torch.device("cpu"), model, clients[:1])  # one source: nothing to batch
    # where a measurement shows the cohort faster, auto follows it
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(cohort.AUTO_COHORT, "cuda", True)
        assert use_cohort("auto", torch.device("cuda"), model, clients)
        assert not use_cohort("auto", torch.device("cpu"), model, clients)
