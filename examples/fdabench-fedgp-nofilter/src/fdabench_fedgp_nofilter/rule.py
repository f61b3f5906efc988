"""The aggregation rule as a pure tensor function (flat updates, as `RoundInputs` holds them)."""

from __future__ import annotations

import torch
from torch import Tensor


def fedgp_nofilter(
    target_update: Tensor, source_updates: Tensor, beta: float, source_counts: Tensor, layer_sizes: tuple[int, ...]
) -> Tensor:
    """Σ_i w_i [(1 − β) g_T,k + β Proj(g_T,k | g_i,k)] per layer k, Proj(v|u) = ⟨v,u⟩ u / ‖u‖² (0 for u = 0).

    FedGP (fdabench.tensor_math.aggregation.fedgp) keeps only positive projections; this variant keeps them all.
    `target_update` (m,), `source_updates` (N, m), `source_counts` (N,), w_i = n_i / Σ n."""
    weights = source_counts.to(source_updates.dtype) / source_counts.sum()
    pieces = []
    for target_k, sources_k in zip(
        torch.split(target_update, list(layer_sizes)), torch.split(source_updates, list(layer_sizes), dim=1)
    ):
        inner = sources_k @ target_k  # (N,)
        squared_norms = sources_k.square().sum(dim=1)
        coefficients = torch.where(squared_norms > 0, inner / squared_norms.clamp_min(torch.finfo(inner.dtype).tiny), 0)
        projections = (weights * beta * coefficients) @ sources_k
        pieces.append((1 - beta) * target_k + projections)
    return torch.cat(pieces)
