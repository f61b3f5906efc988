"""Auto-weighted FedDA and FedGP: β chosen every round, per source, by minimising the estimated Delta
error (docs/design/methods.md). The target receives the source updates before it trains (Algorithm 1) and folds
each of its per-batch updates into `StreamingAutoWeights` as it trains, so no B x m matrix is stored.

Estimation inputs, per source: the source update as its mean per-step update at the target's learning
rate (`scale_alignment: steps_and_lr`; the published codes' conventions are the other values, see
`fda.estimation_scale`), and per-batch target updates G_b that are
either the target's own local optimiser steps (`estimation: local_steps`, the published protocol) or
one plain gradient step −lr_T ∇ℓ_b(θ) per disjoint batch of `estimation_batch_size` samples at the round's
starting parameters (`estimation: gradient_batches`, the synthetic theory check's protocol; it does not
change the target's training). `recompute: once` fixes β after the first FDA round.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from fdabench.core.streams import CHECKED_ROUNDS, SEED_STRIDE, Purpose, register_purpose, stream
from fdabench.federation.delivery import Delivery
from fdabench.federation.settings import TrainSettings
from fdabench.methods.base import (
    METHODS,
    Aggregate,
    LocalContext,
    Objective,
    Phase,
    Roles,
    RoundInputs,
    RoundLoopMethod,
    default_phases,
)
from fdabench.methods.fda import SCALE_ALIGNMENT_SCHEMA, combine_fedgp, estimation_scale
from fdabench.tensor_math.aggregation import StreamingAutoWeights, delta_error, fedda

#: the target's estimation batches, index the round + 1 (the cell's seed)
ESTIMATION_STREAM = register_purpose(
    "auto_estimation",
    Purpose(SEED_STRIDE, 0, 7919, "auto-weighting's estimation batches, index round + 1", range(1, CHECKED_ROUNDS + 1)),
)


class AutoWeighted(RoundLoopMethod):
    rule: str  # "fedda" | "fedgp" | "fedgp_threshold" (which Delta error β minimises)
    roles = Roles(warmup=True)
    delivery = Delivery(source_updates=True)
    hparams_schema = {
        "scale_alignment": {**SCALE_ALIGNMENT_SCHEMA, "default": "steps_and_lr"},
        "estimation": {
            "enum": ["local_steps", "gradient_batches"],
            "description": "what the per-batch target updates G_b are",
            "default": "local_steps",
        },
        "estimation_batch_size": {
            "type": "integer",
            "minimum": 1,
            "description": "batch size of gradient_batches estimation",
            "default": 2,
        },
        "recompute": {"enum": ["every_round", "once"], "default": "every_round"},
        "lr_decay_after_warmup": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 1,
            "description": "learning rates are multiplied by this after warm-up (published: 0.1-0.5)",
            "default": 1.0,
            "search": {"log_uniform": [0.1, 1.0]},
        },
        "target_batch_size": {
            "type": ["integer", "null"],
            "minimum": 1,
            "description": "target batch size in FDA rounds (null: the experiment's); small batches give more G_b",
            "default": None,
        },
    }

    def __init__(self, hparams: dict[str, Any] | None = None):
        super().__init__(hparams)
        self._fixed: tuple[torch.Tensor, dict[str, torch.Tensor]] | None = None

    def check(self, train: dict[str, Any]) -> list[str]:
        batch = self.hparams["target_batch_size"] or train.get("target_batch_size", 0)
        if self.hparams["estimation"] == "local_steps" and batch == 0 and train.get("target_local_epochs", 1) < 2:
            return [
                f"{self.name} estimates β from the target's per-step updates but the target trains full-batch for one "
                "epoch (one step per round); set target_batch_size, or estimation: gradient_batches"
            ]
        return []

    def phases(self, settings: TrainSettings, has_sources: bool) -> list[Phase]:
        """The warm-up, then the FDA rounds at the decayed learning rates (and the target's own batch size)."""
        return default_phases(self, settings, has_sources, fda_settings=self.decayed_settings(settings))

    def decayed_settings(self, settings: TrainSettings) -> TrainSettings:
        """The settings of the FDA rounds: the learning rates times `lr_decay_after_warmup`, and the target's batch
        size where `target_batch_size` sets it."""
        decay = self.hparams["lr_decay_after_warmup"]
        changes: dict[str, Any] = {"source_lr": settings.source_lr * decay, "target_lr": settings.target_lr * decay}
        if self.hparams["target_batch_size"] is not None:
            changes["target_batch_size"] = self.hparams["target_batch_size"]
        return replace(settings, **changes)

    def local_objective(self, context: LocalContext) -> Objective:
        """At the target, the estimates' statistics from its steps (local_steps) or from its gradients at the round's
        start (gradient_batches); none where β is fixed, and none at a source."""
        if context.role != "target" or self._fixed is not None:
            return Objective()
        inputs = context.inputs
        statistics = StreamingAutoWeights(
            inputs.source_updates, estimation_scale(inputs, self.hparams["scale_alignment"])
        )
        if self.hparams["estimation"] == "local_steps":
            return Objective(observer=statistics.add, statistics=statistics)
        for batch_update in gradient_batch_updates(context, self.hparams["estimation_batch_size"]):
            statistics.add(batch_update)
        return Objective(statistics=statistics)

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        sent = 0
        if self._fixed is not None:
            betas, estimates = self._fixed
        else:  # the target's estimates reach the server with its update
            betas, estimates = inputs.target_statistics.result(self.rule)
            sent = sum(value.numel() * value.element_size() for value in estimates.values())
            if self.hparams["recompute"] == "once":
                self._fixed = (betas, estimates)
        betas = betas.to(inputs.source_updates.dtype)
        return Aggregate(self.combine(inputs, betas), auto_log(self.rule, betas, estimates), message_bytes=sent)

    def combine(self, inputs: RoundInputs, betas: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    @property
    def round_state(self) -> dict[str, Any]:
        return {} if self._fixed is None else {"betas": self._fixed[0], "estimates": self._fixed[1]}

    @round_state.setter
    def round_state(self, state: dict[str, Any]) -> None:
        self._fixed = (state["betas"], state["estimates"]) if state else None


def gradient_batch_updates(context: LocalContext, batch_size: int):
    """−lr_T ∇ℓ_b(θ) for disjoint random batches of `batch_size` target samples at the round's start."""
    data, space = context.data, context.space
    generator = torch.Generator().manual_seed(stream(context.seed, ESTIMATION_STREAM, context.inputs.round_index + 1))
    order = torch.randperm(len(data), generator=generator).to(data.x.device)
    batches = len(data) // batch_size
    model = space.model
    model.train()
    lr = context.inputs.settings.target_lr
    for b in range(batches):
        index = order[b * batch_size : (b + 1) * batch_size]
        gradients = torch.autograd.grad(
            context.loss_fn(model(data.inputs(index)), data.labels(index)), space.parameters
        )
        yield torch.cat([g.reshape(-1) for g in gradients]).mul_(-lr)


def auto_log(rule: str, betas: torch.Tensor, estimates: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Per-round record: β and the estimates per source, and the estimated Delta error of the choice."""
    predicted = delta_error(
        rule,
        estimates["sigma2"],
        d2=estimates["d2"],
        tau2d2=estimates["tau2d2"],
        beta=betas.double(),
        delta=estimates["delta_prime"],
        target_norm2=estimates["target_mean_norm2"],
    )
    return {
        "betas": betas.tolist(),
        "sigma2_hat": float(estimates["sigma2"]),
        "d2_hat": estimates["d2"].tolist(),
        "tau2d2_hat": estimates["tau2d2"].tolist(),
        "delta_hat": estimates["delta"].tolist(),
        "estimation_batches": int(estimates["batches"]),
        "delta_error_hat": predicted.tolist(),
    }


@METHODS.register
class FedDAAuto(AutoWeighted):
    """FedDA with β_i = σ̂² / (σ̂² + d̂_i²) every round."""

    name = "fedda_auto"
    family = "auto"
    description = "FedDA with per-source β minimising the estimated Delta error"
    rule = "fedda"

    def combine(self, inputs, betas):
        return fedda(
            inputs.target_update, inputs.source_updates, betas, inputs.source_counts, layer_sizes=inputs.layer_sizes
        )


@METHODS.register
class FedGPAuto(AutoWeighted):
    """FedGP with β_i = σ̂² / (σ̂² + τ²d̂_i²) every round."""

    name = "fedgp_auto"
    family = "auto"
    description = "FedGP with per-source β minimising the estimated Delta error"
    rule = "fedgp"
    hparams_schema = {
        **AutoWeighted.hparams_schema,
        "mode": {"enum": ["projection", "cosine_scaled"], "default": "projection"},
    }

    def combine(self, inputs, betas):
        return combine_fedgp(inputs, betas, self.hparams["mode"], self.hparams["scale_alignment"])


@METHODS.register
class FedGPAutoThreshold(FedGPAuto):
    """FedGP with the thresholded β_i = σ̂² / (σ̂² + δ'_i τ²d̂_i² + (1 − δ'_i) ‖ḡ‖²)."""

    name = "fedgp_auto_threshold"
    description = "FedGP with β from the Delta error that accounts for filtered (non-positive) projections"
    rule = "fedgp_threshold"
