"""GPU-hours per published table, predicted from one measured training step: each DomainBed experiment's cells
(counted by params' own enumeration) times the steps and evaluated images of one cell times their measured cost.

A cell is counted as a round-loop cell: every round each source trains `local_epochs` epochs over its 'in' split,
every FDA round the target trains `target_local_epochs` epochs over its labelled samples, and every round the
model is evaluated on the target's test split. Domains are taken at their mean size (the dataset's images over
its domains): summed over an experiment's targets, each domain is a source D - 1 times and the target once, so
the totals are exact up to the rounding of each domain's batches. Methods that train less (target only) or more
(an oracle on every target sample) are counted like the others."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fdabench.config import Params
from fdabench.data import get_dataset, partition_options

#: DomainBed's datasets: images over all domains, as the DomainBed paper describes each dataset (Gulrajani and
#: Lopez-Paz, "In Search of Lost Domain Generalization", ICLR 2021); ColoredMNIST is MNIST's 70,000 dealt into three
#: environments
DOMAINBED_IMAGES = {
    "colored_mnist": 70_000,
    "vlcs": 10_729,
    "pacs": 9_991,
    "office_home": 15_588,
    "terra_incognita": 24_788,
    "domain_net": 586_575,
}
#: the other backbone the forecast prices the ResNet-18 experiments on (DomainBed's default is ResNet-50)
ALTERNATIVE_MODELS = {"resnet18": "resnet50"}
#: classes of the generated data a step is timed on: the head is well under 1% of a ResNet's work at 224 px
STEP_CLASSES = 10


@dataclass(frozen=True)
class Workload:
    """One experiment of a suite as the forecast counts it: its cells and what one cell computes."""

    experiment: str
    dataset: str
    cells: int
    model: str
    model_options: dict[str, Any] = field(hash=False)
    input_shape: tuple[int, ...]
    source_batch: int
    target_batch: int
    eval_batch: int
    source_steps: int  # per cell, all rounds
    target_steps: int
    eval_images: int


def cell_steps(
    images: int,
    domains: int,
    holdout_fraction: float,
    target_labelled: float,
    warmup_rounds: int,
    rounds: int,
    local_epochs: int,
    target_local_epochs: int,
    source_batch: int,
    target_batch: int,
) -> tuple[int, int, int]:
    """(source steps, target steps, evaluated images) of one leave-one-domain-out cell on a dataset of `images`
    in `domains` domains of the mean size; `target_labelled` a count (an int, or a float > 1) or a fraction of the
    target's 'in' split, as the partitioner reads it."""
    per_domain = images / domains
    held_out = round(holdout_fraction * per_domain)
    in_split = round(per_domain) - held_out
    if isinstance(target_labelled, int) or target_labelled > 1:
        labelled = int(target_labelled)
    else:
        labelled = max(1, round(target_labelled * in_split))
    all_rounds = warmup_rounds + rounds
    source_steps = all_rounds * local_epochs * (domains - 1) * math.ceil(in_split / source_batch)
    target_steps = rounds * target_local_epochs * math.ceil(labelled / target_batch)
    return source_steps, target_steps, all_rounds * held_out


def dataset_images(dataset: str, options: dict[str, Any], domains: int) -> int:
    """DomainBed's image count, less what the dataset options subsample (per environment or per domain)."""
    cap = options.get("samples_per_environment") or options.get("max_per_domain")
    images = DOMAINBED_IMAGES[dataset]
    return min(images, cap * domains) if cap else images


def input_shape(dataset: str, options: dict[str, Any], image_size: int | None = None) -> tuple[int, ...]:
    """What the model sees: ColoredMNIST's two 14 x 14 colour channels (as fdabench prepares it), else RGB at the
    dataset's `image_size` (or `image_size` here, for a dry run)."""
    if dataset == "colored_mnist":
        return (2, 14, 14)
    size = image_size or options["image_size"]
    return (3, size, size)


def experiment_workload(params: Params, experiment: str, image_size: int | None = None) -> Workload | None:
    """The experiment's workload, or None when it is not leave-one-domain-out on a DomainBed dataset."""
    dataset = params.experiment(experiment)["dataset"]
    partitioner = params.partitioner(experiment)
    if dataset not in DOMAINBED_IMAGES or partitioner != "leave_one_domain_out":
        return None
    source = get_dataset(dataset)
    options = params.dataset_options(dataset, experiment)
    train = params.train_settings(experiment)
    split = partition_options(source, partitioner, params.partition_options(experiment))
    domains = len(source.domains)
    steps = cell_steps(
        dataset_images(dataset, options, domains),
        domains,
        split["holdout_fraction"],
        split["target_labelled"],
        train["warmup_rounds"],
        train["rounds"],
        train["local_epochs"],
        train["target_local_epochs"],
        train["source_batch_size"],
        train["target_batch_size"],
    )
    return Workload(
        experiment,
        dataset,
        sum(1 for _ in params.cells([experiment])),
        train["model"],
        dict(train.get("model_options") or {}),
        input_shape(dataset, options, image_size),
        train["source_batch_size"],
        train["target_batch_size"],
        train["eval_batch_size"],
        *steps,
    )


