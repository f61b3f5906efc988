"""The shape every dataset source shares (FLamby style): a name, its domains, its task, and `prepare`.

Prepared datasets are numpy arrays per domain, saved as one `.npz` per dataset; this module and the
partitioners import no torch, so data jobs start fast.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from fdabench.registry import Registry


@dataclass
class DomainArrays:
    """All samples of one domain: inputs `x` (n, *input_shape) float32 and labels `y`."""

    x: np.ndarray
    y: np.ndarray

    def __post_init__(self) -> None:
        if len(self.x) != len(self.y):
            raise ValueError(f"x has {len(self.x)} rows but y has {len(self.y)}")


@dataclass
class PreparedDataset:
    name: str
    task: str  # "classification" | "regression"
    num_outputs: int  # classes, or regression output dimension
    input_shape: tuple[int, ...]
    domains: dict[str, DomainArrays]
    meta: dict[str, Any] = field(default_factory=dict)

    def save(self, path: str | os.PathLike) -> None:
        from fdabench.io import atomic_path

        arrays: dict[str, np.ndarray] = {}
        for index, (name, arrays_of_domain) in enumerate(self.domains.items()):
            arrays[f"x{index}"] = arrays_of_domain.x
            arrays[f"y{index}"] = arrays_of_domain.y
        header = {
            "name": self.name,
            "task": self.task,
            "num_outputs": self.num_outputs,
            "input_shape": list(self.input_shape),
            "domains": list(self.domains),
            "meta": self.meta,
        }
        arrays["header"] = np.array(json.dumps(header))
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as handle:
                np.savez(handle, **arrays)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "PreparedDataset":
        if not Path(path).exists():
            raise FileNotFoundError(f"prepared dataset {path} is missing; run `fdabench prepare` (or snakemake) first")
        with np.load(path, allow_pickle=False) as archive:
            header = json.loads(str(archive["header"]))
            domains = {
                name: DomainArrays(archive[f"x{index}"], archive[f"y{index}"])
                for index, name in enumerate(header["domains"])
            }
        return cls(
            name=header["name"],
            task=header["task"],
            num_outputs=header["num_outputs"],
            input_shape=tuple(header["input_shape"]),
            domains=domains,
            meta=header["meta"],
        )


class DatasetSource(ABC):
    """One dataset family. Subclasses set the class attributes and implement `prepare`."""

    name: ClassVar[str]
    task: ClassVar[str]
    domains: ClassVar[tuple[str, ...]]
    partitioner: ClassVar[str] = "leave_one_domain_out"
    model: ClassVar[str]
    metric: ClassVar[str] = "accuracy"  # "accuracy" (higher is better) or "mse" (lower is better)
    #: JSON-schema properties of the dataset's options (params.yaml `datasets.<name>`) and their defaults.
    options_schema: ClassVar[dict[str, Any]] = {}
    default_options: ClassVar[dict[str, Any]] = {}
    #: default training hyper-parameters for experiments on this dataset (params.yaml `train`).
    default_train: ClassVar[dict[str, Any]] = {}
    #: default partition options (params.yaml `partition`).
    default_partition: ClassVar[dict[str, Any]] = {}
    #: True when `prepare` needs raw files from a mirror or a download (never for embedded datasets).
    needs_raw_data: ClassVar[bool] = False

    @abstractmethod
    def prepare(self, options: dict[str, Any], mirror: str | None = None) -> PreparedDataset:
        """Build every domain's arrays from embedded, generated or raw data."""

    def target_names(self, partition_options: dict[str, Any]) -> list[str]:
        """The names `targets: all` expands to (default: every domain)."""
        return list(self.domains)


DATASETS: Registry[type[DatasetSource]] = Registry("dataset")


def get_dataset(name: str) -> DatasetSource:
    return DATASETS.get(name)()
