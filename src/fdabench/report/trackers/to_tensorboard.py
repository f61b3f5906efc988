"""Runs -> a TensorBoard log folder: one subfolder per cell, named as the cell (<experiment>/<method>/<target>/
seed<N>), holding its series as scalars (step: the round) and its identity and final metrics in the HParams
dashboard. Written with PyTorch's `SummaryWriter`, which needs the tensorboard package (the `tensorboard` extra)."""

from __future__ import annotations

from pathlib import Path

from fdabench.core.staging import atomic_folder
from fdabench.report.trackers import TrackedRun, require

EXTRA = "tensorboard"


def write_tensorboard(runs: list[TrackedRun], folder: str | Path) -> int:
    """The log folder of `runs`, replacing `folder` as a whole (event files only grow, so a second export into the
    same folder would draw every point twice); the number of runs written."""
    summary = require("torch.utils.tensorboard", EXTRA, "fdabench export tensorboard")
    with atomic_folder(folder) as partial:
        for run in runs:
            with summary.SummaryWriter(log_dir=str(partial / run.name)) as writer:
                for name, points in run.series.items():
                    for round_, value in points:
                        writer.add_scalar(name, value, round_)
                # run_name "." puts the HParams summary and the final metrics in the cell's own run
                writer.add_hparams(dict(run.identity), dict(run.finals), run_name=".", global_step=run.last_round)
    return len(runs)