def suite_workloads(params: Params, image_size: int | None = None) -> dict[str, Workload]:
    """experiment -> workload, for every experiment of the suite's tables that has one."""
    experiments = dict.fromkeys(e for table in params.tables().values() for e in table["experiments"])
    found = {e: experiment_workload(params, e, image_size) for e in experiments}
    return {e: workload for e, workload in found.items() if workload is not None}


def timing_specs(workloads: dict[str, Workload]) -> list[dict[str, Any]]:
    """What to time: each (model, input shape) of the workloads with the batch sizes its cells train at, then the
    alternative backbone (ALTERNATIVE_MODELS) at the same shapes and batches."""
    specs: dict[tuple[str, tuple[int, ...]], dict[str, Any]] = {}
    for pass_ in ("own", "alternative"):
        for workload in workloads.values():
            model = workload.model if pass_ == "own" else ALTERNATIVE_MODELS.get(workload.model)
            if model is None:
                continue
            spec = specs.setdefault(
                (model, workload.input_shape),
                {
                    "model": model,
                    "model_options": workload.model_options,
                    "input_shape": list(workload.input_shape),
                    "batches": [],
                    "eval_batch": workload.eval_batch,
                },
            )
            spec["batches"] = sorted({*spec["batches"], workload.source_batch, workload.target_batch}, reverse=True)
    return list(specs.values())


def find_timing(timings: list[dict[str, Any]], model: str, shape: tuple[int, ...]) -> dict[str, Any] | None:
    return next((t for t in timings if t["model"] == model and tuple(t["input_shape"]) == tuple(shape)), None)


def cell_seconds(workload: Workload, timing: dict[str, Any] | None) -> float | None:
    """Seconds of one cell on the timed model: steps times the measured step at each batch size, and the evaluated
    images over the measured evaluation rate; None without a timing for every part."""
    if timing is None:
        return None
    steps = timing.get("train_step_seconds") or {}
    source, target = steps.get(str(workload.source_batch)), steps.get(str(workload.target_batch))
    rate = timing.get("eval_images_per_second")
    if source is None or target is None or not rate:
        return None
    return workload.source_steps * source + workload.target_steps * target + workload.eval_images / rate


def table_forecast(
    tables: dict[str, dict[str, Any]], workloads: dict[str, Workload], timings: list[dict[str, Any]]
) -> dict[str, Any]:
    """Predicted GPU-hours of each table whose experiments all have a workload, one cell at a time on one GPU:
    as configured, and with the ResNet-18 experiments on ResNet-50; the tables left out, with why."""
    rows, left_out = [], {}
    for name, table in tables.items():
        missing = [e for e in table["experiments"] if e not in workloads]
        if missing:
            left_out[name] = f"{', '.join(missing)}: not leave-one-domain-out on a DomainBed dataset"
            continue
        parts = []
        for experiment in table["experiments"]:
            workload = workloads[experiment]
            alternative = ALTERNATIVE_MODELS.get(workload.model, workload.model)
            parts.append(
                {
                    "experiment": experiment,
                    "cells": workload.cells,
                    "model": workload.model,
                    "input_shape": list(workload.input_shape),
                    "source_steps": workload.source_steps,
                    "target_steps": workload.target_steps,
                    "eval_images": workload.eval_images,
                    "seconds_per_cell": cell_seconds(
                        workload, find_timing(timings, workload.model, workload.input_shape)
                    ),
                    "alternative_model": alternative,
                    "seconds_per_cell_alternative": cell_seconds(
                        workload, find_timing(timings, alternative, workload.input_shape)
                    ),
                }
            )
        rows.append(
            {
                "table": name,
                "experiments": list(table["experiments"]),
                "cells": sum(part["cells"] for part in parts),
                "models": sorted({part["model"] for part in parts}),
                "gpu_hours": _hours(parts, "seconds_per_cell"),
                "gpu_hours_alternative": _hours(parts, "seconds_per_cell_alternative"),
                "per_experiment": parts,
            }
        )
    return {"tables": rows, "left_out": left_out}


def _hours(parts: list[dict[str, Any]], key: str) -> float | None:
    if any(part[key] is None for part in parts):
        return None
    return sum(part["cells"] * part[key] for part in parts) / 3600
