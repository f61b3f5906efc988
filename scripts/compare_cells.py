"""Compare two trees of cell files (results/cells/<suite>/...): every cell must be in both and equal, timings,
code fingerprints and package versions aside.

    python scripts/compare_cells.py /work/baseline/results/cells/smoke results/cells/smoke

Exit status 0 when they match, 1 with one line per difference otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

#: keys that differ between runs of the same computation (anywhere in a cell file: top level or per round)
IGNORED = frozenset({"wall_seconds", "train_seconds", "train_cpu_seconds", "seconds", "code", "versions"})


def stripped(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: stripped(item) for key, item in value.items() if key not in IGNORED}
    if isinstance(value, list):
        return [stripped(item) for item in value]
    return value


def differences(before: Any, after: Any, where: str = "") -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        lines = [f"{where}.{key}: only before" for key in before.keys() - after.keys()]
        lines += [f"{where}.{key}: only after" for key in after.keys() - before.keys()]
        for key in sorted(before.keys() & after.keys()):
            lines += differences(before[key], after[key], f"{where}.{key}")
        return lines
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [line for i, (b, a) in enumerate(zip(before, after)) for line in differences(b, a, f"{where}[{i}]")]
    return [] if before == after else [f"{where}: {before!r} -> {after!r}"[:300]]


def compare(before_root: Path, after_root: Path) -> tuple[int, list[str]]:
    before = {p.relative_to(before_root) for p in before_root.rglob("*.json")}
    after = {p.relative_to(after_root) for p in after_root.rglob("*.json")}
    lines = [f"{p}: only in {before_root}" for p in sorted(before - after)]
    lines += [f"{p}: only in {after_root}" for p in sorted(after - before)]
    for path in sorted(before & after):
        old = stripped(json.loads((before_root / path).read_text()))
        new = stripped(json.loads((after_root / path).read_text()))
        lines += [f"{path}{line}" for line in differences(old, new)]
    return len(before & after), lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    compared, lines = compare(args.before, args.after)
    print("\n".join(lines) if lines else f"identical: {compared} cells (timings, code and versions aside)")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
