"""Weakly-supervised FDA (the healthcare paper, Algorithms 1-3, as its authors' code runs them): sources
may train on cheap auxiliary labels as extra tasks, and the target fine-tunes on its few main-task labels.

* `fedavg_finetune`: each round the sources' FedAvg aggregate is fine-tuned by the target on the main task;
  the fine-tuned model is the next global model and the one evaluated.
* `auxinfo`: the same, with sources training a shared body, the main head and one head per auxiliary label
  on L_main + α Σ_a L_a (α = 1); the target's loss is the main task's only.
* `gp`: sources train from the global model θ; per layer the target update g_T and each source update g_i
  with cos(g_T, g_i) > 0 combine as (1 − β) g_T + β Σ_i w_i s_i cos(g_T, g_i) g_i (FedGP's cosine-scaled
  form; s_i the alignment factor: learning-rate and step-count ratio; β weights the *source* term, as the
  code does, where the paper's Eq. 7/9 weight the target term). In the first `averaging_rounds` rounds (5)
  the server first moves θ to the sources' FedAvg, the target fine-tunes from there and the projection is
  taken relative to that average (the authors' federated_midrc_multi.py:354-381); later rounds project
  relative to θ.
* `auxinfo_gp`: `gp` with auxiliary tasks on the sources.

Auxiliary heads are never projected, never part of the target's loss and never used at evaluation. In
`fedavg_finetune`/`auxinfo` they follow the sources' FedAvg every round; in `auxinfo_gp` they take part in
the FedAvg of the averaging rounds only and then keep the global model's values (the authors' code leaves
them out of the projected update).
"""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F

from fdabench.methods.base import METHODS, Aggregate, LocalContext, Objective, RoundInputs, RoundLoopMethod
from fdabench.methods.fda import BETA_SCHEMA, SCALE_ALIGNMENT_SCHEMA, combine_fedgp
from fdabench.models.multitask import AUX_PREFIX, MultiTaskModel
from fdabench.tensor_math.aggregation import fedavg


def multitask_loss(loss_fn, alpha: float):
    """Batch loss L_main + α Σ_a L_a; auxiliary labels of -1 (missing) are ignored."""

    def batch_loss(model, data, index):
        main, auxiliary = model.forward_with_aux(data.inputs(index))
        loss = loss_fn(main, data.labels(index))
        for name, logits in auxiliary.items():
            labels = data.aux[name] if index is None else data.aux[name][index]
            if (labels >= 0).any():
                loss = loss + alpha * F.cross_entropy(logits, labels, ignore_index=-1)
        return loss

    return batch_loss


class WeaklySupervised(RoundLoopMethod):
    """Shared machinery: auxiliary heads (when α > 0 and the data carry auxiliary labels), the multi-task
    source loss, and the split of every aggregate into the shared part and the auxiliary heads."""

    family = "weakly_supervised"
    uses_auxiliary = False
    # α = 1: the healthcare paper
    hparams_schema = {
        "auxiliary": {
            "type": ["array", "null"],
            "items": {"type": "string"},
            "description": "auxiliary labels to train on (null: all the data carry)",
            "default": None,
        },
        "alpha": {"type": "number", "minimum": 0, "description": "weight of the auxiliary losses", "default": 1.0},
    }

    def prepare_model(self, model, problem):
        if not self.uses_auxiliary or self.hparams["alpha"] == 0:
            return model
        available = problem.aux_classes
        wanted = self.hparams["auxiliary"] if self.hparams["auxiliary"] is not None else sorted(available)
        missing = [name for name in wanted if name not in available]
        if missing:
            raise ValueError(
                f"{self.name}: auxiliary labels {missing} are not in the data (it has {sorted(available) or 'none'}); "
                f"set the dataset's auxiliary option"
            )
        if not wanted:
            raise ValueError(
                f"{self.name} needs auxiliary labels; the data carry none (e.g. fed_heart with auxiliary: [sex, "
                f"age_decade])"
            )
        return MultiTaskModel(model, {name: available[name] for name in wanted})

    def local_objective(self, context: LocalContext) -> Objective:
        """The sources' multi-task loss over the auxiliary heads (weight α); the target's task loss alone."""
        if context.role != "source" or not self.uses_auxiliary or self.hparams["alpha"] == 0:
            return Objective()
        return Objective(multitask_loss(context.loss_fn, self.hparams["alpha"]))

    @staticmethod
    def auxiliary_mask(inputs: RoundInputs) -> torch.Tensor:
        """True at the coordinates of auxiliary-head parameters."""
        pieces = [
            torch.full((size,), name.startswith(AUX_PREFIX), dtype=torch.bool)
            for name, size in zip(inputs.layer_names, inputs.layer_sizes)
        ]
        return torch.cat(pieces).to(inputs.global_params.device)

    def split_aggregate(self, inputs: RoundInputs, shared_delta: torch.Tensor) -> torch.Tensor:
        """Auxiliary-head coordinates take the sources' FedAvg, whatever the rule did with them."""
        mask = self.auxiliary_mask(inputs)
        if not mask.any():
            return shared_delta
        return torch.where(mask, fedavg(inputs.source_updates, inputs.source_counts), shared_delta)


