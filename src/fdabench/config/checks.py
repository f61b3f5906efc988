"""Checks of params.yaml beyond its schema: cross-references (methods, experiments, targets, per-target
overrides; an unknown name's message lists the nearest valid ones), each component's own option
schema, each method's demands on its resolved training settings, and settings that contradict each other
(`cross_field_errors`; the list: docs/configuration.md). Settings are resolved by `fdabench.config.resolve`,
exactly as cells are. An experiment's `published:` key names a paper's table, which the library does not know: the
reproduction package checks it (`fdabench.reproduction.lookups.published_errors`), added by the command line and
the workflow (`fdabench.jobs.validation`)."""

from __future__ import annotations

import inspect
import math
import re
from typing import Any

from fdabench.config import names, resolve, sweep
from fdabench.config.partition_checks import partition_errors
from fdabench.config.schema import DEFAULT_LIMITS, object_schema, place, schema_errors, with_bounds
from fdabench.config.theory_roles import theory_roles
from fdabench.core import paths, search
from fdabench.core.errors import did_you_mean
from fdabench.core.families import logs_betas
from fdabench.core.plugins import unknown_name_hint
from fdabench.data import DATASETS, PARTITIONERS, get_dataset, get_partitioner
from fdabench.federation.settings import REQUIRED_TRAIN, TRAIN_SCHEMA
from fdabench.methods import METHODS
from fdabench.models import MODELS


def non_finite_errors(value: Any, where: tuple = ()) -> list[str]:
    """NaN and ±infinity anywhere in params (YAML's .nan and .inf pass every minimum/maximum check)."""
    if isinstance(value, float) and not math.isfinite(value):
        return [f"{place(where)}: {value} is not a finite number; write a number (NaN and infinity are refused)"]
    if isinstance(value, dict):
        return [problem for key, item in value.items() for problem in non_finite_errors(item, (*where, key))]
    if isinstance(value, list):
        return [problem for index, item in enumerate(value) for problem in non_finite_errors(item, (*where, index))]
    return []


def semantic_errors(raw: dict[str, Any]) -> list[str]:
    """Every problem of schema-valid params, one readable line each."""
    problems = _variant_errors(raw)
    if raw.get("gpus") and raw.get("device") == "cpu":
        problems.append("gpus: cells run on the CPU (device: cpu); set device to cuda or auto, or remove gpus")
    if raw["suite"] not in raw["suites"]:
        problems.append(
            f"suite: {raw['suite']!r} is not defined; allowed values: {', '.join(raw['suites'])}"
            f"{did_you_mean(raw['suite'], raw['suites'])}"
        )
    for suite_name in (raw.get("dvc") or {}).get("suites", []):
        if suite_name not in raw["suites"]:
            problems.append(
                f"dvc.suites: {suite_name!r} is not defined; allowed values: {', '.join(raw['suites'])}"
                f"{did_you_mean(suite_name, raw['suites'])}"
            )
    for suite_name, suite in raw["suites"].items():
        if suite_name in paths.RESERVED_RESULT_FOLDERS:
            problems.append(
                f"suites.{suite_name}: the name is taken by results/{suite_name}/; rename the suite (reserved: "
                f"{', '.join(paths.RESERVED_RESULT_FOLDERS)})"
            )
        problems += _suite_errors(raw, suite_name, suite)
    return problems + _by_target_errors(raw) + _plugin_collision_errors(raw) + name_errors(raw)


def _longest(values) -> str:
    return max(map(str, values), key=len, default="")


def _short(where: str) -> str:
    """A place for a message, each part cut to 40 characters (a name can be thousands long)."""
    return ".".join(part if len(part) <= 40 else part[:40] + "..." for part in where.split("."))


