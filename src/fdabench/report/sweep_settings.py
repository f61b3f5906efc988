"""The settings a selection rule chose: per (method, target, trial) the values of the selected draw (not its
index), and per method the median and range of each chosen setting."""

from __future__ import annotations

import numbers
from typing import Any

import pandas as pd


def short_name(setting: str) -> str:
    """`hparams.beta` -> `beta`, `train.target_lr` -> `target_lr`: the setting's name without its group."""
    return setting.split(".", 1)[1]


def chosen_settings(selected: pd.DataFrame) -> pd.DataFrame:
    """One row per (experiment, method, target, trial, setting): the value of the selected draw (tidy)."""
    rows = [
        {
            "experiment": row.experiment,
            "method": row.method,
            "target": row.target,
            "trial": row.trial,
            "draw": row.draw,
            "setting": setting,
            "value": value,
        }
        for row in selected.itertuples()
        for setting, value in row.values.items()
    ]
    columns = ["experiment", "method", "target", "trial", "draw", "setting", "value"]
    return pd.DataFrame(rows, columns=columns)


def format_value(value: Any) -> str:
    if isinstance(value, numbers.Real) and not isinstance(value, bool | numbers.Integral):
        return f"{value:.4g}"
    return str(value)


def settings_text(values: dict[str, Any]) -> str:
    """`beta 0.41, target_lr 0.0069`; `–` where the method varies nothing."""
    return ", ".join(f"{short_name(s)} {format_value(v)}" for s, v in values.items()) or "–"


def chosen_table(selected: pd.DataFrame) -> pd.DataFrame:
    """Methods and targets x trials: each cell the chosen values (`settings_text`)."""
    several = selected["experiment"].nunique() > 1
    trials = sorted(selected["trial"].unique())
    body = {}
    for (experiment, method, target), group in selected.groupby(["experiment", "method", "target"], sort=False):
        by_trial = {row.trial: settings_text(row.values) for row in group.itertuples()}
        label = f"{method}, {experiment} {target}" if several else f"{method}, {target}"
        body[label] = [by_trial.get(trial, "–") for trial in trials]
    return pd.DataFrame.from_dict(body, orient="index", columns=[f"trial {trial}" for trial in trials])


def settings_summary(chosen: pd.DataFrame) -> pd.DataFrame:
    """Per (experiment, method, setting): the median and range of its chosen values over targets and trials (a
    setting with non-numeric values: each value and how often it was chosen)."""
    rows = []
    for (experiment, method, setting), group in chosen.groupby(["experiment", "method", "setting"], sort=False):
        values = group["value"]
        numeric = all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values)
        row = {"experiment": experiment, "method": method, "setting": setting, "chosen": len(values)}
        if numeric:
            row.update(median=float(values.median()), low=float(values.min()), high=float(values.max()), counts="")
        else:
            counts = values.astype(str).value_counts()
            row.update(median=None, low=None, high=None, counts=", ".join(f"{v} ({n})" for v, n in counts.items()))
        rows.append(row)
    columns = ["experiment", "method", "setting", "chosen", "median", "low", "high", "counts"]
    return pd.DataFrame(rows, columns=columns)


def summary_display(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary as display strings: Method x (setting, median, range)."""
    rows = []
    for row in summary.itertuples():
        numeric = row.median is not None and not pd.isna(row.median)
        rows.append(
            [
                row.method,
                short_name(row.setting),
                format_value(row.median) if numeric else "–",
                f"{format_value(row.low)} – {format_value(row.high)}" if numeric else row.counts,
            ]
        )
    frame = pd.DataFrame(rows, columns=["Method", "setting", "median", "range (values chosen)"])
    return frame.set_index("Method")
