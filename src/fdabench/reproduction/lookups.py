"""What the command line and the workflow hand the library from the published papers, so that the library never
imports them: the check of an experiment's `published:` key (`published_errors`, run with params validation by
`fdabench.jobs.validation`) and the published value a final-metric figure marks (`published_mark`, passed to
`fdabench.report.figures.draw_final` by `fdabench figure final`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fdabench.core.errors import did_you_mean
from fdabench.report.tables import AVERAGE
from fdabench.reproduction.papers.published import PUBLISHED, PUBLISHED_AVERAGES, method_key, published_value


def published_errors(raw: dict[str, Any]) -> list[str]:
    """Every experiment whose `published:` key names no published table, one line each (params with their suites
    expanded, as `fdabench.config.validate_params` checks them)."""
    problems = []
    for suite_name, suite in (raw.get("suites") or {}).items():
        for exp_name, exp in (suite.get("experiments") or {}).items():
            if isinstance(exp, dict) and "published" in exp and exp["published"] not in PUBLISHED:
                problems.append(
                    f"suites.{suite_name}.experiments.{exp_name}.published: unknown key {exp['published']!r}; "
                    f"allowed values: {', '.join(sorted(PUBLISHED))}{did_you_mean(exp['published'], PUBLISHED)}"
                )
    return problems


def published_mark(config: Mapping[str, Any], target: str) -> float | None:
    """The published value of a cell's row (its recorded configuration) at `target`, in %; at `AVERAGE` the
    published average over the targets; None where the cell reproduces no published table or its row has none."""
    key = config.get("published")
    if not key:
        return None
    if target == AVERAGE:
        return PUBLISHED_AVERAGES.get(key, {}).get(method_key(dict(config)))
    return published_value(key, target, dict(config))
