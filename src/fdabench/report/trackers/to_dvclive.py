"""Runs -> one DVCLive folder per suite, which dvc.yaml's `report` stage declares as its metrics and plots:
- metrics.json: every cell's final metrics, nested by its name (`{experiment: {method: {target: {seed<N>: {final:
  {<metric>: value}}}}}}`), and `step`, the last round of any cell: the values `dvc exp show` lists;
- plots/metrics/<experiment>/<method>/<target>/seed<N>/<series>.tsv: step (the round), value per round: the curves
  `dvc plots show` draws.

Written with DVCLive's `Live` as a step of a DVC stage: it saves no experiment (`save_dvc_exp=False`: `dvc exp run`
does) and leaves dvc.yaml alone (`dvcyaml=False`: the stage declares the files). DVCLive is a dependency of
fdabench, not an extra, since the pipeline's report writes this folder."""

from __future__ import annotations

from pathlib import Path

from dvclive import Live

from fdabench.core.staging import atomic_folder
from fdabench.report.trackers import TrackedRun


def write_dvclive(runs: list[TrackedRun], folder: str | Path) -> int:
    """The DVCLive folder of `runs`, replacing `folder` as a whole; the number of series written."""
    written = 0
    with (
        atomic_folder(folder) as partial,
        Live(dir=str(partial), save_dvc_exp=False, dvcyaml=False, report=None) as live,
    ):
        for run in runs:
            for name, points in run.series.items():
                for round_, value in points:
                    live.step = round_
                    live.log_metric(f"{run.name}/{name}", value)
                written += 1
            live.summary = {}  # log_metric copies the whole summary each call: kept small, it costs nothing
        summary: dict = {}
        for run in runs:
            place = summary
            for part in run.name.split("/"):
                place = place.setdefault(part, {})
            place.update({"final": {name.removeprefix("final/"): value for name, value in run.finals.items()}})
        live.summary = summary  # the finals only, not each series' last value
        live.step = max(run.last_round for run in runs)
    return written
