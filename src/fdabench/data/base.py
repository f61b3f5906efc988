"""The shape every dataset source shares (FLamby style): a name, its domains, its task, and `prepare`.

Prepared datasets are numpy arrays per domain (inputs float32, or uint8 pixels read as value / 255),
saved as one directory per dataset; this module and the partitioners import no torch, so data jobs
start fast.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from fdabench.core.io import content_hash as payload_hash
from fdabench.core.io import file_sha256
from fdabench.core.readers import read_json_object, reading
from fdabench.core.registry import Registry, derive_defaults


@dataclass
class DomainArrays:
    """All samples of one domain: inputs `x` (n, *input_shape), float32 or uint8 pixels, labels `y`, and
    optional auxiliary labels (e.g. sex, age decade) used as extra training targets, never as inputs."""

    x: np.ndarray
    y: np.ndarray
    aux: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.x) != len(self.y):
            raise ValueError(f"x has {len(self.x)} rows but y has {len(self.y)}")
        for name, values in self.aux.items():
            if len(values) != len(self.y):
                raise ValueError(f"auxiliary label {name!r} has {len(values)} rows, expected {len(self.y)}")


@dataclass
class PreparedDataset:
    name: str
    task: str  # "classification" | "regression"
    num_outputs: int  # classes, or regression output dimension
    input_shape: tuple[int, ...]
    domains: dict[str, DomainArrays]
    meta: dict[str, Any] = field(default_factory=dict)
    #: identifies the saved arrays (a hash of the header, which holds every file's size and sha256); set by
    #: `load`, recorded by partitions so a cell never pairs a partition with other prepared data
    content_hash: str | None = None

    def save(self, path: str | os.PathLike) -> None:
        """Write a directory: header.json plus x<i>.npy / y<i>.npy per domain (loaded memory-mapped).
        The directory appears complete or not at all."""
        import shutil
        import tempfile

        final = Path(path)
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".partial", dir=final.parent))
        try:
            aux_names = sorted(next(iter(self.domains.values())).aux) if self.domains else []
            for index, arrays in enumerate(self.domains.values()):
                if sorted(arrays.aux) != aux_names:
                    raise ValueError("every domain must carry the same auxiliary labels")
                np.save(staging / f"x{index}.npy", arrays.x, allow_pickle=False)
                np.save(staging / f"y{index}.npy", arrays.y, allow_pickle=False)
                for aux_index, name in enumerate(aux_names):
                    np.save(staging / f"aux{index}_{aux_index}.npy", arrays.aux[name], allow_pickle=False)
            header = {
                "name": self.name,
                "task": self.task,
                "num_outputs": self.num_outputs,
                "input_shape": list(self.input_shape),
                "domains": list(self.domains),
                "auxiliary": aux_names,
                "meta": self.meta,
                "files": {
                    file.name: {"bytes": file.stat().st_size, "sha256": file_sha256(file)}
                    for file in sorted(staging.glob("*.npy"))
                },
            }
            (staging / "header.json").write_text(json.dumps(header, indent=1) + "\n")
            staging.chmod(0o777 & ~_umask())
            if final.exists():
                shutil.rmtree(final)
            os.replace(staging, final)
        finally:
            if staging.exists():
                shutil.rmtree(staging)

    @classmethod
    def load(cls, path: str | os.PathLike, mmap: bool = True) -> PreparedDataset:
        """Read a prepared directory; arrays are memory-mapped (read on demand) unless mmap=False."""
        path = Path(path)
        header_path = path / "header.json"
        if not header_path.exists():
            raise FileNotFoundError(f"prepared dataset {path} is missing; run `fdabench prepare` (or snakemake) first")
        header = read_json_object(header_path, "prepared data's header")
        _check_sizes(path, header.get("files", {}))
        mode = "r" if mmap else None
        with reading(path, "a prepared data directory (fdabench prepare writes it)"):
            aux_names = header.get("auxiliary", [])
            domains = {
                name: DomainArrays(
                    np.load(path / f"x{index}.npy", mmap_mode=mode),
                    np.load(path / f"y{index}.npy", mmap_mode=mode),
                    {aux: np.load(path / f"aux{index}_{k}.npy", mmap_mode=mode) for k, aux in enumerate(aux_names)},
                )
                for index, name in enumerate(header["domains"])
            }
        return cls(
            name=header["name"],
            task=header["task"],
            num_outputs=header["num_outputs"],
            input_shape=tuple(header["input_shape"]),
            domains=domains,
            meta=header["meta"],
            content_hash=payload_hash(header),
        )

    @staticmethod
    def verify(path: str | os.PathLike) -> None:
        """Check every array file against the sha256 recorded when it was written (reads every byte; the
        partition job does it once, training jobs check only the sizes)."""
        path = Path(path)
        files = read_json_object(path / "header.json", "prepared data's header").get("files", {})
        _check_sizes(path, files)
        edited = [name for name, record in files.items() if file_sha256(path / name) != record["sha256"]]
        if edited:
            raise PreparedDataError(
                f"prepared dataset {path}: {', '.join(edited)} changed since it was written; delete {path} and "
                "rerun `fdabench prepare` (snakemake does it)"
            )


class PreparedDataError(ValueError):
    """A prepared dataset's files are not as written (truncated, edited or missing)."""


