"""Cells -> tidy tables (CSV, JSON) and the paper's layout (Markdown): methods x targets + Avg."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

from fdabench.cells import check_same_code, read_cell
from fdabench.paper.protocols import PROTOCOLS, changes_from_published
from fdabench.paper.published import PUBLISHED, PUBLISHED_AVERAGES, SOURCES, method_key, published_value

TIDY_COLUMNS = ["experiment", "dataset", "target", "method", "metric", "mean", "std", "n_seeds"]
AVERAGE = "Avg"


def cells_frame(paths: Iterable[str], metrics: list[str] | None = None, allow_mixed_code: bool = False) -> pd.DataFrame:
    """One row per (cell, metric): identity, metric and final value (in the order the paths are given).
    `metrics` picks metrics from each cell's `finals` (default: the cell's primary metric). Cells that ran
    with different versions of shared code are refused unless `allow_mixed_code` (`check_same_code`)."""
    rows = []
    cells = {str(path): read_cell(path) for path in paths}
    if not allow_mixed_code:
        check_same_code(cells)
    for path, cell in cells.items():
        finals = cell.get("finals", {cell["metric"]: cell["final"]})
        for metric in metrics or [cell["metric"]]:
            if metric not in finals:
                raise ValueError(f"{path}: no final {metric!r} (it has {', '.join(finals)})")
            rows.append(
                {
                    **cell["cell"],
                    "metric": metric,
                    "final": finals[metric],
                    "wall_seconds": cell.get("wall_seconds"),
                    "uses_unlabelled_target": bool(cell.get("uses_unlabelled_target", False)),
                }
            )
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
    cells = cells.dropna(subset=["final"])  # e.g. AUC on a test split with one class
    per_target = (
        cells.groupby(keys + ["target"], sort=False)["final"].agg(mean="mean", std="std", n_seeds="count").reset_index()
    )
    per_seed_average = cells.groupby(keys + ["seed"], sort=False)["final"].mean().reset_index()
    complete_seeds = cells.groupby(keys + ["seed"], sort=False)["target"].nunique().reset_index(name="targets")
    targets_per_experiment = cells.groupby("experiment")["target"].nunique()
    complete_seeds = complete_seeds[
        complete_seeds["targets"] == complete_seeds["experiment"].map(targets_per_experiment)
    ]
    per_seed_average = per_seed_average.merge(complete_seeds[keys + ["seed"]], on=keys + ["seed"])
    average = (
        per_seed_average.groupby(keys, sort=False)["final"].agg(mean="mean", std="std", n_seeds="count").reset_index()
    )
    average["target"] = AVERAGE
    tidy = pd.concat([per_target, average], ignore_index=True)
    order_targets = {t: i for i, t in enumerate(list(dict.fromkeys(cells["target"])) + [AVERAGE])}
    order_experiments = {e: i for i, e in enumerate(dict.fromkeys(cells["experiment"]))}
    order_methods = {m: i for i, m in enumerate(dict.fromkeys(cells["method"]))}
    order_metrics = {m: i for i, m in enumerate(dict.fromkeys(cells["metric"]))}
    orders = {
        "experiment": order_experiments,
        "method": order_methods,
        "target": order_targets,
        "metric": order_metrics,
    }
    tidy = tidy.sort_values(
        by=["experiment", "metric", "method", "target"], key=lambda column: column.map(orders[column.name])
    )
    return tidy[TIDY_COLUMNS].reset_index(drop=True)


def format_value(mean: float, std: float, metric: str) -> str:
    """Accuracy and AUC in percent with two decimals, "mean (std)"; other metrics with four significant digits."""
    if metric in ("accuracy", "auc"):
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
    several_metrics = tidy["metric"].nunique() > 1
    columns: list[tuple[str, str, str]] = []
    for experiment in experiments:
        for metric in dict.fromkeys(tidy.loc[tidy["experiment"] == experiment, "metric"]):
            rows = tidy[(tidy["experiment"] == experiment) & (tidy["metric"] == metric)]
            columns += [(experiment, metric, target) for target in dict.fromkeys(rows["target"])]
    lookup = {(row.experiment, row.metric, row.target, row.method): row for row in tidy.itertuples()}
    metric_label = {"accuracy": "ACC", "auc": "AUC", "mse": "MSE", "loss": "loss"}
    header = ["Method"] + [
        f"{exp}{' ' + metric_label.get(metric, metric) if several_metrics else ''} {target}"
        for exp, metric, target in columns
    ]
    lines = []
    if title:
        lines += [f"### {title}", ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + [":---:"] * len(columns)) + "|"]
    for method in methods:
        cells = []
        for exp, metric, target in columns:
            row = lookup.get((exp, metric, target, method))
            cells.append("–" if row is None else format_value(row.mean, row.std, row.metric))
        name = f"{method} {UNLABELLED_MARK}" if method in unlabelled_target else method
        lines.append("| " + " | ".join([name] + cells) + " |")
    seeds = sorted(set(tidy["n_seeds"]))
    notes = [
        "",
        "Cells: mean (sample std) over seeds of the final metric (mean of the last rounds of each run); "
        f"seeds per cell: {', '.join(map(str, seeds))}.",
    ]
    meaning = {
        "accuracy": "target test accuracy (%)",
        "auc": "target test ROC-AUC (%)",
        "mse": "target test mse (lower is better)",
        "loss": "target test loss (lower is better)",
    }
    for exp in experiments:
        for metric in dict.fromkeys(tidy.loc[tidy["experiment"] == exp, "metric"]):
            notes.append(f"{exp}: {meaning.get(metric, metric)}.")
    marked = [method for method in methods if method in unlabelled_target]
    if marked:
        notes.append(
            f"{UNLABELLED_MARK} {', '.join(marked)}: trains on the target's unlabelled training data (100% of its "
            f"training "
            'inputs, labels unused), as the papers mark KD3A "100% data"; the other methods use only the target\'s '
            "labelled samples (oracle: all its training samples, labelled)."
        )
    return "\n".join(lines + notes) + "\n"


def table_json(tidy: pd.DataFrame) -> dict[str, Any]:
    """Nested {experiment: {[metric:] method: {target: {mean, std, n_seeds}}}} for `dvc metrics`."""
    nested: dict[str, Any] = {}
    several_metrics = tidy["metric"].nunique() > 1
    for row in tidy.itertuples():
        entry = {"mean": float(row.mean), "n_seeds": int(row.n_seeds)}
        if not math.isnan(row.std):
            entry["std"] = float(row.std)
        branch = nested.setdefault(row.experiment, {})
        if several_metrics:
            branch = branch.setdefault(row.metric, {})
        branch.setdefault(row.method, {})[row.target] = entry
    return nested


def paper_vs_ours(paths: Iterable[str]) -> pd.DataFrame:
    """Every (experiment, target, method) with a published number: published, ours (mean, sample std over
    seeds, in %), seeds, the difference ours − published, and `changes`: where the runs' setting departs
    from the published one ('; '-separated, empty when it is the published setting)."""
    rows = []
    for path in paths:
        cell = read_cell(path)
        config = cell["config"]
        key = config.get("published")
        value = published_value(key, config["target"], config) if key else None
        if value is None:
            continue
        rows.append(
            {
                "published_table": key,
                "experiment": config["experiment"],
                "target": config["target"],
                "method": config["method"],
                "method_key": method_key(config),
                "seed": config["seed"],
                "ours": 100 * cell["final"],
                "published": value,
                "changes": "; ".join(changes_from_published(config, cell.get("model", {}).get("options"))),
            }
        )
    columns = [
        "published_table",
        "experiment",
        "target",
        "method",
        "method_key",
        "published",
        "ours_mean",
        "ours_std",
        "n_seeds",
        "difference",
        "changes",
    ]
    if not rows:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame(rows)
    frame = pd.concat([frame, _published_average_rows(frame)], ignore_index=True)
    grouped = frame.groupby(
        ["published_table", "experiment", "target", "method", "method_key", "published", "changes"], sort=False
    )["ours"]
    table = grouped.agg(ours_mean="mean", ours_std="std", n_seeds="count").reset_index()
    table["difference"] = table["ours_mean"] - table["published"]
    return table[columns]


def _published_average_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of target "Avg" for published averages: per seed, the mean over every target the published row
    covers (seeds missing a target are left out), as the published table averages its targets."""
    averages = []
    keys = ["published_table", "experiment", "method", "method_key", "changes"]
    for (table, experiment, method, key, changes), group in frame.groupby(keys, sort=False):
        value = PUBLISHED_AVERAGES.get(table, {}).get(key)
        if value is None:
            continue
        targets = {target for target, methods in PUBLISHED[table].items() if key in methods}
        for seed, runs in group.groupby("seed", sort=False):
            if set(runs["target"]) >= targets:
                averages.append(
                    {
                        "published_table": table,
                        "experiment": experiment,
                        "target": AVERAGE,
                        "method": method,
                        "method_key": key,
                        "seed": seed,
                        "ours": runs.loc[runs["target"].isin(targets), "ours"].mean(),
                        "published": value,
                        "changes": changes,
                    }
                )
    return pd.DataFrame(averages, columns=frame.columns)


