"""Wasserstein dictionary math: barycentres against POT, simplex projection, OT costs and their gradients."""

import numpy as np
import pytest
import torch

from fdabench.dictionary import barycentre, exact_plan, ground_cost, project_simplex, wasserstein_cost

# The fixed-point iteration is the same algorithm as POT's; only round-off in the cost matrices differs
# (the same optimal plans are chosen), so the supports agree to near machine precision.
POT_TOLERANCE = 1e-9


def _atoms(sizes, dim, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(size, dim, generator=generator, dtype=torch.float64) + 2.0 * index
        for index, size in enumerate(sizes)
    ]


@pytest.mark.parametrize("weights", [[0.2, 0.5, 0.3], [1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3]])
def test_features_only_barycentre_agrees_with_pot(weights):
    import ot

    atoms = _atoms([30, 25, 40], dim=5)
    initial = torch.randn(20, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    alpha = torch.tensor(weights, dtype=torch.float64)
    ours, labels = barycentre(atoms, alpha, initial, iterations=100, tolerance=1e-7)
    reference = ot.lp.free_support_barycenter(
        [a.numpy() for a in atoms],
        [np.full(len(a), 1.0 / len(a)) for a in atoms],
        initial.numpy(),
        weights=alpha.numpy(),
        numItermax=100,
        stopThr=1e-7,
    )
    assert labels is None
    assert np.abs(ours.numpy() - reference).max() < POT_TOLERANCE


def test_single_iteration_matches_pot_too():
    import ot

    atoms = _atoms([12, 12], dim=3, seed=4)
    initial = atoms[0].clone()
    alpha = torch.tensor([0.7, 0.3], dtype=torch.float64)
    ours, _ = barycentre(atoms, alpha, initial, iterations=1)
    reference = ot.lp.free_support_barycenter(
        [a.numpy() for a in atoms], [np.full(12, 1 / 12)] * 2, initial.numpy(), weights=alpha.numpy(), numItermax=1
    )
    assert np.abs(ours.numpy() - reference).max() < POT_TOLERANCE


def test_barycentre_of_one_atom_is_the_atom():
    atom = _atoms([10], dim=4)[0]
    labels = torch.softmax(torch.randn(10, 3, dtype=torch.float64), dim=1)
    initial = torch.zeros(10, 4, dtype=torch.float64)
    x, y = barycentre(
        [atom],
        torch.tensor([1.0], dtype=torch.float64),
        initial,
        [labels],
        torch.full((10, 3), 1 / 3, dtype=torch.float64),
        label_weight=1.0,
    )
    order = torch.cdist(x, atom).argmin(1)
    assert torch.allclose(x, atom[order]) and torch.allclose(y, labels[order])
    assert sorted(order.tolist()) == list(range(10))


def test_barycentre_labels_stay_on_the_simplex_and_gradients_reach_atoms_and_alpha():
    atoms = [a.float().requires_grad_() for a in _atoms([16, 16, 16], dim=3)]
    labels = [torch.softmax(torch.randn(16, 4), dim=1).requires_grad_() for _ in range(3)]
    alpha = torch.tensor([0.5, 0.3, 0.2], requires_grad=True)
    x, y = barycentre(atoms, alpha, atoms[0].detach(), labels, labels[0].detach(), label_weight=1.0, iterations=5)
    assert torch.allclose(y.sum(1), torch.ones(16)) and (y >= 0).all()
    data_x, data_y = torch.randn(16, 3), torch.eye(4)[torch.arange(16) % 4]
    wasserstein_cost(data_x, x, data_y, y, label_weight=1.0).backward()
    assert all(a.grad is not None and a.grad.abs().sum() > 0 for a in atoms)
    assert all(label.grad is not None for label in labels) and alpha.grad is not None


def test_wasserstein_cost_is_exact_ot():
    import ot

    x = torch.randn(9, 2, dtype=torch.float64)
    z = torch.randn(7, 2, dtype=torch.float64)
    assert float(wasserstein_cost(x, z)) == pytest.approx(
        ot.emd2(np.full(9, 1 / 9), np.full(7, 1 / 7), ot.dist(x.numpy(), z.numpy())), rel=1e-9
    )
    assert float(wasserstein_cost(x, x)) == pytest.approx(0.0, abs=1e-12)


def test_label_term_of_the_cost():
    x, y = torch.zeros(2, 3), torch.eye(2)
    cost = ground_cost(x, x, y, y, label_weight=0.5)
    assert torch.allclose(cost, torch.tensor([[0.0, 1.0], [1.0, 0.0]]))  # 0.5 * ‖e_0 − e_1‖² = 1
    assert torch.equal(ground_cost(x, x, y, y, label_weight=0.0), torch.zeros(2, 2))
    plan = exact_plan(cost)
    assert torch.allclose(plan, 0.5 * torch.eye(2))


@pytest.mark.parametrize("values", [[0.5, 2.0, -1.0, 0.3], [0.2, 0.3, 0.5], [-3.0, -3.0], [10.0], [0.1, 0.1, 0.1, 0.1]])
def test_simplex_projection(values):
    projected = project_simplex(torch.tensor(values, dtype=torch.float64))
    assert (projected >= 0).all() and float(projected.sum()) == pytest.approx(1.0, abs=1e-12)
    # the projection is the closest point of the simplex: no random simplex point is closer
    points = torch.distributions.Dirichlet(torch.ones(len(values), dtype=torch.float64)).sample((2000,))
    distances = (points - torch.tensor(values, dtype=torch.float64)).norm(dim=1)
    assert float((projected - torch.tensor(values, dtype=torch.float64)).norm()) <= float(distances.min()) + 1e-12


def test_points_on_the_simplex_are_fixed():
    alpha = torch.tensor([0.25, 0.0, 0.75])
    assert torch.allclose(project_simplex(alpha), alpha)
