"""Server aggregation rules for federated domain adaptation (docs/design/methods.md), as pure tensor functions.

Updates are model deltas (local parameters minus the global parameters they started from). Every rule
accepts them in either of two forms and answers in the form of `target_update`:

* per layer: `target_update` is a list of tensors (one per parameter tensor) and `source_updates` a list
  (one per source) of such lists;
* flat: `target_update` is a 1-D tensor of length m, `source_updates` an (N, m) tensor (or a list of N
  1-D tensors), and `layer_sizes` the lengths of the consecutive layers (default: one layer of size m).

Source weights are normalised to sum to one (w_i = n_i / Σ n when given sample counts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

Layered = Sequence[Tensor]
UpdateLike = Tensor | Layered
SourcesLike = Tensor | Sequence[Tensor] | Sequence[Layered]

__all__ = [
    "AUTO_RULES",
    "auto_betas",
    "StreamingAutoWeights",
    "auto_weights",
    "delta_error",
    "fedavg",
    "fedda",
    "fedgp",
    "flatten_updates",
    "per_layer_inner_products",
]

AUTO_RULES = ("fedda", "fedgp", "fedgp_threshold")


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

    if not isinstance(source_updates, Tensor) and len(source_updates) == 0:
        raise ValueError("no source updates to aggregate")
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
    """FedDA: Σ_i w_i [(1 − β_i) g_T + β_i g_i]  (docs/design/methods.md, Fixed-β rules)."""
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
    filtered: bool = True,
) -> UpdateLike:
    """FedGP, per layer k, filtering layers whose inner product with the target update is not positive.

    mode="projection" (the definition, docs/design/methods.md):
        Σ_i w_i [(1 − β_i) g_T,k + β_i Proj⁺(g_T,k | g_i,k)],  Proj⁺(v|u) = max(⟨v,u⟩, 0) u / ‖u‖².
    mode="cosine_scaled" (the published real-data code):
        Σ_i w_i [(1 − β_i) g_T,k + β_i s_i max(cos(g_T,k, g_i,k), 0) g_i,k],
        with s_i the alignment factor `scale` (default 1).
    filtered=False keeps the layers with a negative inner product (Proj(v|u) = ⟨v,u⟩ u / ‖u‖², cos instead of
    max(cos, 0)): the "projection without filtering" ablation of the FedGP paper (Section 5.3).
    """
    flat = flatten_updates(target_update, source_updates, layer_sizes)
    sources, target, sizes = flat.sources, flat.target, flat.layer_sizes
    count = sources.shape[0]
    w = normalised_weights(weights, count, sources)
    beta = _betas(betas, count, sources)
    inner, squared_norms = per_layer_inner_products(target, sources, sizes)  # (N, L)
    positive = ((inner > 0) if filtered else (inner != 0)) & (squared_norms > 0)
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


# -- auto-weighting (docs/design/methods.md) -----------------------------------------------------------------
#
# From B per-batch target updates G_b (flattened, dimension m) and source updates g_i on the same scale:
#   ḡ = mean_b G_b,  s² = Σ_b ‖G_b − ḡ‖² / (B − 1),  σ̂² = s² / B
#   d̂_i² = max((1/B) Σ_b ‖G_b − g_i‖² − s², 0)
#   r_b = G_b − ⟨G_b, g_i⟩ g_i / ‖g_i‖²,  r̄ likewise from ḡ
#   τ²d̂_i² = max((1/B) Σ_b ‖r_b‖² − Σ_b ‖r_b − r̄‖² / (B − 1), 0)
#   δ_i = fraction of b with ⟨G_b, g_i⟩ > 0,  δ'_i = 1 − (1 − δ_i) / B
#   β_i^FedDA = σ̂² / (σ̂² + d̂_i²),  β_i^FedGP = σ̂² / (σ̂² + τ²d̂_i²),
#   β_i^FedGP,threshold = σ̂² / (σ̂² + δ'_i τ²d̂_i² + (1 − δ'_i) ‖ḡ‖²);  0/0 is taken as β = 0.5.
# `source_scale` c_i multiplies source i (scale alignment) without copying the updates.


_FLOAT64 = torch.empty(0, dtype=torch.float64)  # source scales are read in float64 (never rounded to float32)


def auto_betas(rule: str, estimates: dict[str, Tensor]) -> Tensor:
    """β_i = σ² / (σ² + distance_i) from the target's estimates, the distance the rule's Delta error weighs
    (FedDA d², FedGP τ²d², thresholded FedGP δ'τ²d² + (1 − δ')‖ḡ_T‖²); 0.5 where both are 0."""
    sigma2 = estimates["sigma2"]
    if rule == "fedda":
        distance = estimates["d2"]
    elif rule == "fedgp":
        distance = estimates["tau2d2"]
    elif rule == "fedgp_threshold":
        delta_prime = estimates["delta_prime"]
        distance = delta_prime * estimates["tau2d2"] + (1 - delta_prime) * estimates["target_mean_norm2"]
    else:
        raise ValueError(f"unknown auto-weighting rule {rule!r}; allowed: {', '.join(AUTO_RULES)}")
    total = sigma2 + distance
    return torch.where(total > 0, sigma2 / torch.where(total > 0, total, 1.0), torch.full_like(total, 0.5))


def auto_weights(
    target_batch_updates: Tensor,
    source_updates: SourcesLike,
    rule: str = "fedda",
    source_scale: Tensor | Sequence[float] | float | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """β per source and the estimates from a stored (B, m) matrix of target batch updates: the
    definitions above computed literally (the test oracle of `StreamingAutoWeights`).

    Returns (betas (N,), estimates) with estimates "sigma2" (scalar), "d2", "tau2d2", "delta",
    "delta_prime" (per source), "target_mean_norm2" ‖ḡ‖² and "batches" B, in float64.
    """
    flat = flatten_updates(None, source_updates)
    batches = target_batch_updates.reshape(target_batch_updates.shape[0], -1).double()
    B = batches.shape[0]
    if B < 2:
        raise ValueError(f"auto-weighting needs at least 2 target batches per round, got {B}")
    count = flat.sources.shape[0]
    scale = torch.ones(count) if source_scale is None else _betas(source_scale, count, _FLOAT64)
    sources = flat.sources.double() * scale.to(batches)[:, None]
    mean = batches.mean(0)
    s2 = (batches - mean).square().sum() / (B - 1)
    d2, tau2d2, delta = [], [], []
    for source in sources:
        d2.append(((batches - source).square().sum(1).mean() - s2).clamp_min(0.0))
        norm2 = source @ source
        unit = source / norm2.sqrt() if norm2 > 0 else torch.zeros_like(source)
        residuals = batches - (batches @ unit)[:, None] * unit[None, :]
        residual_mean = residuals.mean(0)
        spread = (residuals - residual_mean).square().sum() / (B - 1)
        tau2d2.append((residuals.square().sum(1).mean() - spread).clamp_min(0.0))
        delta.append(((batches @ source) > 0).double().mean())
    delta = torch.stack(delta)
    estimates = {
        "batches": torch.tensor(B),
        "sigma2": s2 / B,
        "d2": torch.stack(d2),
        "tau2d2": torch.stack(tau2d2),
        "delta": delta,
        "delta_prime": 1 - (1 - delta) / B,
        "target_mean_norm2": mean @ mean,
    }
    return auto_betas(rule, estimates), estimates


_WELFORD_CHUNK = 1 << 18  # elements of scratch per step of the streaming update (1 MiB in float32)


class StreamingAutoWeights:
    """Auto-weighting statistics accumulated one target batch update at a time.

    Algorithm 1 forwards the source updates to the target before it trains, so the target can fold each
    per-batch update G_b into running statistics as it goes. Welford's update keeps them numerically stable
    in one pass (the textbook Σ‖G_b‖² − B‖Ḡ‖² cancels when the per-step noise is small against the mean
    step): the running mean Ḡ (one m-vector) and M2 = Σ‖G_b − Ḡ‖² (float64), and per source the running
    mean and centred sum of squares of the projections p_b = ⟨G_b, g_i⟩/‖g_i‖ and #{⟨G_b, g_i⟩ > 0}.
    Extra memory: one m-vector (the mean) beyond the N source updates it is given and the batch in flight,
    plus a fixed scratch chunk (never the B x m matrix).
    """

    def __init__(self, source_updates: Tensor, source_scale: Tensor | Sequence[float] | float | None = None):
        if source_updates.dim() != 2:
            raise ValueError("source_updates must be an (N, m) tensor")
        self.sources = source_updates
        count = source_updates.shape[0]
        device = source_updates.device
        scale = torch.ones(count) if source_scale is None else _betas(source_scale, count, _FLOAT64)
        self.scale = scale.to(device=device, dtype=torch.float64)
        raw_norm2 = torch.linalg.vector_norm(source_updates, dim=1).double().square()
        self.source_norm2 = raw_norm2 * self.scale.square()
        self._inverse_raw_norm = torch.where(
            raw_norm2 > 0, 1.0 / torch.where(raw_norm2 > 0, raw_norm2, 1.0).sqrt(), 0.0
        )
        self.mean_update = torch.zeros(source_updates.shape[1], dtype=source_updates.dtype, device=device)
        self.m2 = torch.zeros((), dtype=torch.float64, device=device)
        self.mean_projection = torch.zeros(count, dtype=torch.float64, device=device)
        self.m2_projection = torch.zeros(count, dtype=torch.float64, device=device)
        self.positive = torch.zeros(count, dtype=torch.float64, device=device)
        self.batches = 0

    def add(self, batch_update: Tensor) -> None:
        """Fold one per-batch target update G_b (flat, length m) into the statistics (Welford's update:
        δ = G_b − Ḡ, Ḡ += δ/b, M2 += (1 − 1/b)‖δ‖²; the same for each source's projection)."""
        self.batches += 1
        b = self.batches
        raw_inner = (self.sources @ batch_update).double()  # ⟨G_b, g_i⟩ before scaling
        squared = torch.zeros((), dtype=torch.float64, device=self.m2.device)
        for start in range(0, batch_update.numel(), _WELFORD_CHUNK):  # chunks: scratch stays small
            stop = start + _WELFORD_CHUNK
            deviation = batch_update[start:stop] - self.mean_update[start:stop]
            self.mean_update[start:stop].add_(deviation, alpha=1.0 / b)
            squared += torch.dot(deviation, deviation).double()
        self.m2 += (1.0 - 1.0 / b) * squared
        projection = raw_inner * self._inverse_raw_norm
        projection_deviation = projection - self.mean_projection
        self.mean_projection += projection_deviation / b
        self.m2_projection += (1.0 - 1.0 / b) * projection_deviation.square()
        self.positive += (raw_inner * self.scale > 0).double()

    def estimates(self) -> dict[str, Tensor]:
        """The estimates from the running statistics. With M2 = Σ‖G_b − Ḡ‖²: s² = M2/(B − 1);
        Σ‖G_b − s_i g_i‖² = M2 + B‖Ḡ − s_i g_i‖²; for the residuals r_b = G_b − p_b u_i (u_i = g_i/‖g_i‖),
        Σ‖r_b − r̄‖² = M2 − Σ(p_b − p̄)² and Σ‖r_b‖² = Σ‖r_b − r̄‖² + B‖r̄‖² with ‖r̄‖² = ‖Ḡ‖² − p̄²."""
        B = self.batches
        if B < 2:
            raise ValueError(f"auto-weighting needs at least 2 target batches per round, got {B}")
        mean = self.mean_update
        mean_norm2 = torch.dot(mean, mean).double()
        raw_mean_inner = (self.sources @ mean).double()
        s2 = self.m2 / (B - 1)
        scaled_mean_distance2 = (mean_norm2 - 2 * self.scale * raw_mean_inner + self.source_norm2).clamp_min(0.0)
        distance2 = self.m2 + B * scaled_mean_distance2
        residual_mean2 = (mean_norm2 - self.mean_projection.square()).clamp_min(0.0)
        residual_spread = (self.m2 - self.m2_projection).clamp_min(0.0)
        residual2 = residual_spread + B * residual_mean2
        delta = self.positive / B
        return {
            "batches": torch.tensor(B),
            "sigma2": s2 / B,
            "d2": (distance2 / B - s2).clamp_min(0.0),
            "tau2d2": (residual2 / B - residual_spread / (B - 1)).clamp_min(0.0),
            "delta": delta,
            "delta_prime": 1 - (1 - delta) / B,
            "target_mean_norm2": mean_norm2,
        }

    def result(self, rule: str = "fedda") -> tuple[Tensor, dict[str, Tensor]]:
        estimates = self.estimates()
        return auto_betas(rule, estimates), estimates


def delta_error(
    rule: str,
    sigma2,
    d2=None,
    tau2d2=None,
    beta=None,
    delta=None,
    target_norm2=None,
    model_dim: int | None = None,
):
    """Delta error Δ² = E‖g_{D_T} − ĝ_rule‖² in closed form (FedGP paper, Thm 4.2 and 4.4):

    target_only σ²;  source_only d²;  fedda (1 − β)²σ² + β²d²;
    fedgp ((1 − β)² + (2β − β²)/m) σ² + β²τ²d²   (the 1/m term only when `model_dim` m is given);
    fedgp_threshold ((1 − β)² + (2β − β²)δ/m) σ² + β²δτ²d² + β²(1 − δ)‖g_T‖².
    Arguments may be floats or tensors (per source).
    """
    if rule == "target_only":
        return sigma2
    if rule == "source_only":
        return d2
    if beta is None:
        raise ValueError(f"delta_error({rule!r}) needs beta")
    keep = (1 - beta) ** 2
    if rule == "fedda":
        return keep * sigma2 + beta**2 * d2
    extra = 0.0 if model_dim is None else (2 * beta - beta**2) / model_dim
    if rule == "fedgp":
        return (keep + extra) * sigma2 + beta**2 * tau2d2
    if rule == "fedgp_threshold":
        return (keep + extra * delta) * sigma2 + beta**2 * delta * tau2d2 + beta**2 * (1 - delta) * target_norm2
    raise ValueError(f"unknown rule {rule!r}; allowed: target_only, source_only, fedda, fedgp, fedgp_threshold")
