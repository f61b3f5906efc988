"""The JSON schema of params.yaml, built from the registries, and readable messages for its violations."""

from __future__ import annotations

import copy
import math
import threading
from typing import Any

import jsonschema

from fdabench.config.names import NAME_PATTERN, NAME_RULE
from fdabench.config.sweep import SWEEP_SETTINGS, VALIDATION_SETTINGS
from fdabench.config.theory_roles import DEFAULT_DRAWS, ROLES
from fdabench.core.errors import ParamsError, did_you_mean  # noqa: F401  (ParamsError: raised by the config package)
from fdabench.core.metrics import METRICS
from fdabench.core.plugins import unknown_name_hint
from fdabench.data import DATASETS, PARTITIONERS
from fdabench.data.raw import MIRROR_ENVIRONMENT_VARIABLE
from fdabench.federation.settings import TRAIN_SCHEMA
from fdabench.methods import METHODS
from fdabench.models import MODELS

#: what is refused unless params.yaml `limits` raises it (a typo such as 10**12 rounds or 10,000 seeds would
#: otherwise start training, or spend minutes and gigabytes resolving cells, before anyone notices)
DEFAULT_LIMITS = {"rounds": 100_000, "cells": 20_000}

#: paths that reach shell commands (quoted there): the name characters, spaces and /, no part starting with -
SAFE_PATH_PATTERN = r"^(?!-)(?!.*/-)[A-Za-z0-9_.+ /-]+(?!\n)$"
SAFE_PATH_RULE = "letters, digits, spaces and _ . + - / only, no part starting with '-'"


#: the top-level settings with a default (each property's `default`: the one place it is written; `Params` reads
#: them with `fdabench.core.registry.schema_defaults`)
TOP_LEVEL_SETTINGS: dict[str, Any] = {
    "device": {
        "enum": ["auto", "cpu", "cuda"],
        "default": "auto",
        "description": "auto = CUDA when available, else CPU (fdabench.core.devices)",
    },
    "threads_per_cell": {
        "type": "integer",
        "minimum": 1,
        "default": 1,
        "description": "CPU threads of one training job",
    },
    "checkpoint_every": {
        "type": "integer",
        "minimum": 0,
        "default": 0,
        "description": "training cells save their state every this many rounds and resume from it when rerun after "
        "an interruption (0: never); not part of a cell's identity",
    },
    "cells_per_job": {
        "enum": ["cell", "targets"],
        "default": "cell",
        "description": "what one training job of the workflow trains: one cell (fdabench train), or the targets of "
        "one (experiment, method, seed) in one process (fdabench train-group), each still its own cell with its own "
        "result, plan and log; not part of a cell's identity",
    },
}
#: the settings of a theory check with a default
THEORY_CHECK_SETTINGS: dict[str, Any] = {
    "draws": {
        "type": "integer",
        "minimum": 2,
        "default": DEFAULT_DRAWS,
        "description": "Monte Carlo draws for σ² at initialisation",
    },
}
#: params.yaml `data`
DATA_SETTINGS: dict[str, Any] = {
    "root": {
        "type": "string",
        "pattern": SAFE_PATH_PATTERN,
        "default": "data",
        "description": "where raw and prepared data and partitions are kept (dvc.yaml follows it)",
    },
    "mirror": {
        "type": ["string", "null"],
        "pattern": SAFE_PATH_PATTERN,
        "default": None,
        "description": f"local mirror of raw datasets (null: ${MIRROR_ENVIRONMENT_VARIABLE}, if set)",
    },
    "download": {
        "type": "boolean",
        "default": False,
        "description": "let `acquire` download raw datasets the mirror lacks (network)",
    },
}


