"""What crosses a client boundary in every round of every round-loop method.

The server's inputs of a round (what `aggregate`, or FedAvg in warm-up rounds, receives) may hold updates,
sample counts, step counts and the method's documented messages (auto-weighting's estimates), never a
tensor that shares memory with a client's inputs, labels, auxiliary labels or noise. The target's own code
(the method's observer of its training steps) sees the sources' updates only where the method says the
server forwards them; where the target starts from (`target_start`) is the server's choice, sent down as
one model. Each round's logged bytes equal the bytes of what the test sees cross (float32 parameters, 8
bytes per sample count, the estimates as held: 8 bytes per value, the clients' messages up and the server's
broadcast down to every training client: SCAFFOLD's Δc_i and c, f-DANN's and f-WDGRL's target features; Co-MDA's
queries down to the sources only and their answers up and on to the target), the accounting docs/methods.md
describes.
"""

import dataclasses

import pytest
import torch

from fdabench.config.extends import deep_merge
from fdabench.core.families import logs_betas
from fdabench.federation import rounds
from fdabench.federation.rounds import run_rounds
from fdabench.federation.settings import TrainSettings
from fdabench.methods import METHODS, RoundLoopMethod, baselines, get_method
from fdabench.tensor_math.aggregation import fedavg
from fdabench.testing.method_checks import reachable_tensors
from tiny import AUX_TRAIN, aux_problem

SETTINGS = TrainSettings.from_dict({**AUX_TRAIN, "rounds": 3})
SOURCES = 2
#: methods run with smaller settings than their defaults here (FedDaDiL: a small dictionary, a few rounds)
DICTIONARY = {"atoms": 3, "support_size": 6, "batch_size": 4, "local_steps": 2, "rounds": 2, "classifier_steps": 5}
SMALL_HPARAMS = {"dadil_e": DICTIONARY, "dadil_r": DICTIONARY}


@pytest.fixture(scope="module")
def problem():
    return aux_problem()


def _data_storages(problem):
    clients = [*problem.sources, problem.target_labelled, problem.target_unlabelled, problem.target_test]
    tensors = [t for c in clients for t in (c.x, c.y, c.noise, *c.aux.values()) if t is not None]
    return {t.untyped_storage().data_ptr() for t in tensors}


def _without_source_updates(inputs):
    return dataclasses.replace(inputs, source_updates=None, source_counts=None, source_steps=None)


