"""Wasserstein dataset dictionaries (DaDiL, Montesuma et al. 2023): pure tensor math.

An empirical distribution is a support of n points with uniform weights 1/n: features x (n, d) and, when
labelled, soft labels y (n, C) whose rows lie on the probability simplex. The ground cost between labelled
points is c((x, y), (x', y')) = ‖x − x'‖² + β ‖y − y'‖² (β = `label_weight`; β = 0 or no labels: features
only). Exact optimal transport plans come from POT's network simplex (`ot.emd`, float64 on the CPU);
gradients flow through the supports and the barycentric coordinates with the plans held fixed (the
envelope theorem: the plan is optimal, so its derivative does not enter the gradient of the OT cost).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

EMD_MAX_ITERATIONS = 1_000_000  # network simplex pivots; POT's default (1e5) can stop early on 500 x 500 plans


def squared_distances(a: Tensor, b: Tensor) -> Tensor:
    """(n, m) matrix of ‖a_i − b_j‖² (clamped at 0 against round-off)."""
    return (a.square().sum(1)[:, None] + b.square().sum(1)[None, :] - 2.0 * a @ b.T).clamp_min_(0.0)


def ground_cost(
    x: Tensor, x_other: Tensor, y: Tensor | None = None, y_other: Tensor | None = None, label_weight: float = 0.0
) -> Tensor:
    """C_ij = ‖x_i − x'_j‖² + β ‖y_i − y'_j‖²; the label term only when both sides have labels and β > 0."""
    cost = squared_distances(x, x_other)
    if label_weight and y is not None and y_other is not None:
        cost = cost + label_weight * squared_distances(y, y_other)
    return cost


def exact_plan(cost: Tensor, source_weights: Tensor | None = None, target_weights: Tensor | None = None) -> Tensor:
    """Optimal transport plan for `cost` between two empirical measures (uniform weights by default), by
    POT's exact network simplex; returned without gradient, on the cost's device and dtype."""
    import ot

    n, m = cost.shape
    uniform = source_weights is None and target_weights is None
    a = np.full(n, 1.0 / n) if source_weights is None else source_weights.detach().double().cpu().numpy()
    b = np.full(m, 1.0 / m) if target_weights is None else target_weights.detach().double().cpu().numpy()
    # Uniform marginals have equal mass by construction: skip POT's check (numpy.testing, ~0.5 ms a call).
    plan = ot.emd(
        a, b, cost.detach().double().cpu().numpy(), numItermax=EMD_MAX_ITERATIONS, check_marginals=not uniform
    )
    return torch.from_numpy(plan).to(device=cost.device, dtype=cost.dtype)


def wasserstein_cost(
    x: Tensor, x_other: Tensor, y: Tensor | None = None, y_other: Tensor | None = None, label_weight: float = 0.0
) -> Tensor:
    """W_c(P, Q) = Σ_ij π*_ij C_ij between two uniform empirical measures: differentiable in the supports
    (π* optimal, held fixed)."""
    cost = ground_cost(x, x_other, y, y_other, label_weight)
    return (exact_plan(cost) * cost).sum()


def barycentre(
    atom_features: Sequence[Tensor],
    weights: Tensor,
    initial_features: Tensor,
    atom_labels: Sequence[Tensor] | None = None,
    initial_labels: Tensor | None = None,
    label_weight: float = 0.0,
    iterations: int = 10,
    tolerance: float = 1e-7,
) -> tuple[Tensor, Tensor | None]:
    """Free-support Wasserstein barycentre B(α; P) of the atoms P_k with weights α (uniform barycentre weights).

    The fixed-point iteration (Álvarez-Esteban et al. 2016; Cuturi & Doucet 2014, Algorithm 2 with θ = 1):
    with plans π_k = OT(B, P_k) for the cost ‖x − x'‖² + β‖y − y'‖²,
        x_B ← Σ_k α_k n_B π_k x_k,    y_B ← Σ_k α_k n_B π_k y_k,
    until the squared displacement Σ‖x_B^new − x_B‖² is at most `tolerance` or after `iterations` updates
    (POT's `ot.lp.free_support_barycenter` for β = 0 and no labels). The plans are found without gradient;
    the returned support is the last update, differentiable in the atoms' supports and in α.
    """
    if len(atom_features) != len(weights):
        raise ValueError(f"{len(atom_features)} atoms but {len(weights)} weights")
    labelled = atom_labels is not None and initial_labels is not None
    support_size = initial_features.shape[0]
    features = initial_features.detach()
    labels = initial_labels.detach() if labelled else None
    plans: list[Tensor] = []
    for _ in range(max(iterations, 1)):
        plans = [
            exact_plan(
                ground_cost(features, x_k.detach(), labels, atom_labels[k].detach() if labelled else None, label_weight)
            )
            for k, x_k in enumerate(atom_features)
        ]
        with torch.no_grad():
            updated = sum(float(w) * support_size * (plan @ x_k) for w, plan, x_k in zip(weights, plans, atom_features))
            if labelled:
                labels = sum(
                    float(w) * support_size * (plan @ y_k) for w, plan, y_k in zip(weights, plans, atom_labels)
                )
            displacement = float((updated - features).square().sum())
            features = updated
        if displacement <= tolerance:
            break
    # The last update again, now with gradient (same plans, hence the same values).
    features = sum(w * support_size * (plan @ x_k) for w, plan, x_k in zip(weights, plans, atom_features))
    if labelled:
        labels = sum(w * support_size * (plan @ y_k) for w, plan, y_k in zip(weights, plans, atom_labels))
    return features, labels


def project_simplex(values: Tensor) -> Tensor:
    """Euclidean projection onto the probability simplex {α : α ≥ 0, Σ α = 1} (Held et al. 1974;
    Duchi et al. 2008): α = max(v − θ, 0) with θ from the sorted values."""
    sorted_values, _ = torch.sort(values, descending=True)
    cumulative = sorted_values.cumsum(0) - 1.0
    ranks = torch.arange(1, len(values) + 1, device=values.device, dtype=values.dtype)
    support = (sorted_values - cumulative / ranks) > 0
    count = int(support.nonzero().max()) + 1
    threshold = cumulative[count - 1] / count
    return (values - threshold).clamp_min(0.0)
