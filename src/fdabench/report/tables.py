"""Cells -> tidy tables (CSV, JSON) and the paper's layout (Markdown): methods x targets + Avg."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterable
from typing import Any

import pandas as pd
from jinja2 import Environment
from markupsafe import Markup, escape

from fdabench.cell.reading import read_cells
from fdabench.cell.result import check_same_code, facts_row
from fdabench.core.metrics import METRIC_LABELS, PERCENT_METRICS
from fdabench.core.readers import read_bytes

TIDY_COLUMNS = ["experiment", "dataset", "target", "method", "metric", "mean", "std", "n_seeds"]
AVERAGE = "Avg"


def cells_frame(paths: Iterable[str], metrics: list[str] | None = None, allow_mixed_code: bool = False) -> pd.DataFrame:
    """One row per (cell, metric): identity, metric and final value (in the order the paths are given).
    `metrics` picks metrics from each cell's `finals` (default: the cell's primary metric). Cells that ran
    with different versions of shared code are refused unless `allow_mixed_code` (`check_same_code`)."""
    rows = []
    cells = read_cells(paths)
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
                    "validation": validation_note(cell.get("config", {}).get("validation", {})),
                }
            )
    if not rows:
        raise ValueError("no cells to tabulate")
    return pd.DataFrame(rows)


UNLABELLED_MARK = "†"


def validation_note(validation: dict[str, Any]) -> str:
    """What a cell's `validation` settings withhold from the target's training, in words ("" for nothing)."""
    if validation.get("target_folds"):
        return (
            f"{validation['target_folds']}-fold validation over the labelled target samples (each fold withheld once)"
        )
    if validation.get("target_holdout"):
        return f"{validation['target_holdout']} labelled target samples withheld for validation (never trained on)"
    return ""


def validation_notes(cells: pd.DataFrame) -> list[str]:
    """One note per experiment whose cells withheld labelled target samples for validation."""
    if "validation" not in cells:
        return []
    held = cells[cells["validation"] != ""].drop_duplicates(["experiment", "validation"])
    return [f"{row.experiment}: {row.validation}." for row in held.itertuples()]


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


#: what a cell of a table means, in its title line (the sweep's tables say theirs: fdabench.report.sweep.CONVENTION)
CONVENTION = "each cell: mean (sample sd) over seeds"


def table_caption(title: str | None) -> str:
    """A table's title line: its title, then `CONVENTION`."""
    return f"{title} — {CONVENTION}" if title else CONVENTION


def format_value(mean: float, std: float, metric: str) -> str:
    """Accuracy and AUC in percent with two decimals, "mean (std)"; other metrics with four significant digits."""
    if metric in PERCENT_METRICS:
        text = f"{100 * mean:.2f}"
        return text if math.isnan(std) else f"{text} ({100 * std:.2f})"
    text = f"{mean:.4g}"
    return text if math.isnan(std) else f"{text} ({std:.2g})"


def paper_layout(tidy: pd.DataFrame, unlabelled_target: Iterable[str] = ()) -> pd.DataFrame:
    """The paper's layout: one row per method (marked † when in `unlabelled_target`); per experiment its
    targets then Avg; "mean (std)" strings, "–" where a method did not run."""
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
    header = [
        f"{exp}{' ' + METRIC_LABELS.get(metric, metric) if several_metrics else ''} {target}"
        for exp, metric, target in columns
    ]
    body = []
    for method in methods:
        cells = []
        for exp, metric, target in columns:
            row = lookup.get((exp, metric, target, method))
            cells.append("–" if row is None else format_value(row.mean, row.std, row.metric))
        body.append(cells)
    index = [f"{method} {UNLABELLED_MARK}" if method in unlabelled_target else method for method in methods]
    return pd.DataFrame(body, index=pd.Index(index, name="Method"), columns=header)


