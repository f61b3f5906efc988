"""Compare the finals of the same cells in two result trees (e.g. before and after a change of random streams).

The cells of one (experiment, target, seed) share their initial model and data, so their changes are not
independent: the changes are averaged per such group first, then the mean over groups gets a 95% t-interval and a
Wilcoxon signed-rank test of a systematic shift, per metric; the seed-to-seed spread of the before tree gives the
scale of seed noise.

    python scripts/compare_cell_trees.py BEFORE/results/cells/demo AFTER/results/cells/demo
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from scipy import stats


def finals(root: Path) -> dict[str, tuple[str, float]]:
    cells = {}
    for path in sorted(root.rglob("*.json")):
        cell = json.loads(path.read_text())
        cells[str(path.relative_to(root))] = (cell["metric"], cell["final"])
    return cells


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    before, after = finals(args.before), finals(args.after)
    shared = sorted(set(before) & set(after))
    if len(shared) < 2:
        print("fewer than two cells in both trees", file=sys.stderr)
        return 2
    for metric in sorted({before[key][0] for key in shared}):
        keys = [key for key in shared if before[key][0] == metric]
        groups: dict[tuple[str, str, str], list[float]] = {}
        seeds: dict[str, list[float]] = {}
        for key in keys:
            experiment, method, target, seed = key.split("/")
            groups.setdefault((experiment, target, seed), []).append(after[key][1] - before[key][1])
            seeds.setdefault(f"{experiment}/{method}/{target}", []).append(before[key][1])
        means = [statistics.fmean(values) for values in groups.values()]
        changed = sum(after[key][1] != before[key][1] for key in keys)
        print(f"{metric}: {len(keys)} cells ({changed} changed) in {len(means)} (experiment, target, seed) groups")
        print(f"  mean |change| of a cell: {statistics.fmean(abs(after[k][1] - before[k][1]) for k in keys):.4f}")
        if len(means) > 1:
            mean = statistics.fmean(means)
            low, high = stats.t.interval(0.95, len(means) - 1, loc=mean, scale=stats.sem(means))
            shift = stats.wilcoxon(means).pvalue if any(means) else float("nan")
            print(f"  mean change over groups (after - before): {mean:+.4f}, 95% CI [{low:+.4f}, {high:+.4f}]")
            print(f"  Wilcoxon signed-rank p over groups (a systematic shift): {shift:.3g}")
        spreads = [statistics.stdev(values) for values in seeds.values() if len(values) > 1]
        if spreads:
            print(f"  seed-to-seed sd of a cell before the change: {statistics.fmean(spreads):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
