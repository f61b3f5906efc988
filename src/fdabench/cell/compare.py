"""Whether two runs computed the same cells: cell files compared without what differs between equal runs.

Dropped before comparing (`comparable`): timings (`wall_seconds`, `train_seconds`, `train_cpu_seconds`, each
round's `seconds`), the code fingerprint (`code`: module hashes change with any edit of the code a cell
reaches, even one that leaves every result equal), the digest (`digest`, `fdabench.cell.digest`: it hashes the
timings too) and what a cell rebuilt from an archive record says of that (`archive`). Everything else
(configuration, every round's metrics and bytes, finals, versions, device, partition hash) must be equal.
`scripts/compare_cells.py` runs it on two folders of cell files (e.g. results/cells before and after a change that
must not change results); `fdabench archive vouch` on the same cells run with old and new code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fdabench.core.readers import read_json

#: top-level keys of a cell file that differ between equal runs
VOLATILE_KEYS = ("wall_seconds", "train_seconds", "train_cpu_seconds", "code", "digest", "archive")
#: keys of each round record that differ between equal runs
VOLATILE_ROUND_KEYS = ("seconds",)


def comparable(cell: dict[str, Any]) -> dict[str, Any]:
    """The cell without timings, code fingerprint and digest."""
    kept = {key: value for key, value in cell.items() if key not in VOLATILE_KEYS}
    if isinstance(kept.get("rounds"), list):
        kept["rounds"] = [
            {k: v for k, v in r.items() if k not in VOLATILE_ROUND_KEYS} if isinstance(r, dict) else r
            for r in kept["rounds"]
        ]
    return kept


def _differences(before: Any, after: Any, where: str) -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        found = []
        for key in sorted(set(before) | set(after), key=str):
            if key not in after:
                found.append(f"{where}.{key}: only before")
            elif key not in before:
                found.append(f"{where}.{key}: only after")
            else:
                found += _differences(before[key], after[key], f"{where}.{key}")
        return found
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [d for i, (b, a) in enumerate(zip(before, after)) for d in _differences(b, a, f"{where}[{i}]")]
    return [] if before == after else [f"{where}: {before!r} != {after!r}"]


def cell_differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Where two cell results differ, besides timings and code fingerprints (empty: the same result)."""
    return _differences(comparable(before), comparable(after), "")


def compare_cell_folders(before: Path, after: Path, missing_ok: bool = False) -> dict[str, list[str]]:
    """Cell file (path relative to the folders) -> its differences, for every cell file under either folder
    that differs or is missing from one of them (`missing_ok`: a cell only in one folder is no difference)."""
    before_files = {path.relative_to(before).as_posix() for path in Path(before).rglob("*.json")}
    after_files = {path.relative_to(after).as_posix() for path in Path(after).rglob("*.json")}
    found: dict[str, list[str]] = {}
    for name in sorted(before_files | after_files):
        if name not in after_files or name not in before_files:
            if not missing_ok:
                found[name] = ["only in " + ("before" if name in before_files else "after")]
            continue
        cells = (read_json(Path(folder) / name, "a cell result") for folder in (before, after))
        differences = cell_differences(*cells)
        if differences:
            found[name] = differences
    return found
