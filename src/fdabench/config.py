"""params.yaml: its schema (built from the registries), validation with clear messages, and resolution
into cells — one (suite, experiment, method, target, seed) each, with every setting spelled out."""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

NAME_PATTERN = r"^[A-Za-z0-9_+-][A-Za-z0-9_.+-]*$"
NAME_RULE = "letters, digits and _ . + - only, not starting with '.'"
MIRROR_ENVIRONMENT_VARIABLE = "FDABENCH_DATA_MIRROR"
THEORY_ROLES = ("target_only", "source_only", "fedda", "fedgp", "fedda_auto", "fedgp_auto")


class ParamsError(ValueError):
    """params.yaml is invalid; the message lists every problem with its key and the allowed values."""


def _name(description: str) -> dict[str, Any]:
    return {"type": "string", "pattern": NAME_PATTERN, "description": description}


def _object(properties: dict[str, Any], required: list[str] | None = None, description: str = "") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        schema["required"] = required
    if description:
        schema["description"] = description
    return schema


def params_schema() -> dict[str, Any]:
    """The JSON schema of params.yaml; registered names (datasets, methods, models) are enums."""
    from fdabench.data import DATASETS, PARTITIONERS
    from fdabench.federation.settings import TRAIN_SCHEMA
    from fdabench.methods import METHODS
    from fdabench.models import MODELS

    train = _object({**TRAIN_SCHEMA, "model": {"enum": MODELS.names(), "description": "model registry name"}},
                    description="training settings; unset keys take the dataset's defaults")
    name_list = {"type": "array", "items": _name("a name"), "minItems": 1, "uniqueItems": True}
    seeds = {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1, "uniqueItems": True}
    experiment = _object(
        {
            "dataset": {"enum": DATASETS.names(), "description": "dataset registry name"},
            "partitioner": {"enum": PARTITIONERS.names(), "description": "how clients are formed (default: the dataset's)"},
            "targets": {"oneOf": [{"const": "all"}, name_list], "description": "target domains, or 'all'"},
            "methods": {**name_list, "description": "method variants (keys of `methods`) or registered methods"},
            "seeds": seeds,
            "partition": {"type": "object", "description": "partitioner options; unset keys take the dataset's defaults"},
            "dataset_options": {"type": "object", "description": "dataset options for this experiment (over `datasets.<name>`)"},
            "published": {"type": "string", "description": "key of the published numbers this experiment reproduces (paper_vs_ours)"},
            "method_options": {"type": "object", "propertyNames": {"pattern": NAME_PATTERN}, "additionalProperties": {"type": "object"},
                               "description": "per-method hyper-parameters of this experiment, over the variant's (e.g. a dataset's published auto-weighting settings)"},
            "train": train,
        },
        required=["dataset"],
    )
    table = _object(
        {
            "experiments": {**name_list, "description": "experiments of this suite shown in the table"},
            "title": {"type": "string"},
            "metrics": {"type": "array", "items": {"enum": ["accuracy", "auc", "mse", "loss"]}, "minItems": 1, "uniqueItems": True,
                        "description": "metrics shown (default: each cell's primary metric)"},
        },
        required=["experiments"],
    )
    roles = {"type": "object", "propertyNames": {"enum": list(THEORY_ROLES)}, "additionalProperties": _name("a method")}
    theory_check = _object(
        {
            "experiment": _name("an experiment of this suite on synthetic_regression"),
            "roles": {**roles, "description": "method variant playing each rule (default: the rule's own name)"},
            "draws": {"type": "integer", "minimum": 2, "description": "Monte Carlo draws for σ² at initialisation"},
            "title": {"type": "string"},
        },
        required=["experiment"],
    )
    figure = _object(
        {
            "kind": {"enum": ["shift", "beta", "alpha"], "description": "shift: final metric against the level in the target name; beta / alpha: final metric against the hyper-parameter β / α"},
            "experiments": {**name_list, "description": "experiments of this suite in the figure"},
            "title": {"type": "string"},
        },
        required=["kind", "experiments"],
    )
    suite = _object(
        {
            "seeds": seeds,
            "methods": {**name_list, "description": "default methods of the suite's experiments"},
            "train": train,
            "experiments": {"type": "object", "propertyNames": {"pattern": NAME_PATTERN}, "additionalProperties": experiment, "minProperties": 1},
            "tables": {"type": "object", "propertyNames": {"pattern": NAME_PATTERN}, "additionalProperties": table},
            "theory_checks": {"type": "object", "propertyNames": {"pattern": NAME_PATTERN}, "additionalProperties": theory_check},
            "figures": {"type": "object", "propertyNames": {"pattern": NAME_PATTERN}, "additionalProperties": figure},
        },
        required=["experiments"],
    )
    dataset_options = {
        name: _object(copy.deepcopy(source.options_schema), description=f"options of {name}")
        for name, source in DATASETS.items()
    }
    method_variant = {
        "type": "object",
        "properties": {
            "algorithm": {"enum": METHODS.names(), "description": "registered method (default: the variant's name)"},
            "by_target": {"type": "object", "propertyNames": {"pattern": NAME_PATTERN}, "additionalProperties": {"type": "object"},
                          "description": "per-target hyper-parameters over the variant's (e.g. a published per-domain lr decay)"},
        },
        "description": "hyper-parameters of the algorithm (checked against its own schema)",
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "fdabench params.yaml",
        **_object(
            {
                "suite": _name("the suite that snakemake and dvc build"),
                "device": {"enum": ["auto", "cpu", "cuda"], "description": "auto = CUDA when available, else CPU"},
                "threads_per_cell": {"type": "integer", "minimum": 1, "description": "CPU threads of one training job"},
                "data": _object(
                    {
                        "root": {"type": "string", "description": "where prepared data and partitions are written"},
                        "mirror": {"type": ["string", "null"], "description": f"local mirror of raw datasets (or ${MIRROR_ENVIRONMENT_VARIABLE})"},
                        "download": {"type": "boolean", "description": "let `acquire` download raw datasets the mirror lacks (network; default false)"},
                    }
                ),
                "datasets": _object(dataset_options, description="per-dataset options; unset keys take the dataset's defaults"),
                "methods": {"type": "object", "propertyNames": {"pattern": NAME_PATTERN}, "additionalProperties": method_variant},
                "suites": {"type": "object", "propertyNames": {"pattern": NAME_PATTERN}, "additionalProperties": suite, "minProperties": 1},
            },
            required=["suite", "suites"],
        ),
    }


