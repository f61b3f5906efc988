"""Mutation testing gate: run mutmut on the modules configured in pyproject.toml ([tool.mutmut]) and fail
when a mutant survives that tests/mutation/equivalent.txt does not explain, or when the score falls below
the threshold.

An explained mutant is run again only where its module may have changed since a run saw it survive:
tests/mutation/verified.json holds, per module, a digest of its source, the mutmut version and its explained
mutants' names, recorded by `--record-verified` after a run in which every one of them survived. Where the digest
still matches, the same source gives the same mutants, so those known survivors are skipped (they cost a third of
the gate's time, each running every test that reaches it); `--recheck` runs them all, as does any edit to the module.

A whole gate is not run again where nothing it reads has changed: tests/mutation/passed.json holds the digest of
the tree a passing run over every module saw (every tracked file but the documentation and that record: the mutated
modules, the rest of the source and every test, pyproject.toml, the lock, mutmut's version) and that run's summary.
Where the digest matches, the same mutants meet the same tests, and the gate prints the recorded summary instead
of running them again; any other tree runs the gate. `--record-verified` writes it after a full passing run.

Usage: python tests/mutation/check.py [--min-score 0.95] [--no-run] [--recheck] [--record-verified]"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tomllib
from collections import Counter
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EQUIVALENT = Path(__file__).with_name("equivalent.txt")
VERIFIED = Path(__file__).with_name("verified.json")
PASSED = Path(__file__).with_name("passed.json")
MUTATED = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mutmut"]["only_mutate"]
#: [tool.mutmut] only_mutate, as modules (a package's __init__ holds no code to mutate): `mutmut run` mutates them all
MODULES = [
    ".".join(path.relative_to(ROOT / "src").with_suffix("").parts)
    for pattern in MUTATED
    for path in sorted(ROOT.glob(pattern))
    if path.name != "__init__.py"
]
DETECTED = {"killed", "timeout", "segfault"}  # a mutant that fails the tests, hangs or crashes them is caught
UNDETECTED = {"survived", "no tests"}  # what a run must see of every explained mutant to record its module verified
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


def of_module(module: str, names) -> list[str]:
    """The mutant names among `names` that belong to `module` (mutmut names them `<module>.x<function>__mutmut_<n>`)."""
    return [name for name in names if name.startswith(module + ".x")]


def module_digest(module: str, reasons: dict[str, str]) -> str:
    """What fixes a module's mutants and which of them are explained: its source, the mutmut version and the names."""
    source = ROOT / "src" / (module.replace(".", "/") + ".py")
    explained_names = sorted(of_module(module, reasons))
    digest = hashlib.sha256(source.read_bytes())
    digest.update(version("mutmut").encode())
    digest.update("\n".join(explained_names).encode())
    return digest.hexdigest()


def recorded_digests() -> dict[str, str]:
    return json.loads(VERIFIED.read_text(encoding="utf-8")) if VERIFIED.exists() else {}


def verified_modules(reasons: dict[str, str]) -> set[str]:
    """The modules whose explained mutants a recorded run saw survive, unchanged since."""
    recorded = recorded_digests()
    return {module for module in MODULES if recorded.get(module) == module_digest(module, reasons)}


def known_survivors(reasons: dict[str, str]) -> set[str]:
    """The explained mutants not to run again: those of verified modules."""
    return {name for module in verified_modules(reasons) for name in of_module(module, reasons)}


