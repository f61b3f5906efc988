"""Suites that extend another: `extends: <suite>` plus only what differs, expanded before validation.

    suites:
      nofilter:
        extends: demo
        seeds: [0, 1]                          # lists and values replace the parent's
        methods: [source_only, fedgp, fedgp_nofilter]
        experiments:                           # given: only these experiments, each merged over the parent's
          colored_digits: {targets: ["-90"]}
        train: {rounds: 8}                     # mappings merge key by key

The parent's tables, figures and theory checks keep the experiments that remain (one left with none is
dropped); the child's own `tables`, `figures` and `theory_checks` merge over them. The expanded suite is an
ordinary suite with its own folders (results/cells/<suite>/, results/<suite>/), so no parent result is
overwritten. A suite may extend a suite that extends another; a cycle is an error.
"""

from __future__ import annotations

import copy
from typing import Any

from fdabench.config.schema import violation_messages
from fdabench.core.errors import ParamsError

#: keys of a suite whose entries name experiments of the suite (trimmed to the experiments that remain)
PER_EXPERIMENT_VIEWS = ("tables", "figures")


def expand_suites(raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` with every suite that `extends` another replaced by its expansion (a copy; `raw` is unchanged)."""
    suites = raw.get("suites")
    if not isinstance(suites, dict) or not any(isinstance(s, dict) and "extends" in s for s in suites.values()):
        return raw
    expanded: dict[str, Any] = {}
    problems: list[str] = []
    for name in suites:
        _expand(name, suites, expanded, (), problems)
    if problems:
        raise ParamsError(violation_messages(problems))
    return {**raw, "suites": expanded}


def _expand(name: str, suites: dict[str, Any], expanded: dict[str, Any], chain: tuple[str, ...], problems: list[str]):
    if name in expanded:
        return expanded[name]
    suite = suites[name]
    parent_name = suite.get("extends") if isinstance(suite, dict) else None
    if parent_name is None:
        expanded[name] = suite
        return suite
    where = f"suites.{name}.extends"
    if not isinstance(parent_name, str) or parent_name not in suites:
        problems.append(f"{where}: unknown suite {parent_name!r}; allowed values: {', '.join(sorted(suites))}")
        expanded[name] = suite
        return suite
    if parent_name in (*chain, name):
        problems.append(f"{where}: suites extend each other in a cycle ({' -> '.join((*chain, name, parent_name))})")
        expanded[name] = suite
        return suite
    parent = _expand(parent_name, suites, expanded, (*chain, name), problems)
    expanded[name] = extend(parent, suite)
    return expanded[name]


def extend(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """The suite `child` (with `extends`) over `parent` (expanded), by the rules of the module docstring."""
    suite = copy.deepcopy(parent)
    suite.pop("extends", None)
    if "experiments" in child and isinstance(child["experiments"], dict):
        parents = parent.get("experiments") or {}
        suite["experiments"] = {
            name: deep_merge(parents.get(name, {}), own or {}) for name, own in child["experiments"].items()
        }
        kept = set(suite["experiments"])
        for view in PER_EXPERIMENT_VIEWS:
            trimmed = {
                name: {**entry, "experiments": [e for e in entry["experiments"] if e in kept]}
                for name, entry in (suite.get(view) or {}).items()
                if isinstance(entry, dict) and any(e in kept for e in entry.get("experiments", []))
            }
            _set_or_drop(suite, view, trimmed)
        checks = {
            name: check
            for name, check in (suite.get("theory_checks") or {}).items()
            if isinstance(check, dict) and check.get("experiment") in kept
        }
        _set_or_drop(suite, "theory_checks", checks)
    for key, value in child.items():
        if key != "experiments":
            suite[key] = deep_merge(suite.get(key), value)
    return suite


def _set_or_drop(suite: dict[str, Any], key: str, value: dict[str, Any]) -> None:
    if value:
        suite[key] = value
    else:
        suite.pop(key, None)


def deep_merge(base: Any, override: Any) -> Any:
    """Mappings merge key by key (recursively); anything else in `override` replaces `base` (a copy; neither is
    changed). The one merge of settings: a suite over the suite it extends, and params files layered over params.yaml
    (`fdabench.config.params.load_params`)."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = copy.deepcopy(base)
        for key, value in override.items():
            merged[key] = deep_merge(merged.get(key), value)
        return merged
    return copy.deepcopy(override)
