"""Partitioners: turn a prepared dataset, a target name and a seed into federated clients.

Every partitioner returns a `Partition` of index arrays into the prepared domains; every partition is
deterministic per seed and written with a manifest (per-client counts, class histograms, seed, options,
content hash). Like the datasets, partitioners import no torch.
"""

from __future__ import annotations

import copy
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from fdabench.core.io import content_hash
from fdabench.core.registry import Registry, derive_defaults
from fdabench.core.streams import stream
from fdabench.data.base import DatasetSource, PreparedDataset
from fdabench.data.heterogeneity import client_positions


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


def _fraction_or_count(value: float | int, total: int, what: str) -> int:
    """A count (an integer) or a fraction of `total` (a float in (0, 1]; 1.0 = all)."""
    count = int(value) if (isinstance(value, int) or value > 1) else int(round(value * total))
    if not 0 < count <= total:
        raise ValueError(f"{what} = {value} selects {count} of {total} samples; need between 1 and {total}")
    return count


def _require_domain(prepared: PreparedDataset, target: str) -> None:
    if target not in prepared.domains:
        raise ValueError(f"target {target!r} is not a domain of {prepared.name}: {', '.join(prepared.domains)}")


@PARTITIONERS.register
class LeaveOneDomainOut(Partitioner):
    """DomainBed leave-one-domain-out: every domain is split into 'in' and 'out' (holdout_fraction).
    Sources train on their 'in' split; the target's 'out' split is its test set, and `target_labelled`
    samples of its 'in' split (a count, or a fraction of it) are labelled; the rest of 'in' is unlabelled.

    `holdout_split: seeded` draws the in/out split from the cell's seed (DomainBed); `flamby` fixes it per
    domain as FLamby does (scikit-learn's train_test_split, random_state 43, shuffled, stratified by the
    label when every class has more than 2 samples), so seeds only change which 'in' samples are labelled."""

    name = "leave_one_domain_out"
    holds_out_sources = True
    options_schema = {
        "holdout_fraction": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "default": 0.2},
        "holdout_split": {
            "enum": ["seeded", "flamby"],
            "description": "seeded: in/out drawn per seed (DomainBed); flamby: one fixed stratified split per domain "
            "(FLamby)",
            "default": "seeded",
        },
        "target_labelled": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "labelled target samples: a count (an integer) or a fraction of the target's 'in' split (a "
            "float <= 1; 1.0 = all)",
            "default": 0.1,
        },
        "target_labelled_overrides": {
            "type": "object",
            "additionalProperties": {"type": "number", "exclusiveMinimum": 0},
            "description": "per-target value of target_labelled (e.g. a small centre labelled in full)",
        },
        "clients_per_domain": {
            "type": "integer",
            "minimum": 1,
            "description": "each source domain's 'in' samples dealt over this many clients, <domain>_c<j> (unset: "
            "one client per domain); uniformly, or with label_skew or quantity_skew",
        },
        "label_skew": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "Dirichlet α of each class's deal over a domain's clients (small: few classes each; large: "
            "the domain's mix; fdabench.data.heterogeneity)",
        },
        "quantity_skew": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "Dirichlet β of the clients' sizes within a domain (labels mixed as the domain's)",
        },
        "standardize": {
            "enum": [False, True, "per_domain"],
            "description": "impute missing inputs with the median and scale to zero mean, unit variance, fitted on the "
            "training clients only (never the target's test split): true pools the sources and the target's labelled "
            "samples; per_domain scales each domain by its own training split (FLamby's per-centre normalisation)",
        },
    }

    def option_problems(self, options: dict[str, Any]) -> list[str]:
        problems = []
        if "label_skew" in options and "quantity_skew" in options:
            problems.append("label_skew and quantity_skew exclude each other (label skew already sets the sizes)")
        if ("label_skew" in options or "quantity_skew" in options) and options.get("clients_per_domain", 1) < 2:
            problems.append("label_skew and quantity_skew deal a domain over clients: set clients_per_domain >= 2")
        return problems

    def split(self, prepared: PreparedDataset, target: str, seed: int, options: dict[str, Any]) -> Partition:
        _require_domain(prepared, target)
        rng = np.random.default_rng(seed)
        client_rng = np.random.default_rng(stream(seed, "client_split"))  # apart from the in/out draws
        sources, holdout = [], []
        target_parts: dict[str, np.ndarray]
        for domain, arrays in prepared.domains.items():
            order = rng.permutation(len(arrays.y))
            if options.get("holdout_split") == "flamby":  # absent: seeded (the schema's default)
                in_split, out_split = flamby_split(arrays.y, options["holdout_fraction"])
                in_split = in_split[rng.permutation(len(in_split))]  # the seed picks the labelled samples
            else:
                out_count = int(round(options["holdout_fraction"] * len(order)))
                out_split, in_split = order[:out_count], order[out_count:]
            if domain == target:
                wanted = options.get("target_labelled_overrides", {}).get(target, options["target_labelled"])
                labelled = _fraction_or_count(wanted, len(in_split), "target_labelled")
                target_parts = {"labelled": in_split[:labelled], "unlabelled": in_split[labelled:], "test": out_split}
            else:
                sources += domain_clients(domain, np.sort(in_split), arrays.y, options, client_rng)
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
            transforms=_standardize_transform(options.get("standardize", False)),
        )


