"""Hyper-parameter sweeps as ordinary cells, and the validation settings model selection reads.

A suite's `sweep` block turns each swept method of an experiment into one method variant per draw,
`<method>.draw<k>` (draw 0: the method's setting as configured; draws 1.. from the search spaces,
`fdabench.core.search`), and with k-fold target validation into one per fold as well (`.fold<f>`). Each is a cell
like any other: Snakemake schedules it, its resolved configuration and code decide when it reruns, DVC tracks it.
The trials are the experiment's seeds; by default each trial draws its own settings (`draw_scope: trial`,
DomainBed's trial-level search), or every trial shares them (`draw_scope: shared`). Draw k of a method does not
depend on how many draws the suite asks for, so adding draws or seeds adds cells and reruns none.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from fdabench.core import search
from fdabench.core.registry import schema_defaults
from fdabench.core.selection import RULES
from fdabench.federation.settings import TRAIN_SCHEMA
from fdabench.methods import METHODS

#: training settings that declare a search space (`fdabench.federation.settings.TRAIN_SCHEMA`)
SEARCHABLE_TRAIN = tuple(name for name, spec in TRAIN_SCHEMA.items() if "search" in spec)
_SPEC_OR_NULL = {"oneOf": [search.SEARCH_SPEC_SCHEMA, {"type": "null"}]}

#: params.yaml `suites.<suite>.validation` and `...experiments.<experiment>.validation` (the experiment's replaces
#: the suite's)
VALIDATION_SETTINGS: dict[str, Any] = {
    "target_holdout": {
        "type": "integer",
        "minimum": 1,
        "description": "hold-out target validation: this many of the target's labelled samples validate and are never "
        "trained on (drawn from the cell's seed)",
    },
    "target_folds": {
        "type": "integer",
        "minimum": 2,
        "description": "k-fold target validation: the labelled samples in k folds, each held out by one cell "
        "(`<method>.fold<f>`); selection averages the folds",
    },
}

#: params.yaml `suites.<suite>.sweep`
SWEEP_SETTINGS: dict[str, Any] = {
    "search": {
        "enum": ["random", "grid"],
        "default": "random",
        "description": "random: draws 1.. sampled per setting; grid: every combination of grid_points per setting",
    },
    "draws": {
        "type": "integer",
        "minimum": 1,
        "default": 8,
        "description": "random search: draws 0 .. draws-1 per method (draw 0: the configured setting)",
    },
    "draw_scope": {
        "enum": ["trial", "shared"],
        "default": "trial",
        "description": "random search: trial: draw k of trial t is a function of (experiment, method, k, t), so the "
        "spread over trials includes the search's luck (DomainBed's trial-level search); shared: every trial uses "
        "the same draw k, a function of (experiment, method, k)",
    },
    "grid_points": {
        "type": "integer",
        "minimum": 2,
        "default": 3,
        "description": "grid search: points per range (a choice's values are all taken)",
    },
    "methods": {
        "type": "array",
        "items": {"type": "string"},
        "minItems": 1,
        "uniqueItems": True,
        "description": "the experiments' methods that are swept (default: all); the others run once",
    },
    "train": {
        "type": "array",
        "items": {"enum": list(SEARCHABLE_TRAIN)},
        "uniqueItems": True,
        "default": [],
        "description": "training settings every swept method varies (each over its declared space)",
    },
    "spaces": {
        "type": "object",
        "additionalProperties": {"type": "object", "additionalProperties": _SPEC_OR_NULL},
        "default": {},
        "description": "per method: hyper-parameter -> search distribution over the declared one (null: not swept)",
    },
    "train_spaces": {
        "type": "object",
        "propertyNames": {"enum": list(TRAIN_SCHEMA)},
        "additionalProperties": search.SEARCH_SPEC_SCHEMA,
        "default": {},
        "description": "training setting -> search distribution over the declared one",
    },
    "rules": {
        "type": "array",
        "items": {"enum": list(RULES)},
        "minItems": 1,
        "uniqueItems": True,
        "default": list(RULES),
        "description": "the selection rules tabulated (results/<suite>/sweep_<rule>.*)",
    },
    "reference": {
        "type": "string",
        "description": "the method every other is compared with, paired over (target, trial) (default: the first "
        "swept method)",
    },
    "rope": {
        "type": "number",
        "minimum": 0,
        "default": 1.0,
        "description": "region of practical equivalence of the Bayesian comparison, in the table's unit (percentage "
        "points for accuracy and AUC): differences within it count as equivalent",
    },
    "min_validation": {
        "type": "integer",
        "minimum": 1,
        "default": 30,
        "description": "the tables warn where a rule selects on fewer target validation samples per cell than this",
    },
    "early_stopping": {
        "type": "boolean",
        "default": False,
        "description": "rules also pick the round (the best validation round; its test metric is reported); false: "
        "every draw is read at its final rounds",
    },
}
SWEEP_DEFAULTS = schema_defaults(SWEEP_SETTINGS)

_NAME = re.compile(r"^(?P<base>.+?)(?:\.draw(?P<draw>\d+))?(?:\.fold(?P<fold>\d+))?$")
#: a method variant name the sweep reserves (`<method>.draw<k>`, `<method>.fold<f>`)
RESERVED_NAME = re.compile(r"\.(draw|fold)\d+$")


def settings(suite: dict[str, Any]) -> dict[str, Any] | None:
    """The suite's sweep settings with their defaults, or None without a `sweep` block."""
    given = suite.get("sweep")
    return None if given is None else {**copy.deepcopy(SWEEP_DEFAULTS), **copy.deepcopy(given)}