#: the bounds of every number a consumer takes, declared here once, each with its consumer. Every integer and number
#: setting of the schema (components' options and hyper-parameters included, through `object_schema`) takes the
#: bound of its name, else of its type; a CLI option that sets the same thing takes the same bound (`option_schema`,
#: `fdabench.cli.common.bounded`); CLI options that shadow no setting have theirs here too.
BOUNDS: dict[str, dict[str, Any]] = {
    "integer": {"maximum": 2**63 - 1, "consumer": "torch and numpy hold integers as int64"},
    "number": {
        "maximum": 3.4028234663852886e38,
        "consumer": "the models compute in float32, where a larger number is infinity",
    },
    "seeds": {
        "type": "integer",
        "minimum": 0,
        "maximum": 2**32 - 1,
        "consumer": "numpy.random.RandomState, which draws leave_one_domain_out's published split, takes seeds "
        "below 2**32 (the narrowest seeded generator of a cell)",
    },
    "threads_per_cell": {
        "type": "integer",
        "minimum": 1,
        "maximum": 2**31 - 1,
        "consumer": "torch.set_num_threads takes a C int",
    },
    "gpus": {
        "type": "integer",
        "minimum": 0,
        "maximum": 127,
        "consumer": "torch numbers CUDA devices with an int8 (c10::DeviceIndex)",
    },
    # CLI options that shadow no setting
    "timeout_seconds": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": threading.TIMEOUT_MAX,
        "consumer": "the Flower server waits for a site's answer at most threading.TIMEOUT_MAX seconds",
    },
    "wait_seconds": {
        "type": "number",
        "minimum": 0,
        "maximum": threading.TIMEOUT_MAX,
        "consumer": "the Flower server waits for missing sites at most threading.TIMEOUT_MAX seconds",
    },
    "sites_at_once": {
        "type": "integer",
        "minimum": 1,
        "maximum": 2**31 - 1,
        "consumer": "Ray counts the CPUs it schedules a simulation's sites on as a C int",
    },
    "budget_seconds": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": threading.TIMEOUT_MAX,
        "consumer": "the GPU bench's stage timer waits at most threading.TIMEOUT_MAX seconds",
    },
    "count": {
        "type": "integer",
        "minimum": 1,
        "maximum": 2**63 - 1,
        "consumer": "the benchmarks' and stand-ins' counts and tensor sizes are int64, and at least one of each",
    },
}


