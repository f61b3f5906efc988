"""Reference methods: FedAvg over the sources, the target alone, and the oracle."""

from __future__ import annotations

from fdabench.aggregation import fedavg
from fdabench.methods.base import METHODS, Aggregate, RoundInputs, RoundLoopMethod


@METHODS.register("source_only")
class SourceOnly(RoundLoopMethod):
    """FedAvg over the sources only (θ += Σ w_i g_i); the target never trains."""

    name = "source_only"
    description = "FedAvg over the source clients; evaluated on the target"
    target_split = None

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        return Aggregate(fedavg(inputs.source_updates, inputs.source_counts))


@METHODS.register("target_only")
class TargetOnly(RoundLoopMethod):
    """The target trains alone on its labelled samples (θ += g_T)."""

    name = "target_only"
    description = "the target client trains alone on its labelled samples"
    sources_train = False

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        return Aggregate(inputs.target_update)


@METHODS.register("oracle")
class Oracle(TargetOnly):
    """The target trains alone on all of its training samples, every one labelled (an upper reference)."""

    name = "oracle"
    description = "the target trains alone on all its training samples, all labelled"
    target_split = "all"
