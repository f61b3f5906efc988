"""FedDA and FedGP with a fixed β (DESIGN.md §2)."""

from __future__ import annotations

import torch

from fdabench.aggregation import fedda, fedgp
from fdabench.methods.base import METHODS, Aggregate, RoundInputs, RoundLoopMethod

BETA_SCHEMA = {"type": "number", "minimum": 0, "maximum": 1, "description": "weight of the source term"}


@METHODS.register("fedda")
class FedDA(RoundLoopMethod):
    """FedDA: θ += Σ_i w_i [(1 − β) g_T + β g_i], after FedAvg warm-up rounds."""

    name = "fedda"
    description = "convex combination of the target update and each source update"
    warmup = True
    hparams_schema = {"beta": BETA_SCHEMA}
    default_hparams = {"beta": 0.5}

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        delta = fedda(inputs.target_update, inputs.source_updates, self.hparams["beta"], inputs.source_counts, layer_sizes=inputs.layer_sizes)
        return Aggregate(delta)


SCALE_ALIGNMENT_SCHEMA = {
    "enum": ["steps_and_lr", "none"],
    "description": "steps_and_lr: express source updates at the target's learning rate and step count; none: as sent",
}


def source_scale(inputs: RoundInputs, alignment: str, target_steps: float) -> torch.Tensor:
    """Scale alignment: c_i = (lr_T / lr_S) · target_steps / steps_i, the factor that expresses source i's
    update (made of steps_i local steps at lr_S) as `target_steps` steps at the target's lr_T. With
    target_steps = 1 it turns a source update into its mean per-step update at the target's rate (used
    before estimating β); with the target's own step count it gives the published alignment factor s_i of
    cosine-scaled FedGP ((lr_T/lr_S)·(n_T/bs_T)/(n_i/bs_S)/local_epochs, weakly-supervised paper Eq. 8).
    alignment = "none" gives c_i = 1."""
    steps = inputs.source_steps.to(inputs.source_updates.dtype)
    if alignment == "none":
        return torch.ones_like(steps)
    if alignment != "steps_and_lr":
        raise ValueError(f"unknown scale alignment {alignment!r}; allowed: steps_and_lr, none")
    return (inputs.settings.target_lr / inputs.settings.source_lr) * target_steps / steps


def combine_fedgp(inputs: RoundInputs, betas, mode: str, alignment: str) -> torch.Tensor:
    """FedGP's aggregate for the round in `mode`, with the alignment factor for cosine_scaled."""
    scale = source_scale(inputs, alignment, inputs.target_steps) if mode == "cosine_scaled" else None
    return fedgp(
        inputs.target_update,
        inputs.source_updates,
        betas,
        inputs.source_counts,
        mode=mode,
        scale=scale,
        layer_sizes=inputs.layer_sizes,
    )


@METHODS.register("fedgp")
class FedGP(RoundLoopMethod):
    """FedGP: θ += Σ_i w_i [(1 − β) g_T + β Proj⁺(g_T | g_i)] per layer, after FedAvg warm-up rounds.

    `mode: projection` is the definition; `cosine_scaled` the published real-data variant, whose source
    term β s_i max(cos, 0) g_i uses the alignment factor s_i of `source_scale` (DESIGN.md §2).
    """

    name = "fedgp"
    description = "per-layer projection of the target update onto each source update, non-positive layers filtered"
    warmup = True
    hparams_schema = {
        "beta": BETA_SCHEMA,
        "mode": {"enum": ["projection", "cosine_scaled"], "description": "the definition or the published real-data variant"},
        "scale_alignment": SCALE_ALIGNMENT_SCHEMA,
    }
    default_hparams = {"beta": 0.5, "mode": "projection", "scale_alignment": "steps_and_lr"}

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        return Aggregate(combine_fedgp(inputs, self.hparams["beta"], self.hparams["mode"], self.hparams["scale_alignment"]))
