"""Which cells of a suite are current: done with today's configuration and code, or edited (changed after its
training job wrote it: its digest, `fdabench.cell.digest`, does not match), missing, failed, or stale (run with
another configuration or other code than what params.yaml and the source now give, or not readable as a complete
cell of this format: `fdabench.jobs.heal.recorded_state`). Edited and stale cells rerun.

`heal_workspace` heals every cell of a suite at once (`fdabench.jobs.heal`; the Snakefile heals the cells a run
plans, one by one)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fdabench.cell.digest import UNSEALED, digest_matches
from fdabench.cell.plugin_scope import cell_code
from fdabench.cell.result import FORMAT
from fdabench.config.params import Cell, Params
from fdabench.core import paths
from fdabench.core.readers import read_json, reading
from fdabench.federation.checkpoint import checkpoint_path
from fdabench.jobs.heal import heal_cell, heal_link, kept_path, recorded_state

STATES = ("current", "edited", "stale", "failed", "missing")


@dataclass(frozen=True)
class CellState:
    cell: Cell
    state: str  # one of STATES
    reason: str = ""


def _last_error(log: Path, sibling_prefix: str | None = None, own: str | None = None) -> str | None:
    """The last line of a training log that reports an error, if any; in a group job's log, the lines naming another
    cell of the group (a path under `sibling_prefix` other than `own`) are not this cell's."""
    if not log.is_file():
        return None
    with reading(log, "a training log"):
        text = log.read_text(encoding="utf-8", errors="replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("fdabench:") or "Error" in line]
    if sibling_prefix is not None:
        errors = [line for line in errors if sibling_prefix not in line or (own is not None and own in line)]
    return errors[-1] if errors else None


def cell_state(cell: Cell, root: Path = Path(".")) -> CellState:
    result_path = root / cell.path
    if result_path.is_dir():
        return CellState(cell, "missing", "a directory is where the cell file belongs; snakemake moves it aside")
    if not result_path.is_file():
        log = root / cell.log_path
        error = _last_error(log)
        if error is None:  # a job that trained the cell with its group's other targets may have failed before it
            log = root / cell.group_log_path
            error = _last_error(log, cell.path.rsplit("/", 2)[0] + "/", cell.path)
        if kept_path(result_path).is_file():
            return CellState(cell, "missing", "finished in a group job that did not; put back when its group reruns")
        if error:
            return CellState(cell, "failed", f"{error} (log: {log})")
        if checkpoint_path(result_path).is_file():
            return CellState(cell, "missing", "interrupted; it resumes from its checkpoint when rerun")
        return CellState(cell, "missing")
    state, reason = recorded_state(result_path, cell.config, lambda: cell_code(cell.config).to_json())
    return CellState(cell, state, reason)


def suite_status(params: Params, root: Path = Path(".")) -> list[CellState]:
    return [cell_state(cell, root) for cell in params.cells()]


def format_status(params: Params, states: list[CellState], show: tuple[str, ...] = STATES[1:]) -> str:
    counts = Counter(state.state for state in states)
    lines = [
        f"suite {params.suite_name}: {len(states)} cells: " + ", ".join(f"{counts[name]} {name}" for name in STATES)
    ]
    unsealed = sum(state.state == "current" and state.reason == UNSEALED for state in states)
    if unsealed:
        lines.append(f"  {unsealed} current cells are {UNSEALED}; they carry one once they rerun")
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
    search = f"grid of {plan['grid_points']} points per method"
    if plan["search"] == "random":
        scope = "each trial drawing its own" if plan["draw_scope"] == "trial" else "shared by the trials"
        search = f"{plan['draws']} random draws per method, {scope}"
    lines = [f"sweep ({search}; trials: the seeds): current cells, and draws complete"]
    for method, counter in cells.items():
        complete = sum(all(done) for done in draws[method].values())
        lines.append(
            f"  {method}: {counter['current']} of {sum(counter.values())} cells; {complete} of {len(draws[method])} "
            "draws complete"
        )
    return lines


def cell_name(cell: Cell) -> str:
    """A cell by name, as its training job is named: suite/experiment/method/target/seed<N>."""
    return f"{cell.suite}/{cell.experiment}/{cell.method}/{cell.target}/seed{cell.seed}"


def parse_cell_name(text: str) -> tuple[str | None, tuple[str, str, str, int]]:
    """(suite or None, (experiment, method, target, seed)) of a cell named as `cell_name` names it, without the
    suite, or by its result path (results/cells/...json); a ValueError for anything else."""
    name = text.removeprefix("./").removeprefix(paths.CELL.split("{")[0]).removesuffix(".json")
    parts = name.split("/")
    if len(parts) not in (4, 5) or not parts[-1].startswith("seed") or not parts[-1][4:].isdigit():
        raise ValueError(
            f"{text!r} names no cell: give suite/experiment/method/target/seed<N> (a training job's name, the suite "
            "optional) or the cell's result path"
        )
    suite = parts[0] if len(parts) == 5 else None
    experiment, method, target, seed = parts[-4:]
    return suite, (experiment, method, target, int(seed[4:]))


def format_cell(state: CellState, code: dict[str, Any]) -> str:
    """One cell in full: its state, its files, the resolved configuration it runs with and the code fingerprint
    (`{fingerprint, modules}`) its result depends on, as params.yaml and the source give them now."""
    cell = state.cell
    lines = [f"{cell_name(cell)}: {state.state}" + (f"  {state.reason}" if state.reason else "")]
    plan = paths.fill(paths.CELL_PLAN, **_fields(cell))
    lines += [f"  result: {cell.path}", f"  plan:   {plan}", f"  log:    {cell.log_path}", "configuration:"]
    lines += ["  " + line for line in json.dumps(cell.config, indent=2, sort_keys=True).splitlines()]
    lines.append(f"code fingerprint: {code['fingerprint']}")
    lines += [f"  {module} {digest}" for module, digest in sorted(code["modules"].items())]
    return "\n".join(lines)


def _fields(cell: Cell) -> dict[str, Any]:
    return {
        "suite": cell.suite,
        "experiment": cell.experiment,
        "method": cell.method,
        "target": cell.target,
        "seed": cell.seed,
    }


def rerun_marker(cell: Cell) -> str:
    return paths.fill(paths.RERUN_MARKER, **_fields(cell))


def heal_workspace(params: Params, links: list[str], root: Path = Path(".")) -> list[str]:
    """Every existing cell of the suite that is not current gets a new rerun marker (`fdabench.jobs.heal.heal_cell`),
    and every link of `links` whose target is gone is removed (`heal_link`). Returns one line per change."""
    changes = []
    for cell in params.cells():
        code = lambda cell=cell: cell_code(cell.config).to_json()
        changes.append(heal_cell(root / cell.path, root / rerun_marker(cell), cell.config, code, cell.path))
    changes += [heal_link(root / link, link) for link in links]
    return [change for change in changes if change]


def unreadable_cells_message(cell_paths: list[str]) -> str:
    """Why cell files cannot be tabulated, one clause per file, and the command that reruns them."""
    reasons = []
    for path in cell_paths:
        try:
            result = read_json(path, "a cell result")
        except FileNotFoundError:
            reasons.append(f"{path} is missing")
            continue
        except ValueError as error:
            reasons.append(f"{path} is not readable JSON (truncated or edited: {error.problem})")
            continue
        found = result.get("format") if isinstance(result, dict) else None
        if found != FORMAT:
            reasons.append(f"{path} has format {found!r}, not {FORMAT} (written by another fdabench version)")
        elif result.get("status") != "complete":
            reasons.append(f"{path} has status {result.get('status')!r}, not complete")
        elif not digest_matches(result):
            reasons.append(f"{path} was edited after its training job wrote it (its digest does not match)")
    listed = "; ".join(reasons) or "a cell is not a complete result"
    return f"{listed}; rerun `snakemake` (it reruns such cells with this version, keeping the files until then)"
