"""`fdabench bench gpu`: the stages in order within the budget (`budget.run_stages`), the JSON and its Markdown
written atomically after every stage (a run cut short keeps what it measured), and a dry run on the CPU."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import torch

from fdabench.config import Params
from fdabench.core.devices import cuda_available
from fdabench.core.io import write_json_atomic, write_text_atomic
from fdabench.speed.gpu import report, stages
from fdabench.speed.gpu.budget import Stage, run_stages

#: about 8 minutes: what a lent GPU machine's 10-minute command allows, with its start-up and the transfers
DEFAULT_BUDGET = 480.0
JSON_NAME, MARKDOWN_NAME = "bench_gpu.json", "bench_gpu.md"
#: (stage, share of the budget, minimum seconds to start it)
PLAN = (
    ("pytest", 0.20, 20.0),
    ("cells", 0.30, 30.0),
    ("packing", 0.25, 20.0),
    ("steps", 0.10, 10.0),
    ("agreement", 0.10, 10.0),
)


def default_stages(ctx: stages.Context, dry_run: bool) -> list[Stage]:
    functions = {
        "pytest": stages.pytest_stage,
        "cells": stages.cells_stage,
        "packing": stages.packing_stage,
        "steps": stages.steps_stage,
        "agreement": stages.agreement_stage,
    }
    # a dry run checks the code paths, not the time: its stages start whatever their minimum
    return [
        Stage(name, share, 0.0 if dry_run else minimum, partial(functions[name], ctx)) for name, share, minimum in PLAN
    ]


def write_outputs(directory: str | Path, result: dict[str, Any]) -> tuple[Path, Path]:
    """Validate `result` and write it as JSON and as Markdown into `directory`, each atomically."""
    report.validate_result(result)
    directory = Path(directory)
    json_path, markdown_path = directory / JSON_NAME, directory / MARKDOWN_NAME
    write_json_atomic(json_path, result)
    write_text_atomic(markdown_path, report.render_markdown(result))
    return json_path, markdown_path


def run_gpu_bench(
    params: Params,
    output_dir: str | Path,
    dry_run: bool = False,
    budget: float = DEFAULT_BUDGET,
    repo: str | Path = ".",
    make_stages: Callable[[stages.Context, bool], Sequence[Stage]] = default_stages,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Run every stage on the one CUDA device (or, dry, on the CPU at toy sizes) within `budget` seconds; the
    result, also written to `output_dir` after each stage."""
    if not dry_run and not cuda_available():
        raise ValueError("no CUDA device is visible: run on a GPU machine, or pass --dry-run to check on the CPU")
    device = torch.device("cpu" if dry_run else "cuda")
    if device.type == "cuda":  # as a training job on a GPU runs (fdabench.cell.run.run_cell)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
    repo = Path(repo).resolve()
    started = clock()
    result: dict[str, Any] = {
        "format": report.FORMAT,
        "dry_run": dry_run,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "budget_seconds": float(budget),
        "wall_seconds": 0.0,
        "environment": stages.environment(device, repo),
        "stages": {},
        "cohort_auto": report.cohort_decisions({}),
    }

    def record(records: dict[str, dict[str, Any]]) -> None:
        result["stages"] = {name: records.get(name, _pending()) for name in report.STAGES}
        result["wall_seconds"] = clock() - started
        result["cohort_auto"] = report.cohort_decisions(result["stages"])
        write_outputs(output_dir, result)

    with tempfile.TemporaryDirectory(prefix="fdabench-bench-gpu-") as work:
        sizes = stages.DRY_RUN if dry_run else stages.FULL
        ctx = stages.Context(params, device, sizes, repo, Path(work))
        run_stages(make_stages(ctx, dry_run), budget, clock, on_stage=record)
    return result


def _pending() -> dict[str, Any]:
    return {"status": "skipped", "seconds": 0.0, "allotted_seconds": 0.0, "reason": "not reached yet"}
