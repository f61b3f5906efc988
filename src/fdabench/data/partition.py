"""Partitioners: turn a prepared dataset, a target name and a seed into federated clients.

Every partitioner returns a `Partition` of index arrays into the prepared domains; every partition is
deterministic per seed and written with a manifest (per-client counts, class histograms, seed, options,
content hash). Like the datasets, partitioners import no torch.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from fdabench.data.base import DatasetSource, PreparedDataset
from fdabench.registry import Registry


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

    def to_json(self, prepared: PreparedDataset) -> dict[str, Any]:
        from fdabench.io import content_hash

        def entry(role: str, client: ClientIndices) -> dict[str, Any]:
            labels = prepared.domains[client.domain].y[client.indices]
            record: dict[str, Any] = {"role": role, "name": client.name, "domain": client.domain, "count": len(client.indices)}
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
            "clients": [entry(role, client) for role, client in self.splits()],
        }
        payload["content_hash"] = content_hash(payload)
        return payload

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> "Partition":
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
    options_schema: ClassVar[dict[str, Any]]

    @abstractmethod
    def split(self, prepared: PreparedDataset, target: str, seed: int, options: dict[str, Any]) -> Partition:
        ...

    def validate_target(self, source: DatasetSource, target: str, options: dict[str, Any]) -> str | None:
        """An error message when `target` is not a valid target name for this dataset, else None."""
        allowed = source.target_names(options)
        if target not in allowed:
            return f"{target!r} is not a target of {source.name}; allowed: {', '.join(allowed)}"
        return None


PARTITIONERS: Registry[type[Partitioner]] = Registry("partitioner")


def _fraction_or_count(value: float | int, total: int, what: str) -> int:
    """A count given directly (integer >= 1) or as a fraction of `total` (0 < value < 1)."""
    count = int(value) if (isinstance(value, int) or value >= 1) else int(round(value * total))
    if not 0 < count <= total:
        raise ValueError(f"{what} = {value} selects {count} of {total} samples; need between 1 and {total}")
    return count


@PARTITIONERS.register("leave_one_domain_out")
class LeaveOneDomainOut(Partitioner):
    """DomainBed leave-one-domain-out: every domain is split into 'in' and 'out' (holdout_fraction).
    Sources train on their 'in' split; the target's 'out' split is its test set, and `target_labelled`
    samples of its 'in' split (a count, or a fraction of it) are labelled; the rest of 'in' is unlabelled."""

    name = "leave_one_domain_out"
    options_schema = {
        "holdout_fraction": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "target_labelled": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "labelled target samples: a count (>= 1) or a fraction of the target's 'in' split (< 1)",
        },
    }

    def split(self, prepared: PreparedDataset, target: str, seed: int, options: dict[str, Any]) -> Partition:
        rng = np.random.default_rng(seed)
        sources, holdout = [], []
        target_parts: dict[str, np.ndarray] = {}
        for domain, arrays in prepared.domains.items():
            order = rng.permutation(len(arrays.y))
            out_count = int(round(options["holdout_fraction"] * len(order)))
            out_split, in_split = order[:out_count], order[out_count:]
            if domain == target:
                labelled = _fraction_or_count(options["target_labelled"], len(in_split), "target_labelled")
                target_parts = {"labelled": in_split[:labelled], "unlabelled": in_split[labelled:], "test": out_split}
            else:
                sources.append(ClientIndices(domain, domain, np.sort(in_split)))
                holdout.append(ClientIndices(f"{domain}_out", domain, np.sort(out_split)))
        return Partition(
            dataset=prepared.name,
            target=target,
            seed=seed,
            partitioner=self.name,
            options=dict(options),
            sources=sources,
            target_labelled=ClientIndices("target_labelled", target, np.sort(target_parts["labelled"])),
            target_unlabelled=ClientIndices("target_unlabelled", target, np.sort(target_parts["unlabelled"])),
            target_test=ClientIndices("target_test", target, np.sort(target_parts["test"])),
            holdout=holdout,
        )


_SHIFT_TARGET = re.compile(r"^(?P<source>s\d+)-n(?P<size>\d+)$")


@PARTITIONERS.register("shift_and_subsample")
class ShiftAndSubsample(Partitioner):
    """The synthetic theory check: one source domain `s<k>` and a target subsample of size n, named
    "s<k>-n<n>". The target domain is split into a test set (test_fraction) and a training pool whose
    first n samples (in a seeded order) are labelled; the rest of the pool is unlabelled. Source
    domains that are not the chosen source are left out."""

    name = "shift_and_subsample"
    options_schema = {
        "test_fraction": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "target_sizes": {"type": "array", "items": {"type": "integer", "minimum": 2}, "minItems": 1},
    }

    def validate_target(self, source: DatasetSource, target: str, options: dict[str, Any]) -> str | None:
        match = _SHIFT_TARGET.match(target)
        if match is None or match["source"] not in source.domains:
            sources = [name for name in source.domains if name != "target"]
            return f"{target!r} is not a target of {source.name}; use '<source>-n<size>' with source in {', '.join(sources)}"
        return None

    def split(self, prepared: PreparedDataset, target: str, seed: int, options: dict[str, Any]) -> Partition:
        match = _SHIFT_TARGET.match(target)
        if match is None or match["source"] not in prepared.domains:
            raise ValueError(f"target {target!r} must look like 's<k>-n<size>' with s<k> a source domain")
        source_domain, size = match["source"], int(match["size"])
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(prepared.domains["target"].y))
        test_count = int(round(options["test_fraction"] * len(order)))
        test, pool = order[:test_count], order[test_count:]
        if not 1 < size <= len(pool):
            raise ValueError(f"target size {size} must be between 2 and the training pool size {len(pool)}")
        source_size = len(prepared.domains[source_domain].y)
        return Partition(
            dataset=prepared.name,
            target=target,
            seed=seed,
            partitioner=self.name,
            options=dict(options),
            sources=[ClientIndices(source_domain, source_domain, np.arange(source_size))],
            target_labelled=ClientIndices("target_labelled", "target", np.sort(pool[:size])),
            target_unlabelled=ClientIndices("target_unlabelled", "target", np.sort(pool[size:])),
            target_test=ClientIndices("target_test", "target", np.sort(test)),
        )


def get_partitioner(name: str) -> Partitioner:
    return PARTITIONERS.get(name)()