def table_notes(tidy: pd.DataFrame, unlabelled_target: Iterable[str] = ()) -> list[str]:
    """What a table's cells mean: the statistic, the seeds, each experiment's metric, the † mark."""
    unlabelled_target = set(unlabelled_target)
    seeds = sorted(set(tidy["n_seeds"]))
    notes = [
        "Cells: mean (sample std) over seeds of the final metric (mean of the last rounds of each run); "
        f"seeds per cell: {', '.join(map(str, seeds))}."
    ]
    meaning = {
        "accuracy": "target test accuracy (%)",
        "auc": "target test ROC-AUC (%)",
        "mse": "target test mse (lower is better)",
        "loss": "target test loss (lower is better)",
    }
    for exp in dict.fromkeys(tidy["experiment"]):
        for metric in dict.fromkeys(tidy.loc[tidy["experiment"] == exp, "metric"]):
            notes.append(f"{exp}: {meaning.get(metric, metric)}.")
    marked = [method for method in dict.fromkeys(tidy["method"]) if method in unlabelled_target]
    if marked:
        notes.append(
            f"{UNLABELLED_MARK} {', '.join(marked)}: trains on the target's unlabelled training data (100% of its "
            f"training "
            'inputs, labels unused), as the papers mark KD3A "100% data"; the other methods use only the target\'s '
            "labelled samples (oracle: all its training samples, labelled)."
        )
    return notes + identical_rows_notes(tidy)


def identical_rows_notes(tidy: pd.DataFrame) -> list[str]:
    """One note per group of methods whose rows read the same in every column of the table (`format_value`, the
    same columns run): at the table's precision nothing tells them apart, which mostly means each predicts a
    constant (chance accuracy, one class) rather than that two rules agree."""
    rows: dict[str, tuple] = {}
    for method in dict.fromkeys(tidy["method"]):
        mine = tidy[tidy["method"] == method]
        rows[method] = tuple(
            sorted(
                (row.experiment, row.metric, row.target, format_value(row.mean, row.std, row.metric))
                for row in mine.itertuples()
            )
        )
    groups: dict[tuple, list[str]] = {}
    for method, row in rows.items():
        groups.setdefault(row, []).append(method)
    return [
        f"{', '.join(methods)}: the same value in every column ({len(row)}), at this precision; check whether they "
        "predict a constant (e.g. chance accuracy) before reading them as rules that agree."
        for row, methods in groups.items()
        if len(methods) > 1 and len(row) > 1
    ]


def markdown_table(
    tidy: pd.DataFrame, title: str | None = None, unlabelled_target: Iterable[str] = (), extra_notes: Iterable[str] = ()
) -> str:
    """`paper_layout` as a Markdown table under its title line (`table_caption`), then `table_notes` and `extra_notes`.
    Methods in `unlabelled_target` are marked † with a note (as the papers mark KD3A "100% data")."""
    layout = paper_layout(tidy, unlabelled_target)
    lines = [f"### {table_caption(title)}", ""]
    lines += [
        "| " + " | ".join(["Method", *layout.columns]) + " |",
        "|" + "|".join(["---"] + [":---:"] * len(layout.columns)) + "|",
    ]
    for method, cells in layout.iterrows():
        lines.append("| " + " | ".join([method, *cells]) + " |")
    return "\n".join(lines + ["", *table_notes(tidy, unlabelled_target), *extra_notes]) + "\n"


TABLE_STYLES = [
    {"selector": "", "props": "border-collapse: collapse; font: 13px sans-serif; margin-bottom: 14px;"},
    {"selector": "caption", "props": "font-weight: bold; text-align: left; padding-bottom: 6px;"},
    {"selector": "th, td", "props": "border: 1px solid #ccc; padding: 3px 7px; text-align: center;"},
    {"selector": "th.row_heading", "props": "text-align: left;"},
    {"selector": "thead th", "props": "background: #f2f2f2;"},
]


#: the page every HTML output is: Jinja2 with autoescaping, so any text (a title, a name, a note) reaches it escaped
PAGE = Environment(autoescape=True, keep_trailing_newline=True).from_string(
    '<!DOCTYPE html>\n<html>\n<head><meta charset="utf-8"></head>\n<body>\n'
    "{% for table in tables %}{{ table }}\n{% endfor %}"
    '{% for note in notes %}<p style="font: 12px sans-serif; color: #444;">{{ note }}</p>\n{% endfor %}'
    '{% for source, caption in figures %}<figure style="margin: 14px 0;"><img src="{{ source }}" alt="{{ caption }}" '
    'style="max-width: 100%;"><figcaption style="font: 12px sans-serif; color: #444;">{{ caption }}</figcaption>'
    "</figure>\n{% endfor %}"
    "</body>\n</html>\n"
)


