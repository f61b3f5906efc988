"""`fdabench bench cells`: the same cells trained one by one and as one group (`federation.lockstep`), alternately in
one process, against the arithmetic floor.

One by one, each cell trains alone with `batching: off` (the one-by-one kernels, the default); batched, all of them
as one group with `batching: stacked`; both on one torch thread. `max_abs_final_difference` is the largest difference
of a cell's final metric between the two. A third pass, once, trains each cell alone with `batching: stacked`
(`lockstep.Solo`): its finals must equal the group's (`group_independence_max_abs_difference`, 0: a cell's result
does not depend on its group). The floor is the group's floating-point operations (forward and backward of
every training step, forward of every evaluation, counted by `torch.utils.flop_counter.FlopCounterMode` on one cell and
scaled by its steps) over the device's measured peak matrix-product rate."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from statistics import median
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from fdabench.cell.setup import load_cell
from fdabench.config import Params
from fdabench.config.lookup import MissingCellInputs, cell_inputs
from fdabench.config.resolve import given_dataset_options
from fdabench.core.formats import PARTITION
from fdabench.core.io import write_json_atomic
from fdabench.data import PreparedDataset, get_dataset, get_partitioner, partition_options
from fdabench.federation import client as client_module
from fdabench.federation import stacked as stacked_module
from fdabench.federation.client import active_group, join_group
from fdabench.federation.lockstep import Solo, run_together
from fdabench.federation.rounds import build_cell_model, run_rounds
from fdabench.federation.settings import TrainSettings
from fdabench.federation.sites import target_training_data
from fdabench.methods import METHODS, get_method
from fdabench.testing.method_checks import SETTINGS, small_problem


def cell_names(params: Params, experiment: str, method: str, draws: int | None) -> list[str]:
    """The method variants benched: the method, or its first `draws` sweep draws (`<method>.draw<k>`)."""
    if draws is None:
        return [method]
    if params.sweep() is None:
        raise ValueError(f"suite {params.suite_name} has no sweep block: --draws needs one")
    return [f"{method}.draw{draw}" for draw in range(draws)]


def bench_inputs(params: Params, experiment: str, targets: list[str], seeds: list[int], folder: Path) -> dict:
    """(prepared data, partition) of every (target, seed): the suite's files where they exist, else built here, under
    `folder` (the prepared data, and the partitions of seeds the suite lacks), never in the workspace."""

    dataset, key = params.prepared_key(experiment)
    prepared = params.prepared_path(experiment)
    if not Path(prepared).exists():
        prepared = str(folder / "prepared" / f"{dataset}-{key}")
        if not Path(prepared).exists():
            options = given_dataset_options(dataset, params.dataset_options(dataset, experiment))
            raw_root = str(Path(params.data_root) / "raw")
            get_dataset(dataset).prepare(options, raw_root=raw_root).save(prepared)
    loaded = None
    inputs = {}
    for target in targets:
        for seed in seeds:
            try:
                _, partition = cell_inputs(params, experiment, target, seed)
            except MissingCellInputs:
                partition = str(folder / "partitions" / experiment / target / f"seed{seed}.json")
                if not Path(partition).exists():
                    if loaded is None:
                        loaded = PreparedDataset.load(prepared)
                    partitioner = params.partitioner(experiment)
                    options = partition_options(get_dataset(dataset), partitioner, params.partition_options(experiment))
                    split = get_partitioner(partitioner).split(loaded, target, seed, options)
                    write_json_atomic(partition, {"format": PARTITION, **split.to_json(loaded)})
            inputs[(target, seed)] = (prepared, partition)
    return inputs


def peak_matmul_flops(device: torch.device, size: int = 1024, repeats: int = 20) -> float:
    """The device's measured matrix-product rate (FLOP/s): the best of `repeats` float32 `size`x`size` products."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    best = float("inf")
    for _ in range(repeats + 2):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - started)
    return 2 * size**3 / best


def _cell_flops(setup) -> tuple[int, int]:
    """(FLOPs of one training step on one source batch, FLOPs of one evaluation forward over one test sample) of the
    cell's model, counted by FlopCounterMode."""
    problem, settings = setup.problem, setup.settings
    model = build_cell_model(problem, settings, 0, setup.device)
    client = problem.sources[0] if problem.sources else problem.target_labelled
    batch = min(len(client), settings.source_batch_size or len(client))
    x, y = client.inputs(slice(0, batch)), client.labels(slice(0, batch))
    loss_fn = client_module.loss_function(problem.task)
    with FlopCounterMode(display=False) as counter:
        loss_fn(model(x), y).backward()
    train = counter.get_total_flops()
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(x[:1])
    return train // batch, counter.get_total_flops()