def name_errors(raw: dict[str, Any]) -> list[str]:
    """Every name that becomes a path or a command argument passes `fdabench.config.names.name_problem`; where all of
    an experiment's do, the paths its longest names make fit the file system (`names.path_problem`)."""
    named = [] if raw["suite"] in raw["suites"] else [("suite", "suite", raw["suite"])]  # else checked as a suite's
    named += [(f"dvc.suites[{i}]", "suite", name) for i, name in enumerate((raw.get("dvc") or {}).get("suites", []))]
    for name, variant in (raw.get("methods") or {}).items():
        named.append(("methods", "method", name))
        named += [(f"methods.{name}.by_target", "target", target) for target in variant.get("by_target") or {}]
    problems = _named_errors(named)
    root = (raw.get("data") or {}).get("root", "data")
    for suite_name, suite in raw["suites"].items():
        where_suite = f"suites.{suite_name}"
        named = [("suites", "suite", suite_name)]
        for kind, singular in (("tables", "table"), ("figures", "figure"), ("theory_checks", "theory check")):
            named += [(f"{where_suite}.{kind}", singular, name) for name in suite.get(kind) or {}]
        suite_problems = _named_errors(named)
        problems += suite_problems
        for exp_name, exp in suite["experiments"].items():
            where = f"{where_suite}.experiments.{exp_name}"
            methods = resolve.longest_method_names(raw, suite, exp)  # a sweep's every draw: only the longest
            targets = _targets_or_none(raw, exp) or []
            named = [(f"{where_suite}.experiments", "experiment", exp_name)]
            named += [(f"{where}.methods", "method", method) for method in methods]
            named += [(f"{where}.targets", "target", target) for target in targets]
            members = [("dataset", exp["dataset"]), ("partitioner", resolve.partitioner_name(exp))]
            members += [("method", resolve.algorithm_of(raw, method)) for method in methods]
            members.append(("model", resolve.train_settings(suite, exp).get("model")))
            named += [(where, f"registered {family}", member) for family, member in members if member is not None]
            experiment_problems = _named_errors(named)
            problems += experiment_problems
            if experiment_problems or suite_problems:
                continue
            values = {
                "suite": suite_name,
                "experiment": exp_name,
                "method": _longest(methods),
                "target": _longest(targets),
                "seed": _longest(resolve.experiment_seeds(suite, exp)),
                "table": _longest(suite.get("tables") or {}),
                "figure": _longest(suite.get("figures") or {}),
                "check": _longest(suite.get("theory_checks") or {}),
                "ext": _longest(paths.TABLE_EXTENSIONS),
                "data": root,
            }
            problem = names.path_problem({key: value for key, value in values.items() if value})
            if problem:
                problems.append(f"{_short(where)}: {problem}")
    return problems


def _named_errors(named: list[tuple[str, str, Any]]) -> list[str]:
    """(place, kind, name) -> one line per name that `names.name_problem` refuses (each once)."""
    problems = []
    for where, kind, name in named:
        problem = names.name_problem(name, kind)
        line = f"{_short(where)}: {problem}"
        if problem and line not in problems:
            problems.append(line)
    return problems


def _plugin_collision_errors(raw: dict[str, Any]) -> list[str]:
    """A name that a shipped member and a plugin both claim (the plugin was skipped, `fdabench.core.plugins`): a
    suite that uses it is refused, since which of the two it means is unclear; other suites run."""
    registries = {"method": METHODS, "dataset": DATASETS, "partitioner": PARTITIONERS, "model": MODELS}
    claimed = {
        (family, name) for family, registry in registries.items() for name in registry.broken if name in registry
    }
    if not claimed:
        return []
    problems = []
    for suite_name, suite in raw["suites"].items():
        for exp_name, exp in suite["experiments"].items():
            used = {("dataset", exp["dataset"]), ("partitioner", resolve.partitioner_name(exp))}
            used |= {("method", resolve.algorithm_of(raw, method)) for method in resolve.experiment_methods(suite, exp)}
            used.add(("model", resolve.train_settings(suite, exp).get("model")))
            for family, name in sorted(used & claimed):
                problems.append(
                    f"suites.{suite_name}.experiments.{exp_name}: {family} {name!r}: {registries[family].broken[name]}"
                )
    return problems


def _limit(raw: dict[str, Any], name: str) -> int:
    return (raw.get("limits") or {}).get(name, DEFAULT_LIMITS[name])


