"""f-DANN and f-WDGRL (`fdabench.methods.adversarial`): the gradient reversal layer, DANN's λ schedule and WDGRL's
critic objective against hand computations; the protocol (the target's features as its message and the next round's
broadcast, the target's labels never read, who trains what); determinism and a resumed run."""

import dataclasses
import math

import pytest
import torch
from torch import nn

from fdabench.federation.checkpoint import Checkpoints
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.rounds import build_cell_model, run_rounds
from fdabench.federation.settings import TrainSettings
from fdabench.methods import get_method
from fdabench.methods.adversarial import (
    HEADER,
    bank_indices,
    critic_cost,
    critic_objective,
    dann_domain_loss,
    domain_loss,
    frozen,
    grl_lambda,
    pack_broadcast,
    read_broadcast,
    reverse_gradient,
)
from tiny import TINY_TRAIN

METHODS = ("fdann", "fwdgrl")


# -- the math, by hand -----------------------------------------------------------------------------------------------
def test_gradient_reversal_is_the_identity_forward_and_minus_lambda_times_the_gradient_backward():
    x = torch.tensor([[1.0, -2.0], [0.5, 3.0]], requires_grad=True)
    weights = torch.tensor([[2.0, 1.0], [-1.0, 4.0]])
    reversed_ = reverse_gradient(x, 0.7)
    assert torch.equal(reversed_, x)
    (reversed_ * weights).square().sum().backward()
    plain = 2 * x.detach() * weights.square()  # d/dx Σ (w x)² without the layer
    torch.testing.assert_close(x.grad, -0.7 * plain)


def test_lambda_schedule_by_hand():
    """λ_p = 2 / (1 + exp(−10 p)) − 1: 0 at the start, 0.986614 half-way, 0.999909 at the end."""
    assert grl_lambda(0.0) == 0.0
    assert grl_lambda(0.5) == pytest.approx(0.986614, abs=1e-6)
    assert grl_lambda(1.0) == pytest.approx(0.999909, abs=1e-6)
    assert grl_lambda(0.5, gamma=2.0) == pytest.approx(2 / (1 + math.exp(-1)) - 1)


def test_dann_domain_loss_labels_the_source_zero_and_the_target_one():
    zeros = torch.zeros(3, 1)
    assert dann_domain_loss(zeros, zeros).item() == pytest.approx(math.log(2))  # ½ (ln 2 + ln 2)
    confident = torch.full((3, 1), 20.0)
    assert dann_domain_loss(-confident, confident).item() < 1e-8  # source → 0, target → 1: no loss
    assert dann_domain_loss(confident, -confident).item() > 19  # swapped labels: large
    assert domain_loss(torch.tensor([[0.0], [math.log(3)]]), 1.0).item() == pytest.approx(
        (math.log(2) + math.log(4 / 3)) / 2
    )


def _linear(weight, bias):
    critic = nn.Linear(len(weight), 1)
    with torch.no_grad():
        critic.weight.copy_(torch.tensor([weight]))
        critic.bias.fill_(bias)
    return critic


def test_a_constant_critic_estimates_no_distance_and_pays_the_full_penalty():
    """D ≡ 3: L_wd = 0, every point's gradient is 0, so L_grad = (0 − 1)² = 1 and the critic's cost is γ = 10."""
    source, target = torch.randn(4, 2), torch.randn(4, 2) + 5
    wasserstein, penalty = critic_objective(_linear([0.0, 0.0], 3.0), source, target, torch.rand(4, 1))
    assert wasserstein.item() == 0.0 and penalty.item() == 1.0
    assert critic_cost(wasserstein, penalty, 10.0).item() == 10.0


def test_a_linear_critic_by_hand():
    """D(h) = 3 h₁ + 4 h₂ + 0.5: ‖∇D‖ = 5 at every point (a norm over a point's features, not over the batch), so
    L_grad = (5 − 1)² = 16; L_wd = D(mean h_s) − D(mean h_t) = 3.5 − 0; cost = −3.5 + 10·16 = 156.5."""
    source = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    target = torch.zeros(2, 2)
    wasserstein, penalty = critic_objective(_linear([3.0, 4.0], 0.5), source, target, torch.full((2, 1), 0.3))
    assert wasserstein.item() == pytest.approx(3.5) and penalty.item() == pytest.approx(16.0)
    assert critic_cost(wasserstein, penalty, 10.0).item() == pytest.approx(156.5)