def bench_cells(
    params: Params,
    experiment: str,
    method: str,
    targets: list[str] | None = None,
    seeds: list[int] | None = None,
    draws: int | None = None,
    repeats: int = 2,
    device: str | None = None,
    work_folder: Path = Path("results/bench_cells"),
) -> dict[str, Any]:
    """Train the cells (every target x seed x draw) one by one and as one group, `repeats` times each, alternately;
    the measurements as a JSON-ready dict (module docstring)."""
    if method not in params.methods(experiment):
        raise ValueError(f"suite {params.suite_name} experiment {experiment} has no method {method!r}")
    targets = targets or params.targets(experiment)
    unknown = [t for t in targets if t not in params.targets(experiment)]
    if unknown:
        raise ValueError(f"experiment {experiment} has no target {', '.join(unknown)}")
    seeds = seeds if seeds is not None else params.seeds(experiment)
    names = cell_names(params, experiment, method, draws)
    inputs = bench_inputs(params, experiment, targets, seeds, work_folder)
    torch.set_num_threads(1)
    configs = []
    for name in names:
        for target in targets:
            for seed in seeds:
                config = copy.deepcopy(params.cell(experiment, name, target, seed).config)
                configs.append((config, *inputs[(target, seed)]))

    def job(config, prepared, partition, batching):
        config = {**config, "train": {**config["train"], "batching": batching}}

        def run():
            setup = load_cell(config, prepared, partition, device)
            history = run_rounds(setup.method, setup.problem, setup.settings, config["seed"], setup.device)
            return history, setup

        return run

    def finals(outcomes):
        values = []
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
            history, setup = outcome
            metric = history["metric"]
            last = history["rounds"][-setup.settings.final_rounds :]
            values.append(sum(record[metric] for record in last) / len(last))
        return values

    def one_by_one(batching):
        return [job(*entry, batching)() for entry in configs]

    timings = {"one_by_one": [], "batched": []}
    results = {}
    statistics = None
    for _ in range(repeats):
        started = time.perf_counter()
        results["one_by_one"] = finals(one_by_one("off"))
        timings["one_by_one"].append(time.perf_counter() - started)
        started = time.perf_counter()
        outcomes, statistics = run_together([job(*entry, "stacked") for entry in configs])
        results["batched"] = finals(outcomes)
        timings["batched"].append(time.perf_counter() - started)
    started = time.perf_counter()
    results["stacked_alone"] = finals(one_by_one("stacked"))
    stacked_alone_seconds = time.perf_counter() - started
    first = load_cell(configs[0][0], configs[0][1], configs[0][2], device)
    where = first.device
    stackable = stacked_module.stackable_model(build_cell_model(first.problem, first.settings, 0, where))
    samples = _samples(configs, device)
    step_flops, eval_flops = _cell_flops(first)
    group_flops = samples["train"] * step_flops + samples["evaluated"] * eval_flops
    peak = peak_matmul_flops(where)
    one, together = median(timings["one_by_one"]), median(timings["batched"])
    floor = group_flops / peak
    return {
        "suite": params.suite_name,
        "experiment": experiment,
        "method": method,
        "targets": targets,
        "seeds": seeds,
        "draws": draws,
        "cells": len(configs),
        "device": str(where),
        "threads": 1,
        "model_stackable": stackable,
        "repeats": repeats,
        "one_by_one_seconds": one,
        "batched_seconds": together,
        "one_by_one_runs": timings["one_by_one"],
        "batched_runs": timings["batched"],
        "speedup": one / together,
        "samples_per_second": {"one_by_one": samples["train"] / one, "batched": samples["train"] / together},
        "training_samples": samples["train"],
        "group": None if statistics is None else vars(statistics),
        "arithmetic_floor_seconds": floor,
        "arithmetic_floor": {
            "flops": group_flops,
            "flops_how": "torch.utils.flop_counter.FlopCounterMode: one training step (forward and backward) of "
            "the cell's model per training sample, one forward per evaluated sample, times the group's samples",
            "peak_flops_per_second": peak,
            "peak_how": "the best of 20 float32 1024x1024 matrix products on the device, one thread",
        },
        "fraction_of_floor": {"one_by_one": floor / one, "batched": floor / together},
        "stacked_alone_seconds": stacked_alone_seconds,
        "max_abs_final_difference": _largest_difference(results["one_by_one"], results["batched"]),
        "group_independence_max_abs_difference": _largest_difference(results["stacked_alone"], results["batched"]),
        "finals": results,
    }