def domain_clients(
    domain: str, indices: np.ndarray, labels: np.ndarray, options: dict[str, Any], rng: np.random.Generator
) -> list[ClientIndices]:
    """A source domain's samples as its clients: the domain itself, or `clients_per_domain` clients <domain>_c<j>
    dealt uniformly or with `label_skew` / `quantity_skew` (`fdabench.data.heterogeneity.client_positions`)."""
    clients = int(options.get("clients_per_domain", 1))
    if clients == 1:
        return [ClientIndices(domain, domain, indices)]
    parts = client_positions(labels[indices], clients, rng, options.get("label_skew"), options.get("quantity_skew"))
    return [ClientIndices(f"{domain}_c{j}", domain, indices[part]) for j, part in enumerate(parts)]


def _standardize_transform(standardize: bool | str) -> dict[str, dict[str, str]]:
    if standardize == "per_domain":
        return {"standardize": {"scope": "per_domain"}}
    return {"standardize": {}} if standardize else {}


@PARTITIONERS.register
class LabelledTarget(Partitioner):
    """Every non-target domain is one source client that trains on all of it; the target labels
    `target_labelled` samples (a count, or a fraction of the domain; drawn with the seed) and is tested on
    all the others. No target sample is unlabelled-only (the weakly-supervised paper's Amazon protocol)."""

    name = "labelled_target"
    options_schema = {
        "target_labelled": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "labelled target samples: a count (an integer) or a fraction of the target domain (a float "
            "< 1)",
            "default": 400,
        },
    }

    def split(self, prepared: PreparedDataset, target: str, seed: int, options: dict[str, Any]) -> Partition:
        _require_domain(prepared, target)
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(prepared.domains[target].y))
        labelled = _fraction_or_count(options["target_labelled"], len(order) - 1, "target_labelled")
        sources = [
            ClientIndices(domain, domain, np.arange(len(arrays.y)))
            for domain, arrays in prepared.domains.items()
            if domain != target
        ]
        return Partition(
            dataset=prepared.name,
            target=target,
            seed=seed,
            partitioner=self.name,
            options=dict(options),
            sources=sources,
            target_labelled=ClientIndices("target_labelled", target, np.sort(order[:labelled])),
            target_unlabelled=ClientIndices("target_unlabelled", target, np.array([], dtype=np.int64)),
            target_test=ClientIndices("target_test", target, np.sort(order[labelled:])),
        )


FLAMBY_SPLIT_SEED = 43  # FLamby's Fed-Heart-Disease train/test split (random_state of train_test_split)


