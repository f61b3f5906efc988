"""Published vs ours: every cell with a published number against it, per published table how many rows are
matched and on which settings, the largest gaps with their measured cause, and each method's average rank.

A row is "on the published settings" when its cells ran the row's recorded protocol (no change flagged) and
every setting of that record is read in the authors' code or the paper; a row whose record holds a setting
fdabench inferred is counted apart, with the inferred settings named (`fdabench.reproduction.papers.record`).

Cells rebuilt from the reproduction archive (`fdabench compare --archive`) whose code fingerprint differs from
today's code carry `archive.older_commit`: their rows are kept apart from the current cells' (never averaged with
them), marked "(older commit)", and a published row counts on them only where no current cell matches it
(`from_older_commit` in the summary).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import pandas as pd

from fdabench.cell.reading import read_cells
from fdabench.report.tables import AVERAGE, html_page
from fdabench.reproduction.papers.gaps import MEASURED_CAUSES, Reading
from fdabench.reproduction.papers.protocols import PROTOCOLS, changes_from_published, inferred_for
from fdabench.reproduction.papers.published import (
    NOT_COUNTED,
    PUBLISHED,
    PUBLISHED_AVERAGES,
    SOURCES,
    method_key,
    published_columns,
    published_value,
    row_tables,
)

WITHIN_POINTS = 3.0  # "within 3 points" of the published number (seeds move FMNIST cells by about ±3)
LARGEST_GAPS = 3  # per table, the gaps the summary names
FEWER_ROUNDS = 10  # a gap's cells are also read as runs with this many rounds fewer (their first rounds)
COLUMNS = [
    "published_table",
    "experiment",
    "target",
    "method",
    "method_key",
    "published",
    "ours_mean",
    "ours_std",
    "ours_min",
    "ours_max",
    "n_seeds",
    "difference",
    "ours_best_round",
    "ours_fewer_rounds",
    "ours_after_warmup",
    "ours_global_model",
    "changes",
    "inferred",
    "older_commit",
]
#: the summary's counts per published table, which the README block also sums over the tables
SUMMARY_COUNTS = [
    "published_rows",
    "matched",
    "on_published_settings",
    "on_inferred_settings",
    "within_3_points",
    "within_3_points_inferred",
]
SUMMARY_COLUMNS = ["published_table", "source", *SUMMARY_COUNTS, "from_older_commit"]
OLDER_COMMIT = " (older commit)"  # the mark of a row whose cells ran an older version of their code
NOT_COUNTED_MARK = " (not counted)"  # the mark of a row whose published value `NOT_COUNTED` leaves out
NOTHING_VARIED = "no setting varied yet"  # the measured cause of a gap with neither a marked variant nor a reading


def older_commit(cell: dict[str, Any]) -> bool:
    """Whether a cell rebuilt from the archive ran code that differs from today's (set by `fdabench compare
    --archive`; never for a cell file)."""
    return bool(cell.get("archive", {}).get("older_commit", False))


def paper_vs_ours(paths: Iterable[str]) -> pd.DataFrame:
    """`paper_vs_ours_of` the cell files at `paths`."""
    return paper_vs_ours_of(read_cells(paths).values())


def paper_vs_ours_of(cells: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Every (experiment, target, method) with a published number: published, ours (mean, sample std over
    seeds, in %), seeds, the difference ours − published, the mean over seeds of each run's best round (the
    statistic a reader may suspect behind a published number), the mean of the same runs' statistic at
    FEWER_ROUNDS rounds fewer (`fewer_rounds_final`), the mean of the model the FDA rounds start from
    (`after_warmup`), `changes`: where the runs' setting departs from
    the published one, and `inferred`: the settings of the row's record that fdabench inferred ('; '-separated,
    empty when none), and `older_commit` (`older_commit`). A cell is compared with every published column that prints
    its row (`published_columns`)."""
    rows = []
    for cell in cells:
        config = cell["config"]
        if not config.get("published"):
            continue
        for key, target in published_columns(config["published"], config["target"], method_key(config)):
            value = published_value(key, target, config)
            if value is None:
                continue
            as_published = {**config, "published": key}
            rows.append(
                {
                    "published_table": key,
                    "experiment": config["experiment"],
                    "target": target,
                    "method": config["method"],
                    "method_key": method_key(config),
                    "seed": config["seed"],
                    "ours": 100 * cell["final"],
                    **{name: statistic.of(cell) for name, statistic in RUN_STATISTICS.items()},
                    "published": value,
                    "changes": "; ".join(changes_from_published(as_published, cell.get("model", {}).get("options"))),
                    "inferred": "; ".join(inferred_for(as_published)),
                    "older_commit": older_commit(cell),
                }
            )
    if not rows:
        return pd.DataFrame(columns=COLUMNS)
    frame = pd.DataFrame(rows)
    frame = pd.concat([frame, _published_average_rows(frame)], ignore_index=True)
    keys = [
        "published_table",
        "experiment",
        "target",
        "method",
        "method_key",
        "published",
        "changes",
        "inferred",
        "older_commit",
    ]
    grouped = frame.groupby(keys, sort=False)
    table = (
        grouped["ours"]
        .agg(ours_mean="mean", ours_std="std", ours_min="min", ours_max="max", n_seeds="count")
        .reset_index()
    )
    for name, statistic in RUN_STATISTICS.items():
        skip = statistic.skip_missing
        table[f"ours_{name}"] = grouped[name].agg(lambda values, skip=skip: values.mean(skipna=skip)).to_numpy()
    table["difference"] = table["ours_mean"] - table["published"]
    return _in_published_order(table)[COLUMNS]


def best_round(cell: dict) -> float:
    """The best per-round value of the cell's metric, in %, over the phase its final comes from (the phase of its
    last logged round): the FDA rounds, never the warm-up; for Finetune_Offline the fine-tuning epochs, never the
    FedAvg rounds it starts from. NaN when no round was logged."""
    metric, higher = cell.get("metric", "accuracy"), cell.get("higher_is_better", True)
    logged = [record for record in cell.get("rounds", []) if metric in record]
    if not logged:
        return math.nan
    final_phase = logged[-1].get("phase")
    values = [record[metric] for record in logged if record.get("phase") == final_phase]
    return 100 * (max(values) if higher else min(values))


def fewer_rounds_final(cell: dict, fewer: int = FEWER_ROUNDS) -> float:
    """The cell's final metric had it run `fewer` rounds fewer, in %: the mean of its metric over the
    `final_rounds` rounds that end `fewer` rounds before its last. Nothing in a round depends on the round budget,
    so a shorter run is, bit for bit, the first rounds of a longer one (tests/federation/test_rounds.py). NaN
    where that reading does not hold: rounds outside the round loop's warm-up and FDA phases (a fine-tuning
    phase), a final that is not the mean of the last rounds' metric (a personalised evaluation), or too few
    FDA rounds."""
    metric, records, last = cell.get("metric", "accuracy"), cell.get("rounds", []), cell.get("final_rounds", 0)
    if not records or last < 1 or any(record.get("phase") not in ("warmup", "fda") for record in records):
        return math.nan
    values = [record.get(metric, math.nan) for record in records]
    if sum(record["phase"] == "fda" for record in records) < fewer + last:
        return math.nan
    if not math.isclose(sum(values[-last:]) / last, cell["final"], rel_tol=1e-9, abs_tol=1e-12):
        return math.nan
    return 100 * sum(values[-last - fewer : -fewer]) / last


def after_warmup(cell: dict) -> float:
    """The cell's metric at its last warm-up round, in %: the model its FDA rounds start from (with β = 1, FedGP
    moves it by the projected source term alone). NaN when no warm-up round logged the metric."""
    metric = cell.get("metric", "accuracy")
    rounds = cell.get("rounds", [])
    warmup = [record[metric] for record in rounds if record.get("phase") == "warmup" and metric in record]
    return 100 * warmup[-1] if warmup else math.nan


def global_model(cell: dict) -> float:
    """The global model's metric over the rounds the cell's final averages (its last `final_rounds` logged), in %:
    a personalised method logs it (`global_<metric>`) beside the metric of the target's personal model, the one its
    final reads. NaN where the cell logs none."""
    metric, last = cell.get("metric", "accuracy"), cell.get("final_rounds", 0)
    values = [record[f"global_{metric}"] for record in cell.get("rounds", []) if f"global_{metric}" in record]
    return 100 * sum(values[-last:]) / len(values[-last:]) if values and last > 0 else math.nan


class RunStatistic(NamedTuple):
    """A statistic of each run beside its final, averaged over the seeds (`ours_<name>`) and read beside a gap as
    `label` <value>; `within` names it where it comes within WITHIN_POINTS of the published number."""

    of: Callable[[dict], float]
    skip_missing: bool  # a seed without it is left out of the mean; else one missing makes the mean NaN
    label: str
    within: str


#: in the order a gap's measured cause reads them (`measured_cause`)
RUN_STATISTICS = {
    "after_warmup": RunStatistic(after_warmup, False, "after warm-up", "the warm-up model"),
    "best_round": RunStatistic(best_round, True, "best round", "the best round"),
    "fewer_rounds": RunStatistic(
        fewer_rounds_final, False, f"{FEWER_ROUNDS} rounds fewer", f"{FEWER_ROUNDS} rounds fewer"
    ),
    "global_model": RunStatistic(global_model, False, "global model", "the global model"),
}


def _in_published_order(table: pd.DataFrame) -> pd.DataFrame:
    """Rows by published table (in the order `SOURCES` lists them, unknown ones last as first seen), target (the
    published table's column order, Avg last), method."""
    seen = list(dict.fromkeys(table["published_table"]))
    order = list(SOURCES)
    tables = sorted(seen, key=lambda key: (order.index(key), 0) if key in order else (len(order), seen.index(key)))
    target_order = {
        (key, target): position for key in tables for position, target in enumerate([*PUBLISHED.get(key, {}), AVERAGE])
    }
    order = table.assign(
        _table=table["published_table"].map(tables.index),
        _target=[target_order.get(pair, len(target_order)) for pair in zip(table["published_table"], table["target"])],
    )
    return order.sort_values(["_table", "_target", "experiment", "method"], kind="stable").reset_index(drop=True)


def _published_targets(table: str, key: str) -> list[str]:
    """The targets (columns) of published table `table` that print a row for method key `key`."""
    return [target for target, methods in PUBLISHED.get(table, {}).items() if key in methods]


def _published_average_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of target "Avg" for published averages: per seed, the mean over every target the published row
    covers (seeds missing a target are left out), as the published table averages its targets."""
    averages = []
    keys = ["published_table", "experiment", "method", "method_key", "changes", "inferred", "older_commit"]
    for (table, experiment, method, key, changes, inferred, older), group in frame.groupby(keys, sort=False):
        value = PUBLISHED_AVERAGES.get(table, {}).get(key)
        if value is None:
            continue
        targets = set(_published_targets(table, key))
        for seed, runs in group.groupby("seed", sort=False):
            if set(runs["target"]) >= targets:
                covered = runs[runs["target"].isin(targets)]
                averages.append(
                    {
                        "published_table": table,
                        "experiment": experiment,
                        "target": AVERAGE,
                        "method": method,
                        "method_key": key,
                        "seed": seed,
                        "ours": covered["ours"].mean(),
                        **{name: covered[name].mean(skipna=stat.skip_missing) for name, stat in RUN_STATISTICS.items()},
                        "published": value,
                        "changes": changes,
                        "inferred": inferred,
                        "older_commit": older,
                    }
                )
    return pd.DataFrame(averages, columns=frame.columns)


def _rows_of(frame: pd.DataFrame) -> int:
    return frame[["target", "method_key"]].drop_duplicates().shape[0]


def paper_vs_ours_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per published table: its published rows (target x method key), the rows this suite's cells matched,
    those on the published settings (no change flagged, every recorded setting from the code or the paper),
    those on a record that holds an inferred setting, and how many of each are within WITHIN_POINTS, and the matched
    rows that rest on cells from an older commit only (a row that current cells match never counts those)."""
    rows = []
    row_keys = ["target", "method_key"]
    table = table[~_superseded(table) & ~_not_counted(table)]
    for key in dict.fromkeys(table["published_table"]):
        ours = table[(table["published_table"] == key) & (table["target"] != AVERAGE)]
        left_out = {method for table_key, method in NOT_COUNTED if table_key == key}
        unchanged = ours[ours["changes"] == ""]
        faithful, inferred = unchanged[unchanged["inferred"] == ""], unchanged[unchanged["inferred"] != ""]
        # a row matched on the published settings by one cell never counts again as resting on an inference
        inferred = inferred[~inferred.set_index(row_keys).index.isin(faithful.set_index(row_keys).index)]
        close = lambda frame: frame[frame["difference"].abs() <= WITHIN_POINTS]
        rows.append(
            {
                "published_table": key,
                "source": SOURCES.get(key, ""),
                "published_rows": sum(len(set(methods) - left_out) for methods in PUBLISHED.get(key, {}).values()),
                "matched": _rows_of(ours),
                "on_published_settings": _rows_of(faithful),
                "on_inferred_settings": _rows_of(inferred),
                "within_3_points": _rows_of(close(faithful)),
                "within_3_points_inferred": _rows_of(close(inferred)),
                "from_older_commit": _rows_of(ours[_older(ours)]),
            }
        )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def _not_counted(table: pd.DataFrame) -> pd.Series:
    """Whether each row's published value is one `NOT_COUNTED` leaves out of the counts."""
    pairs = zip(table["published_table"], table["method_key"], strict=True)
    return pd.Series([pair in NOT_COUNTED for pair in pairs], index=table.index, dtype=bool)


def _superseded(table: pd.DataFrame) -> pd.Series:
    """Whether each row is of cells from an older commit while current cells match the same published row."""
    keys = ["published_table", "target", "method_key"]
    older = _older(table)
    current = table[~older].set_index(keys).index
    return older & table.set_index(keys).index.isin(current)


def _older(table: pd.DataFrame) -> pd.Series:
    """Whether each row's cells ran an older commit (False for a table without the column)."""
    if "older_commit" not in table:
        return pd.Series(False, index=table.index)
    return table["older_commit"].astype(bool)


def largest_gaps(table: pd.DataFrame, count: int = LARGEST_GAPS) -> pd.DataFrame:
    """Per published table, the `count` rows on the published record (no change flagged) furthest from their
    published number and more than WITHIN_POINTS off, each with what its runs measured (`measured_cause`); a row of
    cells from an older commit only where no current cell matches its published row; never a `NOT_COUNTED` row."""
    ours = with_gap_causes(table)
    ours = ours[(ours["measured_cause"] != "") & (ours["target"] != AVERAGE) & ~_superseded(ours) & ~_not_counted(ours)]
    ours = ours.assign(gap=ours["difference"].abs()).sort_values(["published_table", "gap"], ascending=[True, False])
    picked = ours.groupby("published_table", sort=False).head(count)
    picked = picked.assign(older_commit=_older(picked))
    return picked.rename(columns={"measured_cause": "cause"})[
        ["published_table", "target", "method", "difference", "cause", "older_commit"]
    ]


def with_gap_causes(table: pd.DataFrame) -> pd.DataFrame:
    """`table` with the column `measured_cause`: for every row on its published record (no change flagged) more
    than WITHIN_POINTS off its published number, what its runs measured (`measured_cause`); empty elsewhere."""
    changes = _legend(table["changes"])
    causes = [
        measured_cause(table, row, changes) if row.changes == "" and abs(row.difference) > WITHIN_POINTS else ""
        for row in table.itertuples()
    ]
    return table.assign(measured_cause=causes)


def measured_cause(table: pd.DataFrame, row, changes: list[str]) -> str:
    """What the suite's runs measured about a gap, every number computed from its cells: the seeds' spread, the
    model after the warm-up rounds, the best round instead of the final rounds, the same runs read as runs of
    FEWER_ROUNDS rounds fewer, each marked variant of the same published row that ran (by experiment, with its [k]
    change), whether any of them comes within WITHIN_POINTS of the published number, then the recorded reading of
    those measurements (`fdabench.reproduction.papers.gaps`), or that no setting was varied."""
    variants = table[
        (table["published_table"] == row.published_table)
        & (table["target"] == row.target)
        & (table["method_key"] == row.method_key)
        & (table["changes"] != "")
        & (_older(table) == bool(getattr(row, "older_commit", False)))
    ]
    parts = []
    if not math.isnan(row.ours_std):
        within_sd = " (the gap is within one sd)" if abs(row.difference) <= row.ours_std else ""
        inside = " (the published value inside it)" if row.ours_min <= row.published <= row.ours_max else ""
        parts.append(
            f"seed sd {row.ours_std:.2f} over {row.n_seeds} seeds{within_sd}, seeds {row.ours_min:.2f} to "
            f"{row.ours_max:.2f}{inside}"
        )
    reached = []
    for name, statistic in RUN_STATISTICS.items():
        value = getattr(row, f"ours_{name}")
        if not math.isnan(value):
            parts.append(f"{statistic.label} {value:.2f}")
            reached.append((statistic.within, abs(value - row.published) <= WITHIN_POINTS))
    for variant in variants.itertuples():
        name = variant.experiment if variant.method == row.method else f"{variant.experiment}/{variant.method}"
        parts.append(f"{name} [{changes.index(variant.changes) + 1}] {variant.ours_mean:.2f}")
        reached.append((name, abs(variant.difference) <= WITHIN_POINTS))
    if reached:
        close = [name for name, within in reached if within]
        parts.append(f"within 3 points: {', '.join(close)}" if close else "none of these is within 3 points")
    # a row another table shares (ALSO_PUBLISHED_IN) has that table's reading
    causes = [(key, row.target, row.method_key) for key in row_tables(row.published_table)]
    reading = next((MEASURED_CAUSES[cause] for cause in causes if cause in MEASURED_CAUSES), None)
    if reading is None and row.target == AVERAGE:  # an average reads as its targets do, where they all read alike
        alike = {
            MEASURED_CAUSES.get((key, target, row.method_key))
            for key in row_tables(row.published_table)
            for target in _published_targets(key, row.method_key)
        }
        reading = alike.pop() if len(alike) == 1 else None
    if reading is None and (row.published_table, row.method_key) in NOT_COUNTED:
        reading = Reading((), f"not counted: {NOT_COUNTED[(row.published_table, row.method_key)]}")
    missing = [name for name in (reading.variants if reading else ()) if name not in set(variants["experiment"])]
    if missing:
        parts.append(f"not run yet: {', '.join(missing)}")
    text = reading.text if reading else ("" if not variants.empty else NOTHING_VARIED)
    return ". ".join(piece for piece in ("; ".join(parts), text) if piece)


def average_ranks(tidy: pd.DataFrame) -> pd.DataFrame:
    """DomainBed-style average rank: in every (experiment, target) column each method is ranked by its mean
    (1 = best, ties share the mean rank), and ranks are averaged over the columns a method ran in.
    `tidy` has one row per (experiment, target, method) with the column `mean`."""
    if tidy.empty:
        return pd.DataFrame(columns=["method", "average_rank", "columns"])
    ranked = tidy.assign(rank=tidy.groupby(["experiment", "target"])["mean"].rank(ascending=False, method="average"))
    ranks = ranked.groupby("method")["rank"].agg(average_rank="mean", columns="count").reset_index()
    return ranks.sort_values(["average_rank", "method"]).reset_index(drop=True)


def suite_means(paths: Iterable[str]) -> pd.DataFrame:
    """`suite_means_of` the cell files at `paths`."""
    return suite_means_of(read_cells(paths).values())


def suite_means_of(cells: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per (experiment, target, method) of the cells: the mean final metric over seeds, in %. Cells from an
    older commit count as a method of their own, "<method> (older commit)"."""
    records = []
    for cell in cells:
        config = cell["config"]
        records.append(
            {
                "experiment": config["experiment"],
                "target": config["target"],
                "method": config["method"] + (OLDER_COMMIT if older_commit(cell) else ""),
                "value": 100 * cell["final"],
            }
        )
    if not records:
        return pd.DataFrame(columns=["experiment", "target", "method", "mean"])
    frame = pd.DataFrame(records)
    return frame.groupby(["experiment", "target", "method"], sort=False)["value"].mean().rename("mean").reset_index()


PAPER_VS_OURS_TITLE = "Published vs ours (target test accuracy, %)"
MATCHED_NOTE = (
    "Matched: published rows (target x method) that cells of this suite ran. On the published settings: matched by a "
    "row with no [k] mark whose recorded settings all come from the authors' code or the paper. On inferred settings: "
    "matched by a row with no [k] mark whose record holds a setting fdabench inferred (the rows marked (i...)). Within "
    "3 points: those of each kind whose mean over seeds is within 3 points of the published number."
)


def _legend(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(value for value in values if value))


def paper_vs_ours_layout(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """`paper_vs_ours` for reading: the per-table summary, the rows (formatted; a method marked [k] ran the
    setting change k, one marked (ik) rests on the inferred settings ik) and the notes."""
    summary = paper_vs_ours_summary(table).rename(
        columns={
            "published_table": "published table",
            "published_rows": "published rows",
            "on_published_settings": "on the published settings",
            "on_inferred_settings": "on inferred settings",
            "within_3_points": "within 3 points",
            "within_3_points_inferred": "within 3 points (inferred)",
            "from_older_commit": "from an older commit",
        }
    )
    older = _older(table)
    if not older.any():
        summary = summary.drop(columns="from an older commit")
    changes, inferred = _legend(table["changes"]), _legend(table["inferred"])

    left_out = _not_counted(table)

    def marked(method: str, change: str, inference: str, old: bool = False, uncounted: bool = False) -> str:
        mark = f" [{changes.index(change) + 1}]" if change else ""
        mark += f" (i{inferred.index(inference) + 1})" if inference and not change else ""
        return method + mark + (OLDER_COMMIT if old else "") + (NOT_COUNTED_MARK if uncounted else "")

    rows = pd.DataFrame(
        {
            "published table": table["published_table"],
            "target": table["target"],
            "method": [
                marked(*values)
                for values in zip(table["method"], table["changes"], table["inferred"], older, left_out, strict=True)
            ],
            "published": [f"{value:.2f}" for value in table["published"]],
            "ours": [
                f"{mean:.2f}" + ("" if math.isnan(std) else f" ± {std:.2f}")
                for mean, std in zip(table["ours_mean"], table["ours_std"], strict=True)
            ],
            "seeds": table["n_seeds"].astype(str),
            "difference": [f"{value:+.2f}" for value in table["difference"]],
        }
    )
    notes = ["Ours: mean ± sample std over seeds of each run's final metric (mean of its last rounds)."]
    if older.any():
        notes.append(OLDER_COMMIT_NOTE)
    uncounted = dict.fromkeys(zip(table["published_table"][left_out], table["method_key"][left_out], strict=True))
    if uncounted:
        notes.append(f"Rows marked{NOT_COUNTED_MARK} are shown but left out of every count:")
        notes += [f"- {key} {method}: {NOT_COUNTED[(key, method)]}." for key, method in uncounted]
    if changes:
        notes.append(
            "Rows marked [k] ran a setting other than the published protocol of their row "
            "(`fdabench.reproduction.papers.protocols`), so their difference measures that change as well as any "
            "reproduction gap:"
        )
        notes += [f"- [{k}] {change}." for k, change in enumerate(changes, start=1)]
    if inferred:
        notes.append(
            "Rows marked (ik) ran their row's recorded protocol, but that record holds settings nothing public fixes; "
            "fdabench inferred them (value, and why):"
        )
        notes += [f"- (i{k}) {inference}." for k, inference in enumerate(inferred, start=1)]
    protocol_notes = _protocol_notes(list(dict.fromkeys(table["published_table"])))
    if protocol_notes:
        notes.append("Known differences from the published code that no setting expresses (every row of the table):")
        notes += [f"- {key}: {note}." for key, note in protocol_notes]
    return summary, rows, notes


OLDER_COMMIT_NOTE = (
    "Rows marked (older commit) come from archived cells whose code fingerprint differs from the code of this "
    "commit: they ran an older version of the code their result depends on. They are kept apart from the current "
    "cells' rows, and a published row counts on them only where no current cell matches it (the summary's column "
    "'from an older commit'). `fdabench archive export` lists them; rerunning them and `fdabench archive add` "
    "replaces them."
)


def _markdown_rows(frame: pd.DataFrame, alignments: list[str]) -> list[str]:
    return [
        "| " + " | ".join(frame.columns) + " |",
        "|" + "|".join(alignments) + "|",
        *("| " + " | ".join(str(value) for value in row) + " |" for row in frame.itertuples(index=False)),
    ]


def _gaps_for_reading(table: pd.DataFrame) -> pd.DataFrame:
    gaps = largest_gaps(table)
    return pd.DataFrame(
        {
            "published table": gaps["published_table"],
            "target": gaps["target"],
            "method": [
                method + (OLDER_COMMIT if old else "") for method, old in zip(gaps["method"], gaps["older_commit"])
            ],
            "difference": [f"{value:+.2f}" for value in gaps["difference"]],
            "measured cause": gaps["cause"],
        }
    )


def _ranks_for_reading(ranks: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "method": ranks["method"],
            "average rank": [f"{value:.2f}" for value in ranks["average_rank"]],
            "columns": ranks["columns"].astype(str),
        }
    )


EVERY_GAP_NOTE = (
    f"The {LARGEST_GAPS} largest per table; the CSV's `measured_cause` column gives it for every row on its published "
    "record more than 3 points off, averages included."
)
RANK_NOTE = (
    "Average rank (DomainBed style): in every column (experiment x target) of the suite's cells, methods are ranked by "
    "their mean (1 = best; ties share the mean rank); a method's ranks are averaged over the columns it ran in."
)


def paper_vs_ours_markdown(table: pd.DataFrame, ranks: pd.DataFrame | None = None) -> str:
    lines = [f"### {PAPER_VS_OURS_TITLE}", ""]
    if table.empty:
        return "\n".join(lines + ["No cell of this suite has a published number."]) + "\n"
    summary, rows, notes = paper_vs_ours_layout(table)
    lines += _markdown_rows(summary, ["---", "---", *["---:"] * (len(summary.columns) - 2)])
    lines += ["", MATCHED_NOTE, ""]
    gaps = _gaps_for_reading(table)
    if not gaps.empty:
        lines += ["#### Largest gaps (rows on their published record, more than 3 points off)", ""]
        lines += _markdown_rows(gaps, ["---", "---", "---", "---:", "---"]) + ["", EVERY_GAP_NOTE, ""]
    if ranks is not None and not ranks.empty:
        lines += ["#### Average rank over every table of the suite", "", RANK_NOTE, ""]
        lines += _markdown_rows(_ranks_for_reading(ranks), ["---", "---:", "---:"]) + [""]
    lines += ["#### Every row", ""]
    lines += _markdown_rows(rows, ["---", "---", "---", "---:", "---:", "---:", "---:"])
    for note in notes:  # a paragraph each, except list items, which follow their lead line
        lines += [note] if note.startswith("- ") else ["", note]
    return "\n".join(lines) + "\n"


def paper_vs_ours_html(table: pd.DataFrame, ranks: pd.DataFrame | None = None) -> str:
    if table.empty:
        return html_page([], ["No cell of this suite has a published number."])
    summary, rows, notes = paper_vs_ours_layout(table)
    sections = [(summary, PAPER_VS_OURS_TITLE, False)]
    gaps = _gaps_for_reading(table)
    if not gaps.empty:
        sections.append((gaps, "Largest gaps (rows on their published record, more than 3 points off)", False))
    if ranks is not None and not ranks.empty:
        sections.append((_ranks_for_reading(ranks), "Average rank over every table of the suite", False))
    sections.append((rows, "Every row", False))
    every_gap = [EVERY_GAP_NOTE] if not gaps.empty else []
    return html_page(sections, [MATCHED_NOTE, *every_gap, RANK_NOTE, *notes])


def _protocol_notes(keys: list[str]) -> list[tuple[str, str]]:
    return [(key, note) for key in keys if key in PROTOCOLS for note in PROTOCOLS[key].notes]


STATUS_BEGIN = "<!-- reproduction-status: generated by `fdabench compare --readme`; do not edit by hand -->"
STATUS_END = "<!-- end of reproduction-status -->"


def status_table(summary: pd.DataFrame, suite: str) -> str:
    """The README's reproduction status: one line per published table of the summary, counts as computed, their
    sum over the tables, and the share of the rows on the published settings within WITHIN_POINTS."""
    lines = [
        f"Suite `{suite}` (`results/{suite}/paper_vs_ours.md`):",
        "",
        "| published table | published rows | matched | on the published settings (within 3 points) | on inferred "
        "settings (within 3 points) |",
        "|---|---:|---:|---:|---:|",
    ]
    line = lambda name, row: (
        f"| {name} | {row['published_rows']} | {row['matched']} | {row['on_published_settings']} "
        f"({row['within_3_points']}) | {row['on_inferred_settings']} ({row['within_3_points_inferred']}) |"
    )
    for _, row in summary.iterrows():
        lines.append(line(row["source"] or row["published_table"], row))
    total = summary[SUMMARY_COUNTS].sum()
    if len(summary) > 1:
        lines.append(line("all tables", total))
    if total["on_published_settings"]:
        share = total["within_3_points"] / total["on_published_settings"]
        lines += [
            "",
            f"On the published settings, {total['within_3_points']} of {total['on_published_settings']} matched rows "
            f"are within {WITHIN_POINTS:g} points ({share:.0%}).",
        ]
    older = [
        f"{row.source or row.published_table} {row.from_older_commit}"
        for row in summary.itertuples(index=False)
        if getattr(row, "from_older_commit", 0)
    ]
    if older:
        lines += [
            "",
            "Matched rows resting on archived cells from an older commit (marked in the page): "
            + "; ".join(older)
            + ".",
        ]
    return "\n".join(lines)


def replace_status(readme: str, block: str) -> str:
    """`readme` with the text between the status markers replaced by `block` (markers kept)."""
    if STATUS_BEGIN not in readme or STATUS_END not in readme:
        raise ValueError(f"the README has no reproduction-status markers ({STATUS_BEGIN!r} ... {STATUS_END!r})")
    head, rest = readme.split(STATUS_BEGIN, 1)
    _, tail = rest.split(STATUS_END, 1)
    return f"{head}{STATUS_BEGIN}\n{block}\n{STATUS_END}{tail}"


def compare_texts(
    cells: Iterable[dict[str, Any]], suite: str | None = None, readme: str | None = None
) -> dict[str, str]:
    """What `fdabench compare` writes, as text: `csv` (every row, with its measured cause), `md`, `html`, `summary`
    (the per-table summary, CSV) and, given the text of a `readme`, `readme` with its status block for `suite`."""
    cells = list(cells)
    table = paper_vs_ours_of(cells)
    ranks = average_ranks(suite_means_of(cells))
    summary = paper_vs_ours_summary(table)
    texts = {
        "csv": with_gap_causes(table).to_csv(index=False, float_format="%.4g"),
        "md": paper_vs_ours_markdown(table, ranks),
        "html": paper_vs_ours_html(table, ranks),
        "summary": summary.to_csv(index=False),
    }
    if readme is not None:
        if not suite:
            raise ValueError("the README's status block needs the suite the cells belong to")
        texts["readme"] = replace_status(readme, status_table(summary, suite))
    return texts
