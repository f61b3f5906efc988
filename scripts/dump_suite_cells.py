"""Every suite's resolved cells, as JSON: {suite: {cell path: config}} (a before/after check for params.yaml edits).

python scripts/dump_suite_cells.py [--params params.yaml] > cells.json
python scripts/dump_suite_cells.py --compare before.json        # exit 1 and list differences if any
"""

from __future__ import annotations

import argparse
import json
import sys

from fdabench.jobs.validation import load_checked_params


def suite_cells(params_path: str) -> dict[str, dict[str, dict]]:
    params = load_checked_params(params_path)
    return {suite: _suite(params.for_suite(suite)) for suite in params.raw["suites"]}


def _suite(params) -> dict[str, dict]:
    """The suite's cells by path, and under "@settings" what else it resolves to (resources, tables, ...)."""
    cells = {cell.path: cell.config for cell in params.cells()}
    cells["@settings"] = {
        "resources": {e: params.resources(e) for e in params.experiment_names()},
        "tables": params.tables(),
        "figures": params.figures(),
        "theory_checks": params.theory_checks(),
        "top": {
            key: getattr(params, key)
            for key in ("device", "threads_per_cell", "checkpoint_every", "gpus", "dvc_suites", "data_root", "download")
        },
    }
    return cells


def differences(before: dict, after: dict) -> list[str]:
    lines = [f"suite {s}: only before" for s in before.keys() - after.keys()]
    lines += [f"suite {s}: only after" for s in after.keys() - before.keys()]
    for suite in sorted(before.keys() & after.keys()):
        old, new = before[suite], after[suite]
        lines += [f"{path}: only before" for path in sorted(old.keys() - new.keys())]
        lines += [f"{path}: only after" for path in sorted(new.keys() - old.keys())]
        lines += [f"{path}: config differs" for path in sorted(old.keys() & new.keys()) if old[path] != new[path]]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--compare", help="a JSON file this script wrote before")
    args = parser.parse_args()
    cells = json.loads(json.dumps(suite_cells(args.params)))
    if args.compare is None:
        json.dump(cells, sys.stdout, indent=1, sort_keys=True)
        return 0
    with open(args.compare, encoding="utf-8") as handle:
        lines = differences(json.load(handle), cells)
    count = sum(len(c) - 1 for c in cells.values())
    print("\n".join(lines) or f"identical: {count} cells and their suites' settings in {len(cells)} suites")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