def tree_digest() -> str:
    """What a whole gate's outcome depends on: every file git tracks but the documentation and `PASSED` (by path and
    contents, as they are on disk), and mutmut's and Python's versions."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    digest = hashlib.sha256(f"mutmut {version('mutmut')} python {sys.version_info[0]}.{sys.version_info[1]}".encode())
    for name in sorted(filter(None, listed.decode().split("\0"))):
        path = ROOT / name
        if name.startswith("docs/") or name.endswith(".md") or path == PASSED or not path.is_file():
            continue
        digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def recorded_pass() -> list[str] | None:
    """The summary of a passing whole gate recorded for this very tree, or None."""
    try:
        record = json.loads(PASSED.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return record["summary"] if record.get("tree") == tree_digest() else None


def record_pass(summary: list[str]) -> None:
    temporary = PASSED.with_suffix(".tmp")
    temporary.write_text(json.dumps({"tree": tree_digest(), "summary": summary}, indent=2) + "\n", encoding="utf-8")
    temporary.replace(PASSED)


def run_mutmut(skip: set[str]) -> None:
    """`mutmut run` on every mutant but `skip`. mutmut names its mutants only once it has generated them, so a first
    call runs the modules with nothing to skip (which makes the mutants), a second the rest by name."""

    def mutmut_run(*names: str) -> None:
        environment = {**os.environ, **SINGLE_THREADED}
        command = [sys.executable, "-m", "mutmut", "run", *names]
        subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, env=environment)

    whole_modules = [module for module in MODULES if not of_module(module, skip)]
    if not skip or not whole_modules:
        mutmut_run()
        return
    mutmut_run(*(f"{module}.x*" for module in whole_modules))
    rest = sorted(name for name, status in statuses().items() if status == "not checked" and name not in skip)
    if rest:
        mutmut_run(*rest)


def record_verified(modules: list[str], results: dict[str, str], reasons: dict[str, str]) -> None:
    """Write the digest of each module whose every explained mutant this run saw survive."""
    recorded = recorded_digests()
    for module in modules:
        mine = of_module(module, reasons)
        if all(results.get(name) in UNDETECTED for name in mine):
            recorded[module] = module_digest(module, reasons)
        else:
            recorded.pop(module, None)
            print(f"{module}: not recorded as verified (an explained mutant did not survive this run)")
    temporary = VERIFIED.with_suffix(".tmp")
    temporary.write_text(json.dumps(dict(sorted(recorded.items())), indent=2) + "\n", encoding="utf-8")
    temporary.replace(VERIFIED)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--min-score", type=float, default=0.95, help="killed-or-explained fraction required per module"
    )
    parser.add_argument("--no-run", action="store_true", help="read the last run's results only")
    parser.add_argument("--recheck", action="store_true", help="run the explained mutants of verified modules too")
    parser.add_argument(
        "--record-verified",
        action="store_true",
        help="run every mutant (as --recheck) and record the modules whose explained mutants all survived",
    )
    parser.add_argument(
        "--modules",
        nargs="+",
        default=MODULES,
        help="modules to mutate (of [tool.mutmut] only_mutate); CI runs the default",
    )
    args = parser.parse_args()
    whole = sorted(args.modules) == sorted(MODULES)
    if whole and not (args.no_run or args.recheck or args.record_verified):
        summary = recorded_pass()
        if summary is not None:
            print("\n".join(summary))
            print(f"(recorded in {PASSED.name} by a passing run on this very tree: not run again; --recheck runs it)")
            return 0
    reasons = explained()
    skip = set() if args.recheck or args.record_verified else known_survivors(reasons)
    if not args.no_run:
        run_mutmut(skip)
    results = statuses()
    failed = False
    summary: list[str] = []
    for module in args.modules:
        mine = {name: results[name] for name in of_module(module, results)}
        if not mine or any(status == "not checked" for name, status in mine.items() if name not in skip):
            print(f"{module}: not (fully) run; run without --no-run")
            failed = True
            continue
        counts = Counter(mine.values())
        detected = sum(counts[s] for s in DETECTED)
        survivors = [name for name, status in mine.items() if status not in DETECTED]
        unexplained = [name for name in survivors if name not in reasons]
        score = (detected + len(survivors) - len(unexplained)) / len(mine)
        known = sum(name in skip and status == "not checked" for name, status in mine.items())
        summary.append(
            f"{module}: {len(mine)} mutants, {detected} killed ({detected / len(mine):.1%}), "
            f"{len(survivors) - len(unexplained)} explained"
            + (f" ({known} known survivors not run again: the module is as verified)" if known else "")
            + f", {len(unexplained)} unexplained: {score:.1%} killed or explained ({dict(counts)})"
        )
        print(summary[-1])
        for name in unexplained:
            print(f"  unexplained: {name} ({mine[name]}); `mutmut show {name}`")
        failed |= bool(unexplained) or score < args.min_score
    in_scope = [name for module in args.modules for name in of_module(module, reasons)]
    # an explained mutant the tests now fail is stale; one that timed out is not (on a busy machine an equivalent
    # mutant's tests can run past mutmut's limit, which proves nothing about them)
    stale = sorted(name for name in in_scope if results.get(name) in DETECTED - {"timeout"} or name not in results)
    for name in stale:
        print(f"  listed as equivalent but now {results.get(name, 'gone')}: {name} (remove it from {EQUIVALENT.name})")
    if args.record_verified and not (failed or stale):
        record_verified(args.modules, results, reasons)
        if whole:
            record_pass(summary)  # after verified.json, which the tree's digest covers
    return 1 if failed or stale else 0


if __name__ == "__main__":
    sys.exit(main())