def validation(suite: dict[str, Any], experiment: dict[str, Any]) -> dict[str, Any]:
    """The experiment's validation settings (its own, else the suite's; empty: no target validation)."""
    return copy.deepcopy(experiment.get("validation", suite.get("validation", {})))


def folds(suite: dict[str, Any], experiment: dict[str, Any]) -> int:
    return int(validation(suite, experiment).get("target_folds", 1))


def sweep_name(base: str, draw: int | None, fold: int | None) -> str:
    name = base if draw is None else f"{base}.draw{draw}"
    return name if fold is None else f"{name}.fold{fold}"


def parse_name(name: str) -> tuple[str, int | None, int | None]:
    """(method, draw, fold) of a variant name the sweep made; (name, None, None) for any other."""
    match = _NAME.match(name)
    draw, fold = match["draw"], match["fold"]
    return match["base"], None if draw is None else int(draw), None if fold is None else int(fold)


def swept_methods(suite: dict[str, Any], methods: list[str]) -> list[str]:
    """The methods of an experiment the suite's sweep varies."""
    sweep = settings(suite)
    if sweep is None:
        return []
    return [m for m in methods if m in sweep.get("methods", methods)]


def spaces(algorithm: str, method: str, sweep: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every swept setting of `method` (`hparams.<name>` and `train.<name>`) -> its search distribution: the
    algorithm's declared spaces and the sweep's `train` settings, with the sweep's overrides on top."""
    declared = {
        name: spec["search"] for name, spec in METHODS.get(algorithm).hparams_schema.items() if "search" in spec
    }
    for name, spec in sweep["spaces"].get(method, {}).items():
        declared.pop(name, None)
        if spec is not None:
            declared[name] = spec
    result = {f"hparams.{name}": spec for name, spec in declared.items()}
    for name in sweep["train"]:
        result[f"train.{name}"] = sweep["train_spaces"].get(name, TRAIN_SCHEMA[name]["search"])
    return result


def draw_count(sweep: dict[str, Any], method_spaces: dict[str, dict[str, Any]]) -> int:
    """Draws of a method: 1 where nothing varies; random: `draws`; grid: 1 + the grid's size."""
    if not method_spaces:
        return 1
    if sweep["search"] == "grid":
        return 1 + len(search.grid(method_spaces, sweep["grid_points"]))
    return sweep["draws"]


def trial_draws(sweep: dict[str, Any]) -> bool:
    """Whether each trial draws its own settings (random search with `draw_scope: trial`); a grid is every trial's."""
    return sweep["search"] == "random" and sweep["draw_scope"] == "trial"


def draw_values(
    experiment: str,
    method: str,
    draw: int,
    sweep: dict[str, Any],
    method_spaces: dict[str, dict[str, Any]],
    trial: int,
) -> dict[str, Any]:
    """Setting (`hparams.<name>`, `train.<name>`) -> value of draw `draw` of `method` in `experiment` and trial
    `trial` (draw 0: none, the configured setting)."""
    if draw == 0:
        return {}
    if sweep["search"] == "grid":
        return search.grid(method_spaces, sweep["grid_points"])[draw - 1]
    return search.random_draw(experiment, method, draw, method_spaces, trial if trial_draws(sweep) else None)


def sweep_record(method: str, draw: int, values: dict[str, Any], sweep: dict[str, Any]) -> dict[str, Any]:
    """A cell's `sweep` block: the method, the draw and its values, and `scope: trial` where the trial drew them
    (absent for shared draws, whose cells keep the configuration they had before trials drew their own)."""
    record = {"method": method, "draw": draw, "values": values}
    if values and trial_draws(sweep):
        record["scope"] = "trial"
    return record


def apply_draw(hparams: dict[str, Any], train: dict[str, Any], values: dict[str, Any]) -> None:
    """Put a draw's values into a cell's hyper-parameters and training settings (in place)."""
    for key, value in values.items():
        group, name = key.split(".", 1)
        (hparams if group == "hparams" else train)[name] = value
