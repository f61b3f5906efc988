"""Validation metrics a model-selection rule may read (`fdabench.report.sweep`), recorded every round beside the
target test metric.

Each is the cell's reported predictor (the global model, or the target's personalised model) on another split:
`source_val_<metric>` the mean over the sources of its value on each source's held-out samples (DomainBed's
training-domain validation: every source domain counts once), `target_val_<metric>` its value on the target's
labelled samples kept for validation (never trained on). A split the problem does not hold is not recorded.
"""

from __future__ import annotations

from collections.abc import Callable

from fdabench.federation.problem import ClientData, FederatedProblem

SOURCE_PREFIX = "source_val_"
TARGET_PREFIX = "target_val_"


def mean_metrics(per_split: list[dict[str, float]]) -> dict[str, float]:
    """The mean of each metric every split reports (each split counts once)."""
    shared = set.intersection(*(set(metrics) for metrics in per_split)) if per_split else set()
    return {name: sum(metrics[name] for metrics in per_split) / len(per_split) for name in sorted(shared)}


def validation_metrics(
    problem: FederatedProblem, evaluate_on: Callable[[ClientData], dict[str, float]]
) -> dict[str, float]:
    """`source_val_*` and `target_val_*` of the predictor that `evaluate_on(split)` scores."""
    metrics: dict[str, float] = {}
    if problem.source_validation:
        source = mean_metrics([evaluate_on(split) for split in problem.source_validation if len(split)])
        metrics.update({SOURCE_PREFIX + name: value for name, value in source.items()})
    if problem.target_validation is not None:
        target = evaluate_on(problem.target_validation)
        metrics.update({TARGET_PREFIX + name: value for name, value in target.items()})
    return metrics