def _bounded(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """`spec` with the maximum of `name`'s bound (else its numeric type's) where that is narrower than its own."""
    types = spec.get("type") if isinstance(spec.get("type"), list) else [spec.get("type")]
    numeric = [kind for kind in ("integer", "number") if kind in types]
    if not numeric:
        return spec
    maximum = BOUNDS.get(name, BOUNDS[numeric[0]])["maximum"]
    if maximum >= min(spec.get("maximum", math.inf), spec.get("exclusiveMaximum", math.inf)):
        return spec
    return {**{key: value for key, value in spec.items() if key != "exclusiveMaximum"}, "maximum": maximum}


def _bound_tree(name: str, spec: Any) -> Any:
    """`spec` and every number below it (array items, mapping values, alternatives: of the same name; properties: of
    theirs) bounded."""
    if not isinstance(spec, dict):
        return spec
    spec = _bounded(name, spec)
    nested = {key: _bound_tree(name, spec[key]) for key in ("items", "additionalProperties") if key in spec}
    nested |= {key: [_bound_tree(name, item) for item in spec[key]] for key in ("oneOf", "anyOf") if key in spec}
    if isinstance(spec.get("properties"), dict):
        nested["properties"] = with_bounds(spec["properties"])
    return {**spec, **nested}


def with_bounds(properties: dict[str, Any]) -> dict[str, Any]:
    """Object properties, each number below them bounded by `BOUNDS`."""
    return {name: _bound_tree(name, spec) for name, spec in properties.items()}


def option_schema(name: str) -> dict[str, Any]:
    """The schema of one value of a CLI option: a setting's (`rounds`, `seeds`, `threads_per_cell`, `draws`, ...) or
    a `BOUNDS` entry's own."""
    settings = {**TRAIN_SCHEMA, **TOP_LEVEL_SETTINGS, **THEORY_CHECK_SETTINGS, "seeds": {"items": BOUNDS["seeds"]}}
    spec = with_bounds({name: settings.get(name, BOUNDS.get(name))})[name]
    spec = spec.get("items", spec)
    return {key: value for key, value in spec.items() if key not in ("default", "search", "consumer", "description")}


def bound_consumer(spec: dict[str, Any], name: str) -> str:
    """` (who sets it)` where `spec`'s maximum is a `BOUNDS` bound (of `name`, else of its numeric type), else ''."""
    kinds = spec.get("type") if isinstance(spec.get("type"), list) else [spec.get("type")]
    bound = BOUNDS.get(name) or next((BOUNDS[kind] for kind in ("integer", "number") if kind in kinds), {})
    return f" ({bound['consumer']})" if "maximum" in bound and bound["maximum"] == spec.get("maximum") else ""


def value_problem(name: str, value: Any) -> str | None:
    """Why `value` cannot be given to the CLI option that sets `name` (`option_schema`), or None."""
    spec = option_schema(name)
    for error in jsonschema.Draft202012Validator(spec).iter_errors(value):
        return error.message + (bound_consumer(spec, name) if error.validator == "maximum" else "")
    return None


def _name(description: str) -> dict[str, Any]:
    return {"type": "string", "pattern": NAME_PATTERN, "description": description}


def object_schema(
    properties: dict[str, Any], required: list[str] | None = None, description: str = ""
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": with_bounds(properties)}
    if required:
        schema["required"] = required
    if description:
        schema["description"] = description
    return schema


def params_schema() -> dict[str, Any]:
    """The JSON schema of params.yaml; registered names (datasets, methods, models) are enums."""
    train = object_schema(
        {**TRAIN_SCHEMA, "model": {"enum": MODELS.names(), "description": "model registry name"}},
        description="training settings; unset keys take the dataset's defaults",
    )
    name_list = {"type": "array", "items": _name("a name"), "minItems": 1, "uniqueItems": True}
    resources = object_schema(
        {
            "runtime": {"type": "integer", "minimum": 1, "description": "minutes a training job may run"},
            "mem_mb": {"type": "integer", "minimum": 1, "description": "memory of a training job (MB)"},
        },
        description="what a training job asks a cluster scheduler for (Snakemake resources; never part of a "
        "cell's identity)",
    )
    seeds = {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1, "uniqueItems": True}
    validation = object_schema(
        copy.deepcopy(VALIDATION_SETTINGS),
        description="validation a model-selection rule may read: the sources' held-out samples are always scored "
        "where the partition holds some out; these keep some of the target's labelled samples (never trained on)",
    )
    experiment = object_schema(
        {
            "dataset": {"enum": DATASETS.names(), "description": "dataset registry name"},
            "partitioner": {
                "enum": PARTITIONERS.names(),
                "description": "how clients are formed (default: the dataset's)",
            },
            "targets": {"oneOf": [{"const": "all"}, name_list], "description": "target domains, or 'all'"},
            "methods": {**name_list, "description": "method variants (keys of `methods`) or registered methods"},
            "seeds": seeds,
            "partition": {
                "type": "object",
                "description": "partitioner options; unset keys take the dataset's defaults",
            },
            "dataset_options": {
                "type": "object",
                "description": "dataset options for this experiment (over `datasets.<name>`)",
            },
            "published": {
                "type": "string",
                "description": "key of the published numbers this experiment reproduces (paper_vs_ours)",
            },
            "method_options": {
                "type": "object",
                "propertyNames": {"pattern": NAME_PATTERN},
                "additionalProperties": {"type": "object"},
                "description": "per-method hyper-parameters of this experiment, over the variant's (e.g. a dataset's "
                "published auto-weighting settings)",
            },
            "train": train,
            "resources": resources,
            "validation": {**validation, "description": "the experiment's validation (replaces the suite's)"},
        },
        required=["dataset"],
    )
    table = object_schema(
        {
            "experiments": {**name_list, "description": "experiments of this suite shown in the table"},
            "title": {"type": "string"},
            "metrics": {
                "type": "array",
                "items": {"enum": list(METRICS)},
                "minItems": 1,
                "uniqueItems": True,
                "description": "metrics shown (default: each cell's primary metric)",
            },
        },
        required=["experiments"],
    )
    roles = {"type": "object", "propertyNames": {"enum": list(ROLES)}, "additionalProperties": _name("a method")}
    theory_check = object_schema(
        {
            "experiment": _name("an experiment of this suite on synthetic_regression"),
            "roles": {**roles, "description": "method variant playing each rule (default: the rule's own name)"},
            **copy.deepcopy(THEORY_CHECK_SETTINGS),
            "title": {"type": "string"},
        },
        required=["experiment"],
    )
    figure = object_schema(
        {
            "kind": {
                "enum": ["shift", "beta", "alpha"],
                "description": "shift: final metric against the level in the target name; beta / alpha: final metric "
                "against the hyper-parameter β / α",
            },
            "experiments": {**name_list, "description": "experiments of this suite in the figure"},
            "title": {"type": "string"},
        },
        required=["kind", "experiments"],
    )
    suite = object_schema(
        {
            "extends": _name(
                "a suite this one extends: its settings, with only what this suite gives changed (lists replace, "
                "mappings merge; given experiments narrow the parent's); fdabench.config.extends"
            ),
            "seeds": seeds,
            "methods": {**name_list, "description": "default methods of the suite's experiments"},
            "train": train,
            "resources": {**resources, "description": "default resources of the suite's training jobs"},
            "experiments": {
                "type": "object",
                "propertyNames": {"pattern": NAME_PATTERN},
                "additionalProperties": experiment,
                "minProperties": 1,
            },
            "tables": {"type": "object", "propertyNames": {"pattern": NAME_PATTERN}, "additionalProperties": table},
            "theory_checks": {
                "type": "object",
                "propertyNames": {"pattern": NAME_PATTERN},
                "additionalProperties": theory_check,
            },
            "figures": {"type": "object", "propertyNames": {"pattern": NAME_PATTERN}, "additionalProperties": figure},
            "validation": validation,
            "sweep": object_schema(
                copy.deepcopy(SWEEP_SETTINGS),
                description="a hyper-parameter sweep: each swept method runs once per draw (`<method>.draw<k>`); "
                "per-rule tables results/<suite>/sweep_<rule>.* (docs: Comparing rules fairly)",
            ),
        },
        required=["experiments"],
    )
    dataset_options = {
        name: object_schema(copy.deepcopy(source.options_schema), description=f"options of {name}")
        for name, source in DATASETS.items()
    }
    method_variant = {
        "type": "object",
        "properties": {
            "algorithm": {"enum": METHODS.names(), "description": "registered method (default: the variant's name)"},
            "by_target": {
                "type": "object",
                "propertyNames": {"pattern": NAME_PATTERN},
                "additionalProperties": {"type": "object"},
                "description": "per-target hyper-parameters over the variant's (e.g. a published per-domain lr decay)",
            },
        },
        "description": "hyper-parameters of the algorithm (checked against its own schema)",
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "fdabench params.yaml",
        **object_schema(
            {
                "suite": _name("the suite that snakemake and dvc build"),
                **copy.deepcopy(TOP_LEVEL_SETTINGS),
                "gpus": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 0},
                    "minItems": 1,
                    "uniqueItems": True,
                    "description": "CUDA devices (as nvidia-smi numbers them) training cells are spread over, "
                    "round-robin; `snakemake --resources gpu_<index>=K` runs K cells on each at once (one machine; "
                    "not with a cluster profile)",
                },
                "limits": object_schema(
                    {
                        name: {
                            "type": "integer",
                            "minimum": 1,
                            "default": limit,
                            "description": f"refuse more {name} than this; raise it to confirm a run that large",
                        }
                        for name, limit in DEFAULT_LIMITS.items()
                    },
                    description="sizes refused unless confirmed here: rounds of a cell (warm-up included), cells of "
                    "a suite",
                ),
                "dvc": object_schema(
                    {
                        "suites": {
                            "type": "array",
                            "items": _name("a suite"),
                            "minItems": 1,
                            "uniqueItems": True,
                            "description": "the suites dvc.yaml builds (one cells@/report@/metrics stage each)",
                        }
                    },
                    description="what `dvc repro` builds",
                ),
                "data": object_schema(copy.deepcopy(DATA_SETTINGS)),
                "datasets": object_schema(
                    dataset_options, description="per-dataset options; unset keys take the dataset's defaults"
                ),
                "methods": {
                    "type": "object",
                    "propertyNames": {"pattern": NAME_PATTERN},
                    "additionalProperties": method_variant,
                },
                "suites": {
                    "type": "object",
                    "propertyNames": {"pattern": NAME_PATTERN},
                    "additionalProperties": suite,
                    "minProperties": 1,
                },
            },
            required=["suite", "suites"],
        ),
    }


