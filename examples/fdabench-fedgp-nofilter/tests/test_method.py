"""The plugin's own tests: the rule against a hand computation, what sets it apart from FedGP, and the
fdabench method kit (`fdabench.testing`) on the registered method."""

import torch
from fdabench_fedgp_nofilter.method import FedGPNoFilter
from fdabench_fedgp_nofilter.rule import fedgp_nofilter

from fdabench.methods import METHODS
from fdabench.tensor_math.aggregation import fedgp

pytest_plugins = ["fdabench.testing.fixtures"]

TARGET = torch.tensor([1.0, 0.0, 2.0])
SOURCES = torch.tensor([[2.0, 0.0, -2.0], [0.0, 1.0, 1.0]])  # layer (1, 2): source 0's second layer opposes
COUNTS = torch.tensor([1, 3])


def test_rule_by_hand():
    """Layers of sizes 1 and 2, β = 0.5, w = (1/4, 3/4).
    Layer 1: ⟨1, 2⟩/4 · 2 = 1 for source 0, 0 for source 1 -> 0.5 · 1 + 0.5 · (1/4 · 1) = 0.625.
    Layer 2: source 0: ⟨(0,2),(0,-2)⟩/4 · (0,-2) = -1 · (0,-2) = (0,2); source 1: ⟨(0,2),(1,1)⟩/2 · (1,1) = (1,1)
    -> 0.5 · (0,2) + 0.5 · (1/4 · (0,2) + 3/4 · (1,1)) = (0.375, 1.625)."""
    delta = fedgp_nofilter(TARGET, SOURCES, 0.5, COUNTS, (1, 2))
    assert torch.allclose(delta, torch.tensor([0.625, 0.375, 1.625]))


def test_negative_projections_are_kept_where_fedgp_filters_them():
    ours = fedgp_nofilter(TARGET, SOURCES, 0.5, COUNTS, (1, 2))
    filtered = fedgp(TARGET, SOURCES, 0.5, COUNTS, layer_sizes=(1, 2))
    assert torch.allclose(ours[:1], filtered[:1])  # every projection of layer 1 is non-negative: the same
    assert not torch.allclose(ours[1:], filtered[1:])


def test_registered_through_its_entry_point():
    assert METHODS.get("fedgp_nofilter") is FedGPNoFilter


def test_passes_the_method_kit(method_checks):
    method_checks("fedgp_nofilter")
    method_checks("fedgp_nofilter", {"beta": 0.2})