def _largest_difference(first: list[float], second: list[float]) -> float:
    return max(abs(a - b) for a, b in zip(first, second, strict=True))


def _samples(configs, device) -> dict[str, int]:
    """Training samples (every client's epochs over its samples, every round) and evaluated samples (every round's
    evaluation splits) of all the cells."""
    train = evaluated = 0
    for config, prepared, partition in configs:
        setup = load_cell(config, prepared, partition, device)
        problem, settings = setup.problem, setup.settings
        phases = setup.method.phases(settings, bool(problem.sources))
        for phase in phases:
            per_round, in_force = 0, settings if phase.settings is None else phase.settings
            if phase.sources and setup.method.roles.sources_train:
                per_round += in_force.local_epochs * sum(len(s) for s in problem.sources)
            target = target_training_data(setup.method.roles.target, problem.target_labelled, problem.target_unlabelled)
            if phase.target and target is not None:
                per_round += in_force.target_local_epochs * len(target)
            train += per_round * phase.rounds
            splits = len(problem.target_test) + sum(len(s) for s in problem.source_validation)
            if problem.target_validation is not None:
                splits += len(problem.target_validation)
            evaluated += splits * phase.rounds
    return {"train": train, "evaluated": evaluated}


#: hyper-parameters for `batching_support`'s short runs where a method's defaults take minutes (FedDaDiL's dictionary
#: size): they change how long its rounds take, not what trains how
_QUICK_HPARAMS = {
    "dadil_r": {"atoms": 2, "support_size": 6, "batch_size": 4, "local_steps": 2, "encoder_rounds": 1},
    "dadil_e": {"atoms": 2, "support_size": 6, "batch_size": 4, "local_steps": 2, "encoder_rounds": 1},
}


class RecordingSolo(Solo):
    """A `batching: stacked` cell alone (`lockstep.Solo`) that records what it computed stacked, in order:
    ("train", client), ("train_all", clients) or ("evaluate",)."""

    def __init__(self):
        self.calls: list[tuple] = []

    def _record(self, call: tuple, answer: Any) -> Any:
        if answer is not None:
            self.calls.append(call)
        return answer

    def train(self, space, start, data, settings, loss_fn, generator):
        answer = super().train(space, start, data, settings, loss_fn, generator)
        return self._record(("train", data.name), answer)

    def train_all(self, requests):
        answer = super().train_all(requests)
        return self._record(("train_all", tuple(request.data.name for request in requests)), answer)

    def evaluate(self, model, data, task, batch_size):
        return self._record(("evaluate",), super().evaluate(model, data, task, batch_size))

    def trained(self) -> set[str]:
        """The clients whose trainings it computed."""
        names: set[str] = set()
        for call in self.calls:
            if call[0] == "train":
                names.add(call[1])
            elif call[0] == "train_all":
                names.update(call[1])
        return names


def batching_support(names: list[str] | None = None) -> dict[str, dict[str, bool]]:
    """Per registered method: whether, under `batching: stacked` with an MLP, its sources' local training, its
    target's and its evaluation are computed with the stacked kernels (else one by one, in the cell's own thread), as
    a short run on a small problem shows."""
    support = {}
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for name in names or sorted(METHODS.names()):
            cls = METHODS.get(name)
            train = {**SETTINGS, "rounds": 2, **cls.requires.train, "batching": "stacked"}
            problem = small_problem()
            group = RecordingSolo()
            outer = active_group()
            join_group(group)
            try:
                method = get_method(name, _QUICK_HPARAMS.get(name, {}))
                run_rounds(method, problem, TrainSettings.from_dict(train), 0, torch.device("cpu"))
            finally:
                join_group(outer)
            sources = {client.name for client in problem.sources}
            trained = group.trained()
            support[name] = {
                "sources": bool(sources & trained),
                "target": bool(trained - sources),
                "evaluation": ("evaluate",) in group.calls,
            }
    finally:
        torch.set_num_threads(previous_threads)
    return support


def batching_table(support: dict[str, dict[str, bool]]) -> str:
    """`batching_support` as the Markdown table docs/methods.md shows."""
    mark = lambda value: "stacked" if value else "one by one"
    lines = ["| method | sources | target | evaluation |", "|---|---|---|---|"]
    lines += [
        f"| `{name}` | {mark(row['sources'])} | {mark(row['target'])} | {mark(row['evaluation'])} |"
        for name, row in support.items()
    ]
    return "\n".join(lines)
