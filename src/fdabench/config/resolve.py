"""How a setting of a cell is resolved: the one place that states each merge order. Params validation and
cell resolution both call these functions, so what is checked is what runs.

    dataset options    dataset's schema defaults < params `datasets.<name>` < experiment `dataset_options`
                       (`fdabench prepare --options`: the dataset's schema defaults < the given options)
    partition options  partitioner's schema defaults < the dataset's `default_partition` (its own
                       partitioner only) < experiment `partition` (`fdabench partition --options` alike;
                       stated by `fdabench.data.partition_options`)
    train settings     train schema defaults < dataset's `default_train` < suite `train` < experiment `train`
                       (the merge is `fdabench.federation.settings.with_train_defaults`, the home of the
                       defaults, which `TrainSettings.from_dict` applies too)
    hyper-parameters   method's schema defaults < variant (`methods.<name>`) < its `by_target.<target>`
                       < experiment `method_options.<name>` (the first step is `Method.with_defaults`, the one
                       merge of a method's defaults, which its constructor applies too: methods import nothing
                       of the config package)
    seeds              `[0]` < suite `seeds` < experiment `seeds` (each replaces the one before)
    methods            suite `methods` < experiment `methods` (the one given replaces the other); a suite's
                       `sweep` turns each swept method into its draws (and k-fold validation into folds):
                       `expanded_methods`, `fdabench.config.sweep`
    validation         suite `validation` < experiment `validation` (the one given replaces the other)
    a sweep's draw     the cell's hyper-parameters and training settings as above < the draw's values
    resources          TRAINING_RESOURCES < suite `resources` < experiment `resources` (key by key)
"""

from __future__ import annotations

import copy
from typing import Any

from fdabench.config import sweep
from fdabench.data import get_dataset, partition_options
from fdabench.federation.settings import with_train_defaults
from fdabench.methods import METHODS

#: what a training job asks a scheduler for unless the suite or experiment says otherwise
TRAINING_RESOURCES = {"runtime": 60, "mem_mb": 4096}
#: the seeds of an experiment when neither it nor its suite lists any
DEFAULT_SEEDS = [0]


def given_dataset_options(dataset: str, given: dict[str, Any]) -> dict[str, Any]:
    """The dataset's schema defaults < `given` (what `fdabench prepare --options` prepares with)."""
    return {**copy.deepcopy(get_dataset(dataset).default_options), **copy.deepcopy(given)}


def dataset_options(raw: dict[str, Any], dataset: str, experiment: dict[str, Any] | None = None) -> dict[str, Any]:
    options = given_dataset_options(dataset, (raw.get("datasets") or {}).get(dataset, {}))
    if experiment is not None:
        options.update(copy.deepcopy(experiment.get("dataset_options", {})))
    return options


def partitioner_name(experiment: dict[str, Any]) -> str:
    return experiment.get("partitioner", get_dataset(experiment["dataset"]).partitioner)


def experiment_partition_options(experiment: dict[str, Any]) -> dict[str, Any]:
    """(The merge itself is `fdabench.data.partition_options`, which `fdabench partition` also calls: a partition
    job imports no more than the data package.)"""
    return partition_options(
        get_dataset(experiment["dataset"]), experiment.get("partitioner"), experiment.get("partition", {})
    )


def train_settings(suite: dict[str, Any], experiment: dict[str, Any]) -> dict[str, Any]:
    """The merge of `fdabench.federation.settings.with_train_defaults`, with the layers of the module docstring."""
    dataset_defaults = get_dataset(experiment["dataset"]).default_train
    return with_train_defaults(dataset_defaults, suite.get("train", {}), experiment.get("train", {}))


def algorithm_of(raw: dict[str, Any], method: str) -> str:
    """The registered algorithm of a method variant (a variant's name defaults to its algorithm), or of a sweep's
    draw of one (`<variant>.draw<k>`)."""
    method = sweep_base(method)
    return (raw.get("methods") or {}).get(method, {}).get("algorithm", method)


def sweep_base(method: str) -> str:
    """The method variant a sweep's `<variant>.draw<k>` / `.fold<f>` name stands for (any other name: itself)."""
    return sweep.parse_name(method)[0] if sweep.RESERVED_NAME.search(method) else method


def method_spaces(raw: dict[str, Any], suite: dict[str, Any], method: str) -> dict[str, dict[str, Any]]:
    """The swept settings of `method` under the suite's sweep (`fdabench.config.sweep.spaces`)."""
    return sweep.spaces(algorithm_of(raw, method), method, sweep.settings(suite))


def _expansion(raw: dict[str, Any], suite: dict[str, Any], experiment: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(method, draws, folds) of each method of the experiment: its draws where it is swept (0 where it is not) and
    the folds of k-fold target validation (1 without)."""
    plan = sweep.settings(suite)
    methods = experiment_methods(suite, experiment)
    swept = set(sweep.swept_methods(suite, methods))
    fold_count = sweep.folds(suite, experiment)
    return [
        (
            method,
            sweep.draw_count(plan, method_spaces(raw, suite, method))
            if method in swept and algorithm_of(raw, method) in METHODS
            else 0,
            fold_count,
        )
        for method in methods
    ]


def expanded_methods(raw: dict[str, Any], suite: dict[str, Any], experiment: dict[str, Any]) -> list[str]:
    """The method names of the experiment's cells: each swept method once per draw, each method once per fold of
    k-fold target validation, the others as they are."""
    names = []
    for method, draw_count, fold_count in _expansion(raw, suite, experiment):
        draws = list(range(draw_count)) if draw_count else [None]
        folds = [None] if fold_count == 1 else list(range(fold_count))
        names += [sweep.sweep_name(method, draw, fold) for draw in draws for fold in folds]
    return names


def expanded_method_count(raw: dict[str, Any], suite: dict[str, Any], experiment: dict[str, Any]) -> int:
    """len(expanded_methods(...)), counted without listing them (a limit is checked before anything is expanded)."""
    return sum(max(draw_count, 1) * fold_count for _, draw_count, fold_count in _expansion(raw, suite, experiment))


def longest_method_names(raw: dict[str, Any], suite: dict[str, Any], experiment: dict[str, Any]) -> list[str]:
    """Each method's longest cell name (its last draw and last fold): what a check of names needs of a sweep,
    without listing every draw (the names of one method differ only in those numbers)."""
    return [
        sweep.sweep_name(method, draw_count - 1 if draw_count else None, fold_count - 1 if fold_count > 1 else None)
        for method, draw_count, fold_count in _expansion(raw, suite, experiment)
    ]


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
    resolved = METHODS.get(algorithm_of(raw, method)).with_defaults(variant_hparams(raw, method, target))
    if experiment is not None:
        resolved.update(copy.deepcopy((experiment.get("method_options") or {}).get(method, {})))
    return resolved


def experiment_methods(suite: dict[str, Any], experiment: dict[str, Any]) -> list[str]:
    return list(experiment.get("methods", suite.get("methods", [])))


def experiment_seeds(suite: dict[str, Any], experiment: dict[str, Any]) -> list[int]:
    return list(experiment.get("seeds", suite.get("seeds", DEFAULT_SEEDS)))


def resources(suite: dict[str, Any], experiment: dict[str, Any]) -> dict[str, int]:
    """Scheduler resources of the experiment's training jobs."""
    return {**TRAINING_RESOURCES, **suite.get("resources", {}), **experiment.get("resources", {})}
