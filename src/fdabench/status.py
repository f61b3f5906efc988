"""Which cells of a suite are current: done with today's configuration and code, or missing, failed, or
stale (run with another configuration or other code than what params.yaml and the source now give)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from fdabench.config.params import Cell, Params
from fdabench.federation.checkpoint import checkpoint_path
from fdabench.io import read_json
from fdabench.plugin_fingerprint import cell_code

STATES = ("current", "stale", "failed", "missing")


@dataclass(frozen=True)
class CellState:
    cell: Cell
    state: str  # one of STATES
    reason: str = ""


def _last_error(log: Path) -> str | None:
    """The last line of a training log that reports an error, if any."""
    if not log.is_file():
        return None
    lines = [line.strip() for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("fdabench:") or "Error" in line]
    return errors[-1] if errors else None


def cell_state(cell: Cell, root: Path = Path(".")) -> CellState:
    result_path = root / cell.path
    if not result_path.is_file():
        log = root / cell.log_path
        error = _last_error(log)
        if error:
            return CellState(cell, "failed", f"{error} (log: {log})")
        if checkpoint_path(result_path).is_file():
            return CellState(cell, "missing", "interrupted; it resumes from its checkpoint when rerun")
        return CellState(cell, "missing")
    try:
        result = read_json(result_path)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        return CellState(cell, "stale", f"unreadable result ({error}); rerun it")
    if result.get("status") != "complete":
        return CellState(cell, "stale", f"result status {result.get('status')!r}, not complete")
    if result.get("config") != cell.config:
        changed = sorted(
            key
            for key in set(cell.config) | set(result.get("config", {}))
            if result["config"].get(key) != cell.config.get(key)
        )
        return CellState(cell, "stale", "configuration changed: " + ", ".join(changed))
    recorded = result.get("code", {})
    current = cell_code(cell.config)
    if recorded.get("fingerprint") != current.digest:
        before = recorded.get("modules", {})
        changed = sorted(m for m in set(before) | set(current.modules) if before.get(m) != current.modules.get(m))
        return CellState(cell, "stale", "code changed: " + (", ".join(changed) or "no fingerprint recorded"))
    return CellState(cell, "current")


def suite_status(params: Params, root: Path = Path(".")) -> list[CellState]:
    return [cell_state(cell, root) for cell in params.cells()]


def format_status(
    params: Params, states: list[CellState], show: tuple[str, ...] = ("stale", "failed", "missing")
) -> str:
    counts = Counter(state.state for state in states)
    lines = [
        f"suite {params.suite_name}: {len(states)} cells: " + ", ".join(f"{counts[name]} {name}" for name in STATES)
    ]
    for state in states:
        if state.state in show:
            lines.append(f"  {state.state:8} {state.cell.path}" + (f"  {state.reason}" if state.reason else ""))
    return "\n".join(lines)
