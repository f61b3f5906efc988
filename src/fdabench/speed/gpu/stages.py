"""The stages of `fdabench bench gpu`, each `(deadline, result) -> failure reason or None` (`budget.Stage`): the
CUDA tests, the FMNIST cells one by one and as cohorts, packing, model steps and the forecast, and the GPU-vs-CPU
agreement of one small cell; and the machine's description. `Sizes` holds what a real run and a dry run differ in."""

from __future__ import annotations

import copy
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from fdabench.cell.run import run_cell
from fdabench.config import Params
from fdabench.core.io import content_hash, file_sha256, write_json_atomic
from fdabench.core.readers import read_json, read_text
from fdabench.speed.cell import bench_cell, cohort_summary
from fdabench.speed.gpu import forecast, inputs, packing, steps
from fdabench.speed.gpu.budget import Deadline

#: the cells the issue names: paper_cpu's FMNIST noise-0.4 FedGP and its auto-weighted FedGP
CELL_SUITE, CELL_EXPERIMENT, CELL_TARGET, CELL_SEED = "paper_cpu", "fmnist_noise", "noise0.4", 0
CELL_METHODS = ("fedgp", "fedgp_auto_threshold")
#: the cell K copies of which are packed onto the device
PACK_METHOD = "fedgp"
#: the suite whose tables the forecast prices
FORECAST_SUITE = "paper"
#: the small cell run end to end on the device and on the CPU, and how far their finals may differ: float
#: rounding in another order moves a few borderline test predictions over the cell's rounds (the demo target's
#: test split is 120 images, so 0.02 is 2 of them)
AGREEMENT_CELL = ("demo", "colored_digits", "fedgp", "-90", 0)
AGREEMENT_TOLERANCE = 0.02


@dataclass(frozen=True)
class Sizes:
    """What a run measures: the real sizes on a GPU, or toy sizes for a CPU dry run."""

    fmnist_per_class: tuple[int, int]  # (training, test) images per class of the FMNIST stand-in
    cell_rounds: int  # FDA rounds timed per cell run (after one warm-up round)
    repeats: int  # runs of each cohort mode per cell (medians)
    pack_counts: tuple[int, ...]  # K: cells at once
    pack_rounds: int  # FDA rounds of each packed cell (after one warm-up round)
    image_size: int | None  # the step timings' image size (None: the experiments' own, 224)
    timed_steps: int  # training steps per timed epoch
    step_repeats: int  # timed epochs (and evaluation passes) per model and batch size
    eval_batch: int  # cap on the evaluation batch
    agreement_rounds: int | None  # the agreement cell's rounds (None: its own)
    pytest_collect_only: bool


FULL = Sizes((6_000, 1_000), 3, 3, (1, 2, 4, 8, 16), 2, None, 10, 3, 1024, None, False)
DRY_RUN = Sizes((120, 10), 1, 1, (1, 2), 1, 16, 1, 1, 8, 3, True)


@dataclass
class Context:
    """What every stage reads: the params file, the device under test, the sizes, the repository (its tests) and a
    scratch folder for generated inputs."""

    params: Params
    device: torch.device
    sizes: Sizes
    repo: Path
    work: Path
    _fmnist: tuple[str, str] | None = field(default=None, repr=False)

    def cell_config(self, method: str) -> dict[str, Any]:
        params = self.params.for_suite(CELL_SUITE)
        return copy.deepcopy(params.cell(CELL_EXPERIMENT, method, CELL_TARGET, CELL_SEED).config)

    def fmnist_inputs(self) -> tuple[str, str]:
        """The FMNIST cells' prepared stand-in and partition (made once)."""
        if self._fmnist is None:
            dataset = inputs.fmnist_stand_in(self.sizes.fmnist_per_class)
            self._fmnist = inputs.write_inputs(self.work / "fmnist", dataset, self.cell_config(PACK_METHOD))
        return self._fmnist


# -- the machine ------------------------------------------------------------------------------------------------


def environment(device: torch.device, repo: Path) -> dict[str, Any]:
    """The device, its driver, the software and the code measured (the commit where git answers, else
    $FDABENCH_COMMIT; and a hash of fdabench's source files, which needs no git)."""
    cuda = device.type == "cuda"
    properties = torch.cuda.get_device_properties(device) if cuda else None
    smi = _run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
    git = _run(["git", "-C", str(repo), "rev-parse", "HEAD"])
    dirty = _run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"]) if git else None
    return {
        "device": properties.name if cuda else cpu_name(),
        "device_type": device.type,
        "device_memory_bytes": properties.total_memory if cuda else None,
        "multiprocessors": properties.multi_processor_count if cuda else None,
        "driver": smi.split(",")[1].strip() if smi and smi.count(",") >= 2 else None,
        "nvidia_smi": smi or None,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "commit": git or os.environ.get("FDABENCH_COMMIT"),
        "uncommitted_changes": None if dirty is None else bool(dirty),
        "source_hash": source_hash(),
    }


