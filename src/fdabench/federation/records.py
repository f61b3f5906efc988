"""The per-round record every method logs (the `rounds` list of a cell file, see `fdabench.cell.result`)."""

from __future__ import annotations

import time
from typing import Any

PHASES = ("warmup", "fda", "finetune", "encoder", "dictionary")


def primary_metric(task: str) -> str:
    """The metric a cell reports: accuracy for classification, mse for regression."""
    return "accuracy" if task == "classification" else "mse"


def round_record(
    round_index: int, phase: str, metrics: dict[str, Any], uplink: int, downlink: int, started: float, **log: Any
) -> dict[str, Any]:
    """One round: its index and phase, the target's metrics, the bytes that crossed a client boundary each way,
    the seconds since `started` (a `time.perf_counter()` value), then method-specific logs."""
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; allowed: {', '.join(PHASES)}")
    return {
        "round": round_index,
        "phase": phase,
        **metrics,
        "bytes_uplink": uplink,
        "bytes_downlink": downlink,
        "seconds": time.perf_counter() - started,
        **log,
    }
