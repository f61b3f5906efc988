"""FedDA and FedGP with a fixed β (docs/design/methods.md, Fixed-β rules)."""

from __future__ import annotations

import torch

from fdabench.methods.base import METHODS, Aggregate, Roles, RoundInputs, RoundLoopMethod
from fdabench.tensor_math.aggregation import fedda, fedgp

BETA_SCHEMA = {"type": "number", "minimum": 0, "maximum": 1, "description": "weight of the source term"}
SOURCE_WEIGHTS = ("samples", "padded_batches")
SOURCE_WEIGHTS_SCHEMA = {
    "enum": list(SOURCE_WEIGHTS),
    "description": "the sources' weights w_i; unset or samples: their sample counts n_i; padded_batches: "
    "ceil(n_i/bs_S)·bs_S, a source's batch count times the batch size (the FedGP authors' Fed-Heart code: "
    "len(loader)·BATCH_SIZE, main_flamby_heart.py:312-313)",
}
TARGET_STEPS = ("optimizer_steps", "samples_over_batch")
TARGET_STEPS_SCHEMA = {
    "enum": list(TARGET_STEPS),
    "description": "k_T in cosine-scaled FedGP's factor s_i = (lr_T/lr_S)·k_T/k_i; unset or optimizer_steps: the "
    "target's local optimiser steps, E_T·ceil(n_T/bs_T); samples_over_batch: E_T·n_T/bs_T without the ceil (the "
    "FedGP authors' Fed-Heart code: n_target_samples/target_batch_size, main_flamby_heart.py:158)",
}


def source_weights(inputs: RoundInputs, how: str | None) -> torch.Tensor:
    """The sources' aggregation weights (normalised by the rules): their sample counts, or with `padded_batches`
    ceil(n_i/bs_S)·bs_S (a full batch: n_i)."""
    if how is None or how == "samples":
        return inputs.source_counts
    if how != "padded_batches":
        raise ValueError(f"unknown source weights {how!r}; allowed: {', '.join(SOURCE_WEIGHTS)}")
    batch = inputs.settings.source_batch_size
    counts = inputs.source_counts
    return counts if batch <= 0 else torch.ceil(counts / batch) * batch


@METHODS.register
class FedDA(RoundLoopMethod):
    """FedDA: θ += Σ_i w_i [(1 − β) g_T + β g_i], after FedAvg warm-up rounds."""

    name = "fedda"
    family = "fda"
    description = "convex combination of the target update and each source update"
    roles = Roles(warmup=True)
    hparams_schema = {
        "beta": {**BETA_SCHEMA, "default": 0.5, "search": {"uniform": [0.0, 1.0]}},
        "source_weights": SOURCE_WEIGHTS_SCHEMA,
    }

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        delta = fedda(
            inputs.target_update,
            inputs.source_updates,
            self.hparams["beta"],
            source_weights(inputs, self.hparams.get("source_weights")),
            layer_sizes=inputs.layer_sizes,
        )
        return Aggregate(delta)


SCALE_ALIGNMENTS = ("steps_and_lr", "noniid_code", "domainbed_code", "none")
SCALE_ALIGNMENT_SCHEMA = {
    "enum": list(SCALE_ALIGNMENTS),
    "description": (
        "how source update i is put on the target's scale (r = lr_T/lr_S, k_i its local steps). Before estimating "
        "β, source i counts as c_i g_i against the target's per-step updates: steps_and_lr c_i = r/k_i (one step at "
        "the target's rate); noniid_code 1/k_i (the published FMNIST/CIFAR code scales both sides by r); "
        "domainbed_code 1/(r k_i) (the published DomainBed code scales the target's steps by r); none 1. The "
        "cosine-scaled FedGP factor s_i = r k_T/k_i is the same for all but none (s_i = 1)"
    ),
}


def _ratio_and_steps(inputs: RoundInputs, alignment: str) -> tuple[float, torch.Tensor]:
    """(lr_T / lr_S, the sources' local steps k_i) after checking `alignment`."""
    if alignment not in SCALE_ALIGNMENTS:
        raise ValueError(f"unknown scale alignment {alignment!r}; allowed: {', '.join(SCALE_ALIGNMENTS)}")
    return inputs.settings.target_lr / inputs.settings.source_lr, inputs.source_steps.to(inputs.source_updates.dtype)


