"""Wasserstein dictionary math: barycentres against POT, simplex projection, OT costs and their gradients."""

import numpy as np
import pytest
import torch

from fdabench.tensor_math.dataset_dictionary import (
    barycentre,
    exact_plan,
    ground_cost,
    project_simplex,
    wasserstein_cost,
)

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


@pytest.mark.parametrize(
    "values, expected",
    [
        ([1.0, 0.9, 0.1], [0.55, 0.45, 0.0]),  # θ = (1.0 + 0.9 − 1)/2: the third value drops out
        ([0.4, 0.3, 0.2], [0.4 + 1 / 30, 0.3 + 1 / 30, 0.2 + 1 / 30]),  # all kept: θ = (0.9 − 1)/3
        ([3.0, 0.0], [1.0, 0.0]),
    ],
)
def test_simplex_projection_hand_computed(values, expected):
    projected = project_simplex(torch.tensor(values, dtype=torch.float64))
    assert projected.tolist() == pytest.approx(expected, abs=1e-15)


def test_exact_plan_respects_given_marginals_and_refuses_unequal_mass():
    """With weights the plan's rows sum to the source weights and its columns to the target weights (POT's
    exact solver); uniform weights are the default; masses that differ are refused, not silently fixed."""
    generator = torch.Generator().manual_seed(4)
    cost = torch.rand(3, 4, generator=generator, dtype=torch.float64)
    a = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    b = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    plan = exact_plan(cost, a, b)
    assert torch.allclose(plan.sum(1), a) and torch.allclose(plan.sum(0), b)
    import ot

    assert float((plan * cost).sum()) == pytest.approx(ot.emd2(a.numpy(), b.numpy(), cost.numpy()), rel=1e-12)
    assert torch.allclose(exact_plan(cost, a, None).sum(0), torch.full((4,), 0.25, dtype=torch.float64))
    assert torch.allclose(exact_plan(cost, None, b).sum(1), torch.full((3,), 1 / 3, dtype=torch.float64))
    assert torch.allclose(exact_plan(cost).sum(1), torch.full((3,), 1 / 3, dtype=torch.float64))
    with pytest.raises(AssertionError):  # POT's marginal check: 1.0 against 1.5
        exact_plan(cost, a, 1.5 * b)


def test_the_label_term_is_off_unless_asked_for_and_needs_labels_on_both_sides():
    generator = torch.Generator().manual_seed(6)
    x, x_other = torch.randn(4, 2, generator=generator), torch.randn(5, 2, generator=generator)
    y, y_other = torch.eye(3)[torch.tensor([0, 1, 2, 0])], torch.eye(3)[torch.tensor([1, 1, 2, 0, 2])]
    features_only = ground_cost(x, x_other)
    assert torch.equal(ground_cost(x, x_other, y, y_other), features_only)  # β defaults to 0
    assert torch.equal(ground_cost(x, x_other, None, y_other, 0.5), features_only)
    assert torch.equal(ground_cost(x, x_other, y, None, 0.5), features_only)
    assert torch.equal(wasserstein_cost(x, x_other, y, y_other), wasserstein_cost(x, x_other))


def test_one_labelled_barycentre_step_is_the_weighted_transport_of_features_and_labels():
    """x_B ← Σ_k α_k n π_k x_k and y_B ← Σ_k α_k n π_k y_k with π_k the exact plan for ‖x − x'‖² + β‖y − y'‖²
    (computed here with POT directly)."""
    import ot

    generator = torch.Generator().manual_seed(8)
    atoms = [torch.randn(6, 2, generator=generator, dtype=torch.float64) for _ in range(2)]
    labels = [torch.eye(3, dtype=torch.float64)[torch.randint(0, 3, (6,), generator=generator)] for _ in range(2)]
    alpha = torch.tensor([0.3, 0.7], dtype=torch.float64)
    start_x, start_y = atoms[0].clone(), labels[0].clone()  # uniform start labels would not move any plan
    beta = 10.0
    x, y = barycentre(atoms, alpha, start_x, labels, start_y, label_weight=beta, iterations=1)
    expected_x, expected_y = torch.zeros_like(start_x), torch.zeros_like(start_y)
    for weight, x_k, y_k in zip(alpha, atoms, labels):
        cost = ot.dist(start_x.numpy(), x_k.numpy()) + beta * ot.dist(start_y.numpy(), y_k.numpy())
        plan = torch.from_numpy(ot.emd(np.full(6, 1 / 6), np.full(6, 1 / 6), cost))
        expected_x += weight * 6 * plan @ x_k
        expected_y += weight * 6 * plan @ y_k
    assert torch.allclose(x, expected_x, atol=1e-12) and torch.allclose(y, expected_y, atol=1e-12)
    assert not torch.allclose(x, barycentre(atoms, alpha, start_x, labels, start_y, label_weight=0.0, iterations=1)[0])
    # labels count only when both the atoms and the start carry them; β defaults to 0
    unlabelled = barycentre(atoms, alpha, start_x, iterations=1)
    assert barycentre(atoms, alpha, start_x, labels, None, label_weight=beta, iterations=1)[1] is None
    assert torch.equal(
        barycentre(atoms, alpha, start_x, labels, None, label_weight=beta, iterations=1)[0], unlabelled[0]
    )
    assert torch.equal(barycentre(atoms, alpha, start_x, labels, start_y, iterations=1)[0], unlabelled[0])


