"""How a setting of a cell is resolved: the one place that states each merge order. Params validation and
cell resolution both call these functions, so what is checked is what runs.

    dataset options    dataset's schema defaults < params `datasets.<name>` < experiment `dataset_options`
    partition options  partitioner's schema defaults < the dataset's `default_partition` (its own
                       partitioner only) < experiment `partition`
    train settings     train schema defaults < dataset's `default_train` < suite `train` < experiment `train`
    hyper-parameters   method's schema defaults < variant (`methods.<name>`) < its `by_target.<target>`
                       < experiment `method_options.<name>`
"""

from __future__ import annotations

import copy
from typing import Any

from fdabench.data import get_dataset, partition_options
from fdabench.federation.settings import TRAIN_DEFAULTS
from fdabench.methods import METHODS


def dataset_options(raw: dict[str, Any], dataset: str, experiment: dict[str, Any] | None = None) -> dict[str, Any]:
    options = {
        **copy.deepcopy(get_dataset(dataset).default_options),
        **copy.deepcopy((raw.get("datasets") or {}).get(dataset, {})),
    }
    if experiment is not None:
        options.update(copy.deepcopy(experiment.get("dataset_options", {})))
    return options


def partitioner_name(experiment: dict[str, Any]) -> str:
    return experiment.get("partitioner", get_dataset(experiment["dataset"]).partitioner)


def experiment_partition_options(experiment: dict[str, Any]) -> dict[str, Any]:
    """(The merge itself is `fdabench.data.partition_options`, which `fdabench partition` also calls.)"""
    return partition_options(
        get_dataset(experiment["dataset"]), experiment.get("partitioner"), experiment.get("partition", {})
    )


def dataset_train_defaults(dataset: str) -> dict[str, Any]:
    """Training settings of a dataset when nothing overrides them."""
    return {**copy.deepcopy(TRAIN_DEFAULTS), **copy.deepcopy(get_dataset(dataset).default_train)}


def train_settings(suite: dict[str, Any], experiment: dict[str, Any]) -> dict[str, Any]:
    merged = dataset_train_defaults(experiment["dataset"])
    merged.update(copy.deepcopy(suite.get("train", {})))
    merged.update(copy.deepcopy(experiment.get("train", {})))
    return merged


def algorithm_of(raw: dict[str, Any], method: str) -> str:
    """The registered algorithm of a method variant (a variant's name defaults to its algorithm)."""
    return (raw.get("methods") or {}).get(method, {}).get("algorithm", method)


def variant_hparams(raw: dict[str, Any], method: str, target: str | None = None) -> dict[str, Any]:
    """The hyper-parameters a variant sets (without the algorithm's defaults); `by_target.<target>` on top."""
    variant = copy.deepcopy(dict((raw.get("methods") or {}).get(method, {})))
    variant.pop("algorithm", None)
    by_target = variant.pop("by_target", {})
    return {**variant, **by_target.get(target, {})}


def hparams(
    raw: dict[str, Any], experiment: dict[str, Any] | None, method: str, target: str | None = None
) -> dict[str, Any]:
    """The complete hyper-parameters of `method` in `experiment` for `target`."""
    resolved = {
        **copy.deepcopy(METHODS.get(algorithm_of(raw, method)).default_hparams),
        **variant_hparams(raw, method, target),
    }
    if experiment is not None:
        resolved.update(copy.deepcopy((experiment.get("method_options") or {}).get(method, {})))
    return resolved


def experiment_methods(suite: dict[str, Any], experiment: dict[str, Any]) -> list[str]:
    return list(experiment.get("methods", suite.get("methods", [])))
