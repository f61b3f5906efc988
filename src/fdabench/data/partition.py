"""Partitions and partitioners: a partitioner turns a prepared dataset, a target name and a seed into federated
clients, a `Partition` of index arrays into the prepared domains.

Every partition is deterministic per seed and written with a manifest (per-client counts, class histograms, seed,
options, content hash). Like the datasets, partitioners import no torch. The shipped partitioners are one module
each in `fdabench.data.partitioners`; here are what they share: the `Partition`, the `Partitioner` interface and
registry, and how a partitioner's options are resolved (`partition_options`).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from fdabench.core.io import content_hash
from fdabench.core.registry import Registry, derive_defaults
from fdabench.data.base import DatasetSource, PreparedDataset


@dataclass
class ClientIndices:
    name: str
    domain: str
    indices: np.ndarray


@dataclass
class Partition:
    """Sources and the target's labelled / unlabelled / test splits, as indices into prepared domains.

    `holdout` lists samples of source domains that no client trains on (DomainBed's 'out' splits).
    `transforms` names per-split input transforms applied when the problem is built.
    """

    dataset: str
    target: str
    seed: int
    partitioner: str
    options: dict[str, Any]
    sources: list[ClientIndices]
    target_labelled: ClientIndices
    target_unlabelled: ClientIndices
    target_test: ClientIndices
    holdout: list[ClientIndices] = field(default_factory=list)
    transforms: dict[str, Any] = field(default_factory=dict)

    def splits(self) -> list[tuple[str, ClientIndices]]:
        named = [("source", client) for client in self.sources]
        named += [
            ("target_labelled", self.target_labelled),
            ("target_unlabelled", self.target_unlabelled),
            ("target_test", self.target_test),
        ]
        return named + [("holdout", client) for client in self.holdout]

    def empty_clients(self) -> list[str]:
        """Sources, labelled target or target test split without a sample (a partition that cannot train)."""
        needed = [("source", c) for c in self.sources] + [
            ("target_labelled", self.target_labelled),
            ("target_test", self.target_test),
        ]
        return [f"{role} {client.name}" for role, client in needed if len(client.indices) == 0]

    def to_json(self, prepared: PreparedDataset) -> dict[str, Any]:
        def entry(role: str, client: ClientIndices) -> dict[str, Any]:
            labels = prepared.domains[client.domain].y[client.indices]
            record: dict[str, Any] = {
                "role": role,
                "name": client.name,
                "domain": client.domain,
                "count": len(client.indices),
            }
            if prepared.task == "classification":
                record["class_histogram"] = np.bincount(labels, minlength=prepared.num_outputs).tolist()
            record["indices"] = client.indices.tolist()
            return record

        payload = {
            "dataset": self.dataset,
            "target": self.target,
            "seed": self.seed,
            "partitioner": self.partitioner,
            "options": self.options,
            "transforms": self.transforms,
            "prepared_hash": prepared.content_hash,
            "clients": [entry(role, client) for role, client in self.splits()],
        }
        payload["content_hash"] = content_hash(payload)
        return payload

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> Partition:
        by_role: dict[str, list[ClientIndices]] = {}
        for record in payload["clients"]:
            client = ClientIndices(record["name"], record["domain"], np.asarray(record["indices"], dtype=np.int64))
            by_role.setdefault(record["role"], []).append(client)
        return cls(
            dataset=payload["dataset"],
            target=payload["target"],
            seed=payload["seed"],
            partitioner=payload["partitioner"],
            options=payload["options"],
            sources=by_role.get("source", []),
            target_labelled=by_role["target_labelled"][0],
            target_unlabelled=by_role["target_unlabelled"][0],
            target_test=by_role["target_test"][0],
            holdout=by_role.get("holdout", []),
            transforms=payload.get("transforms", {}),
        )


class Partitioner(ABC):
    """One way of splitting a prepared dataset into source clients and the target's splits."""

    name: ClassVar[str]
    #: JSON-schema properties of the options, each with its `default`; `default_options` (used where the
    #: dataset's own `default_partition` does not apply) is derived from them.
    options_schema: ClassVar[dict[str, Any]] = {}
    default_options: ClassVar[dict[str, Any]] = {}
    #: whether its partitions hold samples of each source domain out of training (`Partition.holdout`): what the
    #: `source_val` selection rule scores
    holds_out_sources: ClassVar[bool] = False

    def partition(
        self,
        prepared: Any,
        target: str,
        seed: int,
        options: dict[str, Any],
        sources: list[ClientIndices],
        **splits: Any,
    ) -> Partition:
        """The `Partition` of this partitioner's split of `prepared` for `target` and `seed`: its identity (dataset,
        target, seed, partitioner, options) filled in, the sources and the target's splits as given."""
        return Partition(
            dataset=prepared.name,
            target=target,
            seed=seed,
            partitioner=self.name,
            options=dict(options),
            sources=sources,
            **splits,
        )

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        derive_defaults(cls, "options_schema", "default_options")

    @abstractmethod
    def split(self, prepared: PreparedDataset, target: str, seed: int, options: dict[str, Any]) -> Partition: ...

    def option_problems(self, options: dict[str, Any]) -> list[str]:
        """Options that are valid alone but contradict each other (reported before any job); default: none."""
        return []

    def target_names(
        self, source: DatasetSource, options: dict[str, Any], dataset_options: dict[str, Any] | None = None
    ) -> list[str]:
        """What `targets: all` means for this partitioner on `source` (default: the dataset's targets)."""
        return source.target_names(options, dataset_options)

    def validate_target(
        self, source: DatasetSource, target: str, options: dict[str, Any], dataset_options: dict[str, Any] | None = None
    ) -> str | None:
        """An error message when `target` is not a valid target name for this dataset, else None."""
        allowed = self.target_names(source, options, dataset_options)
        if target not in allowed:
            return f"{target!r} is not a target of {source.name}; allowed: {', '.join(allowed)}"
        return None


PARTITIONERS: Registry[type[Partitioner]] = Registry("partitioner")


def fraction_or_count(value: float | int, total: int, what: str) -> int:
    """A count (an integer) or a fraction of `total` (a float in (0, 1]; 1.0 = all)."""
    count = int(value) if (isinstance(value, int) or value > 1) else int(round(value * total))
    if not 0 < count <= total:
        raise ValueError(f"{what} = {value} selects {count} of {total} samples; need between 1 and {total}")
    return count


def require_domain(prepared: PreparedDataset, target: str) -> None:
    if target not in prepared.domains:
        raise ValueError(f"target {target!r} is not a domain of {prepared.name}: {', '.join(prepared.domains)}")


def get_partitioner(name: str) -> Partitioner:
    return PARTITIONERS.get(name)()


def partition_options(source: DatasetSource, partitioner: str | None, overrides: dict[str, Any]) -> dict[str, Any]:
    """The partitioner's schema defaults < the dataset's `default_partition` (for its own partitioner only) <
    `overrides` (an experiment's `partition`)."""
    name = partitioner or source.partitioner
    defaults = dict(get_partitioner(name).default_options)
    if name == source.partitioner:
        defaults.update(source.default_partition)
    return {**copy.deepcopy(defaults), **copy.deepcopy(overrides)}
