"""Checks of params.yaml beyond its schema: cross-references (methods, experiments, targets, published
keys), each component's own option schema, and each method's demands on its resolved training settings.
Settings are resolved by `fdabench.config.resolve`, exactly as cells are."""

from __future__ import annotations

from typing import Any

from fdabench import paths
from fdabench.config import resolve
from fdabench.config.schema import object_schema, schema_errors
from fdabench.data import get_dataset, get_partitioner
from fdabench.federation.settings import REQUIRED_TRAIN, TRAIN_SCHEMA
from fdabench.methods import METHODS
from fdabench.paper.published import PUBLISHED
from fdabench.paper.theory_check import ROLES
from fdabench.plugins import registration_hint


def theory_roles(check: dict[str, Any]) -> dict[str, str]:
    """The method variant playing each rule of a theory check (default: the rule's own name)."""
    return {role: role for role in ROLES} | check.get("roles", {})


def semantic_errors(raw: dict[str, Any]) -> list[str]:
    """Every problem of schema-valid params, one readable line each."""
    problems = _variant_errors(raw)
    if raw.get("gpus") and raw.get("device") == "cpu":
        problems.append("gpus: cells run on the CPU (device: cpu); set device to cuda or auto, or remove gpus")
    if raw["suite"] not in raw["suites"]:
        problems.append(f"suite: {raw['suite']!r} is not defined; allowed values: {', '.join(raw['suites'])}")
    for suite_name in (raw.get("dvc") or {}).get("suites", []):
        if suite_name not in raw["suites"]:
            problems.append(f"dvc.suites: {suite_name!r} is not defined; allowed values: {', '.join(raw['suites'])}")
    for suite_name, suite in raw["suites"].items():
        if suite_name in paths.RESERVED_RESULT_FOLDERS:
            problems.append(
                f"suites.{suite_name}: the name is taken by results/{suite_name}/; rename the suite (reserved: "
                f"{', '.join(paths.RESERVED_RESULT_FOLDERS)})"
            )
        problems += _suite_errors(raw, suite_name, suite)
    return problems


def _known_methods(raw: dict[str, Any]) -> list[str]:
    return sorted(set(raw.get("methods") or {}) | set(METHODS.names()))


def _variant_errors(raw: dict[str, Any]) -> list[str]:
    problems = []
    for name, variant in (raw.get("methods") or {}).items():
        algorithm = variant.get("algorithm", name)
        if algorithm not in METHODS:
            problems.append(
                f"methods.{name}: {name!r} is not a registered method, so it needs `algorithm:`; "
                f"allowed algorithms: {', '.join(METHODS.names())}\n    {registration_hint('method')}"
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
        f"{where_suite}.methods[{index}]: unknown method {method!r}; allowed values: {', '.join(known_methods)}\n    "
        f"{registration_hint('method')}"
        for index, method in enumerate(suite.get("methods", []))
        if method not in known_methods
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
                    )
    return problems


def _experiment_errors(raw: dict[str, Any], suite: dict[str, Any], where: str, exp: dict[str, Any]) -> list[str]:
    prefix = tuple(where.split("."))
    source = get_dataset(exp["dataset"])
    partitioner = get_partitioner(resolve.partitioner_name(exp))
    problems = schema_errors(
        exp.get("partition", {}), object_schema(partitioner.options_schema), prefix=(*prefix, "partition")
    )
    problems += schema_errors(
        exp.get("dataset_options", {}), object_schema(source.options_schema), prefix=(*prefix, "dataset_options")
    )
    if "published" in exp and exp["published"] not in PUBLISHED:
        problems.append(
            f"{where}.published: unknown key {exp['published']!r}; allowed values: {', '.join(sorted(PUBLISHED))}"
        )
    known_methods = _known_methods(raw)
    methods = resolve.experiment_methods(suite, exp)
    if not methods:
        problems.append(f"{where}: no methods (set `methods` here or in {where.rsplit('.experiments.', 1)[0]})")
    for index, method in enumerate(exp.get("methods", [])):
        if method not in known_methods:
            problems.append(
                f"{where}.methods[{index}]: unknown method {method!r}; allowed values: {', '.join(known_methods)}\n    "
                f"{registration_hint('method')}"
            )
    for method, options in (exp.get("method_options") or {}).items():
        if method not in methods:
            problems.append(
                f"{where}.method_options.{method}: {method!r} is not a method of this experiment; its methods: "
                f"{', '.join(methods)}"
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
                problems.append(f"{where}.targets[{index}]: {message}")
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
    missing = [key for key in REQUIRED_TRAIN if key not in train]
    if missing:
        problems.append(f"{where}.train: missing {', '.join(missing)} (no default for {exp['dataset']})")
    unknown_train = set(train) - set(TRAIN_SCHEMA)
    if unknown_train:
        problems.append(f"{where}.train: unknown keys {sorted(unknown_train)}")
    return problems


def _theory_check_errors(raw: dict[str, Any], suite: dict[str, Any], where: str, check: dict[str, Any]) -> list[str]:
    experiment = suite["experiments"].get(check["experiment"])
    if experiment is None:
        return [
            f"{where}.experiment: unknown experiment {check['experiment']!r}; allowed values: "
            f"{', '.join(suite['experiments'])}"
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
                f"methods: {', '.join(in_experiment)})"
            )
    betas = {
        resolve.hparams(raw, None, roles[rule]).get("beta")
        for rule in ("fedda", "fedgp")
        if _valid_algorithm(raw, roles[rule])
    }
    if len(betas) > 1:
        problems.append(f"{where}: the fedda and fedgp roles must share one beta (got {sorted(betas)})")
    return problems