def _cell_count(raw: dict[str, Any], suite: dict[str, Any]) -> int:
    """How many cells the suite resolves to (without resolving them)."""
    count = 0
    for exp in suite["experiments"].values():
        targets = exp.get("targets", "all")
        if targets == "all":
            partitioner = get_partitioner(resolve.partitioner_name(exp))
            targets = partitioner.target_names(get_dataset(exp["dataset"]), resolve.experiment_partition_options(exp))
        seeds = exp.get("seeds", suite.get("seeds", [0]))
        count += resolve.expanded_method_count(raw, suite, exp) * len(targets) * len(seeds)
    return count


def _known_methods(raw: dict[str, Any]) -> list[str]:
    return sorted(set(raw.get("methods") or {}) | set(METHODS.names()))


def _variant_errors(raw: dict[str, Any]) -> list[str]:
    problems = []
    for name, variant in (raw.get("methods") or {}).items():
        if sweep.RESERVED_NAME.search(name):
            problems.append(
                f"methods.{name}: names ending in .draw<k> or .fold<f> are a sweep's cells; rename the variant"
            )
            continue
        algorithm = variant.get("algorithm", name)
        if algorithm not in METHODS:
            problems.append(
                f"methods.{name}: {name!r} is not a registered method, so it needs `algorithm:`; "
                f"allowed algorithms: {', '.join(METHODS.names())}{did_you_mean(algorithm, METHODS.names())}\n    "
                f"{unknown_name_hint(METHODS, algorithm)}"
            )
            continue
        schema = object_schema(METHODS.get(algorithm).hparams_schema)
        problems += schema_errors(resolve.variant_hparams(raw, name), schema, prefix=("methods", name))
        for target, overrides in (variant.get("by_target") or {}).items():
            problems += schema_errors(overrides, schema, prefix=("methods", name, "by_target", target))
    return problems


def _valid_algorithm(raw: dict[str, Any], method: str) -> str | None:
    """The method's algorithm where it is registered (problems with the variant are reported elsewhere)."""
    algorithm = resolve.algorithm_of(raw, method)
    return algorithm if algorithm in METHODS else None


def _suite_errors(raw: dict[str, Any], suite_name: str, suite: dict[str, Any]) -> list[str]:
    where_suite = f"suites.{suite_name}"
    known_methods = _known_methods(raw)
    problems = [
        f"{where_suite}.methods[{index}]: unknown method {method!r}; allowed values: {', '.join(known_methods)}"
        f"{did_you_mean(method, known_methods)}\n    {unknown_name_hint(METHODS, method)}"
        for index, method in enumerate(suite.get("methods", []))
        if method not in known_methods
    ]
    sweep_problems = _sweep_errors(raw, suite, where_suite)
    if sweep_problems:  # the cell count needs a usable sweep
        return problems + sweep_problems
    cells, limit = _cell_count(raw, suite), _limit(raw, "cells")
    if cells > limit:
        return problems + [
            f"{where_suite}: {cells} cells (methods, with a sweep's draws, x targets x seeds), above the limit of "
            f"{limit}; fewer seeds, targets or methods, or confirm with `limits: {{cells: {cells}}}` in params.yaml"
        ]
    for exp_name, exp in suite["experiments"].items():
        problems += _experiment_errors(raw, suite, f"{where_suite}.experiments.{exp_name}", exp)
    for check_name, check in (suite.get("theory_checks") or {}).items():
        problems += _theory_check_errors(raw, suite, f"{where_suite}.theory_checks.{check_name}", check)
    for kind in ("figures", "tables"):
        for name, entry in (suite.get(kind) or {}).items():
            for index, experiment in enumerate(entry["experiments"]):
                if experiment not in suite["experiments"]:
                    problems.append(
                        f"{where_suite}.{kind}.{name}.experiments[{index}]: unknown experiment {experiment!r}; "
                        f"allowed values: {', '.join(suite['experiments'])}"
                        f"{did_you_mean(experiment, suite['experiments'])}"
                    )
    return problems


