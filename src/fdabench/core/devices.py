"""Many cells per GPU, many GPUs on one machine: which GPU each training cell runs on.

params.yaml `gpus: [0, 1]` lists the CUDA devices (as `nvidia-smi` numbers them) that training cells are spread
over. Each cell is pinned to one of them, round-robin in the suite's cell order (`assign`), so the assignment is
fixed before anything runs and a dry run shows it. The train rule then asks Snakemake for one unit of that
device's resource, `gpu_<index>`, and `snakemake --resources gpu_0=K gpu_1=K` runs up to K cells on each GPU at
once. The job runs with `CUDA_VISIBLE_DEVICES=<index>` (`pin`), so inside it the GPU is `cuda:0`.

On a cluster the scheduler picks the GPU and sets CUDA_VISIBLE_DEVICES itself: pinning there would point at a
device the job was not given, so `pin` refuses it.

params.yaml `device` has one meaning everywhere (`uses_cuda`): `cuda` is CUDA, `cpu` the CPU, and `auto` CUDA
exactly when torch sees a CUDA device in the process that asks (`cuda_available`): a training job, and the
Snakemake run that schedules it (its `gpu` resource)."""

from __future__ import annotations

import os
from collections.abc import Hashable, MutableMapping, Sequence
from typing import TypeVar

#: set in the environment of a job that a cluster scheduler started
SCHEDULER_VARIABLES = ("SLURM_JOB_ID", "KUBERNETES_SERVICE_HOST", "PBS_JOBID", "LSB_JOBID")
#: the train rule's value for a cell that is not pinned (params.yaml without `gpus`)
UNPINNED = "none"

Cell = TypeVar("Cell", bound=Hashable)


def cuda_available() -> bool:
    """Whether this process sees a CUDA device (torch is imported here, only when asked)."""
    import torch

    return torch.cuda.is_available()


def uses_cuda(device: str) -> bool:
    """Whether params.yaml `device` (auto, cpu or cuda) means CUDA in this process: auto asks `cuda_available`, the
    others do not."""
    return device == "cuda" or (device == "auto" and cuda_available())


def assign(cells: Sequence[Cell], devices: Sequence[int]) -> dict[Cell, int]:
    """Each cell's device: the i-th cell gets devices[i mod len(devices)] (every device within one cell of an
    even share, whatever subset of the cells a run builds most)."""
    if not devices:
        raise ValueError("no GPU to assign cells to: gpus is empty")
    if len(set(devices)) != len(devices) or min(devices) < 0:
        raise ValueError(f"gpus must be distinct device indices 0, 1, ...; got {list(devices)}")
    return {cell: devices[index % len(devices)] for index, cell in enumerate(cells)}


def resource_name(device: int) -> str:
    """The Snakemake resource that counts the cells running on one GPU."""
    return f"gpu_{device}"


def pin(device: str, environ: MutableMapping[str, str] = os.environ) -> int | None:
    """Make only GPU `device` (a device index, or UNPINNED) visible to this process, before CUDA starts; the index,
    or None when not pinned."""
    if device == UNPINNED:
        return None
    if not device.isdigit():
        raise ValueError(f"a GPU to pin is a device index (0, 1, ...) or {UNPINNED!r}, not {device!r}")
    scheduler = [name for name in SCHEDULER_VARIABLES if environ.get(name)]
    if scheduler:
        raise ValueError(
            f"this job was started by a cluster scheduler ({scheduler[0]} is set), which chooses its GPU: "
            "remove `gpus` from params.yaml when running on a cluster"
        )
    environ["CUDA_VISIBLE_DEVICES"] = device
    return int(device)