def flamby_split(labels: np.ndarray, test_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) positions of one domain as FLamby splits a centre: shuffled with random_state 43,
    stratified by the label when there are two or more classes and each has more than 2 samples."""
    from sklearn.model_selection import train_test_split

    classes, counts = np.unique(labels, return_counts=True)
    stratify = labels if len(classes) > 1 and (counts > 2).all() else None
    train, test = train_test_split(
        np.arange(len(labels)),
        test_size=test_fraction,
        train_size=1.0 - test_fraction,
        random_state=FLAMBY_SPLIT_SEED,
        shuffle=True,
        stratify=stratify,
    )
    return np.asarray(train), np.asarray(test)


_SHIFT_TARGET = re.compile(r"^(?P<source>s\d+)-n(?P<size>\d+)$")


@PARTITIONERS.register
class ShiftAndSubsample(Partitioner):
    """The synthetic theory check: one source domain `s<k>` and a target subsample of size n, named
    "s<k>-n<n>". The target domain is split into a test set (test_fraction) and a training pool whose
    first n samples (in a seeded order) are labelled; the rest of the pool is unlabelled. Source
    domains that are not the chosen source are left out."""

    name = "shift_and_subsample"
    options_schema = {
        "test_fraction": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "default": 0.2},
        "target_sizes": {
            "type": "array",
            "items": {"type": "integer", "minimum": 2},
            "minItems": 1,
            "default": [14, 27, 49, 90, 164, 299, 546, 994, 1810],
        },
    }

    def validate_target(
        self, source: DatasetSource, target: str, options: dict[str, Any], dataset_options: dict[str, Any] | None = None
    ) -> str | None:
        match = _SHIFT_TARGET.match(target)
        if match is None or match["source"] not in source.domains:
            sources = [name for name in source.domains if name != "target"]
            return (
                f"{target!r} is not a target of {source.name}; "
                f"use '<source>-n<size>' with source in {', '.join(sources)}"
            )
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


def partition_options(source: DatasetSource, partitioner: str | None, overrides: dict[str, Any]) -> dict[str, Any]:
    """The partitioner's schema defaults < the dataset's `default_partition` (for its own partitioner only) <
    `overrides` (an experiment's `partition`)."""
    name = partitioner or source.partitioner
    defaults = dict(get_partitioner(name).default_options)
    if name == source.partitioner:
        defaults.update(source.default_partition)
    return {**copy.deepcopy(defaults), **copy.deepcopy(overrides)}


_NOISE_TARGET = re.compile(r"^noise(?P<std>\d+(\.\d+)?)(-n(?P<labelled>\d+))?(-label(?P<classes>\d+))?$")
_LABEL_SPLIT = re.compile(r"^label(?P<classes>\d+)$")


def _split_clients(
    labels: np.ndarray, clients: int, split: str, rng: np.random.Generator, assignment: str = "cyclic"
) -> list[np.ndarray]:
    """Indices of `labels` dealt to `clients`: "iid" (equal random shares) or "label<k>" (each client holds k
    classes, chosen by `_class_holders`; every class is shared equally among the clients that hold it)."""
    if split == "iid":
        return [np.sort(part) for part in np.array_split(rng.permutation(len(labels)), clients)]
    match = _LABEL_SPLIT.match(split)
    if match is None:
        raise ValueError(f"unknown split {split!r}; use iid or label<k>")
    classes = np.unique(labels)
    per_client = int(match["classes"])
    if not 0 < per_client <= len(classes):
        raise ValueError(f"{split}: need between 1 and {len(classes)} classes per client")
    holders = _class_holders(classes, clients, per_client, assignment, rng)
    parts: list[list[np.ndarray]] = [[] for _ in range(clients)]
    for label, owners in holders.items():
        if not owners:
            continue
        members = rng.permutation(np.flatnonzero(labels == label))
        for owner, share in zip(owners, np.array_split(members, len(owners))):
            parts[owner].append(share)
    return [np.sort(np.concatenate(p)) for p in parts]  # every client holds >= 1 class, so p is never empty


def _class_holders(
    classes: np.ndarray, clients: int, per_client: int, assignment: str, rng: np.random.Generator
) -> dict[int, list[int]]:
    """Which clients hold each class, in client order. "cyclic": the classes, relabelled by one seeded
    permutation, are dealt around the cycle in windows of `per_client`, so the holders of any two classes
    differ in number by at most one. "niid_bench" (NIID-Bench's noniid-#label<k>, as the FedGP code partitions
    its label-subset sources): client i holds class i mod K and `per_client` - 1 other classes drawn uniformly
    without replacement; a class no client drew is held by none, and its samples go to no client."""
    holders: dict[int, list[int]] = {int(c): [] for c in classes}
    if assignment == "niid_bench":
        for client in range(clients):
            own = classes[client % len(classes)]
            others = rng.choice(classes[classes != own], size=per_client - 1, replace=False)
            for label in [int(own), *others.tolist()]:
                holders[label].append(client)
        return holders
    if assignment != "cyclic":
        raise ValueError(f"unknown label assignment {assignment!r}; use cyclic or niid_bench")
    shuffled = rng.permutation(classes)
    for client in range(clients):
        for j in range(per_client):
            holders[int(shuffled[(client * per_client + j) % len(classes)])].append(client)
    return holders


@PARTITIONERS.register
class FeatureNoise(Partitioner):
    """Noisy features (FedGP paper): the `train` domain split into `clients` clients (the last is the
    target) iid or by label; Gaussian noise of std s added to the target's inputs only. Targets are named
    "noise<s>", "noise<s>-n<labelled>" (overriding target_labelled) and may end in "-label<k>" (the sources
    are dealt k classes each, overriding `split`). The target's labelled samples come from its partition; it
    is tested on the `test` domain (target_test: test_domain) or on the rest of its partition (target_test:
    rest). `target_share: iid` gives the target an iid 1/clients share of `train`, drawn first, so it holds
    every class, and deals the rest to the sources by `split` (non-IID MNIST of the weakly-supervised paper);
    `all` deals the whole of `train` to the sources and gives the target the whole of `train` too, seen
    through its noise (the FedGP paper's label-subset sources, Table 14); `split` (default) deals the target
    its share like any client."""

    name = "feature_noise"
    options_schema = {
        "clients": {"type": "integer", "minimum": 2, "description": "sources + 1 target", "default": 10},
        "split": {
            "type": "string",
            "pattern": "^(iid|label[0-9]+)$",
            "description": "iid or label<k> (k classes per client)",
            "default": "iid",
        },
        "label_assignment": {
            "enum": ["cyclic", "niid_bench"],
            "description": "with label<k>, which classes each client holds: cyclic (unset: classes dealt around a "
            "seeded cycle, every class held by as many clients as any other, give or take one) or niid_bench "
            "(NIID-Bench's noniid-#label<k>: client i holds class i mod K and k-1 random others)",
        },
        "target_share": {
            "enum": ["split", "iid", "all"],
            "description": "split: the target is dealt its share like the sources; iid: an iid 1/clients share drawn "
            "first (every class); all: the sources split all of train and the target draws from all of it",
            "default": "split",
        },
        "target_labelled": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "count (integer) or fraction of the target's partition (float <= 1)",
            "default": 100,
        },
        "target_test": {"enum": ["test_domain", "rest"], "default": "test_domain"},
        "noise_mode": {
            "enum": ["fixed", "redraw"],
            "description": "noise drawn once per sample (reproducible) or at every read (the published code)",
            "default": "fixed",
        },
    }

    def target_names(self, source, options: dict[str, Any], dataset_options: dict[str, Any] | None = None) -> list[str]:
        return ["noise0", "noise0.2", "noise0.4", "noise0.6", "noise0.8"]  # the published noise levels

    def validate_target(
        self, source, target: str, options: dict[str, Any], dataset_options: dict[str, Any] | None = None
    ) -> str | None:
        if _NOISE_TARGET.match(target) is None:
            return (
                f"{target!r} is not a target of {source.name}; "
                "use 'noise<std>', 'noise<std>-n<labelled>' or either with '-label<k>' (e.g. noise0.4, "
                "noise0.4-n200, noise0.4-label3)"
            )
        return None

    def split(self, prepared: PreparedDataset, target: str, seed: int, options: dict[str, Any]) -> Partition:
        match = _NOISE_TARGET.match(target)
        if match is None:
            raise ValueError(f"target {target!r} must look like noise<std> or noise<std>-n<labelled>")
        rng = np.random.default_rng(seed)
        labels = np.asarray(prepared.domains["train"].y)
        split = f"label{match['classes']}" if match["classes"] else options["split"]
        share = options.get("target_share")  # absent: split (the schema's default)
        assignment = options.get("label_assignment", "cyclic")
        if share == "iid":
            order = rng.permutation(len(labels))
            cut = len(labels) // options["clients"]
            target_part, remaining = order[:cut], np.sort(order[cut:])
            dealt = _split_clients(labels[remaining], options["clients"] - 1, split, rng, assignment)
            parts = [remaining[part] for part in dealt]
        elif share == "all":
            parts = _split_clients(labels, options["clients"] - 1, split, rng, assignment)
            target_part = rng.permutation(len(labels))
        else:
            parts = _split_clients(labels, options["clients"], split, rng, assignment)
            target_part = rng.permutation(parts.pop())
        sources = [ClientIndices(f"client{index}", "train", part) for index, part in enumerate(parts)]
        wanted = int(match["labelled"]) if match["labelled"] else options["target_labelled"]
        labelled_count = _fraction_or_count(wanted, len(target_part), "target_labelled")
        labelled, rest = np.sort(target_part[:labelled_count]), np.sort(target_part[labelled_count:])
        if options["target_test"] == "test_domain":
            unlabelled, test = (
                ClientIndices("target_unlabelled", "train", rest),
                ClientIndices("target_test", "test", np.arange(len(prepared.domains["test"].y))),
            )
        else:
            unlabelled, test = (
                ClientIndices("target_unlabelled", "train", np.array([], dtype=np.int64)),
                ClientIndices("target_test", "train", rest),
            )
        return Partition(
            dataset=prepared.name,
            target=target,
            seed=seed,
            partitioner=self.name,
            options=dict(options),
            sources=sources,
            target_labelled=ClientIndices("target_labelled", "train", labelled),
            target_unlabelled=unlabelled,
            target_test=test,
            transforms={"target_noise": {"std": float(match["std"]), "mode": options["noise_mode"]}},
        )