WITHIN_POINTS = 3.0  # "within 3 points" of the published number (issue contract; seeds move FMNIST cells by ±3)


def paper_vs_ours_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per published table: its published rows (target x method key), how many of them this suite's cells
    matched, how many on the published settings (no change flagged), and how many of those are within
    WITHIN_POINTS of the published number."""
    rows = []
    for key in dict.fromkeys(table["published_table"]):
        ours = table[(table["published_table"] == key) & (table["target"] != AVERAGE)]
        faithful = ours[ours["changes"] == ""]
        rows.append(
            {
                "published_table": key,
                "source": SOURCES.get(key, ""),
                "published_rows": sum(len(methods) for methods in PUBLISHED.get(key, {}).values()),
                "matched": ours[["target", "method_key"]].drop_duplicates().shape[0],
                "matched_published_settings": faithful[["target", "method_key"]].drop_duplicates().shape[0],
                "within_3_points": faithful.loc[faithful["difference"].abs() <= WITHIN_POINTS, ["target", "method_key"]]
                .drop_duplicates()
                .shape[0],
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "published_table",
            "source",
            "published_rows",
            "matched",
            "matched_published_settings",
            "within_3_points",
        ],
    )


def paper_vs_ours_markdown(table: pd.DataFrame) -> str:
    lines = ["### Published vs ours (target test accuracy, %)", ""]
    if table.empty:
        return "\n".join(lines + ["No cell of this suite has a published number."]) + "\n"
    summary = paper_vs_ours_summary(table)
    lines += [
        "| published table | source | published rows | matched | on the published settings | within 3 points |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for row in summary.itertuples():
        lines.append(
            f"| {row.published_table} | {row.source} | {row.published_rows} | {row.matched} | "
            f"{row.matched_published_settings} | {row.within_3_points} |"
        )
    lines += [
        "",
        "Matched: published rows (target x method) that cells of this suite ran; on the published settings: matched by "
        "a "
        "row with no [k] mark; within 3 points: those whose mean over seeds is within 3 points of the published "
        "number.",
        "",
    ]
    lines += [
        "| published table | target | method | published | ours | seeds | difference |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    settings = list(dict.fromkeys(changes for changes in table["changes"] if changes))
    for row in table.itertuples():
        ours = f"{row.ours_mean:.2f}" + ("" if math.isnan(row.ours_std) else f" ± {row.ours_std:.2f}")
        mark = f" [{settings.index(row.changes) + 1}]" if row.changes else ""
        lines.append(
            f"| {row.published_table} | {row.target} | {row.method}{mark} | {row.published:.2f} | {ours} | "
            f"{row.n_seeds} | {row.difference:+.2f} |"
        )
    lines += ["", "Ours: mean ± sample std over seeds of each run's final metric (mean of its last rounds)."]
    if settings:
        lines += [
            "",
            "Rows marked [k] ran a setting other than the published protocol of their row "
            "(`fdabench.paper.protocols`), "
            "so their difference measures that change as well as any reproduction gap:",
        ]
        lines += [f"- [{k}] {changes}." for k, changes in enumerate(settings, start=1)]
    notes = _protocol_notes(list(dict.fromkeys(table["published_table"])))
    if notes:
        lines += ["", "Known differences from the published code that no setting expresses (every row of the table):"]
        lines += [f"- {key}: {note}." for key, note in notes]
    return "\n".join(lines) + "\n"


def _protocol_notes(keys: list[str]) -> list[tuple[str, str]]:
    return [(key, note) for key in keys if key in PROTOCOLS for note in PROTOCOLS[key].notes]
