"""Run one cell: set it up (`fdabench.cell.setup`), train its method, and return the cell result
(`fdabench.cell.result`). The CLI only parses arguments and writes the result."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from fdabench import __version__
from fdabench.cell.fingerprint import CodeFingerprint
from fdabench.cell.plugin_fingerprint import cell_code, loaded_distributions
from fdabench.cell.result import cell_result
from fdabench.cell.setup import load_cell
from fdabench.core.io import canonical_json
from fdabench.federation.checkpoint import Checkpoints
from fdabench.federation.client import cpu_seconds
from fdabench.federation.records import primary_metric
from fdabench.federation.rounds import run_rounds
from fdabench.models import resolved_model_options

ProgressCallback = Callable[[dict[str, Any], int, str], None]  # (record, total rounds, the cell's metric)


def run_cell(
    config: dict[str, Any],
    prepared: str,
    partition: str,
    threads: int = 1,
    device: str | None = None,
    on_round: ProgressCallback | None = None,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 0,
    code: CodeFingerprint | None = None,
) -> dict[str, Any]:
    """Train the cell described by its resolved `config`; its result, ready to be written. `code` is the cell's
    code fingerprint, computed once per cell by the caller (default: `cell_code(config)`, plugins included). With
    a `checkpoint` path and `checkpoint_every` > 0, the round loop saves its state there every so many
    rounds and continue from it when rerun (the caller removes it once the result is written)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    started = time.perf_counter()
    torch.set_num_threads(threads)
    cell = load_cell(config, prepared, partition, device)
    if cell.device.type == "cuda":
        # CPU kernels are deterministic already; this call imports torch's compiler stack (~3 s), so it is
        # made only where it matters.
        torch.use_deterministic_algorithms(True)
    code = cell_code(config) if code is None else code
    checkpoints = None
    if checkpoint is not None and checkpoint_every > 0:
        identity = {
            "config": canonical_json(config),
            "code": code.digest,
            "device": str(cell.device),
            "threads": threads,
        }
        checkpoints = Checkpoints(Path(checkpoint), checkpoint_every, identity)
    train_started, train_cpu_started = time.perf_counter(), cpu_seconds()
    metric = primary_metric(cell.problem.task)
    progress = None if on_round is None else (lambda record, total: on_round(record, total, metric))
    history = run_rounds(
        cell.method,
        cell.problem,
        cell.settings,
        config["seed"],
        cell.device,
        on_round=progress,
        checkpoints=checkpoints,
    )
    train_seconds = time.perf_counter() - train_started
    train_cpu_seconds = cpu_seconds() - train_cpu_started
    settings = cell.settings
    return cell_result(
        config,
        history,
        settings.final_rounds,
        {
            "model": {
                "name": settings.model,
                "options": resolved_model_options(settings.model, settings.model_options),
            },
            "wall_seconds": time.perf_counter() - started,
            "train_seconds": train_seconds,
            "train_cpu_seconds": train_cpu_seconds,
            "device": str(cell.device),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),  # a GPU it was pinned to (params gpus)
            "threads": threads,
            "partition_hash": cell.partition_hash,
            "code": code.to_json(),
            "plugins": loaded_distributions(),  # the plugin distributions installed here
            "uses_unlabelled_target": cell.method.roles.unlabelled,
            "family": cell.method.family,
            "versions": {"fdabench": __version__, "torch": torch.__version__, "python": platform.python_version()},
        },
    )
