"""Reference methods: FedAvg over the sources, the target alone (with or without a FedAvg warm-up), and the
oracle."""

from __future__ import annotations

from fdabench.methods.base import METHODS, Aggregate, Roles, RoundInputs, RoundLoopMethod
from fdabench.tensor_math.aggregation import fedavg


@METHODS.register
class SourceOnly(RoundLoopMethod):
    """FedAvg over the sources only (θ += Σ w_i g_i); the target never trains. The warm-up rounds of the
    FDA methods come first here too (FedAvg as well), so source_only runs warmup_rounds + rounds FedAvg
    rounds: the same number of source rounds as every warm-up method, as in the published code (which
    starts every run with its 2 FedAvg warm-up epochs: 52 FedAvg rounds for FMNIST)."""

    name = "source_only"
    family = "baseline"
    description = "FedAvg over the source clients; evaluated on the target"
    roles = Roles(target=None, warmup=True)

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        return Aggregate(fedavg(inputs.source_updates, inputs.source_counts))


@METHODS.register
class TargetOnly(RoundLoopMethod):
    """The target trains alone on its labelled samples (θ += g_T)."""

    name = "target_only"
    family = "baseline"
    description = "the target client trains alone on its labelled samples"
    roles = Roles(sources="never")

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        return Aggregate(inputs.target_update)


@METHODS.register
class WarmupTargetOnly(TargetOnly):
    """The FedAvg warm-up rounds over the sources, then the target alone (θ += g_T): FedDA/FedGP with β = 0.
    The published Target Only rows of the FedGP paper ran this way (its code always starts with 2 FedAvg
    warm-up epochs; scripts/noniid_exp/run_target_only.sh runs FedGP with projection weight 0), so it
    separates FedGP's gain from its FedAvg initialisation."""

    name = "warmup_target_only"
    description = "FedAvg warm-up over the sources, then the target trains alone"
    roles = Roles(sources="warmup", warmup=True)


@METHODS.register
class Oracle(TargetOnly):
    """The target trains alone on all of its training samples, every one labelled (an upper reference)."""

    name = "oracle"
    description = "the target trains alone on all its training samples, all labelled"
    roles = Roles(sources="never", target="all")
