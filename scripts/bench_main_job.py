#!/usr/bin/env python3
"""Benchmark the README's main job, `snakemake --cores 8 results/table1.csv`, from a clean clone.

The repository's files as a clean clone has them (git's tracked and untracked-but-not-ignored files: no
results/, data/prepared, data/partitions or .snakemake) are copied to a temporary folder and the job runs
there, with that copy's src/ first on PYTHONPATH and a private fork-server folder (XDG_RUNTIME_DIR), so the
fork server starts cold as it does in a fresh clone. Nothing in the repository itself is touched.

Prints the wall time and where it went:

* start-up: `snakemake -n` of the same target in the same copy (Snakemake's and fdabench's imports, params
  validation, the workspace check, building the DAG), measured before the run;
* the run's phases from Snakemake's log (1 s resolution): until the first job starts, data jobs (prepare,
  partition), training (first to last training job), report (tables and links);
* per training job: Snakemake's job time (start to finish in its log), the cell's own time in the fork
  server's child (`wall_seconds`), its training time (`train_seconds`, `train_cpu_seconds`);
* CPU: the Snakemake process tree's user+sys time, and the whole machine's busy CPU time (/proc/stat: also
  counts the fork server and its children, and anything else running).

Training jobs are the `train` rule's (one cell a job) or a `train_<experiment>` rule's (params.yaml
`cells_per_job: targets`: a job trains its targets; `--config cells_per_job=cell` measures one job a cell).

Usage: scripts/bench_main_job.py [--keep DIR] [--json FILE] [--cores 8] [--configfile FILE] [--config KEY=VALUE ...]
       [target ...]
(`--keep DIR` copies the run's results/cells there, e.g. for scripts/compare_cells.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
RULE = re.compile(r"^(?:local)?rule (\w+):$")
FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
#: the training rules: `train` (a cell a job) and `train_<experiment>` (a group of cells a job)
TRAINING = re.compile(r"^train(_\w+)?$")


def clean_copy(destination: Path) -> None:
    """The files a clean clone has (tracked, and untracked but not ignored), as they are in the worktree."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = ROOT / os.fsdecode(name)
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the worktree, not yet in git
        target = destination / os.fsdecode(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)


def busy_cpu_seconds() -> float:
    """The machine's non-idle CPU time so far (all CPUs)."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def parse_log(path: Path) -> list[dict]:
    """Snakemake's jobs: rule, start and finish (seconds since the epoch, 1 s resolution)."""
    jobs: dict[str, dict] = {}
    stamp = rule = None
    for line in path.read_text().splitlines():
        if match := STAMP.match(line):
            stamp = datetime.strptime(match.group(1), "%a %b %d %H:%M:%S %Y").timestamp()
        elif match := RULE.match(line):
            rule = match.group(1)
        elif (match := JOBID.match(line)) and rule is not None:
            jobs[match.group(1)] = {"rule": rule, "start": stamp}
            rule = None
        elif match := FINISHED.match(line):
            job = jobs.setdefault(match.group(1), {"rule": match.group(2), "start": stamp})
            job["finish"] = stamp
    return list(jobs.values())


