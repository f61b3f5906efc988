"""Healing a workspace: Snakemake's own bookkeeping made to agree with what the cell files say.

The cell file is the truth about what it was computed with. A cell Snakemake considers done may not be (a
truncated file, one copied from another code version, or a previous result Snakemake restored after a failed
rerun): `heal_cell` gives it a new input, a rerun marker (`fdabench.core.paths.RERUN_MARKER`), so the same
`snakemake` command reruns it, its file kept until the new one is complete; `heal_link` removes a link to a result
that no longer exists (the rule that made it makes it again).

Only a run that executes jobs heals, and only the cells it plans, each before Snakemake decides whether the cell
runs (the Snakefile's `rerun_marker` input function); a dry run opens no cell file and writes nothing. Imports
neither torch nor the library: the cell's configuration and code fingerprint come from the plan.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fdabench.cell.digest import UNSEALED, EditedError, verify
from fdabench.cell.result import FORMAT
from fdabench.core.device_identity import changed_settings
from fdabench.core.io import write_text_atomic
from fdabench.core.readers import FileReadError, read_json


def recorded_state(result_path: Path, config: dict[str, Any], code: Callable[[], dict[str, Any]]) -> tuple[str, str]:
    """("current", "stale" or "edited", why) of an existing cell file against the configuration and code fingerprint
    (`code()`: `{fingerprint, modules}`, `fdabench.cell.fingerprint.CodeFingerprint.to_json`) params.yaml and the
    source now give; a changed `device` setting counts where the cell did not run on what it now asks for
    (`fdabench.core.device_identity`). "edited": its digest (`fdabench.cell.digest`) does not match its contents, so
    nothing it says is trusted. A current cell written before cells carried a digest says so (`UNSEALED`) as its
    why."""
    try:
        result = read_json(result_path, "a cell result")
    except FileNotFoundError:
        raise
    except FileReadError as error:
        return "stale", f"unreadable result ({error.problem}); snakemake reruns it"
    if not isinstance(result, dict):
        return "stale", "not a cell result; snakemake reruns it"
    if result.get("format") != FORMAT:
        return "stale", f"format {result.get('format')!r}, not {FORMAT}; snakemake reruns it"
    if result.get("status") != "complete":
        return "stale", f"result status {result.get('status')!r}, not complete"
    try:
        sealed = verify(result, str(result_path))
    except EditedError:
        return "edited", "edited after its training job wrote it: its digest does not match its contents"
    recorded = result.get("config") if isinstance(result.get("config"), dict) else {}
    changed = changed_settings(recorded, result.get("device"), config)
    if changed:
        return "stale", "configuration changed: " + ", ".join(changed)
    recorded = result.get("code") if isinstance(result.get("code"), dict) else {}
    current = code()
    if recorded.get("fingerprint") != current["fingerprint"]:
        before, now = recorded.get("modules", {}), current["modules"]
        changed = sorted(m for m in set(before) | set(now) if before.get(m) != now.get(m))
        return "stale", "code changed: " + (", ".join(changed) or "no fingerprint recorded")
    return "current", "" if sealed else UNSEALED


def _unconsumed(marker: Path, result: Path) -> bool:
    return marker.is_file() and (not result.is_file() or marker.stat().st_mtime > result.stat().st_mtime)


def heal_cell(
    result: Path, marker: Path, config: dict[str, Any], code: Callable[[], dict[str, Any]], path: str | None = None
) -> str | None:
    """Give the cell file `result` a new rerun `marker` if it is stale or edited (`recorded_state`; the file is
    untouched, so a failed rerun keeps it); remove a marker no job consumed from a cell that is neither. One line if
    the cell reruns (naming it `path`), else None.

    A missing cell (deleted, moved aside, or never run) gets a new marker too: Snakemake reruns no job for a missing
    file that up-to-date outputs were made from (a table whose cell was deleted), so the marker, newer than those
    outputs, makes the cell run and everything made from it with it."""
    moved = move_aside(result, path) if result.is_dir() and not result.is_symlink() else None
    state, reason = recorded_state(result, config, code) if result.is_file() else ("missing", "")
    if state in ("stale", "edited", "missing"):
        write_text_atomic(marker, f"{time.time_ns()} {reason or state}\n")  # new content: a new input
        if state == "missing":
            return moved
        return f"{path or result}: reruns ({reason}); the file stays until the new one is complete"
    if _unconsumed(marker, result):
        # written by a run whose job never ran (interrupted, or params changed back): an input Snakemake has not
        # recorded, which would rerun the cell (a marker a job consumed is older than its result, and stays)
        marker.unlink()
    return None


def kept_path(output: str | Path) -> Path:
    """Where `train-group` keeps a copy of a finished cell's result until the whole group has finished (Snakemake
    removes the outputs of a job that failed or was killed): a hidden file beside the output."""
    output = Path(output)
    return output.with_name(f".{output.name}.kept")


def move_aside(result: Path, path: str | None = None) -> str:
    """A directory where the cell file belongs (no job can write the cell there): renamed to a hidden folder beside
    it (nothing in it is deleted), so the cell is missing and runs; one line saying where it went."""
    aside = result.with_name(f".{result.name}.directory-{time.time_ns()}")
    result.rename(aside)
    return f"{path or result}: was a directory, where the cell file belongs; moved aside to {aside}, the cell runs"


def heal_link(link: Path, name: str | None = None) -> str | None:
    """Remove `link` if it is a link whose target is gone; one line if it was."""
    if link.is_symlink() and not link.exists():
        link.unlink()
        return f"{name or link}: removed a link to a missing file (it is made again)"
    return None
