"""Which cells of a suite are current: done with today's configuration and code, or missing, failed, or
stale (run with another configuration or other code than what params.yaml and the source now give, or not
readable as a complete cell of this format).

The cell file is the truth about what it was computed with. `heal_workspace`, called by the Snakefile before
Snakemake plans, makes Snakemake's own bookkeeping agree with it: a cell it would otherwise consider done (a
truncated file, one copied from another code version, or a previous result Snakemake restored after a
failed rerun) is given a new input (a rerun marker), so the same `snakemake` command reruns it; links to results
that no longer exist are removed (the rule that made them makes them again)."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from fdabench.cell.plugin_fingerprint import cell_code
from fdabench.cell.result import FORMAT
from fdabench.config.params import Cell, Params
from fdabench.core import paths
from fdabench.core.io import read_json
from fdabench.federation.checkpoint import checkpoint_path

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
        return CellState(cell, "stale", f"unreadable result ({error}); snakemake reruns it")
    if not isinstance(result, dict):
        return CellState(cell, "stale", "not a cell result; snakemake reruns it")
    if result.get("format") != FORMAT:
        return CellState(cell, "stale", f"format {result.get('format')!r}, not {FORMAT}; snakemake reruns it")
    if result.get("status") != "complete":
        return CellState(cell, "stale", f"result status {result.get('status')!r}, not complete")
    if result.get("config") != cell.config:
        recorded_config = result.get("config") if isinstance(result.get("config"), dict) else {}
        changed = sorted(
            key for key in set(cell.config) | set(recorded_config) if recorded_config.get(key) != cell.config.get(key)
        )
        return CellState(cell, "stale", "configuration changed: " + ", ".join(changed))
    recorded = result.get("code") if isinstance(result.get("code"), dict) else {}
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
    lines += sweep_progress(params, states)
    for state in states:
        if state.state in show:
            lines.append(f"  {state.state:8} {state.cell.path}" + (f"  {state.reason}" if state.reason else ""))
    return "\n".join(lines)


def sweep_progress(params: Params, states: list[CellState]) -> list[str]:
    """A sweep's progress per method: current cells of all, and draws complete (every target, trial and fold
    current); nothing for a suite without a sweep."""
    plan = params.sweep()
    if plan is None:
        return []
    cells: dict[str, Counter] = {}
    draws: dict[str, dict[int, list[bool]]] = {}
    for state in states:
        sweep = state.cell.config.get("sweep", {})
        method = sweep.get("method", state.cell.method)
        cells.setdefault(method, Counter())[state.state] += 1
        draws.setdefault(method, {}).setdefault(sweep.get("draw", 0), []).append(state.state == "current")
    search = f"{plan['draws']} random draws" if plan["search"] == "random" else f"grid of {plan['grid_points']} points"
    lines = [f"sweep ({search} per method; trials: the seeds): current cells, and draws complete"]
    for method, counter in cells.items():
        complete = sum(all(done) for done in draws[method].values())
        lines.append(
            f"  {method}: {counter['current']} of {sum(counter.values())} cells; {complete} of {len(draws[method])} "
            "draws complete"
        )
    return lines


def rerun_marker(cell: Cell) -> str:
    fields = {"suite": cell.suite, "experiment": cell.experiment, "method": cell.method, "target": cell.target}
    return paths.fill(paths.RERUN_MARKER, **fields, seed=cell.seed)


def _unconsumed(marker: Path, result: Path) -> bool:
    return marker.is_file() and (not result.is_file() or marker.stat().st_mtime > result.stat().st_mtime)


def heal_workspace(params: Params, links: list[str], root: Path = Path(".")) -> list[str]:
    """Make the workspace say what its files are (see the module docstring): every existing cell of the suite
    that is not current gets a new rerun marker (`paths.RERUN_MARKER`, an input of its training job; the cell
    file is untouched, so a failed rerun keeps it), and every link of `links` whose target is gone is removed.
    Returns one line per change."""
    changes = []
    for state in suite_status(params, root):
        result, marker = root / state.cell.path, root / rerun_marker(state.cell)
        if state.state == "stale" and result.is_file():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(f"{time.time_ns()} {state.reason}\n", encoding="utf-8")  # new content: a new input
            changes.append(f"{state.cell.path}: reruns ({state.reason}); the file stays until the new one is complete")
        elif state.state != "stale" and _unconsumed(marker, result):
            # written by a plan whose job never ran (a dry run, or params changed back): an input Snakemake has not
            # recorded, which would rerun the cell (a marker a job consumed is older than its result, and stays)
            marker.unlink()
    for link in links:
        path = root / link
        if path.is_symlink() and not path.exists():
            path.unlink()
            changes.append(f"{link}: removed a link to a missing file (it is made again)")
    return changes


def unreadable_cells_message(cell_paths: list[str]) -> str:
    """Why cell files cannot be tabulated, one clause per file, and the command that reruns them."""
    reasons = []
    for path in cell_paths:
        try:
            result = read_json(path)
        except FileNotFoundError:
            reasons.append(f"{path} is missing")
            continue
        except (OSError, ValueError) as error:
            reasons.append(f"{path} is not readable JSON (truncated or edited: {error})")
            continue
        found = result.get("format") if isinstance(result, dict) else None
        if found != FORMAT:
            reasons.append(f"{path} has format {found!r}, not {FORMAT} (written by another fdabench version)")
        elif result.get("status") != "complete":
            reasons.append(f"{path} has status {result.get('status')!r}, not complete")
    listed = "; ".join(reasons) or "a cell is not a complete result"
    return f"{listed}; rerun `snakemake` (it reruns such cells with this version, keeping the files until then)"