def run(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the process tree, exit status)."""
    cpu, started = children_cpu_seconds(), time.perf_counter()
    code = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    return time.perf_counter() - started, children_cpu_seconds() - cpu, code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", default=["results/table1.csv"])
    parser.add_argument("--cores", type=int, default=8)
    parser.add_argument("--keep", type=Path, help="copy the run's results/cells here")
    parser.add_argument("--json", type=Path, help="write the numbers here as JSON")
    parser.add_argument("--config", nargs="+", default=[], metavar="KEY=VALUE", help="passed to snakemake --config")
    parser.add_argument(
        "--configfile", type=Path, help="a YAML file merged over params.yaml (e.g. a suite's train setting)"
    )
    args = parser.parse_args()
    snakemake = shutil.which("snakemake")
    if snakemake is None:
        print("bench_main_job: snakemake is not on PATH (activate the environment)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="fdabench-bench-") as temporary:
        work = Path(temporary) / "repo"
        runtime = Path(temporary) / "run"
        runtime.mkdir(mode=0o700)
        clean_copy(work)
        env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(work / "src"), os.environ.get("PYTHONPATH")]))
        command = [snakemake, "--cores", str(args.cores), *args.targets]
        if args.configfile:
            shutil.copy(args.configfile, work / "overlay.yaml")
            command += ["--configfile", "params.yaml", "overlay.yaml"]
        if args.config:
            command += ["--config", *args.config]
        dry_wall, dry_cpu, code = run([*command, "-n"], work, env)
        if code:
            print(f"bench_main_job: the dry run failed (status {code})", file=sys.stderr)
            return 1
        shutil.rmtree(work / ".snakemake", ignore_errors=True)  # the run starts as a clean clone does
        busy = busy_cpu_seconds()
        launched = time.time()
        wall, cpu, code = run(command, work, env)
        busy = busy_cpu_seconds() - busy
        logs = sorted((work / ".snakemake" / "log").glob("*.snakemake.log"))
        jobs = parse_log(logs[-1]) if logs else []
        cells = [json.loads(path.read_text()) for path in sorted((work / "results" / "cells").rglob("*.json"))]
        if args.keep:
            shutil.rmtree(args.keep, ignore_errors=True)
            shutil.copytree(work / "results" / "cells", args.keep)
    report = summarise(wall, cpu, busy, launched, dry_wall, dry_cpu, jobs, cells, code)
    for line in format_report(report):
        print(line)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if code == 0 else 1


def summarise(wall, cpu, busy, launched, dry_wall, dry_cpu, jobs, cells, code) -> dict:
    train = [job for job in jobs if TRAINING.match(job["rule"]) and job.get("finish")]
    data = [job for job in jobs if job["rule"] in ("prepare", "partition") and job.get("finish")]
    starts = [job["start"] for job in jobs if job.get("start")]
    first = min(starts) if starts else launched
    train_start = min((job["start"] for job in train), default=first)
    train_end = max((job["finish"] for job in train), default=train_start)
    durations = [job["finish"] - job["start"] for job in train]
    return {
        "exit_status": code,
        "wall_seconds": wall,
        "snakemake_tree_cpu_seconds": cpu,
        "machine_busy_cpu_seconds": busy,
        "dry_run_wall_seconds": dry_wall,
        "dry_run_cpu_seconds": dry_cpu,
        "phases": {
            "until_first_job": first - launched,
            "data_jobs": (max((job["finish"] for job in data), default=first) - first) if data else 0.0,
            "training": train_end - train_start,
            "after_training": launched + wall - train_end,
        },
        "cells": len(cells),
        "train_jobs": len(train),
        "train_job_seconds_mean": statistics.fmean(durations) if durations else 0.0,
        "cell_wall_seconds_mean": statistics.fmean(c["wall_seconds"] for c in cells) if cells else 0.0,
        "cell_train_seconds_mean": statistics.fmean(c["train_seconds"] for c in cells) if cells else 0.0,
        "train_cpu_seconds_total": sum(c["train_cpu_seconds"] for c in cells),
        "train_jobs_running_mean": sum(durations) / (train_end - train_start) if train_end > train_start else 0.0,
    }


def format_report(r: dict) -> list[str]:
    p = r["phases"]
    return [
        f"main job: {r['wall_seconds']:.1f} s wall (exit status {r['exit_status']}), {r['cells']} cells",
        f"  start-up (snakemake -n): {r['dry_run_wall_seconds']:.1f} s wall, {r['dry_run_cpu_seconds']:.1f} s CPU",
        f"  phases (1 s resolution): until first job {p['until_first_job']:.0f} s, data jobs {p['data_jobs']:.0f} s, "
        f"training {p['training']:.0f} s, after training {p['after_training']:.0f} s",
        f"  training jobs: {r['train_jobs']} for {r['cells']} cells, {r['train_jobs_running_mean']:.1f} running on "
        "average; per job "
        f"{r['train_job_seconds_mean']:.2f} s in Snakemake's log, {r['cell_wall_seconds_mean']:.2f} s in the cell "
        f"(wall_seconds), {r['cell_train_seconds_mean']:.2f} s training",
        f"  CPU: training {r['train_cpu_seconds_total']:.1f} s (sum of train_cpu_seconds), Snakemake tree "
        f"{r['snakemake_tree_cpu_seconds']:.1f} s, machine busy {r['machine_busy_cpu_seconds']:.1f} s",
    ]


if __name__ == "__main__":
    sys.exit(main())