def _path(parts) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _format_schema_error(error, prefix: tuple = ()) -> str:
    where = _path([*prefix, *error.absolute_path])
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        unexpected = sorted(set(error.instance) - set(allowed)) if isinstance(error.instance, dict) else []
        return f"{where}: unknown key(s) {', '.join(map(repr, unexpected))}; allowed keys: {', '.join(allowed) or '(none)'}"
    if error.validator == "enum":
        return f"{where}: {error.instance!r} is not allowed; allowed values: {', '.join(map(str, error.validator_value))}"
    if error.validator == "pattern" or (error.validator == "propertyNames"):
        return f"{where}: name {error.instance!r} is not allowed ({NAME_RULE})"
    if error.validator == "type":
        return f"{where}: {error.instance!r} has the wrong type; expected {error.validator_value}"
    if error.validator == "oneOf" and where.endswith("targets"):
        return f"{where}: {error.instance!r} must be 'all' or a list of target names ({NAME_RULE})"
    return f"{where}: {error.message}"


def _schema_errors(instance: Any, schema: dict[str, Any], prefix: tuple = ()) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path])
    return [_format_schema_error(error, prefix) for error in errors]


@dataclass(frozen=True)
class Cell:
    """One training job: its identity and its fully resolved configuration."""

    suite: str
    experiment: str
    method: str
    target: str
    seed: int
    config: dict[str, Any]

    @property
    def path(self) -> str:
        return cell_path(self.suite, self.experiment, self.method, self.target, self.seed)


def cell_path(suite: str, experiment: str, method: str, target: str, seed: int | str) -> str:
    return f"results/cells/{suite}/{experiment}/{method}/{target}/seed{seed}.json"


