"""Cells -> the tidy per-round files `dvc plots` draws with its built-in templates (dvc.yaml `report` stage).

DVC's templates draw one line per file and revision from one x and one y column, so every series is its own
small CSV, and `dvc plots diff` overlays the same series of two revisions or experiments:
- rounds/<experiment>/<method>.csv: round, target_test_metric (the mean over the experiment's targets and
  seeds; accuracy in %);
- betas/<experiment>/<method>/<source>.csv: round, beta (auto-weighted methods; the mean over the targets
  for which that client is a source, and over seeds)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from fdabench.core.staging import atomic_folder
from fdabench.report.figures import betas_frame, rounds_frame

ROUNDS_COLUMNS = ["round", "target_test_metric"]
BETAS_COLUMNS = ["round", "beta"]


def _series(frame: pd.DataFrame, keys: list[str], column: str) -> dict[str, list[tuple[int, float]]]:
    """'<key values joined by />' -> (round, mean of `column` over the frame's other rows) per round."""
    means = frame.groupby([*keys, "round"], sort=False)[column].mean()
    series: dict[str, list[tuple[int, float]]] = {}
    for (*names, round_), value in means.items():
        series.setdefault("/".join(names), []).append((int(round_), float(value)))
    return series


def rounds_series(paths: Iterable[str]) -> dict[str, list[tuple[int, float]]]:
    """'<experiment>/<method>' -> (round, mean over targets and seeds of the target test metric) per round."""
    return _series(rounds_frame(paths), ["experiment", "method"], "value")


def betas_series(paths: Iterable[str]) -> dict[str, list[tuple[int, float]]]:
    """'<experiment>/<method>/<source>' -> (round, mean β over targets and seeds) per round."""
    frame = betas_frame(paths)
    return {} if frame.empty else _series(frame, ["experiment", "method", "source"], "beta")


def write_series(folder: str | Path, series: dict[str, list[tuple[int, float]]], columns: list[str]) -> None:
    """One CSV per series under `folder`, replacing the folder as a whole: the new files are written beside it
    and moved in at the end, so an interrupted write leaves the previous folder (or none), never a mixture."""
    with atomic_folder(folder) as partial:
        for name, rows in series.items():
            path = partial / f"{name}.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            lines = [",".join(columns)] + [f"{round_},{value:.6g}" for round_, value in sorted(rows)]
            path.write_text("\n".join(lines) + "\n")


def write_dvc_plots(paths: Iterable[str], rounds: str | Path, betas: str | Path) -> tuple[int, int]:
    """The rounds and betas folders of a suite's cells; (number of rounds files, number of betas files)."""
    paths = list(paths)
    round_series, beta_series = rounds_series(paths), betas_series(paths)
    write_series(rounds, round_series, ROUNDS_COLUMNS)
    write_series(betas, beta_series, BETAS_COLUMNS)
    return len(round_series), len(beta_series)
