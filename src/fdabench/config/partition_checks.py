"""What a partition job would refuse about an experiment, checked by `validate` before any job: the partitioner's
own split, run for every target and seed on the dataset's real samples wherever they are at hand without a
download. That is a dataset already prepared under `data.root` (its header and memory-mapped arrays), or one the
package holds or generates (prepared in memory, once per process). A dataset that is neither (raw files not yet
acquired, a manifest of images) is checked by its partition jobs, as before.

So `target_labelled` above a domain's count, a Dirichlet deal that leaves a client empty, and a label deal the
domain's classes cannot serve are refused here, with the partition job's own message."""

from __future__ import annotations

import json
from functools import cache
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


@cache
def _generated(dataset: str, options_text: str) -> PreparedDataset | None:
    options = json.loads(options_text)
    source = get_dataset(dataset)
    if source.needs_raw_data or source.input_files(options):
        return None
    try:
        return source.prepare(options)
    except (OSError, ValueError):
        return None  # its prepare job reports it


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