def _check_sizes(path: Path, files: dict[str, dict[str, Any]]) -> None:
    for name, record in files.items():
        actual = (path / name).stat().st_size if (path / name).is_file() else None
        if actual != record["bytes"]:
            found = "missing" if actual is None else f"{actual} bytes"
            raise PreparedDataError(
                f"prepared dataset {path}: {name} is truncated or was edited ({found}, expected {record['bytes']} "
                f"bytes); delete {path} and rerun `fdabench prepare` (snakemake does it)"
            )


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class DatasetSource(ABC):
    """One dataset family. Subclasses set the class attributes and implement `prepare`."""

    name: ClassVar[str]
    task: ClassVar[str]
    domains: ClassVar[tuple[str, ...]]
    partitioner: ClassVar[str] = "leave_one_domain_out"
    #: JSON-schema properties of the dataset's options (params.yaml `datasets.<name>`), each with its `default`;
    #: `default_options` is derived from them.
    options_schema: ClassVar[dict[str, Any]] = {}
    default_options: ClassVar[dict[str, Any]] = {}
    #: default training hyper-parameters for experiments on this dataset (params.yaml `train`).
    default_train: ClassVar[dict[str, Any]] = {}
    #: default partition options (params.yaml `partition`).
    default_partition: ClassVar[dict[str, Any]] = {}
    #: names of the raw datasets (fdabench.data.raw) that `prepare` reads; empty for embedded datasets.
    raw_datasets: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        derive_defaults(cls, "options_schema", "default_options")

    @property
    def needs_raw_data(self) -> bool:
        return bool(self.raw_datasets)

    @abstractmethod
    def prepare(self, options: dict[str, Any], raw_root: str | None = None) -> PreparedDataset:
        """Build every domain's arrays from embedded or generated data, or from the raw datasets found
        under `raw_root` (data/raw, or a mirror: the same layout)."""

    def target_names(
        self, partition_options: dict[str, Any], dataset_options: dict[str, Any] | None = None
    ) -> list[str]:
        """The names `targets: all` expands to (default: every domain)."""
        return list(self.domains)

    def input_files(self, options: dict[str, Any]) -> list[str]:
        """Files outside data/raw that `prepare` reads (e.g. a manifest), so the workflow tracks them."""
        return []

    def generation_bytes(self, options: dict[str, Any]) -> int | None:
        """The memory `prepare` needs at its peak where `options` set the data's size (a generated dataset), so that
        `validate` refuses a size no machine here can hold before generating it; None where files decide."""
        return None


DATASETS: Registry[type[DatasetSource]] = Registry("dataset")


def get_dataset(name: str) -> DatasetSource:
    return DATASETS.get(name)()
