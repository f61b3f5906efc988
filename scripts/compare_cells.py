#!/usr/bin/env python3
"""Compare two folders of cell files (e.g. results/cells of two runs): every cell must be equal once timings
and code fingerprints are dropped (`fdabench.cell.compare`).

Usage: scripts/compare_cells.py BEFORE AFTER [--missing-ok]
Exit status 0: the same results; 1: a cell differs or is missing from one side (each is listed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fdabench.cell.compare import compare_cell_folders


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--missing-ok", action="store_true", help="compare only the cells both folders hold")
    args = parser.parse_args()
    found = compare_cell_folders(args.before, args.after, missing_ok=args.missing_ok)
    both = {p.relative_to(args.before) for p in args.before.rglob("*.json")} & {
        p.relative_to(args.after) for p in args.after.rglob("*.json")
    }
    for name, differences in found.items():
        print(
            f"{name}: "
            + "; ".join(differences[:5])
            + (f" (+{len(differences) - 5} more)" if len(differences) > 5 else "")
        )
    print(f"{len(both)} cells in both folders; {len(found)} differ or are missing")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