#: keys whose values are registered names, and their registry's family (an unknown one's error says the fix)
REGISTERED_KEYS = {"dataset": "dataset", "partitioner": "partitioner", "model": "model", "algorithm": "method"}


def place(parts) -> str:
    """A key path for a message: keys joined by '.', list indices in brackets; a key that is not plain printable text
    (a newline, a control character, spaces around it) quoted, so that a message stays one line per problem."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
            continue
        part = str(part)
        shown = part if part and part.isprintable() and part.strip() == part else repr(part)
        text += f".{shown}" if text else shown
    return text or "(top level)"


def _format_schema_error(error, prefix: tuple = ()) -> str:
    where = place([*prefix, *error.absolute_path])
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        unexpected = sorted(set(error.instance) - set(allowed)) if isinstance(error.instance, dict) else []
        hint = did_you_mean(unexpected[0], allowed) if unexpected else ""
        return (
            f"{where}: unknown key(s) {', '.join(map(repr, unexpected))}; "
            f"allowed keys: {', '.join(allowed) or '(none)'}{hint}"
        )
    allowed_values = ", ".join(map(str, error.validator_value)) if error.validator == "enum" else ""
    if error.validator == "enum" and not isinstance(error.instance, str):  # a name is a string: no hint to give
        return f"{where}: {error.instance!r} has the wrong type; expected one of {allowed_values}"
    if error.validator == "enum":
        message = (
            f"{where}: {error.instance!r} is not allowed; allowed values: {', '.join(map(str, error.validator_value))}"
            f"{did_you_mean(error.instance, error.validator_value)}"
        )
        family = REGISTERED_KEYS.get(error.absolute_path[-1] if error.absolute_path else None)
        registry = {"dataset": DATASETS, "partitioner": PARTITIONERS, "model": MODELS, "method": METHODS}.get(family)
        return f"{message}\n    {unknown_name_hint(registry, error.instance)}" if registry else message
    if error.validator == "pattern" and error.validator_value == SAFE_PATH_PATTERN:
        return f"{where}: path {error.instance!r} is not allowed ({SAFE_PATH_RULE}); choose another folder"
    if error.validator == "pattern" or (error.validator == "propertyNames"):
        return f"{where}: name {error.instance!r} is not allowed ({NAME_RULE})"
    if error.validator == "type":
        return f"{where}: {error.instance!r} has the wrong type; expected {error.validator_value}"
    if error.validator == "maximum":
        names = [part for part in error.absolute_path if isinstance(part, str)]
        return f"{where}: {error.message}{bound_consumer(schema, names[-1] if names else '')}"
    if error.validator == "oneOf" and where.endswith("targets"):
        return f"{where}: {error.instance!r} must be 'all' or a list of target names ({NAME_RULE})"
    return f"{where}: {error.message}"


def schema_errors(instance: Any, schema: dict[str, Any], prefix: tuple = ()) -> list[str]:
    """Every violation of `schema` by `instance`, one readable line each (keys prefixed by `prefix`)."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path])
    return [_format_schema_error(error, prefix) for error in errors]


def violation_messages(problems: list[str]) -> str:
    """The message of a ParamsError: one line per problem (schema violation or failed check)."""
    return "invalid params:\n" + "\n".join(f"  - {problem}" for problem in problems)
