"""Packing: K copies of one cell at once on one device, each its own process started as Snakemake starts a
training job (the `fdabench` command line, one cell per process). Each child runs the cell as `fdabench train`
does (`run_cell`) and reports its final and its peak memory (CUDA `max_memory_allocated`); the parent times the
K processes from start to the last exit and, where `nvidia-smi` exists, samples the memory the driver sees."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from statistics import median
from typing import Any

import torch

import fdabench
from fdabench.cell.run import run_cell
from fdabench.core.io import write_json_atomic
from fdabench.core.readers import read_json, reading
from fdabench.speed.aggregation import peak_rss_bytes, reset_peak_rss

#: the child's command line after the interpreter
WORKER_ARGUMENTS = ("-m", "fdabench", "bench", "gpu", "--worker")


def worker(spec_path: str, output: str) -> dict[str, Any]:
    """Run the cell of the spec file (config, prepared, partition, device, threads) and write its final, its
    training seconds and its peak memory to `output`."""
    spec = read_json(spec_path, "a packed cell's spec")
    device = torch.device(spec["device"])
    reset_peak_rss()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    result = run_cell(spec["config"], spec["prepared"], spec["partition"], spec["threads"], spec["device"])
    cuda = device.type == "cuda"
    record = {
        "pid": os.getpid(),
        "device": result["device"],
        "final": result["final"],
        "train_seconds": result["train_seconds"],
        "wall_seconds": result["wall_seconds"],
        "peak_memory_bytes": int(torch.cuda.max_memory_allocated(device) if cuda else peak_rss_bytes()),
        "peak_memory_kind": "cuda max_memory_allocated" if cuda else "process peak RSS",
    }
    write_json_atomic(output, record)
    return record


def child_environment() -> dict[str, str]:
    """This environment with fdabench's own source folder first on PYTHONPATH (an uninstalled checkout works)."""
    source = str(Path(fdabench.__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": source + (os.pathsep + path if path else ""), "PYTHONUNBUFFERED": "1"}


def run_level(spec_path: Path, count: int, work: Path, timeout: float) -> dict[str, Any]:
    """Start `count` workers on the spec at once and wait for all (killing those still running after `timeout`
    seconds); the level's wall time, cells per hour, each child's report, and nvidia-smi's samples."""
    env = child_environment()
    children = []
    sampler = GpuMemorySampler()
    with sampler:
        started = time.perf_counter()
        for index in range(count):
            output = work / f"k{count}_{index}.json"
            log = open(work / f"k{count}_{index}.log", "w")  # noqa: SIM115 (closed below, after the child exits)
            command = [sys.executable, *WORKER_ARGUMENTS, str(spec_path), "--output", str(output)]
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
            children.append({"process": process, "output": output, "log": log, "ended": None})
        while any(child["ended"] is None for child in children) and time.perf_counter() - started < timeout:
            for child in children:
                if child["ended"] is None and child["process"].poll() is not None:
                    child["ended"] = time.perf_counter()
            time.sleep(0.05)
    for child in children:
        if child["process"].poll() is None:
            child["process"].kill()
        child["process"].wait()
        child["log"].close()
    return level_record(count, started, children, sampler.summary())


def level_record(
    count: int, started: float, children: list[dict[str, Any]], smi: dict[str, Any] | None
) -> dict[str, Any]:
    """One packing level's measurements from its children (process, output, log, end time)."""
    reports, failures = [], []
    for child in children:
        if child["ended"] is not None and child["process"].returncode == 0 and child["output"].exists():
            reports.append(read_json(child["output"], "a packed cell's report"))
        else:
            with reading(child["log"].name, "a packed cell's log"):
                log = Path(child["log"].name).read_text(errors="replace")
            failures.append({"returncode": child["process"].returncode, "log_tail": log[-2000:]})
    timed_out = any(child["ended"] is None for child in children)
    wall = None if timed_out else max(child["ended"] for child in children) - started
    peaks = [report["peak_memory_bytes"] for report in reports]
    return {
        "K": count,
        "wall_seconds": wall,
        "cells_per_hour": None if wall is None or failures else count * 3600 / wall,
        "timed_out": timed_out,
        "process_seconds": [None if c["ended"] is None else c["ended"] - started for c in children],
        "train_seconds_median": median(r["train_seconds"] for r in reports) if reports else None,
        "peak_memory_bytes": peaks,
        "peak_memory_bytes_max": max(peaks) if peaks else None,
        "peak_memory_kind": reports[0]["peak_memory_kind"] if reports else None,
        "finals": sorted({r["final"] for r in reports}),
        "failures": failures[:2],
        "failed": len(failures),
        "nvidia_smi": smi,
    }


class GpuMemorySampler:
    """nvidia-smi's GPU memory in use, sampled in a thread while a level runs: the largest total, and each
    process's largest where the driver lists processes. Does nothing where nvidia-smi is absent."""

    def __init__(self, interval: float = 0.5, command: str = "nvidia-smi"):
        self.interval, self.command = interval, shutil.which(command)
        self.total_mib: int | None = None
        self.process_mib: dict[str, int] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> GpuMemorySampler:
        if self.command:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _query(self, *arguments: str) -> str:
        try:
            done = subprocess.run([self.command, *arguments], capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return done.stdout if done.returncode == 0 else ""

    def _sample(self) -> None:
        while not self._stop.is_set():
            total = parse_used_mib(self._query("--query-gpu=memory.used", "--format=csv,noheader,nounits"))
            if total is not None:
                self.total_mib = max(total, self.total_mib or 0)
            apps = parse_process_mib(
                self._query("--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits")
            )
            for pid, used in apps.items():
                self.process_mib[pid] = max(used, self.process_mib.get(pid, 0))
            self.samples += 1
            self._stop.wait(self.interval)

    def summary(self) -> dict[str, Any] | None:
        if not self.command:
            return None
        return {
            "samples": self.samples,
            "used_mib_max": self.total_mib,
            "process_mib_max": sorted(self.process_mib.values(), reverse=True),
        }


def parse_used_mib(text: str) -> int | None:
    """The first GPU's `memory.used` from nvidia-smi's csv,noheader,nounits output."""
    for line in text.splitlines():
        if line.strip().isdigit():
            return int(line.strip())
    return None


def parse_process_mib(text: str) -> dict[str, int]:
    """pid -> MiB from `--query-compute-apps=pid,used_memory` (csv, no header, no units); unreported values skipped."""
    found = {}
    for line in text.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) == 2 and parts[1].isdigit():
            found[parts[0]] = int(parts[1])
    return found
