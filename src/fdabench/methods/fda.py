"""FedDA and FedGP with a fixed β (DESIGN.md §2)."""

from __future__ import annotations

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


@METHODS.register("fedgp")
class FedGP(RoundLoopMethod):
    """FedGP: θ += Σ_i w_i [(1 − β) g_T + β Proj⁺(g_T | g_i)] per layer, after FedAvg warm-up rounds.

    `mode: projection` is the definition; `cosine_scaled` the published real-data variant, with the
    alignment factor s_i = (lr_T / lr_S) · (steps_T / steps_i) (the source update rescaled to the
    target's learning rate and step count; DESIGN.md §2).
    """

    name = "fedgp"
    description = "per-layer projection of the target update onto each source update, non-positive layers filtered"
    warmup = True
    hparams_schema = {
        "beta": BETA_SCHEMA,
        "mode": {"enum": ["projection", "cosine_scaled"], "description": "the definition or the published real-data variant"},
    }
    default_hparams = {"beta": 0.5, "mode": "projection"}

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        scale = None
        if self.hparams["mode"] == "cosine_scaled":
            scale = alignment_factors(inputs)
        delta = fedgp(
            inputs.target_update,
            inputs.source_updates,
            self.hparams["beta"],
            inputs.source_counts,
            mode=self.hparams["mode"],
            scale=scale,
            layer_sizes=inputs.layer_sizes,
        )
        return Aggregate(delta)


def alignment_factors(inputs: RoundInputs):
    """s_i = (lr_T / lr_S) · (steps_T / steps_i): a source update expressed at the target's learning
    rate and number of local steps (weakly-supervised paper, Eq. 8; steps = (n / batch) · epochs)."""
    settings = inputs.settings
    lr_ratio = settings.target_lr / settings.source_lr
    return lr_ratio * inputs.target_steps / inputs.source_steps.to(inputs.source_counts.dtype)
