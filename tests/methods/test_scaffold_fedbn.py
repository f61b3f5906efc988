"""SCAFFOLD's control variates and FedBN's local BatchNorm layers: each defining step against a hand computation,
the state that stays on a client, and what crosses the client boundary."""

import pytest
import torch
from torch import nn

from fdabench.federation.client import LocalResult, LocalSettings, train_locally
from fdabench.federation.parameters import ParameterSpace, module_entries
from fdabench.federation.problem import ClientData
from fdabench.methods import get_method
from fdabench.methods.scaffold import control_update
from tiny import TINY_TRAIN

SGD = {"optimizer": "sgd", "momentum": 0.0, "source_lr": 0.05, "target_lr": 0.05}
BATCHNORM = {"model_options": {"hidden": [16], "norm": "batch"}}


class FixedClient:
    """A client whose local training returns `result`, recording where it started and with which options."""

    def __init__(self, result, settings, space=None):
        self.result, self.settings, self.space, self.calls = result, settings, space, []

    def train(self, start, **options):
        self.calls.append((start, options))
        return self.result


def _linear_space():
    torch.manual_seed(0)
    model = nn.Linear(3, 1, bias=False)
    return ParameterSpace(model)


def test_the_correction_is_added_to_every_gradient():
    """One full-batch SGD step on ½‖Xw − y‖²/n from w: w' = w − η (∇ + c − c_i); a sign slip (c_i − c) fails."""
    space = _linear_space()
    x = torch.tensor([[1.0, 2.0, 0.0], [0.0, 1.0, -1.0]])
    y = torch.tensor([[1.0], [0.0]])
    data = ClientData("a", x, y)
    start = torch.tensor([0.5, -0.5, 1.0])
    correction = torch.tensor([0.3, -0.1, 0.2])
    settings = LocalSettings(0.1, 0, 1, "sgd")
    loss = lambda prediction, target: 0.5 * (prediction - target).square().sum() / len(target)
    result = train_locally(space, start, data, settings, loss, torch.Generator(), correction=correction)
    gradient = x.T @ (x @ start[:, None] - y) / 2
    expected = -0.1 * (gradient[:, 0] + correction)
    torch.testing.assert_close(result.update, expected)


def test_option_two_control_update_by_hand():
    """c_i⁺ = c_i − c + (θ − y)/(K η): with c_i = (1, 0), c = (0.5, 0.5), y − θ = (−0.2, 0.4), K = 4, η = 0.1."""
    control, server = torch.tensor([1.0, 0.0]), torch.tensor([0.5, 0.5])
    updated = control_update(control, server, torch.tensor([-0.2, 0.4]), 4, 0.1)
    torch.testing.assert_close(updated, torch.tensor([1.0 - 0.5 + 0.5, 0.0 - 0.5 - 1.0]))
    assert control_update(control, server, torch.zeros(2), 0, 0.1) is control  # no step: unchanged


def test_a_client_keeps_its_control_and_sends_its_change():
    """A client's round: its steps corrected by c − c_i from the broadcast c, then the new c_i stays in the state and
    Δc_i = c_i⁺ − c_i is the message; without the broadcast (a warm-up round) it trains plainly and keeps c_i."""
    method = get_method("scaffold")
    state = {"control": torch.tensor([1.0, 0.0])}
    client = FixedClient(LocalResult(torch.tensor([-0.2, 0.4]), 4, 10), LocalSettings(0.1, 0, 1, "sgd"))
    reply = method.local_round(client, state, torch.zeros(2), torch.tensor([0.5, 0.5]))
    torch.testing.assert_close(client.calls[0][1]["correction"], torch.tensor([-0.5, 0.5]))
    torch.testing.assert_close(reply.state["control"], torch.tensor([1.0, -1.5]))
    torch.testing.assert_close(reply.message, torch.tensor([0.0, -1.5]))
    warm = method.local_round(client, state, torch.ones(2), None)
    assert client.calls[1][1] == {} and warm.state is state and warm.message is None
    assert method.evaluation_view(state, torch.ones(2)).params.tolist() == [1.0, 1.0]  # evaluation: θ as it is


def test_the_server_control_moves_by_the_answered_changes_over_every_source():
    """c ← c + (1/N) Σ_{i∈S} Δc_i (Alg. 1 line 17): two of three sources answered."""
    from fdabench.federation.rule_interface import RoundInputs
    from fdabench.federation.settings import TrainSettings

    method = get_method("scaffold")
    method.server_control = torch.tensor([0.3, 0.0])
    inputs = RoundInputs(0, torch.zeros(2), (2,), TrainSettings.from_dict(TINY_TRAIN), source_total=3)
    inputs.source_updates = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    inputs.source_counts = torch.tensor([1.0, 3.0])
    inputs.source_messages = torch.tensor([[0.6, 0.3], [0.3, -0.3]])
    aggregate = method.aggregate(inputs)
    torch.testing.assert_close(aggregate.delta, torch.tensor([0.25, 0.75]))  # FedAvg by samples
    torch.testing.assert_close(method.server_control, torch.tensor([0.6, 0.0]))
    uniform = get_method("scaffold", {"weighting": "uniform"})
    uniform.server_control = torch.zeros(2)
    torch.testing.assert_close(uniform.aggregate(inputs).delta, torch.tensor([0.5, 0.5]))