def _experiment_errors(raw: dict[str, Any], suite: dict[str, Any], where: str, exp: dict[str, Any]) -> list[str]:
    prefix = tuple(where.split("."))
    source = get_dataset(exp["dataset"])
    partitioner = get_partitioner(resolve.partitioner_name(exp))
    problems = schema_errors(
        exp.get("partition", {}), object_schema(partitioner.options_schema), prefix=(*prefix, "partition")
    )
    if not problems:
        options = resolve.experiment_partition_options(exp)
        problems += [f"{where}.partition: {problem}" for problem in partitioner.option_problems(options)]
    problems += schema_errors(
        exp.get("dataset_options", {}), object_schema(source.options_schema), prefix=(*prefix, "dataset_options")
    )
    known_methods = _known_methods(raw)
    methods = resolve.experiment_methods(suite, exp)
    if not methods:
        problems.append(f"{where}: no methods (set `methods` here or in {where.rsplit('.experiments.', 1)[0]})")
    for index, method in enumerate(exp.get("methods", [])):
        if method not in known_methods:
            problems.append(
                f"{where}.methods[{index}]: unknown method {method!r}; allowed values: {', '.join(known_methods)}"
                f"{did_you_mean(method, known_methods)}\n    {unknown_name_hint(METHODS, method)}"
            )
    for method, options in (exp.get("method_options") or {}).items():
        if method not in methods:
            problems.append(
                f"{where}.method_options.{method}: {method!r} is not a method of this experiment; its methods: "
                f"{', '.join(methods)}{did_you_mean(method, methods)}"
            )
            continue
        algorithm = _valid_algorithm(raw, method)
        if algorithm is not None:
            problems += schema_errors(
                options,
                object_schema(METHODS.get(algorithm).hparams_schema),
                prefix=(*prefix, "method_options", method),
            )
    targets = exp.get("targets", "all")
    if targets != "all":
        partition = resolve.experiment_partition_options(exp)
        dataset_options = resolve.dataset_options(raw, exp["dataset"], exp)
        for index, target in enumerate(targets):
            message = partitioner.validate_target(source, target, partition, dataset_options)
            if message:
                known = _targets_or_none(raw, {**exp, "targets": "all"}) or []
                problems.append(f"{where}.targets[{index}]: {message}{did_you_mean(target, known)}")
    train = resolve.train_settings(suite, exp)
    for method in methods:
        algorithm = _valid_algorithm(raw, method) if method in known_methods else None
        if algorithm is None:
            continue
        try:
            instance = METHODS.get(algorithm)(resolve.hparams(raw, exp, method))
        except ValueError:
            continue  # already reported under methods.<variant>
        problems += [f"{where}: method {method!r}: {problem}" for problem in instance.check(train)]
    problems += _model_errors(f"{where}.train", train)
    problems += _size_errors(raw, f"{where}.train", train)
    problems += _batching_errors(raw, f"{where}.train", train)
    problems += _target_batch_errors(raw, where, exp, methods, train, partition_targets(raw, exp))
    problems += _validation_errors(where, sweep.validation(suite, exp), partition_targets(raw, exp))
    problems += _labelled_override_errors(raw, where, exp)
    problems += cross_field_errors(where, suite, exp, train, partition_targets(raw, exp))
    if not problems and suite is raw["suites"].get(raw["suite"]):  # the active suite's: the split needs valid
        problems += _partition_errors(raw, suite, where, exp)  # options and targets, and takes seconds
    missing = [key for key in REQUIRED_TRAIN if key not in train]
    if missing:
        problems.append(f"{where}.train: missing {', '.join(missing)} (no default for {exp['dataset']})")
    unknown_train = set(train) - set(TRAIN_SCHEMA)
    if unknown_train:
        problems.append(f"{where}.train: unknown keys {sorted(unknown_train)}")
    return problems


def _partition_errors(raw: dict[str, Any], suite: dict[str, Any], where: str, exp: dict[str, Any]) -> list[str]:
    targets = _targets_or_none(raw, exp)
    if targets is None:
        return []
    return partition_errors(
        f"{where}.partition",
        exp["dataset"],
        resolve.dataset_options(raw, exp["dataset"], exp),
        (raw.get("data") or {}).get("root", "data"),
        resolve.partitioner_name(exp),
        resolve.experiment_partition_options(exp),
        targets,
        resolve.experiment_seeds(suite, exp),
    )


