"""KD3A: knowledge vote, consensus focus and domain weights on hand-made confidences; the run's protocol."""

import pytest
import torch

from fdabench.methods import get_method
from fdabench.methods.kd3a import confidence_gate, consensus_focus, consensus_quality, domain_weights, knowledge_vote

# 3 sources x 4 target inputs x 3 classes
PROBABILITIES = torch.tensor(
    [
        [[0.90, 0.05, 0.05], [0.50, 0.30, 0.20], [0.85, 0.10, 0.05], [0.05, 0.90, 0.05]],
        [[0.80, 0.10, 0.10], [0.40, 0.40, 0.20], [0.05, 0.90, 0.05], [0.10, 0.85, 0.05]],
        [[0.10, 0.85, 0.05], [0.30, 0.30, 0.40], [0.05, 0.07, 0.88], [0.05, 0.05, 0.90]],
    ]
)


def test_knowledge_vote_by_hand():
    knowledge, support = knowledge_vote(PROBABILITIES, gate=0.8)
    # input 0: all confident; class 0 has two votes -> mean of sources 0 and 1
    assert torch.allclose(knowledge[0], torch.tensor([0.85, 0.075, 0.075])) and support[0] == 2
    # input 1: nobody reaches the gate -> no knowledge
    assert support[1] == 0 and torch.equal(knowledge[1], torch.zeros(3))
    # input 2: one vote each for classes 0, 1, 2 -> the most confident voter (0.90, class 1) breaks the tie
    assert support[2] == 1 and torch.equal(knowledge[2], PROBABILITIES[1, 2])
    # input 3: two votes for class 1 beat one more confident vote for class 2
    assert support[3] == 2 and torch.allclose(knowledge[3], torch.tensor([0.075, 0.875, 0.05]))


def test_tie_goes_to_the_larger_summed_confidence():
    probabilities = torch.tensor([[[0.85, 0.15]], [[0.05, 0.95]]])  # one vote each
    knowledge, support = knowledge_vote(probabilities, gate=0.8)
    assert support.tolist() == [1] and torch.allclose(knowledge[0], torch.tensor([0.05, 0.95]))


def test_gate_filters_sources():
    _, support = knowledge_vote(PROBABILITIES, gate=0.88)
    assert support.tolist() == [1, 0, 1, 1]  # only the 0.90 predictions pass


def test_consensus_focus_by_hand():
    gate = 0.8
    total = consensus_quality(PROBABILITIES, gate)
    # Q = 2 * 0.85 (input 0) + 0 + 1 * 0.90 (input 2) + 2 * 0.875 (input 3)
    assert float(total) == pytest.approx(2 * 0.85 + 0.90 + 2 * 0.875)
    focus = consensus_focus(PROBABILITIES, gate)
    expected = [
        float(total - consensus_quality(PROBABILITIES[[1, 2]], gate)),
        float(total - consensus_quality(PROBABILITIES[[0, 2]], gate)),
        float(total - consensus_quality(PROBABILITIES[[0, 1]], gate)),
    ]
    assert focus.tolist() == pytest.approx([max(e, 0.0) for e in expected])


def test_a_source_that_never_agrees_gets_no_focus():
    agreeing = torch.tensor([[0.9, 0.1], [0.1, 0.9]])
    probabilities = torch.stack([agreeing, agreeing, agreeing.flip(1)])  # the third always disagrees
    focus = consensus_focus(probabilities, gate=0.8)
    assert focus[2] == 0 and focus[0] > 0 and focus[0] == focus[1]


def test_domain_weights():
    weights = domain_weights(torch.tensor([3.0, 1.0]), torch.tensor([100.0, 300.0]), target_count=100)
    assert weights.tolist() == pytest.approx([0.8 * 0.75, 0.8 * 0.25, 0.2])
    fallback = domain_weights(torch.zeros(2), torch.tensor([100.0, 300.0]), target_count=0)
    assert fallback.tolist() == pytest.approx([0.25, 0.75, 0.0])  # no consensus: FedAvg over the sources


def test_confidence_gate_rises_linearly():
    gates = [confidence_gate(r, 4, 0.8, 0.95) for r in range(4)]
    assert gates == pytest.approx([0.8, 0.85, 0.9, 0.95])
    assert confidence_gate(0, 1, 0.8, 0.95) == 0.8


def test_kd3a_run_protocol_and_bytes(run_method, tiny_problem):
    history = run_method("kd3a")
    sources = len(tiny_problem.sources)
    model_bytes = 4 * history["model_size"]
    for record in history["rounds"]:
        assert (
            record["bytes_downlink"] == (sources + 1) * model_bytes + sources * model_bytes
        )  # global + forwarded source models
        assert record["bytes_uplink"] == (sources + 1) * (model_bytes + 8) + (sources + 1) * 4
        assert sum(record["domain_weights"]) == pytest.approx(1.0) and len(record["domain_weights"]) == sources + 1
        assert 0 <= record["knowledge_fraction"] <= 1
    assert [r["confidence_gate"] for r in history["rounds"]] == pytest.approx([0.8, 0.85, 0.9, 0.95])
    assert get_method("kd3a").roles.unlabelled and not get_method("fedgp").roles.unlabelled


def test_kd3a_is_deterministic_and_mixup_matters(run_method):
    confident = {"source_lr": 1e-2}  # sources confident enough to pass the gate within 4 rounds
    first, again = run_method("kd3a", **confident), run_method("kd3a", **confident)
    assert [r["loss"] for r in first["rounds"]] == [r["loss"] for r in again["rounds"]]
    plain = run_method("kd3a", {"mixup_alpha": 0.0}, **confident)
    assert any(r["knowledge_fraction"] > 0 for r in first["rounds"])
    assert [r["loss"] for r in first["rounds"]] != [r["loss"] for r in plain["rounds"]]