def test_the_penalty_covers_the_interpolates_and_both_ends():
    """D(h) = ½‖h‖², ∇D = h: h_s = (2, 0), h_t = 0. With α = 0.5 the interpolate (1, 0) has norm 1, h_s 2, h_t 0:
    L_grad = (0 + 1 + 1)/3; with α = 0.25 the interpolate (1.5, 0) adds 0.25 instead. L_wd = 2 − 0."""
    critic = lambda h: 0.5 * h.square().sum(dim=1, keepdim=True)
    source, target = torch.tensor([[2.0, 0.0]]), torch.zeros(1, 2)
    wasserstein, penalty = critic_objective(critic, source, target, torch.tensor([[0.5]]))
    assert wasserstein.item() == 2.0 and penalty.item() == pytest.approx(2 / 3)
    assert critic_objective(critic, source, target, torch.tensor([[0.25]]))[1].item() == pytest.approx(2.25 / 3)


def test_the_critic_objective_moves_the_critic_only_through_its_own_parameters():
    critic = _linear([1.0, -1.0], 0.0)
    source = torch.randn(3, 2, requires_grad=True)
    critic_cost(*critic_objective(critic, source.detach(), torch.zeros(3, 2), torch.rand(3, 1)), 10.0).backward()
    assert source.grad is None and critic.weight.grad is not None
    frozen_output = frozen(critic)(source).sum()
    frozen_output.backward()
    assert source.grad is not None and critic.weight.grad.abs().sum() > 0  # unchanged by the frozen call
    before = critic.weight.grad.clone()
    frozen(critic)(source).sum().backward()
    assert torch.equal(critic.weight.grad, before)


def test_bank_rows_are_evenly_spaced_and_shift_with_the_round():
    assert bank_indices(10, 4, 0).tolist() == [0, 2, 5, 7]
    assert bank_indices(10, 4, 1).tolist() == [1, 3, 6, 8]
    assert bank_indices(10, 4, 9).tolist() == [9, 1, 4, 6]
    assert bank_indices(3, 5, 0).tolist() == [0, 0, 1, 1, 2]  # fewer inputs than rows: repeated


def test_the_broadcast_carries_the_round_the_budget_and_the_bank():
    bank = torch.arange(6.0).view(3, 2)
    sent = pack_broadcast(4, 10, bank, True, 2, torch.device("cpu"))
    assert sent.shape == (HEADER + 6,)
    received = read_broadcast(sent)
    assert (received.round_index, received.rounds, received.head_trained) == (4, 10, True)
    assert torch.equal(received.bank, bank) and received.progress == 0.4
    empty = read_broadcast(pack_broadcast(0, 10, None, False, 2, torch.device("cpu")))
    assert empty.bank is None and not empty.head_trained
    assert read_broadcast(None) is None


# -- the protocol ----------------------------------------------------------------------------------------------------
def _recorded(name, problem, hparams=None, **settings):
    """The run and, per round, what the server received (its inputs, the broadcast of that round)."""
    method = get_method(name, hparams or {})
    received = []
    aggregate = method.aggregate

    def server(inputs):
        received.append(dataclasses.replace(inputs))
        return aggregate(inputs)

    method.aggregate = server
    history = run_rounds(method, problem, TrainSettings.from_dict({**TINY_TRAIN, **settings}), 0, torch.device("cpu"))
    return method, history, received


def _coordinates(inputs, prefix):
    return torch.cat(
        [torch.full((size,), name.startswith(prefix)) for name, size in zip(inputs.layer_names, inputs.layer_sizes)]
    )


@pytest.mark.parametrize("name", METHODS)
def test_the_target_sends_its_features_and_the_sources_get_them_the_next_round(name, tiny_problem):
    """Round r's broadcast holds the target's message of round r − 1 (none in round 0), and that message is the
    features of `bank_size` of the target's inputs (labels dropped) under its new local model."""
    method, history, received = _recorded(name, tiny_problem, {"bank_size": 32})
    width = 16  # the tiny MLP's hidden layer
    assert [read_broadcast(r.broadcast).round_index for r in received] == list(range(TINY_TRAIN["rounds"]))
    assert read_broadcast(received[0].broadcast).bank is None
    for before, now in zip(received, received[1:]):
        torch.testing.assert_close(read_broadcast(now.broadcast).bank.reshape(-1), before.target_message)
    assert [read_broadcast(r.broadcast).head_trained for r in received] == [False, False, True, True]
    settings = TrainSettings.from_dict(TINY_TRAIN)
    model = method.prepare_model(build_cell_model(tiny_problem, settings, 0, torch.device("cpu")), tiny_problem)
    space = ParameterSpace(model)
    inputs = torch.cat([tiny_problem.target_labelled.inputs(), tiny_problem.target_unlabelled.inputs()])
    for index in (0, 2):
        sent = received[index]
        assert sent.target_message.shape == (32 * width,)
        space.set(sent.global_params + sent.target_update)
        model.eval()
        with torch.no_grad():
            features = model.features(inputs[bank_indices(len(inputs), 32, index)])
        torch.testing.assert_close(sent.target_message, features.reshape(-1))
    assert history["rounds"][1]["bytes_uplink"] - history["rounds"][0]["bytes_uplink"] == 0  # the bank: every round
    sources = len(tiny_problem.sources)
    bank_bytes = (sources + 1) * 4 * 32 * width  # to every training client
    assert history["rounds"][1]["bytes_downlink"] - history["rounds"][0]["bytes_downlink"] == bank_bytes