def _theory_check_errors(raw: dict[str, Any], suite: dict[str, Any], where: str, check: dict[str, Any]) -> list[str]:
    experiment = suite["experiments"].get(check["experiment"])
    if experiment is None:
        return [
            f"{where}.experiment: unknown experiment {check['experiment']!r}; allowed values: "
            f"{', '.join(suite['experiments'])}{did_you_mean(check['experiment'], suite['experiments'])}"
        ]
    problems = []
    if experiment["dataset"] != "synthetic_regression":
        problems.append(f"{where}.experiment: the theory check needs a synthetic_regression experiment")
    roles = theory_roles(check)
    in_experiment = resolve.experiment_methods(suite, experiment)
    for role, method in roles.items():
        if method not in in_experiment:
            problems.append(
                f"{where}.roles.{role}: method {method!r} is not run by experiment {check['experiment']!r} (its "
                f"methods: {', '.join(in_experiment)}){did_you_mean(method, in_experiment)}"
            )
    betas = {
        resolve.hparams(raw, None, roles[rule]).get("beta")
        for rule in ("fedda", "fedgp")
        if _valid_algorithm(raw, roles[rule])
    }
    if len(betas) > 1:
        problems.append(f"{where}: the fedda and fedgp roles must share one beta (got {sorted(betas)})")
    return problems


def _model_errors(where: str, train: dict[str, Any]) -> list[str]:
    """The model is registered and `model_options` are its factory's keyword arguments, of their defaults'
    types (checked here, not after the first training rounds)."""
    model = train.get("model")
    if model is None:
        return []
    if model not in MODELS:
        return [
            f"{where}.model: unknown model {model!r}; allowed values: {', '.join(MODELS.names())}"
            f"{did_you_mean(model, MODELS.names())}"
        ]
    parameters = list(inspect.signature(MODELS.get(model)).parameters.values())[2:]  # after input_shape, outputs
    accepted = {p.name: p.default for p in parameters}
    problems = []
    for name, value in (train.get("model_options") or {}).items():
        if name not in accepted:
            problems.append(
                f"{where}.model_options: {model} has no option {name!r}; its options: {', '.join(accepted) or '(none)'}"
                f"{did_you_mean(name, accepted)}"
            )
            continue
        expected = _option_type(accepted[name])
        if expected is not None and not _has_type(value, expected):
            problems.append(
                f"{where}.model_options.{name}: {value!r} has the wrong type; {model} expects {expected} (like its "
                f"default {accepted[name]!r})"
            )
    return problems


def _batching_errors(raw: dict[str, Any], where: str, train: dict[str, Any]) -> list[str]:
    """`batching: stacked` computes the sources itself (a `cohort: on` would be ignored) and, on a CPU, on one thread
    (`federation.lockstep.batching_scope`; with more, a cell's result would depend on its group)."""
    if train.get("batching") != "stacked":
        return []
    problems = []
    if train.get("cohort") == "on":
        problems.append(
            f"{where}: batching: stacked computes the sources together itself, so cohort: on would be ignored; "
            "set cohort: off (or auto), or batching: off"
        )
    if raw.get("device") == "cpu" and raw.get("threads_per_cell", 1) > 1:
        problems.append(
            f"{where}: batching: stacked computes on one CPU thread (with more, a cell's result would depend on the "
            f"cells it is batched with); threads_per_cell is {raw['threads_per_cell']}: set it to 1, or batching: off"
        )
    return problems


def _option_type(default: Any) -> str | None:
    if default is inspect.Parameter.empty or default is None:
        return None
    if isinstance(default, bool):
        return "boolean"
    if isinstance(default, int):
        return "integer"
    if isinstance(default, float):
        return "number"
    if isinstance(default, str):
        return "string"
    if isinstance(default, (list, tuple)):
        return "list"
    return None


def _has_type(value: Any, expected: str) -> bool:
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected == "string":
        return isinstance(value, str)
    return isinstance(value, list)


