"""Mutation testing gate: run mutmut on the modules configured in pyproject.toml ([tool.mutmut]) and fail
when a mutant survives that tests/mutation/equivalent.txt does not explain, or when the score falls below
the threshold. Usage: python tests/mutation/check.py [--min-score 0.95] [--no-run]"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EQUIVALENT = Path(__file__).with_name("equivalent.txt")
DETECTED = {"killed", "timeout", "segfault"}  # a mutant that fails the tests, hangs or crashes them is caught
# mutmut forks a worker per mutant from a process that has run torch: with OpenMP's thread pool started,
# the forked workers deadlock and every such mutant reads as "timeout" (caught) whatever the tests say.
# One thread per process keeps the pool unused, so each mutant is judged by its tests.
SINGLE_THREADED = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def explained() -> dict[str, str]:
    entries = {}
    for line in EQUIVALENT.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, reason = line.partition(":")
            if not reason.strip():
                raise SystemExit(f"{EQUIVALENT}: {name.strip()} has no reason")
            entries[name.strip()] = reason.strip()
    return entries


def statuses() -> dict[str, str]:
    output = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {match[1]: match[2] for match in re.finditer(r"^\s*(\S+): (.+?)\s*$", output, re.MULTILINE)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--min-score", type=float, default=0.95, help="killed-or-explained fraction required per module"
    )
    parser.add_argument("--no-run", action="store_true", help="read the last run's results only")
    parser.add_argument(
        "--modules",
        nargs="+",
        default=[
            "fdabench.tensor_math.aggregation",
            "fdabench.tensor_math.dataset_dictionary",
            "fdabench.data.partition",
            "fdabench.data.partitioners.feature_noise",
            "fdabench.data.partitioners.label_shift",
            "fdabench.data.partitioners.labelled_target",
            "fdabench.data.partitioners.leave_one_domain_out",
            "fdabench.data.partitioners.shift_and_subsample",
            "fdabench.federation.rounds",
            "fdabench.federation.sites",
            "fdabench.methods.auto",
        ],
        help="modules to mutate (of [tool.mutmut] only_mutate); CI runs the default",
    )
    args = parser.parse_args()
    if not args.no_run:
        environment = {**os.environ, **SINGLE_THREADED}
        subprocess.run(
            [sys.executable, "-m", "mutmut", "run"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL, env=environment
        )
    results, reasons = statuses(), explained()
    failed = False
    for module in args.modules:
        mine = {name: status for name, status in results.items() if name.startswith(module + ".x")}
        if not mine or any(status == "not checked" for status in mine.values()):
            print(f"{module}: not (fully) run; run without --no-run")
            failed = True
            continue
        counts = Counter(mine.values())
        detected = sum(counts[s] for s in DETECTED)
        survivors = [name for name, status in mine.items() if status not in DETECTED]
        unexplained = [name for name in survivors if name not in reasons]
        score = (detected + len(survivors) - len(unexplained)) / len(mine)
        print(
            f"{module}: {len(mine)} mutants, {detected} killed ({detected / len(mine):.1%}), "
            f"{len(survivors) - len(unexplained)} explained, {len(unexplained)} unexplained: "
            f"{score:.1%} killed or explained ({dict(counts)})"
        )
        for name in unexplained:
            print(f"  unexplained: {name} ({mine[name]}); `mutmut show {name}`")
        failed |= bool(unexplained) or score < args.min_score
    in_scope = [name for name in reasons if name.startswith(tuple(module + ".x" for module in args.modules))]
    # an explained mutant the tests now fail is stale; one that timed out is not (on a busy machine an equivalent
    # mutant's tests can run past mutmut's limit, which proves nothing about them)
    stale = sorted(name for name in in_scope if results.get(name) in DETECTED - {"timeout"} or name not in results)
    for name in stale:
        print(f"  listed as equivalent but now {results.get(name, 'gone')}: {name} (remove it from {EQUIVALENT.name})")
    return 1 if failed or stale else 0


if __name__ == "__main__":
    sys.exit(main())
