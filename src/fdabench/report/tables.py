"""Cells -> tidy tables (CSV, JSON) and the paper's layout (Markdown): methods x targets + Avg."""

from __future__ import annotations

import math
from typing import Any, Iterable

import pandas as pd

from fdabench.cells import read_cell

TIDY_COLUMNS = ["experiment", "dataset", "target", "method", "metric", "mean", "std", "n_seeds"]
AVERAGE = "Avg"


def cells_frame(paths: Iterable[str]) -> pd.DataFrame:
    """One row per cell: identity, metric and final value (in the order the paths are given)."""
    rows = []
    for path in paths:
        cell = read_cell(path)
        rows.append({**cell["cell"], "metric": cell["metric"], "final": cell["final"], "wall_seconds": cell.get("wall_seconds"),
                     "uses_unlabelled_target": bool(cell.get("uses_unlabelled_target", False))})
    if not rows:
        raise ValueError("no cells to tabulate")
    return pd.DataFrame(rows)


UNLABELLED_MARK = "†"


def unlabelled_target_methods(cells: pd.DataFrame) -> list[str]:
    """Methods whose cells trained on the target's unlabelled training inputs."""
    if "uses_unlabelled_target" not in cells:
        return []
    return list(dict.fromkeys(cells.loc[cells["uses_unlabelled_target"], "method"]))


def tidy_table(cells: pd.DataFrame) -> pd.DataFrame:
    """mean, sample std (ddof=1) and seed count per (experiment, target, method); plus an Avg target per
    (experiment, method): the mean over targets per seed, then mean and std over seeds."""
    keys = ["experiment", "dataset", "method", "metric"]
    per_target = (
        cells.groupby(keys + ["target"], sort=False)["final"]
        .agg(mean="mean", std="std", n_seeds="count")
        .reset_index()
    )
    per_seed_average = cells.groupby(keys + ["seed"], sort=False)["final"].mean().reset_index()
    complete_seeds = cells.groupby(keys + ["seed"], sort=False)["target"].nunique().reset_index(name="targets")
    targets_per_experiment = cells.groupby("experiment")["target"].nunique()
    complete_seeds = complete_seeds[complete_seeds["targets"] == complete_seeds["experiment"].map(targets_per_experiment)]
    per_seed_average = per_seed_average.merge(complete_seeds[keys + ["seed"]], on=keys + ["seed"])
    average = per_seed_average.groupby(keys, sort=False)["final"].agg(mean="mean", std="std", n_seeds="count").reset_index()
    average["target"] = AVERAGE
    tidy = pd.concat([per_target, average], ignore_index=True)
    order_targets = {t: i for i, t in enumerate(list(dict.fromkeys(cells["target"])) + [AVERAGE])}
    order_experiments = {e: i for i, e in enumerate(dict.fromkeys(cells["experiment"]))}
    order_methods = {m: i for i, m in enumerate(dict.fromkeys(cells["method"]))}
    tidy = tidy.sort_values(
        by=["experiment", "method", "target"],
        key=lambda column: column.map({"experiment": order_experiments, "method": order_methods, "target": order_targets}[column.name]),
    )
    return tidy[TIDY_COLUMNS].reset_index(drop=True)


def format_value(mean: float, std: float, metric: str) -> str:
    """Accuracy in percent with two decimals, "mean (std)"; other metrics with four significant digits."""
    if metric == "accuracy":
        text = f"{100 * mean:.2f}"
        return text if math.isnan(std) else f"{text} ({100 * std:.2f})"
    text = f"{mean:.4g}"
    return text if math.isnan(std) else f"{text} ({std:.2g})"


def markdown_table(tidy: pd.DataFrame, title: str | None = None, unlabelled_target: Iterable[str] = ()) -> str:
    """The paper's layout: one row per method; per experiment its targets then Avg; "mean (std)".
    Methods in `unlabelled_target` are marked † with a note (as the papers mark KD3A "100% data")."""
    unlabelled_target = set(unlabelled_target)
    experiments = list(dict.fromkeys(tidy["experiment"]))
    methods = list(dict.fromkeys(tidy["method"]))
    columns: list[tuple[str, str]] = []
    for experiment in experiments:
        targets = list(dict.fromkeys(tidy.loc[tidy["experiment"] == experiment, "target"]))
        columns += [(experiment, target) for target in targets]
    lookup = {(row.experiment, row.target, row.method): row for row in tidy.itertuples()}
    metrics = {exp: tidy.loc[tidy["experiment"] == exp, "metric"].iloc[0] for exp in experiments}
    header = ["Method"] + [f"{exp} {target}" if target != AVERAGE else f"{exp} {AVERAGE}" for exp, target in columns]
    lines = []
    if title:
        lines += [f"### {title}", ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + [":---:"] * len(columns)) + "|"]
    for method in methods:
        cells = []
        for exp, target in columns:
            row = lookup.get((exp, target, method))
            cells.append("–" if row is None else format_value(row.mean, row.std, row.metric))
        label = f"{method} {UNLABELLED_MARK}" if method in unlabelled_target else method
        lines.append("| " + " | ".join([label] + cells) + " |")
    seeds = sorted(set(tidy["n_seeds"]))
    notes = [
        "",
        "Cells: mean (sample std) over seeds of the final metric (mean of the last rounds of each run); "
        f"seeds per cell: {', '.join(map(str, seeds))}.",
    ]
    for exp in experiments:
        metric = metrics[exp]
        notes.append(f"{exp}: {'target test accuracy (%)' if metric == 'accuracy' else 'target test ' + metric + ' (lower is better)'}.")
    marked = [method for method in methods if method in unlabelled_target]
    if marked:
        notes.append(
            f"{UNLABELLED_MARK} {', '.join(marked)}: trains on the target's unlabelled training data (100% of its training "
            "inputs, labels unused), as the papers mark KD3A \"100% data\"; the other methods use only the target's "
            "labelled samples (oracle: all its training samples, labelled)."
        )
    return "\n".join(lines + notes) + "\n"


def table_json(tidy: pd.DataFrame) -> dict[str, Any]:
    """Nested {experiment: {method: {target: {mean, std, n_seeds}}}} for `dvc metrics`."""
    nested: dict[str, Any] = {}
    for row in tidy.itertuples():
        entry = {"mean": float(row.mean), "n_seeds": int(row.n_seeds)}
        if not math.isnan(row.std):
            entry["std"] = float(row.std)
        nested.setdefault(row.experiment, {}).setdefault(row.method, {})[row.target] = entry
    return nested