class _FinetuneAggregate(WeaklySupervised):
    """The target fine-tunes the sources' FedAvg aggregate; the result is the next global model."""

    def target_start(self, inputs: RoundInputs) -> torch.Tensor:
        self._average = fedavg(inputs.source_updates, inputs.source_counts)
        return inputs.global_params + self._average

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        # θ_T − θ = (θ + FedAvg) + fine-tuning update − θ
        return Aggregate(self.split_aggregate(inputs, self._average + inputs.target_update))


class _ProjectedAggregate(WeaklySupervised):
    hparams_schema = {
        **WeaklySupervised.hparams_schema,
        "beta": {
            **BETA_SCHEMA,
            "description": "weight of the source (projected) term, as the authors' code; the paper's Eq. 7/9 weight "
            "the target term",
            "default": 0.5,
        },
        "mode": {
            "enum": ["cosine_scaled", "projection"],
            "description": "cosine_scaled: the published code; projection: FedGP's definition",
            "default": "cosine_scaled",
        },
        "scale_alignment": {**SCALE_ALIGNMENT_SCHEMA, "default": "steps_and_lr"},
        "averaging_rounds": {
            "type": "integer",
            "minimum": 0,
            "description": "first rounds in which θ first moves to the sources' FedAvg and the target fine-tunes and "
            "projects from there (authors' code: 5)",
            "default": 5,
        },
    }

    def _averaging(self, inputs: RoundInputs) -> bool:
        return inputs.round_index < self.hparams["averaging_rounds"]

    def target_start(self, inputs: RoundInputs) -> torch.Tensor:
        self._average = fedavg(inputs.source_updates, inputs.source_counts) if self._averaging(inputs) else None
        return inputs.global_params if self._average is None else inputs.global_params + self._average

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        average = self._average
        if average is None:
            delta = combine_fedgp(inputs, self.hparams["beta"], self.hparams["mode"], self.hparams["scale_alignment"])
            frozen = torch.zeros_like(delta)  # auxiliary heads keep the global model's values
        else:  # anchored at θ + FedAvg: the sources' updates are their deviations from the average
            moved = replace(inputs, source_updates=inputs.source_updates - average)
            delta = average + combine_fedgp(
                moved, self.hparams["beta"], self.hparams["mode"], self.hparams["scale_alignment"]
            )
            frozen = average
        mask = self.auxiliary_mask(inputs)
        return Aggregate(torch.where(mask, frozen, delta) if mask.any() else delta)


@METHODS.register
class FedAvgFinetune(_FinetuneAggregate):
    name = "fedavg_finetune"
    description = "FedAvg over the sources, then the target fine-tunes the aggregate every round"
    hparams_schema = {}


@METHODS.register
class AuxInfo(_FinetuneAggregate):
    name = "auxinfo"
    description = (
        "sources train auxiliary heads (L_main + α Σ L_aux); the target fine-tunes the aggregate on the main task"
    )
    uses_auxiliary = True


@METHODS.register
class GradientProjection(_ProjectedAggregate):
    name = "gp"
    description = "per-layer cosine-scaled projection of source updates onto the target's fine-tuning update"
    hparams_schema = {k: v for k, v in _ProjectedAggregate.hparams_schema.items() if k not in ("auxiliary", "alpha")}


@METHODS.register
class AuxInfoGP(_ProjectedAggregate):
    name = "auxinfo_gp"
    description = "auxiliary heads on the sources plus gradient projection"
    uses_auxiliary = True
