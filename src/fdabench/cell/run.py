"""Run one cell: load its prepared data and partition, build the federated problem, train the method, and
return the cell result (format: `fdabench.cell.result`). The CLI only parses arguments and writes the result."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from fdabench import __version__
from fdabench.cell.fingerprint import cell_fingerprint
from fdabench.cell.result import summarise
from fdabench.core import devices
from fdabench.core.io import canonical_json, read_json
from fdabench.data import Partition, PreparedDataset
from fdabench.federation.checkpoint import Checkpoints
from fdabench.federation.initial_quantities import initial_quantities
from fdabench.federation.problem import FederatedProblem, build_problem
from fdabench.federation.records import primary_metric
from fdabench.federation.settings import TrainSettings
from fdabench.methods import get_method
from fdabench.models import resolved_model_options

ProgressCallback = Callable[[dict[str, Any], int, str], None]  # (record, total rounds, the cell's metric)


class CellInputError(ValueError):
    """The inputs given for a cell do not belong to it (e.g. another target's partition)."""


def resolve_device(name: str) -> torch.device:
    """auto = CUDA when available, else CPU (`fdabench.core.devices.uses_cuda`); cuda fails clearly where CUDA is
    absent."""
    if name == "auto":
        return torch.device("cuda" if devices.uses_cuda(name) else "cpu")
    if name == "cuda" and not devices.cuda_available():
        raise CellInputError("device: cuda was requested but CUDA is not available")
    return torch.device(name)


def load_problem(
    config: dict[str, Any], prepared: str, partition: str, device: torch.device
) -> tuple[FederatedProblem, str]:
    """The cell's federated problem and its partition's content hash."""
    payload = read_json(partition)
    split = Partition.from_json(payload)
    if (split.target, split.seed) != (config["target"], config["seed"]):
        raise CellInputError(f"partition {partition} is for target {split.target} seed {split.seed}, not this cell")
    data = PreparedDataset.load(prepared)
    if payload.get("prepared_hash") not in (None, data.content_hash):
        raise CellInputError(
            f"partition {partition} was made from other prepared data than {prepared} (prepared hash "
            f"{payload['prepared_hash']} vs {data.content_hash}); rerun its partition job (snakemake reruns it when "
            "the prepared data changes)"
        )
    return build_problem(data, split, device), payload["content_hash"]


def run_cell(
    config: dict[str, Any],
    prepared: str,
    partition: str,
    threads: int = 1,
    device: str | None = None,
    on_round: ProgressCallback | None = None,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 0,
) -> dict[str, Any]:
    """Train the cell described by its resolved `config`; its result, ready to be written. With a
    `checkpoint` path and `checkpoint_every` > 0, methods that resume save their state there every so many
    rounds and continue from it when rerun (the caller removes it once the result is written)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    started = time.perf_counter()
    torch.set_num_threads(threads)
    where = resolve_device(device or config.get("device", "auto"))
    if where.type == "cuda":
        # CPU kernels are deterministic already; this call imports torch's compiler stack (~3 s), so it is
        # made only where it matters.
        torch.use_deterministic_algorithms(True)
    problem, partition_hash = load_problem(config, prepared, partition, where)
    settings = TrainSettings.from_dict(config["train"])
    method = get_method(config["algorithm"], config["hparams"])
    code = cell_fingerprint(config)
    checkpoints = None
    if checkpoint is not None and checkpoint_every > 0 and method.resumes:
        identity = {"config": canonical_json(config), "code": code.digest, "device": str(where), "threads": threads}
        checkpoints = Checkpoints(Path(checkpoint), checkpoint_every, identity)
    train_started, train_cpu_started = time.perf_counter(), time.process_time()
    metric = primary_metric(problem.task)
    progress = None if on_round is None else (lambda record, total: on_round(record, total, metric))
    history = method.run(problem, settings, config["seed"], where, on_round=progress, checkpoints=checkpoints)
    train_seconds = time.perf_counter() - train_started
    train_cpu_seconds = time.process_time() - train_cpu_started
    result = summarise(config, history, settings.final_rounds)
    result.update(
        {
            "model": {
                "name": settings.model,
                "options": resolved_model_options(settings.model, settings.model_options),
            },
            "wall_seconds": time.perf_counter() - started,
            "train_seconds": train_seconds,
            "train_cpu_seconds": train_cpu_seconds,
            "device": str(where),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),  # a GPU it was pinned to (params gpus)
            "threads": threads,
            "partition_hash": partition_hash,
            "code": code.to_json(),
            "uses_unlabelled_target": method.uses_unlabelled_target,
            "family": method.family,
            "versions": {"fdabench": __version__, "torch": torch.__version__, "python": platform.python_version()},
        }
    )
    return result


def run_theory_init(
    config: dict[str, Any], prepared: str, partition: str, beta: float, draws: int, threads: int = 1
) -> dict[str, Any]:
    """d², σ², τ²d² and the rules' Delta errors at the initial parameters of a theory-check cell."""
    torch.set_num_threads(threads)
    problem, _ = load_problem(config, prepared, partition, resolve_device(config.get("device", "auto")))
    quantities = initial_quantities(problem, TrainSettings.from_dict(config["train"]), config["seed"], beta, draws)
    return {"target": config["target"], "seed": config["seed"], "experiment": config["experiment"], **quantities}
