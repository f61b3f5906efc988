"""Server aggregation rules for federated domain adaptation (DESIGN.md §2), as pure tensor functions.

Updates are model deltas (local parameters minus the global parameters they started from). Every rule
accepts them in either of two forms and answers in the form of `target_update`:

* per layer: `target_update` is a list of tensors (one per parameter tensor) and `source_updates` a list
  (one per source) of such lists;
* flat: `target_update` is a 1-D tensor of length m, `source_updates` an (N, m) tensor (or a list of N
  1-D tensors), and `layer_sizes` the lengths of the consecutive layers (default: one layer of size m).

Source weights are normalised to sum to one (w_i = n_i / Σ n when given sample counts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

Layered = Sequence[Tensor]
UpdateLike = Tensor | Layered
SourcesLike = Tensor | Sequence[Tensor] | Sequence[Layered]

__all__ = [
    "fedavg",
    "fedda",
    "fedgp",
    "flatten_updates",
    "per_layer_inner_products",
]


@dataclass(frozen=True)
class FlatUpdates:
    """Target (m,), sources (N, m), layer sizes, and how to give the answer back in the caller's form."""

    target: Tensor | None
    sources: Tensor
    layer_sizes: tuple[int, ...]
    layer_shapes: tuple[torch.Size, ...] | None  # set when the caller used the per-layer form

    def restore(self, flat: Tensor) -> UpdateLike:
        if self.layer_shapes is None:
            return flat
        pieces = torch.split(flat, list(self.layer_sizes))
        return [piece.reshape(shape) for piece, shape in zip(pieces, self.layer_shapes)]


def flatten_updates(
    target_update: UpdateLike | None,
    source_updates: SourcesLike,
    layer_sizes: Sequence[int] | None = None,
) -> FlatUpdates:
    """Bring updates given per layer or flat into the flat form (target (m,), sources (N, m))."""
    per_layer = _is_layered(target_update) if target_update is not None else _is_layered_sources(source_updates)
    if per_layer:
        if layer_sizes is not None:
            raise ValueError("layer_sizes is only for flat updates; per-layer updates carry their own")
        reference = target_update if target_update is not None else source_updates[0]
        shapes = tuple(layer.shape for layer in reference)
        sizes = tuple(layer.numel() for layer in reference)
        target = _cat_layers(target_update) if target_update is not None else None
        sources = torch.stack([_cat_layers(source) for source in source_updates])
        for source in source_updates:
            if tuple(layer.shape for layer in source) != shapes:
                raise ValueError("every source update must have the target update's layer shapes")
        return FlatUpdates(target, sources, sizes, shapes)

    sources = source_updates if isinstance(source_updates, Tensor) else torch.stack(list(source_updates))
    if sources.dim() != 2:
        raise ValueError(f"flat source updates must be (N, m); got shape {tuple(sources.shape)}")
    m = sources.shape[1]
    if target_update is not None and target_update.shape != (m,):
        raise ValueError(f"flat target update must have shape ({m},); got {tuple(target_update.shape)}")
    sizes = tuple(int(s) for s in layer_sizes) if layer_sizes is not None else (m,)
    if sum(sizes) != m or any(s <= 0 for s in sizes):
        raise ValueError(f"layer_sizes {sizes} must be positive and sum to m={m}")
    return FlatUpdates(target_update, sources, sizes, None)


def normalised_weights(weights: Tensor | Sequence[float], count: int, like: Tensor) -> Tensor:
    """w / Σ w as a float tensor on `like`'s device; raises on a wrong length or a non-positive total."""
    weights = torch.as_tensor(weights, dtype=like.dtype, device=like.device).flatten()
    if weights.numel() != count:
        raise ValueError(f"expected {count} weights, got {weights.numel()}")
    if (weights < 0).any() or weights.sum() <= 0:
        raise ValueError("weights must be non-negative with a positive sum")
    return weights / weights.sum()


def _betas(betas: Tensor | Sequence[float] | float, count: int, like: Tensor) -> Tensor:
    betas = torch.as_tensor(betas, dtype=like.dtype, device=like.device).flatten()
    if betas.numel() == 1:
        betas = betas.expand(count)
    if betas.numel() != count:
        raise ValueError(f"expected {count} betas (or one), got {betas.numel()}")
    return betas


def fedavg(source_updates: SourcesLike, weights: Tensor | Sequence[float], layer_sizes=None) -> UpdateLike:
    """FedAvg / source only: Σ_i w_i g_i."""
    flat = flatten_updates(None, source_updates, layer_sizes)
    w = normalised_weights(weights, flat.sources.shape[0], flat.sources)
    return flat.restore(w @ flat.sources)