def test_barycentre_defaults_and_errors():
    atoms = _atoms([5, 5], 2, seed=3)
    alpha = torch.tensor([0.5, 0.5], dtype=torch.float64)
    start = atoms[0].clone()
    default = barycentre(atoms, alpha, start)[0]
    assert torch.equal(default, barycentre(atoms, alpha, start, iterations=10, tolerance=1e-7)[0])
    with pytest.raises(ValueError, match=r"^2 atoms but 3 weights$"):
        barycentre(atoms, torch.ones(3), start)


def _pot_step(atoms, labels, alpha, x, y, beta):
    """One fixed-point update written with POT: x ← Σ_k α_k n π_k x_k, y ← Σ_k α_k n π_k y_k."""
    import ot

    n = x.shape[0]
    new_x, new_y = torch.zeros_like(x), torch.zeros_like(y)
    for weight, x_k, y_k in zip(alpha, atoms, labels):
        cost = ot.dist(x.numpy(), x_k.numpy()) + beta * ot.dist(y.numpy(), y_k.numpy())
        plan = torch.from_numpy(ot.emd(np.full(n, 1 / n), np.full(x_k.shape[0], 1 / x_k.shape[0]), cost))
        new_x += weight * n * plan @ x_k
        new_y += weight * n * plan @ y_k
    return new_x, new_y


def test_labelled_iterations_and_stopping_follow_the_fixed_point():
    """Three spread atoms whose labelled fixed point takes five updates, with squared displacements 377,
    0.47, 5.8, 0.11, 0: the labels updated in one iteration steer the next plans, `iterations` caps the
    updates, and the iteration stops after the first update that moves the support by at most `tolerance`
    (default 1e-7)."""
    generator = torch.Generator().manual_seed(1)
    atoms = [torch.randn(8, 2, generator=generator, dtype=torch.float64) * 3 + 4 * k for k in range(3)]
    labels = [torch.eye(3, dtype=torch.float64)[torch.randint(0, 3, (8,), generator=generator)] for _ in range(3)]
    alpha = torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64)
    x, y, beta = atoms[0].clone(), labels[0].clone(), 5.0
    steps = [(x, y)]
    for _ in range(5):
        steps.append(_pot_step(atoms, labels, alpha, *steps[-1], beta))
    displacements = [float((b[0] - a[0]).square().sum()) for a, b in zip(steps, steps[1:])]
    assert 1e-7 < displacements[1] < 1.0 < displacements[2] and displacements[4] == 0.0

    def ours(**options):
        return barycentre(atoms, alpha, x, labels, y, label_weight=beta, **options)

    for count in (1, 2, 3):
        got_x, got_y = ours(iterations=count, tolerance=0.0)
        assert torch.allclose(got_x, steps[count][0], atol=1e-10) and torch.allclose(got_y, steps[count][1], atol=1e-10)
    assert torch.allclose(ours(iterations=10, tolerance=1.0)[0], steps[2][0], atol=1e-10)  # stops at 0.47 <= 1
    assert torch.allclose(ours()[0], steps[5][0], atol=1e-10)  # the default runs to the fixed point


def test_the_label_term_defaults_to_off_in_the_barycentre():
    """Start points at 0 and 1 with labels e0, e1; atom points at 0.1 and 0.9 with labels e1, e0. On features
    alone the plan keeps the order; with β = 1 the labels swap it. The default is β = 0."""
    atom, atom_labels = torch.tensor([[0.1], [0.9]], dtype=torch.float64), torch.eye(2, dtype=torch.float64).flip(0)
    start, start_labels = torch.tensor([[0.0], [1.0]], dtype=torch.float64), torch.eye(2, dtype=torch.float64)
    alpha = torch.ones(1, dtype=torch.float64)
    default = barycentre([atom], alpha, start, [atom_labels], start_labels, iterations=1)[0]
    swapped = barycentre([atom], alpha, start, [atom_labels], start_labels, label_weight=1.0, iterations=1)[0]
    assert default.flatten().tolist() == pytest.approx([0.1, 0.9]) and swapped.flatten().tolist() == pytest.approx(
        [0.9, 0.1]
    )


def test_one_sided_weights_are_checked_too():
    cost = torch.rand(3, 4, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    with pytest.raises(AssertionError):
        exact_plan(cost, torch.tensor([0.5, 0.5, 0.5], dtype=torch.float64), None)
    with pytest.raises(AssertionError):
        exact_plan(cost, None, torch.full((4,), 0.5, dtype=torch.float64))