#: no step size above this trains (the loss overflows to NaN within a round)
MAX_LEARNING_RATE = 100.0


def _size_errors(raw: dict[str, Any], where: str, train: dict[str, Any]) -> list[str]:
    problems = []
    limit = _limit(raw, "rounds")
    rounds = train.get("rounds", 0) + train.get("warmup_rounds", 0)
    if rounds > limit:
        problems.append(
            f"{where}.rounds: {rounds} rounds (with warm-up) is above the limit of {limit}; fewer rounds, or confirm "
            f"with `limits: {{rounds: {rounds}}}` in params.yaml"
        )
    for key in ("source_lr", "target_lr", "server_lr"):
        if train.get(key, 0) > MAX_LEARNING_RATE:
            problems.append(
                f"{where}.{key}: {train[key]:g} is above {MAX_LEARNING_RATE:g} (training would diverge to NaN); "
                "use a learning rate such as 1e-3"
            )
    return problems


_LABELLED_IN_NAME = re.compile(r"-n(\d+)$")  # feature_noise targets such as noise0.4-n50 (labelled count 50)


def partition_targets(raw: dict[str, Any], exp: dict[str, Any]) -> dict[str, int]:
    """target -> its number of labelled samples, for the targets whose partition options give it as a count
    (a fraction of the domain is only known once the data are prepared)."""
    options = resolve.experiment_partition_options(exp)
    if "target_labelled" not in options:
        return {}
    targets = exp.get("targets", "all")
    if targets == "all":
        targets = get_partitioner(resolve.partitioner_name(exp)).target_names(
            get_dataset(exp["dataset"]), options, resolve.dataset_options(raw, exp["dataset"], exp)
        )
    counts = {}
    for target in targets:
        in_name = _LABELLED_IN_NAME.search(target)
        wanted = (
            int(in_name[1])
            if in_name
            else options.get("target_labelled_overrides", {}).get(target, options["target_labelled"])
        )
        if isinstance(wanted, int) and not isinstance(wanted, bool):
            counts[target] = wanted
    return counts


def _target_batch_errors(
    raw: dict[str, Any], where: str, exp: dict[str, Any], methods: list[str], train: dict[str, Any], labelled: dict
) -> list[str]:
    """Auto-weighting estimates β from at least 2 target batches per round: refuse batch sizes that leave
    fewer for a target whose labelled count is known."""
    problems = []
    for method in methods:
        algorithm = _valid_algorithm(raw, method) if method in _known_methods(raw) else None
        if algorithm is None or not logs_betas(METHODS.get(algorithm).family):
            continue
        hparams = resolve.hparams(raw, exp, method)
        if "estimation" not in hparams:
            continue
        for target, count in labelled.items():
            hp = resolve.hparams(raw, exp, method, target)
            if hp["estimation"] == "gradient_batches":
                batch, batches = hp["estimation_batch_size"], count // max(hp["estimation_batch_size"], 1)
                setting = "estimation_batch_size"
            else:
                batch = hp.get("target_batch_size") or train.get("target_batch_size", 0)
                steps = 1 if batch <= 0 or batch >= count else math.ceil(count / batch)
                batches = train.get("target_local_epochs", 1) * steps
                setting = "target_batch_size"
            if batches < 2:
                problems.append(
                    f"{where}: method {method!r}, target {target!r}: {setting} {batch} leaves {batches} target batch "
                    f"per round of its {count} labelled samples; auto-weighting needs at least 2: set {setting} at "
                    f"most {count // 2}"
                )
    return problems


