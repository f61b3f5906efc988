"""What a partition job would refuse about an experiment, checked by `validate` before any job: the partitioner's
own split, run for every target and seed on the dataset's real samples wherever they are at hand without a
download. That is a dataset already prepared under `data.root` (its header and memory-mapped arrays), or one the
package holds or generates (prepared in memory, once per process). A dataset that is neither (raw files not yet
acquired, a manifest of images) is checked by its partition jobs, as before.

So `target_labelled` above a domain's count, a Dirichlet deal that leaves a client empty, and a label deal the
domain's classes cannot serve are refused here, with the partition job's own message."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from fdabench.core import paths
from fdabench.core.io import content_hash
from fdabench.data import get_dataset, get_partitioner
from fdabench.data.base import PreparedDataset


def _prepared(dataset: str, options: dict[str, Any], data_root: str) -> PreparedDataset | None:
    """The dataset prepared under `data_root` (read again each time: a prepare job may have run since), else
    generated in memory where it needs no files, else None."""
    folder = Path(paths.fill(paths.PREPARED, data=data_root, dataset=dataset, options_hash=content_hash(options)[:12]))
    try:
        return PreparedDataset.load(folder)
    except FileNotFoundError:
        pass  # not prepared yet
    except (OSError, ValueError):
        return None  # unreadable, or a path the file system refuses (reported by the name checks)
    return _generated(dataset, json.dumps(options, sort_keys=True))


@lru_cache(maxsize=4)  # a few option sets per process: each holds a whole dataset in memory
def _generated(dataset: str, options_text: str) -> PreparedDataset | None:
    options = json.loads(options_text)
    source = get_dataset(dataset)
    if source.needs_raw_data or source.input_files(options):
        return None
    try:
        return source.prepare(options)
    except (OSError, ValueError):
        return None  # its prepare job reports it


def machine_memory() -> int:
    """This machine's physical memory in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def generation_error(dataset: str, options: dict[str, Any]) -> str | None:
    """Why `dataset` cannot be generated here with `options` (it needs more memory than the machine has, as its
    `generation_bytes` reckons), or None."""
    needed = get_dataset(dataset).generation_bytes(options)
    available = machine_memory()
    if needed is None or needed <= available:
        return None
    return (
        f"dataset_options of {dataset} need about {needed / 2**30:,.1f} GiB to generate, more than this machine's "
        f"{available / 2**30:,.1f} GiB; choose smaller sizes (samples_per_domain, input_dim, basis_functions)"
    )


def partition_errors(
    where: str,
    dataset: str,
    dataset_options: dict[str, Any],
    data_root: str,
    partitioner: str,
    options: dict[str, Any],
    targets: list[str],
    seeds: list[int],
) -> list[str]:
    """One line per target whose split the partition job would refuse (for its first such seed)."""
    too_big = generation_error(dataset, dataset_options)
    if too_big:
        return [f"{where}: {too_big}"]
    prepared = _prepared(dataset, dataset_options, paths.normal_root(data_root))
    if prepared is None:
        return []
    splitter = get_partitioner(partitioner)
    problems = []
    for target in targets:
        for seed in seeds:
            try:
                splitter.split(prepared, target, seed, options)
            except ValueError as error:
                problems.append(
                    f"{where}: target {target!r}, seed {seed}: {error} (its partition job would refuse it; "
                    f"{partitioner} on {dataset})"
                )
                break
            except KeyError as error:  # a split that looks up a domain the dataset does not have
                return [
                    f"{where}: {partitioner} reads a domain {error} that {dataset} does not have (its domains: "
                    f"{', '.join(prepared.domains)}); choose a partitioner for {dataset}"
                ]
    return problems
