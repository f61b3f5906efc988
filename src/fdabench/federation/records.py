"""The per-round record every method logs (the `rounds` list of a cell file, see `fdabench.cell.result`), and the
phases a record may name: the round loop's own, registered here, and those a method registers from its module
(`register_phase`: Finetune_Offline's fine-tuning, FedDaDiL's encoder and dictionary rounds), as a plugin does."""

from __future__ import annotations

import time
from typing import Any

#: phase name -> what its rounds are (cell files' readers); `register_phase` adds to it
PHASES: dict[str, str] = {}


def register_phase(name: str, description: str) -> str:
    """Add a phase rounds may be recorded in (again with the same description: nothing happens); its name. A name
    registered with another description is refused."""
    known = PHASES.get(name)
    if known is not None and known != description:
        raise ValueError(f"phase {name!r} is registered already, as {known!r}; give yours another name")
    PHASES[name] = description
    return name


WARMUP = register_phase("warmup", "FedAvg over the sources before the FDA rounds")
FDA = register_phase("fda", "the method's federated rounds")


def primary_metric(task: str) -> str:
    """The metric a cell reports: accuracy for classification, mse for regression."""
    return "accuracy" if task == "classification" else "mse"


def round_record(
    round_index: int, phase: str, metrics: dict[str, Any], uplink: int, downlink: int, started: float, **log: Any
) -> dict[str, Any]:
    """One round: its index and phase, the target's metrics, the bytes that crossed a client boundary each way,
    the seconds since `started` (a `time.perf_counter()` value), then method-specific logs."""
    if phase not in PHASES:
        raise ValueError(
            f"unknown phase {phase!r}; allowed: {', '.join(PHASES)} (a method registers its own: `register_phase`)"
        )
    return {
        "round": round_index,
        "phase": phase,
        **metrics,
        "bytes_uplink": uplink,
        "bytes_downlink": downlink,
        "seconds": time.perf_counter() - started,
        **log,
    }
