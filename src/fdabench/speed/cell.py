"""`fdabench bench cell`: a few rounds of one cell, timed, against centralised training of the same model on the
same number of sample-steps, measured in the same process (issue: throughput).

Reports seconds per round (per phase), samples per second, peak memory, where a round's time goes (source and
target training, aggregation, evaluation; round-loop methods) and the FL overhead: the cell's time divided by the
centralised time. `compare_cohort` runs the cell one by one and as cohorts, alternately in one process, and says
which is faster and whether `cohort: auto` picks it."""

from __future__ import annotations

import copy
import dataclasses
import time
from statistics import median
from typing import Any

import torch

from fdabench.cell.setup import load_cell
from fdabench.config import Params
from fdabench.config.lookup import cell_inputs, resolve_cell
from fdabench.federation import cohort as cohort_training
from fdabench.federation.client import loss_function, train_locally
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import ClientData
from fdabench.federation.rounds import build_cell_model, local_settings, run_rounds
from fdabench.federation.settings import TrainSettings
from fdabench.federation.sites import ROUND_PARTS, TimedSites, client_generator
from fdabench.speed.aggregation import peak_rss_bytes, reset_peak_rss


def clock(device: torch.device) -> float:
    """`time.perf_counter()` once the device's queued work is done (CUDA runs asynchronously)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def round_samples(problem, settings: TrainSettings, phase: str) -> int:
    """Training samples a round processes: every source's epochs over its samples, and in FDA rounds the target's
    over its labelled samples; in a fine-tuning round one epoch of the target's alone."""
    source, target = local_settings(settings)
    if phase == "finetune":
        return len(problem.target_labelled)
    samples = sum(source.epochs * len(client) for client in problem.sources)
    if phase != "warmup":
        samples += target.epochs * len(problem.target_labelled)
    return samples


def centralised_seconds(
    problem, settings: TrainSettings, seed: int, device: torch.device, samples: int
) -> tuple[float, int]:
    """Seconds to train the cell's model on the sources' pooled samples, centralised, for about `samples`
    sample-steps (whole epochs) with the sources' batch size and optimiser; and the sample-steps taken."""
    model = build_cell_model(problem, settings, seed, device)
    pooled = ClientData(
        "pooled",
        torch.cat([client.x for client in problem.sources]),
        torch.cat([client.y for client in problem.sources]),
    )
    source, _ = local_settings(settings)
    epochs = max(1, round(samples / len(pooled)))
    local = dataclasses.replace(source, epochs=epochs)
    space = ParameterSpace(model)
    loss_fn = loss_function(problem.task)
    started = clock(device)
    train_locally(space, space.get(), pooled, local, loss_fn, client_generator(seed, 0))
    return clock(device) - started, epochs * len(pooled)