@pytest.mark.parametrize(
    ("name", "hparams"),
    [(name, SMALL_HPARAMS.get(name, {})) for name in METHODS.names()]
    + [("fedgp_auto", {"recompute": "once"})],  # estimates sent once
)
def test_only_updates_counts_and_documented_messages_cross(problem, name, hparams, monkeypatch):
    method = get_method(name, hparams)
    received = []  # per round, what reached the server: (source updates sent, target update sent, tensors)
    aggregate, local_objective = method.aggregate, method.local_objective

    def server(inputs):
        sent = [t for t in (inputs.source_messages, inputs.target_message) if t is not None]
        broadcast = 0 if inputs.broadcast is None else 4 * inputs.broadcast.numel()
        # bytes up, down to each training client, and the sources' messages the server forwards to the target
        answers = 4 * inputs.source_messages.numel() if inputs.source_messages is not None else 0
        messages = (sum(4 * t.numel() for t in sent), broadcast, answers * method.delivery.source_messages)
        received.append(
            (inputs.source_updates is not None, inputs.target_update is not None, reachable_tensors(inputs), messages)
        )
        return aggregate(inputs)

    def fedavg_round(updates, counts):  # warm-up rounds and rounds without a training target
        received.append((True, False, [updates, counts], (0, 0, 0)))
        return fedavg(updates, counts)

    def objective(context):  # at the target: the sources' updates only where the server forwards them
        if context.role == "target" and not method.delivery.source_updates:
            context = dataclasses.replace(context, inputs=_without_source_updates(context.inputs))
        return local_objective(context)

    method.aggregate, method.local_objective = server, objective
    monkeypatch.setattr(rounds, "fedavg", fedavg_round)
    settings = TrainSettings.from_dict(deep_merge({**AUX_TRAIN, "rounds": 3}, method.requires.train))
    history = run_rounds(method, problem, settings, 0, torch.device("cpu"))

    exchanged = [r for r in history["rounds"] if r["phase"] != "finetune"]  # a local round sends nothing
    assert all(r["bytes_uplink"] == r["bytes_downlink"] == 0 for r in history["rounds"] if r["phase"] == "finetune")
    assert len(received) == len(exchanged)
    m = history["model_size"]
    # FedBN: its BatchNorm entries never cross; SCAFFOLD: c down and Δc_i up, m floats each, per training source;
    # f-DANN, f-WDGRL: the target's features up, the server's broadcast of them down (`message_shapes`)
    shared = m - (int(method.local.sum()) if method.roles.state is not None and hasattr(method, "local") else 0)
    if name == "fedrep":  # only the shared body crosses; every head stays with its client
        shared = method.body_size
    if name == "comda":  # no parameter crosses: black-box sources, and the target's networks stay with it
        shared = 0
    if name.startswith("dadil"):  # the atoms cross (feature inputs: no encoder); θ's α slot never does
        shared = m - method.hparams["atoms"]
    shapes = {(SOURCES, m), (SOURCES,), (m,), ()} | method.message_shapes()
    data = _data_storages(problem)
    for (sources_sent, target_sent, tensors, (up, down, answers)), record in zip(received, exchanged, strict=True):
        for tensor in tensors:
            assert tensor.untyped_storage().data_ptr() not in data, f"{name}: client data reached the server"
            assert tuple(tensor.shape) in shapes, f"{name}: {tuple(tensor.shape)}"
        estimates = 0
        first_fda_round = record["round"] == (SETTINGS.warmup_rounds if method.roles.warmup else 0)
        if (
            logs_betas(method.family)
            and record["phase"] == "fda"
            and (first_fda_round or method.hparams["recompute"] != "once")
        ):
            estimates = (4 * SOURCES + 3) * 8  # σ², B, ‖Ḡ‖² and d², τ²d², δ, δ' per source, 8 bytes each
        uplink = SOURCES * (4 * shared + 8) * sources_sent + (4 * shared + 8) * target_sent + estimates + up
        # each training client gets the model it starts from and the broadcast (the target only where the method sends
        # it there); the target also the sources' updates and messages, if forwarded
        forwarded = SOURCES * 4 * m * (target_sent and sources_sent and method.delivery.source_updates)
        forwarded += answers * target_sent
        target_down = 4 * shared + down * method.delivery.broadcast_to_target
        downlink = SOURCES * sources_sent * (4 * shared + down) + target_sent * target_down + forwarded
        assert (record["bytes_uplink"], record["bytes_downlink"]) == (uplink, downlink), (name, record["round"])


PERSONALISED = ("ditto", "fedrep", "apfl", "knn_per")


@pytest.mark.parametrize("name", PERSONALISED)
def test_personalised_methods_send_shared_updates_only(problem, name, monkeypatch):
    """Every client sends the update of the shared parameters and its count; the personal model (Ditto,
    APFL), the head (FedRep: its coordinates are zero in every update) and the datastore (kNN-Per) stay."""
    from fdabench.methods import personalised

    received = []

    def server(updates, counts):
        received.append((updates, counts))
        return fedavg(updates, counts)

    monkeypatch.setattr(personalised, "fedavg", server)
    method = get_method(name)
    history = run_rounds(method, problem, SETTINGS, 0, torch.device("cpu"))
    assert len(received) == len(history["rounds"]) == SETTINGS.rounds
    m, clients = history["model_size"], SOURCES + 1
    data = _data_storages(problem)
    personal = {t.untyped_storage().data_ptr() for t in reachable_tensors(vars(method))}
    head = torch.zeros(m, dtype=torch.bool)
    if name == "fedrep":
        head[method.body_size :] = True
    for (updates, counts), record in zip(received, history["rounds"], strict=True):
        assert updates.shape == (clients, m) and counts.shape == (clients,)
        for tensor in (updates, counts):
            assert tensor.untyped_storage().data_ptr() not in data | personal, name
        assert not updates[:, head].any(), f"{name}: a head left its client"
        shared = int((~head).sum())
        assert (record["bytes_uplink"], record["bytes_downlink"]) == (clients * (4 * shared + 8), clients * 4 * shared)