def fedda(
    target_update: UpdateLike,
    source_updates: SourcesLike,
    betas: Tensor | Sequence[float] | float,
    weights: Tensor | Sequence[float],
    layer_sizes=None,
) -> UpdateLike:
    """FedDA: Σ_i w_i [(1 − β_i) g_T + β_i g_i]  (DESIGN.md §2)."""
    flat = flatten_updates(target_update, source_updates, layer_sizes)
    count = flat.sources.shape[0]
    w = normalised_weights(weights, count, flat.sources)
    beta = _betas(betas, count, flat.sources)
    combined = torch.addmv(flat.target * (w * (1 - beta)).sum(), flat.sources.T, w * beta)
    return flat.restore(combined)


def per_layer_inner_products(vector: Tensor, sources: Tensor, layer_sizes: Sequence[int]) -> tuple[Tensor, Tensor]:
    """Per layer k: ⟨v_k, g_{i,k}⟩ and ‖g_{i,k}‖², each of shape (N, L)."""
    inner, squared_norms = [], []
    for v_k, s_k in zip(torch.split(vector, list(layer_sizes)), torch.split(sources, list(layer_sizes), dim=1)):
        inner.append(s_k @ v_k)
        squared_norms.append(torch.linalg.vector_norm(s_k, dim=1).square())
    return torch.stack(inner, dim=1), torch.stack(squared_norms, dim=1)


def fedgp(
    target_update: UpdateLike,
    source_updates: SourcesLike,
    betas: Tensor | Sequence[float] | float,
    weights: Tensor | Sequence[float],
    mode: str = "projection",
    scale: Tensor | Sequence[float] | float | None = None,
    layer_sizes=None,
) -> UpdateLike:
    """FedGP, per layer k, filtering layers whose inner product with the target update is not positive.

    mode="projection" (the definition, DESIGN.md §2):
        Σ_i w_i [(1 − β_i) g_T,k + β_i Proj⁺(g_T,k | g_i,k)],  Proj⁺(v|u) = max(⟨v,u⟩, 0) u / ‖u‖².
    mode="cosine_scaled" (the published real-data code):
        Σ_i w_i [(1 − β_i) g_T,k + β_i s_i max(cos(g_T,k, g_i,k), 0) g_i,k],
        with s_i the alignment factor `scale` (default 1).
    """
    flat = flatten_updates(target_update, source_updates, layer_sizes)
    sources, target, sizes = flat.sources, flat.target, flat.layer_sizes
    count = sources.shape[0]
    w = normalised_weights(weights, count, sources)
    beta = _betas(betas, count, sources)
    inner, squared_norms = per_layer_inner_products(target, sources, sizes)  # (N, L)
    positive = (inner > 0) & (squared_norms > 0)
    if mode == "projection":
        layer_coefficients = torch.where(positive, inner / squared_norms.clamp_min(torch.finfo(inner.dtype).tiny), 0.0)
    elif mode == "cosine_scaled":
        target_norms = torch.stack([torch.linalg.vector_norm(t_k) for t_k in torch.split(target, list(sizes))])
        denominator = (squared_norms.sqrt() * target_norms).clamp_min(torch.finfo(inner.dtype).tiny)
        cosine = torch.where(positive & (target_norms > 0), inner / denominator, 0.0)
        source_scale = torch.ones_like(w) if scale is None else _betas(scale, count, sources)
        layer_coefficients = cosine * source_scale[:, None]
    else:
        raise ValueError(f"unknown FedGP mode {mode!r}; allowed: projection, cosine_scaled")
    coefficients = layer_coefficients * (w * beta)[:, None]  # (N, L)
    target_coefficient = (w * (1 - beta)).sum()
    pieces = [
        torch.addmv(t_k * target_coefficient, s_k.T, c_k)
        for t_k, s_k, c_k in zip(
            torch.split(target, list(sizes)), torch.split(sources, list(sizes), dim=1), coefficients.T
        )
    ]
    return flat.restore(torch.cat(pieces))


def _is_layered(update) -> bool:
    return not isinstance(update, Tensor)


def _is_layered_sources(sources) -> bool:
    return not isinstance(sources, Tensor) and len(sources) > 0 and not isinstance(sources[0], Tensor)


def _cat_layers(layers: Layered) -> Tensor:
    return torch.cat([layer.reshape(-1) for layer in layers])