def png_data_uri(path: str) -> str:
    """A PNG file as a data: URI, so a page shows it wherever the page is: the Snakemake report shows an HTML output
    from a data: URI of its own, where no path relative to the page's file resolves."""
    return "data:image/png;base64," + base64.b64encode(read_bytes(path, "a figure (PNG)")).decode("ascii")


def _escaped_names(index: pd.Index) -> list[str | None]:
    return [None if name is None else str(escape(name)) for name in index.names]


def html_fragment(frame: pd.DataFrame, caption: str | None, index: bool, position: int) -> Markup:
    """One table rendered by pandas' Styler with every text in it escaped (values, row and column labels and their
    names, the caption), so it enters `PAGE` as markup; its element ids numbered by `position` (pandas draws them at
    random otherwise), so the same table gives the same bytes."""
    frame = frame.copy(deep=False)
    frame.index = frame.index.set_names(_escaped_names(frame.index))
    frame.columns = frame.columns.set_names(_escaped_names(frame.columns))
    style = frame.style if index else frame.style.hide(axis="index")
    style = style.format(escape="html").format_index(escape="html", axis=0).format_index(escape="html", axis=1)
    html = style.set_uuid(f"table{position}").set_caption(escape(caption or "")).set_table_styles(TABLE_STYLES)
    return Markup(html.to_html())


def html_page(
    sections: Iterable[tuple[pd.DataFrame, str | None, bool]],
    notes: Iterable[str] = (),
    figures: Iterable[tuple[str, str]] = (),
) -> str:
    """Tables (frame, caption, whether to show the index), notes, then figures (PNG path, caption), each embedded
    (`png_data_uri`), as one standalone UTF-8 HTML page (`PAGE`, every text escaped): what the Snakemake report shows
    inline, and every HTML page fdabench writes."""
    tables = [
        html_fragment(frame, caption, index, position) for position, (frame, caption, index) in enumerate(sections)
    ]
    embedded = [(png_data_uri(path), caption) for path, caption in figures]
    return PAGE.render(tables=tables, notes=list(notes), figures=embedded)


IDENTITY_SETTINGS = ("suite", "experiment", "dataset", "method", "target", "seed")


def settings_split(configs: list[dict[str, Any]]) -> tuple[list[str], dict[str, str]]:
    """Resolved configurations as dotted settings (train.rounds=3): per configuration the settings that differ
    between them (or that only some have), '; '-joined, and the settings they all share (identity fields left
    out)."""
    flat = [
        {
            key: json.dumps(value, sort_keys=True)
            for key, value in pd.json_normalize(config).to_dict("records")[0].items()
        }
        for config in configs
    ]
    flat = [{key: value for key, value in row.items() if key not in IDENTITY_SETTINGS} for row in flat]
    keys = sorted({key for row in flat for key in row})
    varying = [key for key in keys if len({row.get(key) for row in flat}) > 1]
    shared = {key: flat[0][key] for key in keys if key not in varying}
    rows = ["; ".join(f"{key}={row[key]}" for key in varying if key in row) for row in flat]
    return rows, shared


def cells_html(paths: Iterable[str], title: str | None = None) -> str:
    """One row per cell (`facts_row`): what ran, where, for how long, with which code, and the settings that
    differ between the cells; the settings every cell shares below the table."""
    cells = list(read_cells(paths).values())
    frame = pd.DataFrame([facts_row(cell) for cell in cells])
    frame["settings (where cells differ)"], shared = settings_split([cell["config"] for cell in cells])
    notes = [
        "code: the cell's code fingerprint (fdabench.cell.fingerprint); the full resolved configuration is in each "
        "cell's result file (config) and in its report entry (job parameter cell).",
        "Settings every cell shares: " + "; ".join(f"{key}={value}" for key, value in shared.items()) + ".",
    ]
    return html_page([(frame, title, False)], notes)


def html_table(
    tidy: pd.DataFrame, title: str | None = None, unlabelled_target: Iterable[str] = (), extra_notes: Iterable[str] = ()
) -> str:
    """`paper_layout` under its title line (`table_caption`), `table_notes` and `extra_notes` as an HTML page."""
    notes = [*table_notes(tidy, unlabelled_target), *extra_notes]
    return html_page([(paper_layout(tidy, unlabelled_target), table_caption(title), True)], notes)


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