def estimation_scale(inputs: RoundInputs, alignment: str) -> torch.Tensor:
    """c_i: source i's update times c_i is compared with the target's per-step updates when β is estimated.
    FedGP-type β is invariant to c_i (τ²d² and δ are scale-free in g_i); FedDA's β is not."""
    ratio, steps = _ratio_and_steps(inputs, alignment)
    factor = {"steps_and_lr": ratio, "noniid_code": 1.0, "domainbed_code": 1.0 / ratio, "none": None}[alignment]
    return torch.ones_like(steps) if factor is None else factor / steps


def cosine_scale(inputs: RoundInputs, alignment: str, target_steps: str | None = None) -> torch.Tensor:
    """The alignment factor of cosine-scaled FedGP, s_i = (lr_T/lr_S) · k_T / k_i with k the local optimiser
    steps ((lr_T/lr_S)·(E_T n_T/bs_T)/(E_S n_i/bs_S) in the published code, weakly-supervised paper Eq. 8);
    1 for alignment "none". `target_steps: samples_over_batch` takes k_T = E_T·n_T/bs_T without the ceil."""
    ratio, steps = _ratio_and_steps(inputs, alignment)
    if alignment == "none":
        return torch.ones_like(steps)
    return ratio * _target_steps(inputs, target_steps) / steps


def _target_steps(inputs: RoundInputs, how: str | None) -> float:
    """k_T: the target's optimiser steps, or (samples_over_batch) E_T·n_T/bs_T unrounded."""
    if how is None or how == "optimizer_steps":
        return inputs.target_steps
    if how != "samples_over_batch":
        raise ValueError(f"unknown target steps {how!r}; allowed: {', '.join(TARGET_STEPS)}")
    settings = inputs.settings
    batch = settings.target_batch_size if settings.target_batch_size > 0 else inputs.target_count
    return settings.target_local_epochs * inputs.target_count / batch


def combine_fedgp(
    inputs: RoundInputs,
    betas,
    mode: str,
    alignment: str,
    filtered: bool = True,
    weights: str | None = None,
    target_steps: str | None = None,
) -> torch.Tensor:
    """FedGP's aggregate for the round in `mode`, with the alignment factor for cosine_scaled (`filtered=False`:
    the ablation that keeps layers with a negative inner product; `weights`: `source_weights`; `target_steps`:
    k_T of `cosine_scale`)."""
    scale = cosine_scale(inputs, alignment, target_steps) if mode == "cosine_scaled" else None
    return fedgp(
        inputs.target_update,
        inputs.source_updates,
        betas,
        source_weights(inputs, weights),
        mode=mode,
        scale=scale,
        layer_sizes=inputs.layer_sizes,
        filtered=filtered,
    )


@METHODS.register
class FedGP(RoundLoopMethod):
    """FedGP: θ += Σ_i w_i [(1 − β) g_T + β Proj⁺(g_T | g_i)] per layer, after FedAvg warm-up rounds.

    `mode: projection` is the definition; `cosine_scaled` the published real-data variant, whose source
    term β s_i max(cos, 0) g_i uses the alignment factor s_i of `cosine_scale` (docs/design/methods.md).
    """

    name = "fedgp"
    family = "fda"
    description = "per-layer projection of the target update onto each source update, non-positive layers filtered"
    roles = Roles(warmup=True)
    hparams_schema = {
        "beta": {**BETA_SCHEMA, "default": 0.5, "search": {"uniform": [0.0, 1.0]}},
        "mode": {
            "enum": ["projection", "cosine_scaled"],
            "description": "the definition or the published real-data variant",
            "default": "projection",
        },
        "scale_alignment": {**SCALE_ALIGNMENT_SCHEMA, "default": "steps_and_lr"},
        "filter": {
            "type": "boolean",
            "description": "drop the layers whose inner product with the target update is not positive (false: the "
            "paper's 'projection without filtering' ablation)",
            "default": True,
        },
        "source_weights": SOURCE_WEIGHTS_SCHEMA,
        "target_steps": TARGET_STEPS_SCHEMA,
    }

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        hparams = self.hparams
        return Aggregate(
            combine_fedgp(
                inputs,
                hparams["beta"],
                hparams["mode"],
                hparams["scale_alignment"],
                hparams["filter"],
                hparams.get("source_weights"),
                hparams.get("target_steps"),
            )
        )