def test_scaffold_first_round_is_fedavg_and_control_variates_cost_their_bytes(run_method):
    """c = c_i = 0 in round 1: the same round as FedAvg (FedProx with μ = 0); each source also sends Δc_i and
    receives c (m floats each way), so scaffold's bytes are FedAvg's plus 4m per source each way."""
    scaffold = run_method("scaffold", **SGD)
    fedavg = run_method("fedprox", {"mu": 0.0}, **SGD)
    first, reference = scaffold["rounds"][0], fedavg["rounds"][0]
    assert first["accuracy"] == reference["accuracy"] and first["loss"] == pytest.approx(reference["loss"], abs=0)
    sources = len(scaffold["sources"])
    extra = sources * scaffold["model_size"] * 4
    assert first["bytes_uplink"] == reference["bytes_uplink"] + extra
    assert first["bytes_downlink"] == reference["bytes_downlink"] + extra
    assert all(a["loss"] != b["loss"] for a, b in zip(scaffold["rounds"][1:], fedavg["rounds"][1:]))


def test_scaffold_asks_for_plain_sgd():
    method = get_method("scaffold")
    assert method.check({**TINY_TRAIN, **SGD}) == []
    assert "plain SGD" in method.check(TINY_TRAIN)[0]  # Adam
    assert "plain SGD" in method.check({**TINY_TRAIN, **SGD, "momentum": 0.9})[0]


def test_batchnorm_entries_are_found_by_module():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(), nn.Linear(3, 2))
    mask = module_entries(ParameterSpace(model), (nn.BatchNorm1d,))
    assert mask.tolist() == [False] * 15 + [True] * 6 + [False] * 8


def test_fedbn_batchnorm_layers_never_leave_a_client(run_method, tiny_problem):
    """The global BatchNorm entries stay at their initial values (no client sends them), the target evaluates with
    its own layers, and the bytes each way are those of the shared entries only."""
    history = run_method("fedbn", **BATCHNORM)
    method = get_method("fedbn")
    from fdabench.federation.rounds import build_cell_model
    from fdabench.federation.settings import TrainSettings

    settings = TrainSettings.from_dict({**TINY_TRAIN, **BATCHNORM})
    model = method.prepare_model(build_cell_model(tiny_problem, settings, 0, torch.device("cpu")), tiny_problem)
    space = ParameterSpace(model)
    shared = space.size - int(method.local.sum())
    clients = len(history["sources"]) + 1
    for record in history["rounds"]:
        assert record["bytes_downlink"] == clients * shared * 4
        assert record["bytes_uplink"] == clients * (shared * 4 + 8)
    assert int(method.local.sum()) == 2 * 16  # weight and bias of the one BatchNorm1d(16)


def test_fedbn_sends_zeros_where_its_layers_are_and_keeps_the_trained_ones():
    method = get_method("fedbn")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2), nn.Linear(2, 1))
    method.prepare_model(model, None)
    space = ParameterSpace(model)
    state = method.client_state(space)
    start = torch.arange(space.size, dtype=torch.float32)
    state["norm"] = torch.tensor([-1.0, -2.0, -3.0, -4.0])
    update = torch.ones(space.size)
    client = FixedClient(LocalResult(update, 3, 5), LocalSettings(0.1, 0, 1), space)
    reply = method.local_round(client, state, start, None)
    trained_from = client.calls[0][0]
    assert trained_from[method.local].tolist() == [-1.0, -2.0, -3.0, -4.0]
    assert torch.equal(trained_from[~method.local], start[~method.local])
    assert reply.result.update[method.local].abs().sum() == 0
    assert torch.equal(reply.result.update[~method.local], update[~method.local])
    assert reply.state["norm"].tolist() == [0.0, -1.0, -2.0, -3.0]
    assert reply.message is None


def test_fedbn_needs_batchnorm():
    method = get_method("fedbn")
    assert "train.model_options.norm: 'batch'" in method.check(TINY_TRAIN)[0]
    assert method.check({**TINY_TRAIN, **BATCHNORM}) == []
    with pytest.raises(ValueError, match="no BatchNorm"):
        method.prepare_model(nn.Linear(2, 2), None)


def test_fedbn_target_evaluates_with_its_own_layers(run_method):
    """Against FedAvg over the same clients with shared BatchNorm layers (FedBN with no local entries would be
    that): the runs differ, so the target's own layers are what it evaluates with."""
    fedbn = run_method("fedbn", **BATCHNORM)
    plain = run_method("source_only", **BATCHNORM)
    assert [r["accuracy"] for r in fedbn["rounds"]] != [r["accuracy"] for r in plain["rounds"]]


def test_without_state_a_client_sees_the_global_model():
    for name in ("scaffold", "fedbn"):
        start = torch.ones(3)
        view = get_method(name).evaluation_view(None, start)
        assert view.params is start and view.buffers is None and view.score is None


def test_a_batch_of_one_is_skipped_where_batchnorm_needs_batch_statistics():
    """Five samples in batches of two: the last batch holds one, which a BatchNorm layer in training mode cannot
    normalise; it is skipped (2 steps), while the same model without BatchNorm takes all 3."""
    data = ClientData("a", torch.randn(5, 4), torch.tensor([0, 1, 0, 1, 0]))
    settings = LocalSettings(0.1, 2, 1, "sgd")
    for layers, steps in (([nn.BatchNorm1d(3)], 2), ([], 3)):
        torch.manual_seed(0)
        space = ParameterSpace(nn.Sequential(nn.Linear(4, 3), *layers, nn.ReLU(), nn.Linear(3, 2)))
        result = train_locally(space, space.get(), data, settings, nn.functional.cross_entropy, torch.Generator())
        assert result.steps == steps
