"""The auto-weighting estimators written from the formulas of docs/design/methods.md alone, in numpy float64:
an independent reference for the β that methods log (never calls fdabench)."""

from __future__ import annotations

import numpy as np


def reference_auto_weights(batches, sources, rule: str, scale=None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """β per source from the B per-batch target updates G_b (B, M) and the N source updates (N, M), each
    source multiplied by its `scale` c_i first.

    ḡ = mean G_b;  s² = Σ‖G_b − ḡ‖²/(B − 1);  σ̂² = s²/B;  d̂_i² = max(mean_b ‖G_b − g_i‖² − s², 0);
    r_b = G_b − ⟨G_b, u_i⟩u_i (u_i = g_i/‖g_i‖);  τ²d̂_i² = max(mean_b ‖r_b‖² − Σ‖r_b − r̄‖²/(B − 1), 0);
    δ_i = mean_b [⟨G_b, g_i⟩ > 0], δ'_i = 1 − (1 − δ_i)/B;
    β = σ̂²/(σ̂² + D_i), D_i = d̂_i² (fedda), τ²d̂_i² (fedgp), δ'_i τ²d̂_i² + (1 − δ'_i)‖ḡ‖² (fedgp_threshold).
    """
    G = np.asarray(batches, dtype=np.float64)
    S = np.asarray(sources, dtype=np.float64)
    if scale is not None:
        S = S * np.asarray(scale, dtype=np.float64)[:, None]
    B = G.shape[0]
    mean = G.mean(axis=0)
    s2 = ((G - mean) ** 2).sum() / (B - 1)
    sigma2 = s2 / B
    d2, tau2d2, delta = [], [], []
    for g in S:
        d2.append(max(((G - g) ** 2).sum(axis=1).mean() - s2, 0.0))
        u = g / np.linalg.norm(g)
        r = G - np.outer(G @ u, u)
        tau2d2.append(max((r**2).sum(axis=1).mean() - ((r - r.mean(axis=0)) ** 2).sum() / (B - 1), 0.0))
        delta.append(((G @ g) > 0).mean())
    d2, tau2d2, delta = np.array(d2), np.array(tau2d2), np.array(delta)
    delta_prime = 1 - (1 - delta) / B
    distance = {
        "fedda": d2,
        "fedgp": tau2d2,
        "fedgp_threshold": delta_prime * tau2d2 + (1 - delta_prime) * (mean @ mean),
    }[rule]
    return sigma2 / (sigma2 + distance), {"sigma2": sigma2, "d2": d2, "tau2d2": tau2d2, "delta_prime": delta_prime}
