"""A cell's input files on a machine without its dataset: a generated stand-in for Fashion-MNIST (the shape, the
classes and the split sizes of the real one, so the cells' timings match) and an embedded dataset prepared on the
spot; each partitioned by the cell's own partitioner and options, as the partition job does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from fdabench.core.io import write_json_atomic
from fdabench.data import DomainArrays, PreparedDataset, get_dataset, get_partitioner, partition_options

#: Fashion-MNIST: 6,000 training and 1,000 test images per class, 10 classes, 28 x 28 grey pixels
FMNIST_PER_CLASS = (6_000, 1_000)
STAND_IN_NOTE = (
    "Fashion-MNIST stand-in: generated 28 x 28 grey images (a fixed random pattern per class plus per-image "
    "noise), 10 balanced classes, {train:,} training and {test:,} test images, partitioned by the cell's own "
    "partitioner and options: the cells' shapes and sample counts, not their data (accuracies mean nothing)"
)


def fmnist_stand_in(per_class: tuple[int, int] = FMNIST_PER_CLASS, seed: int = 0) -> PreparedDataset:
    """Fashion-MNIST's layout (domains `train` and `test`, uint8 (n, 1, 28, 28), 10 classes) with generated
    pixels, `per_class` (training, test) images of each class in a seeded random order."""
    rng = np.random.default_rng(seed)
    patterns = rng.integers(0, 128, size=(10, 1, 28, 28), dtype=np.uint8)
    domains = {}
    for domain, count in zip(("train", "test"), per_class):
        labels = rng.permutation(np.repeat(np.arange(10, dtype=np.int64), count))
        noise = rng.integers(0, 128, size=(len(labels), 1, 28, 28), dtype=np.uint8)
        domains[domain] = DomainArrays(patterns[labels] + noise, labels)
    return PreparedDataset(
        "fashion_mnist",
        "classification",
        10,
        (1, 28, 28),
        domains,
        meta={"options": {}, "stand_in": stand_in_note(per_class)},
    )


def stand_in_note(per_class: tuple[int, int]) -> str:
    return STAND_IN_NOTE.format(train=10 * per_class[0], test=10 * per_class[1])


def write_inputs(directory: str | Path, dataset: PreparedDataset, config: dict[str, Any]) -> tuple[str, str]:
    """Save `dataset` under `directory` and partition it for the cell `config` (its partitioner and options over
    the dataset's defaults, as `fdabench partition`); (prepared directory, partition file)."""
    directory = Path(directory)
    prepared = directory / "prepared"
    dataset.save(prepared)
    loaded = PreparedDataset.load(prepared)
    source = get_dataset(config["dataset"])
    partitioner = config.get("partitioner") or source.partitioner
    options = partition_options(source, partitioner, config.get("partition") or {})
    split = get_partitioner(partitioner).split(loaded, config["target"], config["seed"], options)
    empty = split.empty_clients()
    if empty:
        raise ValueError(f"the partition for {config['target']} leaves {', '.join(empty)} without samples")
    partition = directory / f"partition_{config['target']}_seed{config['seed']}.json"
    write_json_atomic(partition, split.to_json(loaded))
    return str(prepared), str(partition)


def embedded_inputs(directory: str | Path, config: dict[str, Any]) -> tuple[str, str]:
    """The cell's dataset prepared by its own source (one that needs no raw files, such as the demo's digits) and
    partitioned for the cell (`write_inputs`)."""
    source = get_dataset(config["dataset"])
    if source.needs_raw_data:
        raise ValueError(f"{source.name} needs raw files; the bench uses embedded or generated data only")
    return write_inputs(directory, source.prepare(config.get("dataset_options") or source.default_options), config)