class Params:
    """Validated params.yaml with helpers that resolve experiments, methods and cells."""

    def __init__(self, raw: dict[str, Any]):
        self.raw = raw
        self.suite_name: str = raw["suite"]
        self.suite: dict[str, Any] = raw["suites"][self.suite_name]
        self.device: str = raw.get("device", "auto")
        self.threads_per_cell: int = raw.get("threads_per_cell", 1)
        data = raw.get("data") or {}
        self.data_root: str = data.get("root", "data")
        self.mirror: str | None = data.get("mirror") or os.environ.get(MIRROR_ENVIRONMENT_VARIABLE) or None
        self.download: bool = bool(data.get("download", False))

    # -- datasets ---------------------------------------------------------------------------------
    def dataset_options(self, dataset: str, experiment: str | None = None) -> dict[str, Any]:
        """Dataset defaults < params `datasets.<name>` < the experiment's `dataset_options`."""
        from fdabench.data import get_dataset

        source = get_dataset(dataset)
        options = {**copy.deepcopy(source.default_options), **(self.raw.get("datasets") or {}).get(dataset, {})}
        if experiment is not None:
            options.update(self.experiment(experiment).get("dataset_options", {}))
        return options

    def prepared_key(self, experiment: str) -> tuple[str, str]:
        """(dataset, options hash): experiments with the same dataset options share prepared data."""
        from fdabench.io import content_hash

        dataset = self.experiment(experiment)["dataset"]
        return dataset, content_hash(self.dataset_options(dataset, experiment))[:12]

    def prepared_path(self, experiment: str) -> str:
        dataset, key = self.prepared_key(experiment)
        return f"{self.data_root}/prepared/{dataset}/{key}"

    def prepared_options(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Every (dataset, options hash) of the suite with its options."""
        return {self.prepared_key(e): self.dataset_options(self.experiment(e)["dataset"], e) for e in self.experiment_names()}

    def raw_paths(self, dataset: str, options: dict[str, Any]) -> list[str]:
        """What `prepare` reads: acquired raw datasets and any outside input files (e.g. a manifest)."""
        from fdabench.data import get_dataset

        source = get_dataset(dataset)
        return [f"{self.data_root}/raw/{raw}" for raw in source.raw_datasets] + source.input_files(options)

    def raw_in_suite(self) -> list[str]:
        from fdabench.data import get_dataset

        return sorted({raw for dataset in self.datasets_in_suite() for raw in get_dataset(dataset).raw_datasets})

    def datasets_in_suite(self) -> list[str]:
        return sorted({exp["dataset"] for exp in self.suite["experiments"].values()})

    # -- experiments ------------------------------------------------------------------------------
    def experiment(self, name: str) -> dict[str, Any]:
        return self.suite["experiments"][name]

    def experiment_names(self) -> list[str]:
        return list(self.suite["experiments"])

    def partitioner(self, experiment: str) -> str:
        from fdabench.data import get_dataset

        exp = self.experiment(experiment)
        return exp.get("partitioner", get_dataset(exp["dataset"]).partitioner)

    def partition_options(self, experiment: str) -> dict[str, Any]:
        exp = self.experiment(experiment)
        return resolve_partition_options(exp["dataset"], exp.get("partitioner"), exp.get("partition", {}))

    def partition_path(self, experiment: str, target: str, seed: int | str) -> str:
        return f"{self.data_root}/partitions/{self.suite_name}/{experiment}/{target}/seed{seed}.json"

    def targets(self, experiment: str) -> list[str]:
        from fdabench.data import get_dataset, get_partitioner

        exp = self.experiment(experiment)
        targets = exp.get("targets", "all")
        if targets == "all":
            partitioner = get_partitioner(self.partitioner(experiment))
            return partitioner.target_names(get_dataset(exp["dataset"]), self.partition_options(experiment), self.dataset_options(exp["dataset"], experiment))
        return list(targets)

    def seeds(self, experiment: str) -> list[int]:
        return list(self.experiment(experiment).get("seeds", self.suite.get("seeds", [0])))

    def methods(self, experiment: str) -> list[str]:
        return list(self.experiment(experiment).get("methods", self.suite.get("methods", [])))

    def train_settings(self, experiment: str) -> dict[str, Any]:
        exp = self.experiment(experiment)
        merged = dataset_train_defaults(exp["dataset"])
        merged.update(self.suite.get("train", {}))
        merged.update(exp.get("train", {}))
        return merged

    # -- methods ----------------------------------------------------------------------------------
    def method_variant(self, name: str, target: str | None = None) -> tuple[str, dict[str, Any]]:
        """(algorithm, complete hyper-parameters) of a method variant or a registered method; a variant's
        `by_target.<target>` hyper-parameters override the others for that target."""
        from fdabench.methods import METHODS

        variant = copy.deepcopy(dict((self.raw.get("methods") or {}).get(name, {})))
        algorithm = variant.pop("algorithm", name)
        by_target = variant.pop("by_target", {})
        method_class = METHODS.get(algorithm)
        return algorithm, {**copy.deepcopy(method_class.default_hparams), **variant, **by_target.get(target, {})}

    def logs_betas(self, name: str) -> bool:
        """Whether the method variant chooses β automatically (its rounds log betas)."""
        from fdabench.methods import METHODS
        from fdabench.methods.auto import AutoWeighted

        return issubclass(METHODS.get(self.method_variant(name)[0]), AutoWeighted)

    # -- cells ------------------------------------------------------------------------------------
    def cells(self, experiments: list[str] | None = None) -> Iterator[Cell]:
        for experiment in experiments or self.experiment_names():
            for method in self.methods(experiment):
                for target in self.targets(experiment):
                    for seed in self.seeds(experiment):
                        yield self.cell(experiment, method, target, seed)

    def cell(self, experiment: str, method: str, target: str, seed: int) -> Cell:
        exp = self.experiment(experiment)
        algorithm, hparams = self.method_variant(method, target)
        hparams.update(copy.deepcopy(exp.get("method_options", {}).get(method, {})))
        config = {
            "suite": self.suite_name,
            "experiment": experiment,
            "dataset": exp["dataset"],
            "method": method,
            "algorithm": algorithm,
            "hparams": hparams,
            "target": target,
            "seed": int(seed),
            "dataset_options": self.dataset_options(exp["dataset"], experiment),
            "partitioner": self.partitioner(experiment),
            "partition": self.partition_options(experiment),
            "train": self.train_settings(experiment),
            "device": self.device,
            "published": exp.get("published"),
        }
        return Cell(self.suite_name, experiment, method, target, int(seed), config)

    def tables(self) -> dict[str, dict[str, Any]]:
        return dict(self.suite.get("tables") or {})

    def figures(self) -> dict[str, dict[str, Any]]:
        return dict(self.suite.get("figures") or {})

    def published_experiments(self) -> list[str]:
        return [name for name in self.experiment_names() if self.experiment(name).get("published")]

    def theory_checks(self) -> dict[str, dict[str, Any]]:
        return dict(self.suite.get("theory_checks") or {})

    def theory_roles(self, check: str) -> dict[str, str]:
        return {role: role for role in THEORY_ROLES} | self.theory_checks()[check].get("roles", {})

    def theory_beta(self, check: str) -> float:
        """β of the FedDA and FedGP roles (validated to be equal)."""
        return float(self.method_variant(self.theory_roles(check)["fedda"])[1]["beta"])

    def theory_init_path(self, experiment: str, target: str, seed: int | str) -> str:
        return f"results/theory/{self.suite_name}/{experiment}/{target}/seed{seed}.json"


def validate_params(raw: Any) -> Params:
    """Check params against the schema and every cross-reference; raise ParamsError listing all problems."""
    if not isinstance(raw, dict):
        raise ParamsError("params must be a mapping (a YAML document with keys suite, suites, ...)")
    problems = _schema_errors(raw, params_schema())
    if problems:
        raise ParamsError(_report(problems))
    problems = _semantic_errors(raw)
    if problems:
        raise ParamsError(_report(problems))
    return Params(raw)


def dataset_train_defaults(dataset: str) -> dict[str, Any]:
    """Training settings of a dataset when nothing overrides them: the optional defaults < its `default_train`."""
    from fdabench.data import get_dataset
    from fdabench.federation.settings import OPTIONAL_DEFAULTS

    return {**copy.deepcopy(OPTIONAL_DEFAULTS), **copy.deepcopy(get_dataset(dataset).default_train)}


def resolve_partition_options(dataset: str, partitioner: str | None, overrides: dict[str, Any]) -> dict[str, Any]:
    """Partitioner defaults < the dataset's defaults (for its own partitioner) < the experiment's."""
    from fdabench.data import get_dataset, get_partitioner

    source = get_dataset(dataset)
    name = partitioner or source.partitioner
    defaults = dict(get_partitioner(name).default_options)
    if name == source.partitioner:
        defaults.update(source.default_partition)
    return {**copy.deepcopy(defaults), **overrides}


def published_keys() -> list[str]:
    from fdabench.report.published import PUBLISHED

    return sorted(PUBLISHED)


def _report(problems: list[str]) -> str:
    return "invalid params:\n" + "\n".join(f"  - {problem}" for problem in problems)


def _semantic_errors(raw: dict[str, Any]) -> list[str]:
    from fdabench.data import get_dataset, get_partitioner
    from fdabench.federation.settings import TRAIN_SCHEMA
    from fdabench.methods import METHODS

    problems: list[str] = []
    variants = raw.get("methods") or {}
    for name, variant in variants.items():
        algorithm = variant.get("algorithm", name)
        if algorithm not in METHODS:
            problems.append(
                f"methods.{name}: {name!r} is not a registered method, so it needs `algorithm:`; "
                f"allowed algorithms: {', '.join(METHODS.names())}"
            )
            continue
        hparams = {key: value for key, value in variant.items() if key not in ("algorithm", "by_target")}
        schema = _object(METHODS.get(algorithm).hparams_schema)
        problems += _schema_errors(hparams, schema, prefix=("methods", name))
        for target, overrides in (variant.get("by_target") or {}).items():
            problems += _schema_errors(overrides, schema, prefix=("methods", name, "by_target", target))
    known_methods = sorted(set(variants) | set(METHODS.names()))

    if raw["suite"] not in raw["suites"]:
        problems.append(f"suite: {raw['suite']!r} is not defined; allowed values: {', '.join(raw['suites'])}")
    for suite_name, suite in raw["suites"].items():
        where_suite = f"suites.{suite_name}"
        for index, method in enumerate(suite.get("methods", [])):
            if method not in known_methods:
                problems.append(f"{where_suite}.methods[{index}]: unknown method {method!r}; allowed values: {', '.join(known_methods)}")
        for exp_name, exp in suite["experiments"].items():
            where = f"{where_suite}.experiments.{exp_name}"
            source = get_dataset(exp["dataset"])
            partitioner = get_partitioner(exp.get("partitioner", source.partitioner))
            partition = resolve_partition_options(exp["dataset"], exp.get("partitioner"), exp.get("partition", {}))
            problems += _schema_errors(exp.get("partition", {}), _object(partitioner.options_schema), prefix=(*where.split("."), "partition"))
            problems += _schema_errors(exp.get("dataset_options", {}), _object(source.options_schema), prefix=(*where.split("."), "dataset_options"))
            if "published" in exp and exp["published"] not in published_keys():
                problems.append(f"{where}.published: unknown key {exp['published']!r}; allowed values: {', '.join(published_keys())}")
            methods = exp.get("methods", suite.get("methods"))
            if not methods:
                problems.append(f"{where}: no methods (set `methods` here or in {where_suite})")
            for index, method in enumerate(exp.get("methods", [])):
                if method not in known_methods:
                    problems.append(f"{where}.methods[{index}]: unknown method {method!r}; allowed values: {', '.join(known_methods)}")
            for method, options in (exp.get("method_options") or {}).items():
                if method not in (methods or []):
                    problems.append(f"{where}.method_options.{method}: {method!r} is not a method of this experiment; its methods: {', '.join(methods or [])}")
                    continue
                algorithm = variants.get(method, {}).get("algorithm", method)
                if algorithm in METHODS:
                    problems += _schema_errors(options, _object(METHODS.get(algorithm).hparams_schema), prefix=(*where.split("."), "method_options", method))
            targets = exp.get("targets", "all")
            if targets != "all":
                for index, target in enumerate(targets):
                    dataset_options = {**source.default_options, **(raw.get("datasets") or {}).get(exp["dataset"], {}), **exp.get("dataset_options", {})}
                    message = partitioner.validate_target(source, target, partition, dataset_options)
                    if message:
                        problems.append(f"{where}.targets[{index}]: {message}")
            train = {**source.default_train, **suite.get("train", {}), **exp.get("train", {})}
            for method in methods or []:
                if method in known_methods:
                    algorithm = variants.get(method, {}).get("algorithm", method)
                    hparams = {k: v for k, v in variants.get(method, {}).items() if k not in ("algorithm", "by_target")}
                    hparams.update((exp.get("method_options") or {}).get(method, {}))
                    if algorithm not in METHODS:
                        continue  # already reported under methods.<variant>
                    try:
                        instance = METHODS.get(algorithm)(hparams)
                    except ValueError:
                        continue  # already reported under methods.<variant>
                    problems += [f"{where}: method {method!r}: {problem}" for problem in instance.check(train)]
            missing = [key for key in ("model", "rounds", "warmup_rounds", "local_epochs", "optimizer", "source_lr", "target_lr", "source_batch_size", "target_batch_size") if key not in train]
            if missing:
                problems.append(f"{where}.train: missing {', '.join(missing)} (no default for {exp['dataset']})")
            unknown_train = set(train) - set(TRAIN_SCHEMA)
            if unknown_train:
                problems.append(f"{where}.train: unknown keys {sorted(unknown_train)}")
        for check_name, check in (suite.get("theory_checks") or {}).items():
            where = f"{where_suite}.theory_checks.{check_name}"
            experiment = suite["experiments"].get(check["experiment"])
            if experiment is None:
                problems.append(f"{where}.experiment: unknown experiment {check['experiment']!r}; allowed values: {', '.join(suite['experiments'])}")
                continue
            if experiment["dataset"] != "synthetic_regression":
                problems.append(f"{where}.experiment: the theory check needs a synthetic_regression experiment")
            roles = {role: role for role in THEORY_ROLES} | check.get("roles", {})
            in_experiment = experiment.get("methods", suite.get("methods", []))
            for role, method in roles.items():
                if method not in in_experiment:
                    problems.append(f"{where}.roles.{role}: method {method!r} is not run by experiment {check['experiment']!r} (its methods: {', '.join(in_experiment)})")
            betas = set()
            for rule in ("fedda", "fedgp"):
                algorithm = variants.get(roles[rule], {}).get("algorithm", roles[rule])
                if algorithm in METHODS:
                    betas.add(variants.get(roles[rule], {}).get("beta", METHODS.get(algorithm).default_hparams.get("beta")))
            if len(betas) > 1:
                problems.append(f"{where}: the fedda and fedgp roles must share one beta (got {sorted(betas)})")
        for figure_name, figure in (suite.get("figures") or {}).items():
            for index, experiment in enumerate(figure["experiments"]):
                if experiment not in suite["experiments"]:
                    problems.append(f"{where_suite}.figures.{figure_name}.experiments[{index}]: unknown experiment {experiment!r}; allowed values: {', '.join(suite['experiments'])}")
        for table_name, table in (suite.get("tables") or {}).items():
            for index, experiment in enumerate(table["experiments"]):
                if experiment not in suite["experiments"]:
                    problems.append(
                        f"{where_suite}.tables.{table_name}.experiments[{index}]: unknown experiment {experiment!r}; "
                        f"allowed values: {', '.join(suite['experiments'])}"
                    )
    return problems


def load_params(path: str | os.PathLike = "params.yaml", overrides: dict[str, Any] | None = None) -> Params:
    """Read, merge `overrides` (nested keys), and validate a params file."""
    import yaml

    path = Path(path)
    if not path.exists():
        raise ParamsError(f"{path} does not exist")
    with open(path, encoding="utf-8") as handle:
        try:
            raw = yaml.safe_load(handle)
        except yaml.YAMLError as error:
            raise ParamsError(f"{path} is not valid YAML: {error}") from None
    if overrides:
        raw = deep_merge(raw, overrides)
    return validate_params(raw)


def deep_merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def is_safe_name(name: str) -> bool:
    return re.match(NAME_PATTERN, name) is not None