def cpu_name() -> str:
    """The processor's model name (Linux's /proc/cpuinfo), else what `platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def source_hash() -> str:
    """A hash of every fdabench source file's path and contents: which code ran, where no git history travels."""
    package = Path(inputs.__file__).resolve().parents[2]
    files = sorted(package.rglob("*.py"))
    return content_hash({str(f.relative_to(package)): file_sha256(f) for f in files})[:16]


def _run(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


# -- pytest -m gpu ------------------------------------------------------------------------------------------------


def gpu_test_files(tests: Path) -> list[str]:
    """The test files that mark tests `gpu` (collecting only these keeps the run free of the others' imports)."""
    return sorted(
        str(p.relative_to(tests.parent)) for p in tests.rglob("test_*.py") if "mark.gpu" in read_text(p, "a test file")
    )


def pytest_counts(output: str) -> dict[str, int]:
    """Outcome counts from pytest's summary line (passed, failed, skipped, errors, deselected; collected)."""
    counts = {}
    for number, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed)", output):
        counts["errors" if word.startswith("error") else word] = int(number)
    collected = re.search(r"(\d+)(?:/\d+)? tests? collected", output)
    if collected:
        counts["collected"] = int(collected.group(1))
    return counts


def pytest_stage(ctx: Context, deadline: Deadline, result: dict[str, Any]) -> str | None:
    files = gpu_test_files(ctx.repo / "tests")
    if not files:
        raise FileNotFoundError(f"no test file under {ctx.repo / 'tests'} marks tests gpu")
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider"]
    command += ["--collect-only"] if ctx.sizes.pytest_collect_only else []
    result.update(command=[*command[1:], *files], collect_only=ctx.sizes.pytest_collect_only)
    try:
        done = subprocess.run(
            [*command, *files],
            cwd=ctx.repo,
            capture_output=True,
            text=True,
            timeout=max(1.0, deadline.left()),
            env=packing.child_environment(),
        )
    except subprocess.TimeoutExpired as timeout:
        result["output_tail"] = _text(timeout.stdout)[-3000:]
        raise
    output = done.stdout + done.stderr
    result.update(returncode=done.returncode, counts=pytest_counts(output), output_tail=output[-3000:])
    if done.returncode != 0:
        return f"pytest exited with status {done.returncode}"
    if not ctx.sizes.pytest_collect_only and not result["counts"].get("passed"):
        return "no CUDA test passed (all skipped: is CUDA visible to pytest?)"
    return None


def _text(value: str | bytes | None) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else (value or "")


# -- the FMNIST cells, one by one and as cohorts ----------------------------------------------------------------------


def cells_stage(ctx: Context, deadline: Deadline, result: dict[str, Any]) -> str | None:
    params = ctx.params.for_suite(CELL_SUITE)
    prepared, partition = ctx.fmnist_inputs()
    result.update(
        suite=CELL_SUITE,
        experiment=CELL_EXPERIMENT,
        target=CELL_TARGET,
        seed=CELL_SEED,
        rounds=ctx.sizes.cell_rounds,
        repeats_planned=ctx.sizes.repeats,
        data=inputs.stand_in_note(ctx.sizes.fmnist_per_class),
        cells={},
    )
    runs: dict[str, list[dict[str, Any]]] = {method: [] for method in CELL_METHODS}
    took: dict[str, float] = {}
    for repeat in range(ctx.sizes.repeats):
        for method in CELL_METHODS:
            if repeat and took[method] > deadline.left():
                result["stopped"] = f"time budget: {repeat} of {ctx.sizes.repeats} repeats of {method}"
                return None
            began = time.perf_counter()
            for mode in ("off", "on"):
                runs[method].append(
                    bench_cell(
                        params,
                        CELL_EXPERIMENT,
                        method,
                        CELL_TARGET,
                        CELL_SEED,
                        ctx.sizes.cell_rounds,
                        ctx.params.threads_per_cell,
                        str(ctx.device),
                        mode,
                        inputs=(prepared, partition),
                    )
                )
            took[method] = time.perf_counter() - began
            result["cells"][method] = cohort_summary(runs[method])
    return None


# -- packing ----------------------------------------------------------------------------------------------------------


def packing_stage(ctx: Context, deadline: Deadline, result: dict[str, Any]) -> str | None:
    config = ctx.cell_config(PACK_METHOD)
    config["train"].update(warmup_rounds=1, rounds=ctx.sizes.pack_rounds)
    prepared, partition = ctx.fmnist_inputs()
    spec = ctx.work / "packing" / "cell.json"
    device = str(ctx.device)
    write_json_atomic(
        spec, {"config": config, "prepared": prepared, "partition": partition, "device": device, "threads": 1}
    )
    result.update(
        cell={"suite": CELL_SUITE, "experiment": CELL_EXPERIMENT, "method": PACK_METHOD, "target": CELL_TARGET},
        rounds={"warmup": 1, "fda": ctx.sizes.pack_rounds},
        data=inputs.stand_in_note(ctx.sizes.fmnist_per_class),
        launch=" ".join(["python", *packing.WORKER_ARGUMENTS, "<cell.json>", "--output", "<result.json>"]),
        levels=[],
    )
    for count in ctx.sizes.pack_counts:
        if result["levels"]:
            last = result["levels"][-1]
            predicted = last["wall_seconds"] * count / last["K"]
            if predicted > deadline.left():
                result["stopped"] = (
                    f"time budget: K = {count} would take about {predicted:.0f} s, {max(0, deadline.left()):.0f} s left"
                )
                break
        level = packing.run_level(spec, count, spec.parent, max(1.0, deadline.left()))
        result["levels"].append(level)
        if level["failed"]:
            return f"{level['failed']} of {count} packed cells failed (K = {count})"
        if level["timed_out"]:
            result["stopped"] = f"time budget: K = {count} did not finish in time"
            break
    return None


