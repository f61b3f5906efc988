"""Co-MDA: its ensemble, source weights, schedules and co-teaching step against hand computations and the authors'
per-sample loops; the run's protocol (what crosses, what stays)."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fdabench.federation.client import LocalSettings
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.rounds import run_rounds
from fdabench.methods import get_method
from fdabench.methods.comda import (
    CoTaughtPair,
    forget_rate,
    icvar,
    label_mixing,
    remembered,
    source_weights,
    temporal_ensemble,
    train_cotaught,
)


def test_temporal_ensemble_carries_the_corrected_value_forward():
    """A constant answer 1.0 with α = 0.6: the code's values, which pass 1 because the corrected ensemble is the next
    accumulator (0.4 / 0.64, then 0.775 / 0.784, ...)."""
    accumulated, values = torch.zeros(1), []
    for update in range(4):
        accumulated = temporal_ensemble(accumulated, torch.ones(1), 0.6, update)
        values.append(float(accumulated))
    assert values == pytest.approx([0.625, 0.775 / 0.784, 1.140984, 1.176039], abs=1e-6)


def _icvar_as_the_code(z, predicted):
    """train.py:256-279, sample by sample, for one source."""
    n, classes = z.shape
    hot = torch.zeros(n, classes)
    hot[torch.arange(n), predicted] = 1
    soft, pos, neg, held = 0, 0, 0, 0
    for i in range(n):
        soft = soft + z[i]
        pos = pos + z[i] * hot[i]
        neg = neg + z[i] * (1 - hot[i])
        held = held + hot[i]
    soft = soft / n
    pos = pos / (held + 0.001)
    neg = neg / (n - held + 0.001)
    return float((held * (pos - soft) ** 2).sum() / n + ((n - held) * (neg - soft) ** 2).sum() / n)


def test_icvar_by_hand_and_as_the_code_computes_it():
    z = torch.tensor([[[0.8, 0.2], [0.3, 0.7]]])
    by_hand = ((0.8 / 1.001 - 0.55) ** 2 + (0.7 / 1.001 - 0.45) ** 2) / 2 + (
        (0.3 / 1.001 - 0.55) ** 2 + (0.2 / 1.001 - 0.45) ** 2
    ) / 2
    assert float(icvar(z, torch.tensor([[0, 1]]))[0]) == pytest.approx(by_hand, rel=1e-6)
    generator = torch.Generator().manual_seed(0)
    z = torch.softmax(torch.randn(3, 20, 4, generator=generator, dtype=torch.float64), dim=2)
    predicted = torch.randint(0, 4, (3, 20), generator=generator)  # the current answers, not z's argmax
    assert icvar(z, predicted).tolist() == pytest.approx([_icvar_as_the_code(z[k], predicted[k]) for k in range(3)])


def test_source_weights_are_a_sharpened_softmax():
    weights = source_weights(torch.tensor([0.1, 0.0, 0.3]), 5.0)
    expected = np.exp([0.5, 0.0, 1.5]) / np.exp([0.5, 0.0, 1.5]).sum()
    assert weights.tolist() == pytest.approx(expected.tolist(), rel=1e-6)


def test_label_mixing_and_forget_rate_schedules():
    assert [label_mixing(r, 10) for r in (0, 5, 6, 9)] == [0, 0, pytest.approx(0.2), pytest.approx(0.8)]
    assert [label_mixing(r, 5) for r in (2, 3, 4)] == [0, pytest.approx(0.2), pytest.approx(0.6)]  # round(2.5) = 2
    assert [forget_rate(r, 0.4, 5, 5) for r in (0, 1, 9, 10, 30)] == pytest.approx([0, 0.4 / 9, 0.4, 0.4, 0.4])
    assert forget_rate(0, 0.3, 0, 0) == 0.3


def test_remembered_keeps_the_smallest_peer_losses_rounding_up():
    losses = torch.tensor([0.5, 0.1, 0.9, 0.3])
    assert remembered(losses, 0.5).tolist() == [1, 3]
    assert remembered(losses, 0.6).tolist() == [1, 3, 0]  # ⌈2.4⌉ = 3
    assert remembered(losses, 1.0).tolist() == [1, 3, 0, 2]


def test_a_network_learns_from_the_input_its_peer_finds_easiest():
    """One full batch, one input kept: mixup pairs it with itself, so the step is one SGD step on the cross-entropy of
    that input's pseudo-label. The kept input is the one of smallest *peer* loss (the network's own smallest is
    another)."""
    torch.manual_seed(0)
    net, peer = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    inputs = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    consensus = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    with torch.no_grad():
        peer.weight.copy_(torch.tensor([[0.0, 0.0, 5.0], [0.0, 0.0, 0.0]]))  # sure of input 2's class 0
        peer.bias.zero_()
        net.weight.copy_(torch.tensor([[5.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))  # sure of input 0's class 0
        net.bias.zero_()
    space = ParameterSpace(net)
    start = space.get()
    settings = LocalSettings(0.1, 0, 1, optimizer="sgd")
    hparams = {"mixup_beta": 0.3, "mix_weight": 2.0}
    update, steps = train_cotaught(
        space,
        peer,
        start,
        inputs,
        consensus,
        0.0,
        1 / 3,
        settings,
        torch.Generator(),
        np.random.default_rng(0),
        hparams,
    )
    expected_net = torch.nn.Linear(3, 2)
    ParameterSpace(expected_net).set(start)
    (2.0 * F.cross_entropy(expected_net(inputs[2:3]), torch.tensor([0]))).backward()
    expected = torch.cat([-0.1 * p.grad.reshape(-1) for p in expected_net.parameters()])
    assert steps == 1 and torch.allclose(update, expected, atol=1e-7)


def test_the_pair_predicts_the_mean_of_its_softmax_outputs():
    first, second = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    x = torch.randn(5, 4)
    pair = CoTaughtPair(first, second)
    mean = (torch.softmax(first(x), 1) + torch.softmax(second(x), 1)) / 2
    assert torch.allclose(pair(x).exp(), mean, atol=1e-6)


def test_nothing_but_queries_and_answers_cross_and_theta_never_moves(tiny_problem, tiny_settings):
    """The sources send zero updates (no parameter leaves them) and answers (n_T × C probabilities) once they have
    the queries; the target sends its training inputs once and its networks stay. Bytes: counts, queries down to
    every source, answers up and on to the target."""
    from fdabench.methods import comda

    method = get_method("comda", {"warm_target": 1, "num_gradual": 1})
    received = []
    aggregate = method.aggregate

    def server(inputs):
        received.append(inputs)
        return aggregate(inputs)

    method.aggregate = server
    history = run_rounds(method, tiny_problem, tiny_settings, 0, torch.device("cpu"))
    target = torch.cat([tiny_problem.target_labelled.x, tiny_problem.target_unlabelled.x])
    n, classes, sources = len(target), tiny_problem.num_outputs, len(tiny_problem.sources)
    queries, answers = 4 * target.numel(), 4 * n * classes
    for index, (inputs, record) in enumerate(zip(received, history["rounds"], strict=True)):
        assert not inputs.source_updates.any() and not inputs.target_update.any()
        if index == 0:
            assert torch.equal(inputs.target_message, target.reshape(-1)) and inputs.source_messages is None
            assert (record["bytes_uplink"], record["bytes_downlink"]) == (8 * (sources + 1) + queries, 0)
        else:
            assert inputs.target_message is None and inputs.source_messages.shape == (sources, n * classes)
            probabilities = inputs.source_messages.reshape(sources, n, classes)
            assert torch.allclose(probabilities.sum(2), torch.ones(sources, n))
            up, down = 8 * (sources + 1) + sources * answers, sources * queries + sources * answers
            assert (record["bytes_uplink"], record["bytes_downlink"]) == (up, down)
    assert comda.CoMDA.update_bytes(method, None, None) == 0
    assert history["rounds"][-1]["loss"] != history["rounds"][0]["loss"]  # the target's networks trained


def test_refuses_partial_participation_and_dropout():
    method = get_method("comda")
    assert method.check({"participation": 1.0}) == []
    assert any("participation" in problem for problem in method.check({"participation": 0.5}))
    assert any("source_dropout" in problem for problem in method.check({"source_dropout": 0.1}))


def test_the_two_target_networks_start_apart_and_the_same_for_a_seed(tiny_problem, tiny_settings):
    from fdabench.federation.rounds import build_cell_model

    pairs = [
        get_method("comda").prepare_model(
            build_cell_model(tiny_problem, tiny_settings, seed, torch.device("cpu")), tiny_problem
        )
        for seed in (0, 0, 1)
    ]
    flat = [[ParameterSpace(net).get() for net in pair.nets] for pair in pairs]
    assert not torch.equal(flat[0][0], flat[0][1])
    assert torch.equal(flat[0][1], flat[1][1]) and not torch.equal(flat[0][1], flat[2][1])
    assert math.isclose(float(flat[0][0].std()), float(flat[0][1].std()), rel_tol=0.3)  # the same initialisation law
