"""What crosses a client boundary in every round of every round-loop method.

The server's inputs of a round (what `aggregate`, or FedAvg in warm-up rounds, receives) may hold updates,
sample counts, step counts and the method's documented messages (auto-weighting's estimates), never a
tensor that shares memory with a client's inputs, labels, auxiliary labels or noise. The target's own code
(the method's observer of its training steps) sees the sources' updates only where the method says the
server forwards them; where the target starts from (`target_start`) is the server's choice, sent down as
one model. Each round's logged bytes equal the bytes of what the test sees cross (float32 parameters, 8
bytes per sample count, the estimates as held: 8 bytes per value), the accounting the README describes.
"""

import dataclasses

import pytest
import torch

from fdabench.aggregation import fedavg
from fdabench.federation import rounds
from fdabench.federation.problem import ClientData, FederatedProblem
from fdabench.federation.settings import TrainSettings
from fdabench.methods import METHODS, RoundLoopMethod, get_method

SETTINGS = TrainSettings.from_dict(
    {
        "model": "mlp",
        "model_options": {"hidden": [8]},
        "rounds": 3,
        "warmup_rounds": 1,
        "local_epochs": 1,
        "optimizer": "adam",
        "source_lr": 1e-2,
        "target_lr": 1e-2,
        "source_batch_size": 16,
        "target_batch_size": 8,
    }
)
ROUND_LOOP_METHODS = sorted(name for name, cls in METHODS.items() if issubclass(cls, RoundLoopMethod))
SOURCES = 2


def _client(name, n, seed):
    g = torch.Generator().manual_seed(seed)
    return ClientData(
        name,
        torch.randn(n, 5, generator=g),
        torch.randint(0, 2, (n,), generator=g),
        aux={"sex": torch.randint(0, 2, (n,), generator=g)},
    )


@pytest.fixture(scope="module")
def problem():
    return FederatedProblem(
        "classification",
        2,
        (5,),
        [_client("a", 40, 0), _client("b", 30, 1)],
        _client("t", 16, 2),
        _client("u", 10, 3),
        _client("test", 20, 4),
        aux_classes={"sex": 2},
    )


def _data_storages(problem):
    clients = [*problem.sources, problem.target_labelled, problem.target_unlabelled, problem.target_test]
    tensors = [t for c in clients for t in (c.x, c.y, c.noise, *c.aux.values()) if t is not None]
    return {t.untyped_storage().data_ptr() for t in tensors}


def _tensors(value, seen=None):
    """Every tensor reachable from `value` through dataclass fields, attributes and containers."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        children = list(value.values())
    elif isinstance(value, list | tuple):
        children = list(value)
    elif hasattr(value, "__dict__"):
        children = list(vars(value).values())
    else:
        return []
    return [t for child in children for t in _tensors(child, seen)]


def _without_source_updates(inputs):
    return dataclasses.replace(inputs, source_updates=None, source_counts=None, source_steps=None)


@pytest.mark.parametrize("name", ROUND_LOOP_METHODS)
def test_only_updates_counts_and_documented_messages_cross(problem, name, monkeypatch):
    method = get_method(name)
    received = []  # per round, what reached the server: (source updates sent, target update sent, tensors)
    aggregate, target_observer = method.aggregate, method.target_observer

    def server(inputs):
        received.append((inputs.source_updates is not None, inputs.target_update is not None, _tensors(inputs)))
        return aggregate(inputs)

    def fedavg_round(updates, counts):  # warm-up rounds and rounds without a training target
        received.append((True, False, [updates, counts]))
        return fedavg(updates, counts)

    def observer(context):  # runs at the target: the sources' updates only where the server forwards them
        if not method.target_receives_source_updates:
            context = dataclasses.replace(context, inputs=_without_source_updates(context.inputs))
        return target_observer(context)

    method.aggregate, method.target_observer = server, observer
    monkeypatch.setattr(rounds, "fedavg", fedavg_round)
    history = method.run(problem, SETTINGS, 0, torch.device("cpu"))

    assert len(received) == len(history["rounds"])
    m = history["model_size"]
    data = _data_storages(problem)
    for (sources_sent, target_sent, tensors), record in zip(received, history["rounds"], strict=True):
        for tensor in tensors:
            assert tensor.untyped_storage().data_ptr() not in data, f"{name}: client data reached the server"
            assert tuple(tensor.shape) in {(SOURCES, m), (SOURCES,), (m,), ()}, f"{name}: {tuple(tensor.shape)}"
        estimates = 0
        first_fda_round = record["round"] == (SETTINGS.warmup_rounds if method.warmup else 0)
        if (
            method.logs_betas
            and record["phase"] == "fda"
            and (first_fda_round or method.hparams["recompute"] != "once")
        ):
            estimates = (4 * SOURCES + 3) * 8  # σ², B, ‖Ḡ‖² and d², τ²d², δ, δ' per source, 8 bytes each
        uplink = SOURCES * (4 * m + 8) * sources_sent + (4 * m + 8) * target_sent + estimates
        # each training client gets the model it starts from; the target also the sources' updates, if forwarded
        forwarded = SOURCES * 4 * m * (target_sent and sources_sent and method.target_receives_source_updates)
        downlink = SOURCES * 4 * m * sources_sent + 4 * m * target_sent + forwarded
        assert (record["bytes_uplink"], record["bytes_downlink"]) == (uplink, downlink), (name, record["round"])


def test_every_round_loop_method_is_checked():
    assert {"fedda", "fedgp", "fedgp_auto", "source_only", "target_only", "fedprox", "auxinfo_gp"} <= set(
        ROUND_LOOP_METHODS
    )
