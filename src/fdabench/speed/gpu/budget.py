"""The time budget of `fdabench bench gpu`: stages run one after another, each may use what is left of the budget
less the shares reserved for the stages after it, and a stage whose allotment falls under its minimum is skipped
with the reason recorded. A stage that raises is recorded with its error; the stages after it still run."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Clock = Callable[[], float]


class Deadline:
    """The moment a stage must be done by, on `clock`'s time line."""

    def __init__(self, at: float, clock: Clock = time.monotonic):
        self.at, self.clock = at, clock

    def left(self) -> float:
        """Seconds until the deadline (negative once it has passed)."""
        return self.at - self.clock()

    def passed(self) -> bool:
        return self.left() <= 0


#: a stage fills its result dict as it goes (what it measured survives a later error) and returns None when its
#: checks hold, or why they do not (status "failed")
StageFunction = Callable[[Deadline, dict[str, Any]], "str | None"]


@dataclass(frozen=True)
class Stage:
    name: str
    share: float  # of the whole budget, reserved for this stage while the stages before it run
    minimum: float  # seconds: with less allotted, the stage is skipped
    run: StageFunction


def allotment(remaining: float, later_shares: float, budget: float) -> float:
    """Seconds a stage may use: what is left of the budget less the shares the later stages reserve."""
    return remaining - later_shares * budget


def run_stages(
    stages: Sequence[Stage],
    budget: float,
    clock: Clock = time.monotonic,
    on_stage: Callable[[dict[str, dict[str, Any]]], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Run `stages` in order within `budget` seconds; each stage's record (status ok, failed, error or skipped;
    seconds; allotted seconds; result, reason or error). `on_stage` sees the records after every stage."""
    started = clock()
    records: dict[str, dict[str, Any]] = {}
    for index, stage in enumerate(stages):
        remaining = budget - (clock() - started)
        later = sum(later_stage.share for later_stage in stages[index + 1 :])
        allowed = allotment(remaining, later, budget)
        if allowed < stage.minimum:
            records[stage.name] = {
                "status": "skipped",
                "seconds": 0.0,
                "allotted_seconds": max(0.0, allowed),
                "reason": f"time budget: {max(0.0, remaining):.0f} s of {budget:.0f} s left, {later * budget:.0f} s "
                f"of it reserved for the later stages; this stage needs {stage.minimum:.0f} s",
            }
        else:
            records[stage.name] = _run_stage(stage, allowed, clock)
        if on_stage is not None:
            on_stage(records)
    return records


def _run_stage(stage: Stage, allowed: float, clock: Clock) -> dict[str, Any]:
    began = clock()
    result: dict[str, Any] = {}
    record: dict[str, Any] = {"status": "ok", "allotted_seconds": allowed}
    try:
        reason = stage.run(Deadline(began + allowed, clock), result)
        if reason:
            record.update(status="failed", reason=reason)
    except Exception as error:  # one stage's failure must not lose the others' measurements
        record.update(status="error", error=f"{type(error).__name__}: {error}", traceback=_tail(traceback.format_exc()))
    record["seconds"] = clock() - began
    record["result"] = result
    return record


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])
