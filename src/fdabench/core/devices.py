"""Many cells per GPU, many GPUs on one machine: which GPU each training cell runs on.

params.yaml `gpus: [0, 1]` lists the CUDA devices (as `nvidia-smi` numbers them) that training cells are spread
over. Each cell is pinned to one of them, round-robin in the suite's cell order (`assign`), so the assignment is
fixed before anything runs and a dry run shows it. The train rule then asks Snakemake for one unit of that
device's resource, `gpu_<index>`, and `snakemake --resources gpu_0=K gpu_1=K` runs up to K cells on each GPU at
once. The job runs with `CUDA_VISIBLE_DEVICES=<index>` (`pin`), so inside it the GPU is `cuda:0`.

On a cluster the scheduler picks the GPU and sets CUDA_VISIBLE_DEVICES itself: pinning there would point at a
device the job was not given, so `pin` refuses it.

params.yaml `device` is decided here and only here (`decide`): `cuda` is CUDA (refused where torch sees none),
`cpu` the CPU, and `auto` CUDA exactly when torch sees a CUDA device in the process that asks (`cuda_available`):
a training job, and the Snakemake run that schedules it (its `gpu` resource, `uses_cuda`). The decision is made
where a cell runs, never where it is planned: a cell's configuration records `device` as params.yaml gives it, so
a cell is the same cell on every machine (its result records the device it ran on)."""

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


class DeviceUnavailable(ValueError):
    """`device: cuda` where this process sees no CUDA device."""


#: the values of params.yaml `device`
DEVICES = ("auto", "cpu", "cuda")


def decide(device: str, strict: bool = True) -> str:
    """The device params.yaml `device` (auto, cpu or cuda) means in this process, "cuda" or "cpu": auto asks
    `cuda_available`, the others do not. `strict`: refuse cuda where CUDA is absent (DeviceUnavailable)."""
    if device not in DEVICES:
        raise ValueError(f"device {device!r}: use one of {', '.join(DEVICES)}")
    if device == "auto":
        return "cuda" if cuda_available() else "cpu"
    if device == "cuda" and strict and not cuda_available():
        raise DeviceUnavailable(
            "device: 'cuda' but this machine has no CUDA (torch.cuda.is_available() is false); set device: auto or cpu"
        )
    return device


def problem(device: str) -> str | None:
    """Why cells of params.yaml `device` cannot run in this process (`decide` refuses it), or None."""
    try:
        decide(device)
    except DeviceUnavailable as error:
        return str(error)
    return None


def uses_cuda(device: str) -> bool:
    """Whether params.yaml `device` means CUDA in this process (`decide`; cuda does, whether or not CUDA is here: a
    cluster's login node schedules jobs for nodes that have it)."""
    return decide(device, strict=False) == "cuda"


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