_ETA_TARGET = re.compile(r"^eta(?P<eta>\d+(\.\d+)?)$")


@PARTITIONERS.register
class LabelShift(Partitioner):
    """Label shift (FedGP paper): the `train` domain's classes split into a minority group (default
    {8, 6, 9}) and the rest. The sources share, iid, a fraction η of the minority group and 1 − η of the
    rest; the target holds the remainder (1 − η of the minority group, η of the rest), labels a fraction
    `target_labelled` of it (published: 15%) and is tested on the rest. Targets are named "eta<η>"."""

    name = "label_shift"
    # FedGP paper: classes {8, 6, 9} against the other 7; 10 clients; the target trains on 15% of its data.
    options_schema = {
        "clients": {"type": "integer", "minimum": 2, "default": 10},
        "minority_classes": {
            "type": "array",
            "items": {"type": "integer", "minimum": 0},
            "minItems": 1,
            "uniqueItems": True,
            "default": [8, 6, 9],
        },
        "target_labelled": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "default": 0.15},
    }

    def target_names(self, source, options: dict[str, Any], dataset_options: dict[str, Any] | None = None) -> list[str]:
        return ["eta0.45", "eta0.3", "eta0.15", "eta0.1", "eta0.05", "eta0"]  # the published η

    def validate_target(
        self, source, target: str, options: dict[str, Any], dataset_options: dict[str, Any] | None = None
    ) -> str | None:
        match = _ETA_TARGET.match(target)
        if match is None or not 0 <= float(match["eta"]) <= 1:
            return f"{target!r} is not a target of {source.name}; use 'eta<η>' with 0 <= η <= 1 (e.g. eta0.15)"
        return None

    def split(self, prepared: PreparedDataset, target: str, seed: int, options: dict[str, Any]) -> Partition:
        match = _ETA_TARGET.match(target)
        if match is None:
            raise ValueError(f"target {target!r} must look like eta<η>")
        eta = float(match["eta"])
        rng = np.random.default_rng(seed)
        labels = np.asarray(prepared.domains["train"].y)
        minority = np.isin(labels, options["minority_classes"])
        group_a, group_b = rng.permutation(np.flatnonzero(minority)), rng.permutation(np.flatnonzero(~minority))
        cut_a, cut_b = int(round(eta * len(group_a))), int(round((1 - eta) * len(group_b)))
        source_pool = rng.permutation(np.concatenate([group_a[:cut_a], group_b[:cut_b]]))
        target_pool = rng.permutation(np.concatenate([group_a[cut_a:], group_b[cut_b:]]))
        sources = [
            ClientIndices(f"client{i}", "train", np.sort(part))
            for i, part in enumerate(np.array_split(source_pool, options["clients"] - 1))
        ]
        labelled_count = _fraction_or_count(float(options["target_labelled"]), len(target_pool), "target_labelled")
        return Partition(
            dataset=prepared.name,
            target=target,
            seed=seed,
            partitioner=self.name,
            options=dict(options),
            sources=sources,
            target_labelled=ClientIndices("target_labelled", "train", np.sort(target_pool[:labelled_count])),
            target_unlabelled=ClientIndices("target_unlabelled", "train", np.array([], dtype=np.int64)),
            target_test=ClientIndices("target_test", "train", np.sort(target_pool[labelled_count:])),
        )