def test_kd3a_sends_models_counts_and_domain_weights(problem, monkeypatch):
    """Sources send their models and counts; the target its model, its count and the N + 1 domain weights
    (KD3A's documented messages); the source models forwarded to the target are the only other traffic."""
    from fdabench.methods import kd3a

    received = []

    def server(weights, source_models, target_model):
        received.append((weights, source_models, target_model))
        return combine(weights, source_models, target_model)

    combine = kd3a.combine_models
    monkeypatch.setattr(kd3a, "combine_models", server)
    history = run_rounds(get_method("kd3a"), problem, SETTINGS, 0, torch.device("cpu"))
    assert len(received) == len(history["rounds"]) == SETTINGS.rounds
    m, data = history["model_size"], _data_storages(problem)
    for (weights, source_models, target_model), record in zip(received, history["rounds"], strict=True):
        assert weights.shape == (SOURCES + 1,) and len(source_models) == SOURCES and target_model.shape == (m,)
        for tensor in (weights, target_model, *source_models):
            assert tensor.untyped_storage().data_ptr() not in data
            assert tensor.shape in {(SOURCES + 1,), (m,)}
        uplink = (SOURCES + 1) * (4 * m + 8) + 4 * (SOURCES + 1)
        downlink = (SOURCES + 1) * 4 * m + SOURCES * 4 * m  # the global model to all; source models to the target
        assert (record["bytes_uplink"], record["bytes_downlink"]) == (uplink, downlink)


def test_finetune_offline_sends_source_updates_then_nothing(problem, monkeypatch):
    """FedAvg over the sources (updates and counts), then the target fine-tunes alone: nothing crosses."""
    received = []

    def fedavg_round(updates, counts):
        received.append((updates, counts))
        return fedavg(updates, counts)

    monkeypatch.setattr(rounds, "fedavg", fedavg_round)
    monkeypatch.setattr(baselines, "fedavg", fedavg_round)  # source_only's FedAvg after the warm-up rounds
    history = run_rounds(get_method("finetune_offline"), problem, SETTINGS, 0, torch.device("cpu"))
    federated = [r for r in history["rounds"] if r["phase"] != "finetune"]
    assert len(received) == len(federated)
    m, data = history["model_size"], _data_storages(problem)
    for (updates, counts), record in zip(received, federated, strict=True):
        assert updates.shape == (SOURCES, m) and counts.shape == (SOURCES,)
        assert updates.untyped_storage().data_ptr() not in data and counts.untyped_storage().data_ptr() not in data
        assert (record["bytes_uplink"], record["bytes_downlink"]) == (SOURCES * (4 * m + 8), SOURCES * 4 * m)
    assert all(r["bytes_uplink"] == r["bytes_downlink"] == 0 for r in history["rounds"] if r["phase"] == "finetune")
    # the fine-tuning epochs are numbered after the warm-up and FedAvg rounds, never again from `rounds`
    expected = SETTINGS.warmup_rounds + SETTINGS.rounds + SETTINGS.rounds * SETTINGS.target_local_epochs
    assert SETTINGS.warmup_rounds > 0 and [r["round"] for r in history["rounds"]] == list(range(expected))


def test_every_method_is_checked_by_the_loops_boundary():
    """The round loop runs every method, plugins' included, so the loop's boundary above checks each of them."""
    assert [name for name, cls in METHODS.items() if not issubclass(cls, RoundLoopMethod)] == []