def worker(spec: str, output: str) -> dict[str, Any]:
    """A packed cell's process (`fdabench bench gpu --worker SPEC --output FILE`)."""
    return packing.worker(spec, output)


# -- model steps and the forecast -------------------------------------------------------------------------------------


def steps_stage(ctx: Context, deadline: Deadline, result: dict[str, Any]) -> str | None:
    paper = ctx.params.for_suite(FORECAST_SUITE)
    workloads = forecast.suite_workloads(paper, ctx.sizes.image_size)
    result.update(suite=FORECAST_SUITE, timings=[], not_timed=[])
    failed = 0
    for spec in forecast.timing_specs(workloads):
        model = f"{spec['model']} at {'x'.join(map(str, spec['input_shape']))}"
        if deadline.passed():
            result["not_timed"].append(f"{model}: time budget")
            continue
        try:
            result["timings"].append(_time_model(ctx, spec))
        except Exception as error:  # one model (out of memory, say) must not lose the others' timings
            failed += 1
            result["not_timed"].append(f"{model}: {type(error).__name__}: {str(error)[:300]}")
        if ctx.device.type == "cuda":
            torch.cuda.empty_cache()
    result["forecast"] = forecast.table_forecast(paper.tables(), workloads, result["timings"])
    return f"{failed} model(s) could not be timed" if failed else None


def _time_model(ctx: Context, spec: dict[str, Any]) -> dict[str, Any]:
    """`steps.time_model` as a cell trains (deterministic algorithms on CUDA); where the model has no deterministic
    kernel (a training job would stop there), timed without, and the error recorded."""
    sizes = ctx.sizes
    time_it = lambda: steps.time_model(spec, ctx.device, sizes.timed_steps, sizes.step_repeats, sizes.eval_batch)
    deterministic = torch.are_deterministic_algorithms_enabled()
    try:
        return time_it() | {"deterministic": deterministic}
    except RuntimeError as error:
        if not deterministic or "deterministic" not in str(error):
            raise
        torch.use_deterministic_algorithms(False)
        try:
            return time_it() | {"deterministic": False, "deterministic_error": str(error)[:500]}
        finally:
            torch.use_deterministic_algorithms(True)


# -- one small cell on the device and on the CPU ----------------------------------------------------------------------


def agreement_stage(ctx: Context, deadline: Deadline, result: dict[str, Any]) -> str | None:
    suite, experiment, method, target, seed = AGREEMENT_CELL
    config = copy.deepcopy(ctx.params.for_suite(suite).cell(experiment, method, target, seed).config)
    if ctx.sizes.agreement_rounds is not None:
        config["train"]["rounds"] = ctx.sizes.agreement_rounds
    prepared, partition = inputs.embedded_inputs(ctx.work / experiment, config)
    test_images = next(c["count"] for c in read_json(partition, "a partition")["clients"] if c["role"] == "target_test")
    runs = {
        "device": run_cell(config, prepared, partition, 1, str(ctx.device)),
        "cpu": run_cell(config, prepared, partition, 1, "cpu"),
    }
    rounds = {name: run["rounds"] for name, run in runs.items()}
    metric = runs["cpu"]["metric"]
    difference = abs(runs["device"]["final"] - runs["cpu"]["final"])
    result.update(
        cell={"suite": suite, "experiment": experiment, "method": method, "target": target, "seed": seed},
        rounds=len(rounds["cpu"]),
        test_images=test_images,
        metric=metric,
        device=runs["device"]["device"],
        device_final=runs["device"]["final"],
        cpu_final=runs["cpu"]["final"],
        difference=difference,
        tolerance=AGREEMENT_TOLERANCE,
        agree=difference <= AGREEMENT_TOLERANCE,
        largest_round_difference=max(
            abs(a[metric] - b[metric]) for a, b in zip(rounds["device"], rounds["cpu"], strict=True)
        ),
        first_round_loss_difference=abs(rounds["device"][0]["loss"] - rounds["cpu"][0]["loss"]),
        train_seconds={name: run["train_seconds"] for name, run in runs.items()},
    )
    if not result["agree"]:
        return f"finals differ by {difference:.4f}, more than {AGREEMENT_TOLERANCE}"
    return None
