"""Round-loop checkpoints: a long cell resumes where it was interrupted, with identical results.

Every `every` rounds a training loop saves its whole state to one file, written atomically: what every
loop has (`loop_state`: the next round, every client's batch-order generator, torch's global random state,
the records so far) and what its own protocol carries (the round loop: model, server momentum, the
method's state and every client's state, e.g. the personalised methods' personal models and heads, KD3A's
mixup generator at the target). A checkpoint is used only by the run that made it: it records the
cell's identity (configuration, code fingerprint, device, threads), and one of another identity is
ignored and replaced. The CLI removes it once the cell's result is written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from fdabench.core.io import atomic_path
from fdabench.core.readers import FileReadError, reading


@dataclass
class Checkpoints:
    """Where the cell's checkpoint lives, how often it is written and whose it is."""

    path: Path
    every: int
    identity: dict[str, Any] = field(default_factory=dict)

    def due(self, round_index: int, total_rounds: int) -> bool:
        """Whether a checkpoint is written after round `round_index` (0-based); never after the last."""
        return self.every > 0 and (round_index + 1) % self.every == 0 and round_index + 1 < total_rounds

    def save(self, state: dict[str, Any]) -> None:
        with atomic_path(self.path) as tmp:
            torch.save({"identity": self.identity, "state": state}, tmp)

    def load(self) -> dict[str, Any] | None:
        """The saved state, or None where there is none or it belongs to another run."""
        if self.every <= 0 or not self.path.is_file():
            return None
        saved = _read(self.path)
        if saved is None:
            return None
        if saved.get("identity") != self.identity:
            print(f"checkpoint {self.path} is of another configuration, code, device or thread count; starting over")
            return None
        print(f"resuming from checkpoint {self.path} at round {saved['state']['next_round']}")
        return saved["state"]


def _read(path: Path) -> dict[str, Any] | None:
    """A checkpoint file's contents; None, with one line of warning, where it cannot be read as one (truncated,
    edited, or not a checkpoint): the file is removed, so the cell starts over and the next checkpoint replaces it."""
    try:
        with reading(path, "a checkpoint"):  # torch raises many kinds for a damaged file
            saved = torch.load(path, map_location="cpu", weights_only=True)
        if isinstance(saved, dict) and isinstance(saved.get("state"), dict) and "next_round" in saved["state"]:
            return saved
        reason = "not a checkpoint"
    except FileReadError as error:
        reason = error.problem[:160]
    print(f"checkpoint {path} is unreadable ({reason}); discarded, the cell starts over")
    path.unlink(missing_ok=True)
    return None


def checkpoint_path(output: str | os.PathLike) -> Path:
    """The checkpoint of the cell whose result goes to `output`: a hidden file beside it."""
    output = Path(output)
    return output.with_name(f".{output.name}.checkpoint.pt")


def loop_state(
    next_round: int,
    generators: list[torch.Generator],
    records: list[dict[str, Any]],
    device: torch.device,
    **protocol: Any,
) -> dict[str, Any]:
    """A loop's state before round `next_round`, with its protocol's own entries."""
    return {
        "next_round": next_round,
        "generators": [generator.get_state() for generator in generators],
        "random": random_state(device),
        "records": records,
        **protocol,
    }


def restore_loop(
    saved: dict[str, Any], generators: list[torch.Generator], device: torch.device
) -> tuple[int, list[dict[str, Any]]]:
    """Put the generators and torch's random state back; (the next round, the records so far)."""
    for generator, state in zip(generators, saved["generators"]):
        generator.set_state(state)
    restore_random_state(saved["random"], device)
    return saved["next_round"], saved["records"]


def random_state(device: torch.device) -> dict[str, Any]:
    """torch's global random state (dropout and other layers draw from it)."""
    state: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def restore_random_state(state: dict[str, Any], device: torch.device) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)
