"""Hyper-parameter search spaces and draws (DomainBed-style random search, and grid search).

A setting declares its search distribution next to its default, in its JSON-schema property:
`"search": {"log_uniform": [1e-4, 1e-1]}`, `{"uniform": [0, 1]}`, `{"int": [1, 5]}` (both ends included) or
`{"choice": [16, 32, 64]}`. Draw k of a setting in trial t is a pure function of (experiment, method, k, t,
setting) (trial-level search, DomainBed's: every trial draws afresh, so the spread over trials includes the
search's luck), or with shared draws of (experiment, method, k, setting) alone: the same value on any machine, in
any order, whatever else is swept; draw 0 is never drawn (it is the setting's default, or the published value).
Grid search enumerates the product of every swept setting's grid points.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

DISTRIBUTIONS = ("log_uniform", "uniform", "int", "choice")
#: JSON schema of one search specification (validated wherever a space is declared or overridden)
SEARCH_SPEC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "minProperties": 1,
    "maxProperties": 1,
    "properties": {
        "log_uniform": {
            "type": "array",
            "items": {"type": "number", "exclusiveMinimum": 0},
            "minItems": 2,
            "maxItems": 2,
        },
        "uniform": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
        "int": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
        "choice": {"type": "array", "minItems": 1, "uniqueItems": True},
    },
    "additionalProperties": False,
    "description": "a search distribution: {log_uniform: [low, high]}, {uniform: [low, high]}, {int: [low, high]} "
    "(both ends included) or {choice: [values]}",
}
#: significant digits kept of a drawn real value (readable cell configurations and tables; still a pure function)
DIGITS = 4


def spec_kind(spec: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """(distribution, its arguments) of a search specification."""
    ((kind, arguments),) = spec.items()
    return kind, list(arguments)


def spec_problem(spec: Any) -> str | None:
    """Why `spec` is not a usable search specification (beyond its schema: ordered bounds), or None."""
    if not isinstance(spec, Mapping) or len(spec) != 1 or next(iter(spec)) not in DISTRIBUTIONS:
        return f"{spec!r} is not a search distribution; use one of {', '.join(DISTRIBUTIONS)}"
    kind, arguments = spec_kind(spec)
    if kind == "choice":
        return None if arguments else "choice needs at least one value"
    if len(arguments) != 2 or not all(isinstance(a, int | float) and not isinstance(a, bool) for a in arguments):
        return f"{kind} needs [low, high], got {arguments!r}"
    low, high = arguments
    if kind == "int" and not all(isinstance(a, int) for a in arguments):
        return f"int needs integer bounds, got {arguments!r}"
    if kind == "log_uniform" and low <= 0:
        return f"log_uniform needs low > 0, got {low}"
    if low > high or (kind != "int" and low == high):
        return f"{kind} needs low < high, got [{low}, {high}]"
    return None


def draw_seed(experiment: str, method: str, draw: int, setting: str, trial: int | None = None) -> int:
    """The seed of one setting's value in one draw: a hash of (experiment, method, draw, setting), and of the
    trial where each trial draws its own (None: the draw every trial shares)."""
    parts = [experiment, method, str(int(draw)), setting]
    if trial is not None:
        parts.append(f"trial{int(trial)}")
    key = "\0".join(parts).encode("utf-8")
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "little")


def _rounded(value: float) -> float:
    return float(f"{value:.{DIGITS}g}")


def sample(spec: Mapping[str, Any], rng: np.random.Generator) -> Any:
    """One value of the distribution `spec`."""
    kind, arguments = spec_kind(spec)
    if kind == "choice":
        return arguments[int(rng.integers(len(arguments)))]
    low, high = arguments
    if kind == "int":
        return int(rng.integers(low, high + 1))
    if kind == "uniform":
        return _rounded(rng.uniform(low, high))
    return _rounded(math.exp(rng.uniform(math.log(low), math.log(high))))


def random_draw(
    experiment: str, method: str, draw: int, spaces: Mapping[str, Mapping[str, Any]], trial: int | None = None
) -> dict[str, Any]:
    """Draw `draw` (≥ 1) of every setting of `spaces` (setting -> specification), each from its own stream; of
    trial `trial`, or (None) the draw every trial shares."""
    if draw < 1:
        raise ValueError("draw 0 is the default setting; random draws start at 1")
    return {
        setting: sample(spec, np.random.default_rng(draw_seed(experiment, method, draw, setting, trial)))
        for setting, spec in sorted(spaces.items())
    }


def grid_points(spec: Mapping[str, Any], points: int) -> list[Any]:
    """The grid of one setting: a choice's values; `points` values spread evenly over a range (geometrically for
    log_uniform; an int range with at most `points` integers gives all of them)."""
    kind, arguments = spec_kind(spec)
    if kind == "choice":
        return arguments
    low, high = arguments
    if kind == "int":
        if high - low + 1 <= points:
            return list(range(low, high + 1))
        return sorted({int(round(v)) for v in np.linspace(low, high, points)})
    values = np.geomspace(low, high, points) if kind == "log_uniform" else np.linspace(low, high, points)
    return [_rounded(float(v)) for v in values]


def grid(spaces: Mapping[str, Mapping[str, Any]], points: int) -> list[dict[str, Any]]:
    """Every combination of the settings' grid points, settings in name order (grid draw k is element k − 1)."""
    names = sorted(spaces)
    axes = [grid_points(spaces[name], points) for name in names]
    return [dict(zip(names, combination)) for combination in itertools.product(*axes)]