def bench_cell(
    params: Params,
    experiment: str,
    method_name: str,
    target: str | None = None,
    seed: int | None = None,
    rounds: int = 3,
    threads: int = 1,
    device: str | None = None,
    cohort: str | None = None,
    inputs: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """Run the cell for at most one warm-up round and `rounds` FDA rounds, time every round after the first, and
    time the centralised reference on as many sample-steps; the measurements as a JSON-ready dict. `inputs`
    (prepared data, partition) replaces the files the suite builds (e.g. generated stand-ins)."""
    target, seed = resolve_cell(params, experiment, method_name, target, seed)
    cell = params.cell(experiment, method_name, target, seed)
    config = copy.deepcopy(cell.config)
    config["train"]["warmup_rounds"] = min(config["train"].get("warmup_rounds", 0), 1)
    config["train"]["rounds"] = rounds
    if cohort is not None:
        config["train"]["cohort"] = cohort
    prepared, partition = inputs or cell_inputs(params, experiment, target, seed)
    torch.set_num_threads(threads)
    setup = load_cell(config, prepared, partition, device)
    problem, settings, method, where = setup.problem, setup.settings, setup.method, setup.device

    now = lambda: clock(where)
    timed: list[TimedSites] = []  # the sites the round loop talks to, timed (round-loop methods)

    def hook(sites):
        timed.append(TimedSites(sites, now))
        return timed[-1]

    parts_now = lambda: dict(timed[0].seconds) if timed else dict.fromkeys(ROUND_PARTS, 0.0)
    # after each round: its phase, the clock and the parts' running totals; the first round is not timed (it
    # pays the start-up: allocations, thread pools, lazy initialisation)
    marks: list[tuple[str, float, dict[str, float]]] = []
    on_round = lambda record, total: marks.append((record["phase"], now(), parts_now()))
    if where.type == "cuda":
        torch.cuda.reset_peak_memory_stats(where)
    reset_peak_rss()
    run_rounds(method, problem, settings, seed, where, on_round=on_round, sites_hook=hook)
    if len(marks) < 2:
        raise ValueError(f"{len(marks)} round ran; the bench needs 2 or more (the first is not timed)")
    durations: dict[str, list[float]] = {}
    for (_, before, _), (phase, after, _) in zip(marks, marks[1:]):
        durations.setdefault(phase, []).append(after - before)
    total = marks[-1][1] - marks[0][1]
    parts = {part: marks[-1][2][part] - marks[0][2][part] for part in ROUND_PARTS}
    samples = sum(round_samples(problem, settings, phase) for phase, _, _ in marks[1:])
    centralised_seconds(problem, settings, seed, where, 1)  # untimed: the same start-up, paid once
    central, central_samples = centralised_seconds(problem, settings, seed, where, samples)
    peak = torch.cuda.max_memory_allocated(where) if where.type == "cuda" else peak_rss_bytes()
    return {
        "cell": {
            "suite": params.suite_name,
            "experiment": experiment,
            "method": method_name,
            "target": target,
            "seed": seed,
        },
        "device": str(where),
        "model": settings.model,
        "threads": threads,
        "cohort": config["train"].get("cohort", "auto"),
        "cohorts_trained": timed[0].cohorts if timed else 0,  # 0: the sources trained one by one
        "timed_rounds": {phase: len(values) for phase, values in durations.items()},
        "seconds_per_round": {phase: median(values) for phase, values in durations.items()},
        "seconds": total,
        "samples": samples,
        "samples_per_second": samples / total,
        "peak_memory_bytes": int(peak),
        "peak_memory_kind": "cuda max_memory_allocated" if where.type == "cuda" else "process peak RSS",
        "share_of_time": {part: seconds / total for part, seconds in parts.items()}
        | {"other": 1 - sum(parts.values()) / total}
        if any(parts.values())
        else {},
        "centralised": {
            "seconds": central,
            "samples": central_samples,
            "samples_per_second": central_samples / central,
        },
        "fl_overhead": (total / samples) / (central / central_samples),
    }


def compare_cohort(
    params: Params,
    experiment: str,
    method_name: str,
    target: str | None = None,
    seed: int | None = None,
    rounds: int = 3,
    threads: int = 1,
    device: str | None = None,
    repeats: int = 2,
    inputs: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """`bench_cell` with `cohort: off` and `cohort: on`, alternately `repeats` times in this process (so both see the
    same machine load, threads and device), summarised by `cohort_summary`."""
    if repeats < 1:
        raise ValueError(f"repeats must be 1 or more, not {repeats}")
    runs = [
        bench_cell(params, experiment, method_name, target, seed, rounds, threads, device, mode, inputs)
        for _ in range(repeats)
        for mode in ("off", "on")
    ]
    return cohort_summary(runs)


def cohort_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One cell's `bench_cell` runs with `cohort: off` and `on`: each mode's median seconds per FDA round,
    samples/s, FL overhead and largest peak memory, which is faster, and whether `cohort: auto` (`auto_cohort`,
    for the device type and the model) picks it."""
    modes = {}
    for mode in ("off", "on"):
        mine = [run for run in runs if run["cohort"] == mode]
        modes[mode] = {
            "seconds_per_fda_round": median(run["seconds_per_round"]["fda"] for run in mine),
            "samples_per_second": median(run["samples_per_second"] for run in mine),
            "fl_overhead": median(run["fl_overhead"] for run in mine),
            "peak_memory_bytes": max(run["peak_memory_bytes"] for run in mine),
            "cohorts_trained": mine[0]["cohorts_trained"],
        }
    cell = runs[0]["cell"]
    if not modes["on"]["cohorts_trained"]:
        raise ValueError(
            f"{cell['method']} on {cell['experiment']}: the sources cannot train as a cohort (unequal sizes, a model "
            "with buffers or dropout, or a custom local loss), so there is nothing to compare"
        )
    faster = min(modes, key=lambda mode: modes[mode]["seconds_per_fda_round"])
    where = torch.device(runs[0]["device"])
    auto = "on" if cohort_training.auto_cohort(where.type, runs[0]["model"]) else "off"
    return {
        "cell": cell,
        "device": runs[0]["device"],
        "model": runs[0]["model"],
        "threads": runs[0]["threads"],
        "repeats": min(sum(run["cohort"] == mode for run in runs) for mode in ("off", "on")),
        "cohort": modes,
        "speedup": modes["off"]["seconds_per_fda_round"] / modes["on"]["seconds_per_fda_round"],
        "faster": faster,
        "auto_picks": auto,
        "auto_picks_faster": auto == faster,
        "runs": runs,
    }