@pytest.mark.parametrize("name", METHODS)
def test_who_trains_what(name, tiny_problem):
    """The sources train the domain head once there is a bank (round ≥ 1), never before; the target never moves the
    head or the domain head, and moves its features only once the domain head has met a bank (round ≥ 2)."""
    _, _, received = _recorded(name, tiny_problem)
    domain = _coordinates(received[0], "domain.")
    body = _coordinates(received[0], "features.")
    for inputs in received:
        round_index = inputs.round_index
        assert (inputs.source_updates[:, domain].abs().sum() > 0) == (round_index >= 1), round_index
        assert inputs.target_update[~body].abs().sum() == 0, round_index
        assert (inputs.target_update[body].abs().sum() > 0) == (round_index >= 2), round_index


def test_round_zero_over_the_sources_is_fedavgs_round(run_method):
    """Without a bank the sources train the task loss alone: with the target's update left out of the average, the
    first round's model is FedAvg's (the domain head added after the model's initialisation changes nothing)."""
    first = run_method("fdann", {"aggregation": "sources"}, rounds=1)["rounds"][0]
    reference = run_method("fedprox", {"mu": 0.0}, rounds=1)["rounds"][0]
    assert first["accuracy"] == reference["accuracy"] and first["loss"] == pytest.approx(reference["loss"], abs=0)


@pytest.mark.parametrize("name", METHODS)
def test_the_target_labels_are_never_read(name, run_method, tiny_problem):
    scrambled = dataclasses.replace(
        tiny_problem,
        target_labelled=dataclasses.replace(tiny_problem.target_labelled, y=(tiny_problem.target_labelled.y + 3) % 10),
        target_unlabelled=dataclasses.replace(
            tiny_problem.target_unlabelled, y=torch.full_like(tiny_problem.target_unlabelled.y, -1)
        ),
    )
    assert _records(run_method(name, problem=scrambled)) == _records(run_method(name))


@pytest.mark.parametrize("name", METHODS)
def test_same_seed_same_run_and_finite(name, run_method):
    first, again = run_method(name), run_method(name)
    assert _records(first) == _records(again)
    assert all(math.isfinite(record["loss"]) and 0 <= record["accuracy"] <= 1 for record in first["rounds"])
    assert get_method(name).roles.unlabelled and get_method(name).family == "unsupervised"


def test_the_logged_lambda_follows_the_schedule(run_method):
    history = run_method("fdann")
    rounds = TINY_TRAIN["rounds"]
    expected = [grl_lambda(r / rounds) for r in range(rounds)]
    assert [r["grl_lambda"] for r in history["rounds"]] == pytest.approx(expected)


def test_more_critic_steps_change_the_run(run_method):
    assert _records(run_method("fwdgrl", {"critic_steps": 1})) != _records(run_method("fwdgrl"))


class _Interrupted(Exception):
    pass


@pytest.mark.parametrize("name", METHODS)
def test_a_resumed_run_equals_an_uninterrupted_one(name, tiny_problem, tmp_path):
    settings = TrainSettings.from_dict({**TINY_TRAIN, "rounds": 5})

    def run(checkpoints=None, stop_after=None):
        def on_round(record, _total):
            if record["round"] == stop_after:
                raise _Interrupted

        return run_rounds(
            get_method(name), tiny_problem, settings, 0, torch.device("cpu"), on_round, checkpoints=checkpoints
        )

    reference = run()
    checkpoints = Checkpoints(tmp_path / "cell.ckpt", 2, {"config": "cell", "code": "", "device": "cpu", "threads": 1})
    with pytest.raises(_Interrupted):
        run(checkpoints, stop_after=2)
    assert checkpoints.path.is_file()
    assert _records(run(checkpoints)) == _records(reference)


def _records(history):
    return [{key: value for key, value in record.items() if key != "seconds"} for record in history["rounds"]]