def _targets_or_none(raw: dict[str, Any], exp: dict[str, Any]) -> list[str] | None:
    """The experiment's targets (`all` spelled out), or None where its dataset or partition options are themselves
    invalid (reported elsewhere)."""
    targets = exp.get("targets", "all")
    if targets != "all":
        return list(targets)
    try:
        return get_partitioner(resolve.partitioner_name(exp)).target_names(
            get_dataset(exp["dataset"]),
            resolve.experiment_partition_options(exp),
            resolve.dataset_options(raw, exp["dataset"], exp),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _by_target_errors(raw: dict[str, Any]) -> list[str]:
    """`methods.<variant>.by_target.<target>` names a target of an experiment that runs the variant (of any
    experiment, where none runs it): otherwise the override would be ignored without a word."""
    experiments = [(suite, exp) for suite in raw["suites"].values() for exp in suite["experiments"].values()]
    problems = []
    for name, variant in (raw.get("methods") or {}).items():
        overrides = variant.get("by_target") or {}
        if not overrides:
            continue
        running = [exp for suite, exp in experiments if name in resolve.experiment_methods(suite, exp)]
        known = list(
            dict.fromkeys(t for exp in running or [e for _, e in experiments] for t in _targets_or_none(raw, exp) or [])
        )
        for target in overrides:
            if target not in known:
                runs = f"no experiment that runs {name!r}" if running else "no experiment"
                problems.append(
                    f"methods.{name}.by_target.{target}: {runs} has target {target!r}, so the override would be "
                    f"ignored{did_you_mean(target, known)} (targets: {_listed(known)})"
                )
    return problems


def _listed(names: list[str], limit: int = 12) -> str:
    """Names for a message, at most `limit` of them."""
    shown = ", ".join(names[:limit]) or "(none)"
    return shown if len(names) <= limit else f"{shown}, ... ({len(names)} in all)"


def _labelled_override_errors(raw: dict[str, Any], where: str, exp: dict[str, Any]) -> list[str]:
    """An experiment's `partition.target_labelled_overrides` names its own targets (a dataset's default overrides
    are not checked: they serve whichever targets an experiment runs)."""
    overrides = (exp.get("partition") or {}).get("target_labelled_overrides") or {}
    targets = _targets_or_none(raw, exp)
    if not overrides or targets is None:
        return []
    return [
        f"{where}.partition.target_labelled_overrides.{target}: {target!r} is not a target of this experiment, so the "
        f"override would be ignored; its targets: {', '.join(targets)}{did_you_mean(target, targets)}"
        for target in overrides
        if target not in targets
    ]


def cross_field_errors(
    where: str, suite: dict[str, Any], exp: dict[str, Any], train: dict[str, Any], labelled: dict[str, int]
) -> list[str]:
    """Settings each valid alone that contradict each other in the experiment's resolved training settings (the list
    is in docs/configuration.md, Settings that contradict each other)."""
    problems = []
    given = {**(suite.get("train") or {}), **(exp.get("train") or {})}
    rounds = train.get("rounds")
    if "final_rounds" in given and rounds is not None and train["final_rounds"] > rounds:
        problems.append(
            f"{where}.train.final_rounds: {train['final_rounds']} is more than the run's {rounds} rounds (the final "
            f"metric would average warm-up or fewer rounds); set final_rounds at most {rounds}"
        )
    if train.get("optimizer") == "adam" and train.get("momentum", 0) > 0:
        problems.append(
            f"{where}.train.momentum: {train['momentum']:g} is SGD's momentum, and optimizer is adam (which would "
            "ignore it); set optimizer: sgd, or remove momentum"
        )
    batch = train.get("target_batch_size", 0)
    for target, count in labelled.items():
        if batch > count:
            problems.append(
                f"{where}.train.target_batch_size: {batch} is more than target {target!r}'s {count} labelled samples "
                f"(one batch would hold them all); set 0 (full batch) or at most {count}"
            )
    return problems


def _validation_errors(where: str, validation: dict[str, Any], labelled: dict[str, int]) -> list[str]:
    """Target validation that contradicts itself or leaves a target nothing to train on or validate with."""
    if "target_holdout" in validation and "target_folds" in validation:
        return [f"{where}.validation: target_holdout and target_folds exclude each other (hold-out or k-fold)"]
    problems = []
    for target, count in labelled.items():
        if "target_holdout" in validation and validation["target_holdout"] >= count:
            problems.append(
                f"{where}.validation.target_holdout: {validation['target_holdout']} of target {target!r}'s {count} "
                f"labelled samples leaves none to train on; hold out at most {count - 1}"
            )
        if "target_folds" in validation and validation["target_folds"] > count:
            problems.append(
                f"{where}.validation.target_folds: {validation['target_folds']} folds of target {target!r}'s {count} "
                f"labelled samples leaves a fold empty; use at most {count}"
            )
    return problems


def _sweep_errors(raw: dict[str, Any], suite: dict[str, Any], where_suite: str) -> list[str]:
    """A sweep names methods of its suite, spaces over their own hyper-parameters with usable bounds, and rules its
    experiments can serve (target_val: target validation everywhere; source_val: held-out source samples)."""
    plan = sweep.settings(suite)
    if plan is None:
        return []
    where = f"{where_suite}.sweep"
    in_suite = list(
        dict.fromkeys(m for exp in suite["experiments"].values() for m in resolve.experiment_methods(suite, exp))
    )
    problems = []
    for index, method in enumerate(plan.get("methods", [])):
        if method not in in_suite:
            problems.append(
                f"{where}.methods[{index}]: {method!r} is not a method of the suite's experiments; its methods: "
                f"{', '.join(in_suite)}{did_you_mean(method, in_suite)}"
            )
    swept = plan.get("methods", in_suite)
    if "reference" in plan and plan["reference"] not in in_suite:
        problems.append(
            f"{where}.reference: {plan['reference']!r} is not a method of the suite's experiments; its methods: "
            f"{', '.join(in_suite)}{did_you_mean(plan['reference'], in_suite)}"
        )
    for method, overrides in plan["spaces"].items():
        if method not in swept:
            problems.append(
                f"{where}.spaces.{method}: {method!r} is not swept; swept methods: {', '.join(swept)}"
                f"{did_you_mean(method, swept)}"
            )
            continue
        algorithm = _valid_algorithm(raw, method)
        if algorithm is None:
            continue
        schema = METHODS.get(algorithm).hparams_schema
        for name, spec in overrides.items():
            if name not in schema:
                problems.append(
                    f"{where}.spaces.{method}.{name}: {algorithm} has no hyper-parameter {name!r}; its "
                    f"hyper-parameters: {', '.join(schema) or '(none)'}{did_you_mean(name, schema)}"
                )
            elif spec is not None:
                problems += _spec_errors(f"{where}.spaces.{method}.{name}", spec, schema[name])
    for name, spec in plan["train_spaces"].items():
        if name not in plan["train"]:
            problems.append(f"{where}.train_spaces.{name}: {name!r} is not in sweep.train, so it is not varied")
        problems += _spec_errors(f"{where}.train_spaces.{name}", spec, TRAIN_SCHEMA[name])
    if plan["search"] == "grid" and "draws" in suite["sweep"]:
        problems.append(f"{where}.draws: a grid search runs every grid point; set grid_points, or search: random")
    for exp_name, exp in suite["experiments"].items():
        if "target_val" in plan["rules"] and not sweep.validation(suite, exp):
            problems.append(
                f"{where}.rules: target_val needs target validation in experiment {exp_name!r}: set validation: "
                "{target_holdout: n} (or target_folds) in the suite or the experiment"
            )
        partitioner = get_partitioner(resolve.partitioner_name(exp))
        if "source_val" in plan["rules"] and not partitioner.holds_out_sources:
            problems.append(
                f"{where}.rules: source_val needs held-out source samples, and experiment {exp_name!r}'s partitioner "
                f"{partitioner.name} holds none out; drop source_val from sweep.rules"
            )
    return problems


def _spec_errors(where: str, spec: dict[str, Any], setting_schema: dict[str, Any]) -> list[str]:
    """A search distribution with ordered bounds whose every end (or choice) is a valid value of the setting."""
    problem = search.spec_problem(spec)
    if problem:
        return [f"{where}: {problem}"]
    value_schema = {
        key: value for key, value in with_bounds({"": setting_schema})[""].items() if key not in ("search", "default")
    }
    kind, arguments = search.spec_kind(spec)
    problems = []
    for value in arguments:
        for message in schema_errors(value, value_schema):
            problems.append(f"{where}: {kind} value {value!r} is not a valid setting ({message.split(': ', 1)[-1]})")
    return problems
