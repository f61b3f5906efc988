"""Leave one domain out (DomainBed), with FLamby's fixed per-centre split as an option, and each source domain
dealt over several clients with label or quantity skew (`fdabench.data.heterogeneity`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fdabench.core.streams import stream
from fdabench.data.base import PreparedDataset
from fdabench.data.heterogeneity import client_positions
from fdabench.data.partition import (
    PARTITIONERS,
    ClientIndices,
    Partition,
    Partitioner,
    fraction_or_count,
    require_domain,
)


@PARTITIONERS.register
class LeaveOneDomainOut(Partitioner):
    """DomainBed leave-one-domain-out: every domain is split into 'in' and 'out' (holdout_fraction).
    Sources train on their 'in' split; the target's 'out' split is its test set, and `target_labelled`
    samples of its 'in' split (a count, or a fraction of it) are labelled; the rest of 'in' is unlabelled.

    `holdout_split: seeded` draws the in/out split from the cell's seed (DomainBed); `flamby` fixes it per
    domain as FLamby does (scikit-learn's train_test_split, random_state 43, shuffled, stratified by the
    label when every class has more than 2 samples), so seeds only change which 'in' samples are labelled.

    `target_selection` picks the target's labelled samples. Unset: the first `target_labelled` of a seeded
    permutation of its 'in' split (a fraction rounded to a count). `split_dataset`: DomainBed's
    misc.split_dataset as the FedGP authors' Fed-Heart code calls it (`split_dataset_selection`)."""

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
        "target_selection": {
            "enum": ["split_dataset"],
            "description": "which 'in' samples of the target are labelled; unset: the first target_labelled of the "
            "seed's permutation, a fraction rounded to a count; split_dataset: DomainBed's misc.split_dataset (the "
            "FedGP authors' Fed-Heart code): the 'in' split in stored order, numpy RandomState(seed).shuffle of its "
            "positions, the first int(fraction x n) (a floor) labelled and kept in that shuffled order (the order "
            "`train.target_order: fixed` trains them in)",
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
        require_domain(prepared, target)
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
                if options.get("target_selection") == "split_dataset":
                    labelled, unlabelled = split_dataset_selection(np.sort(in_split), wanted, seed)
                else:
                    count = fraction_or_count(wanted, len(in_split), "target_labelled")
                    labelled, unlabelled = in_split[:count], in_split[count:]
                target_parts = {"labelled": labelled, "unlabelled": unlabelled, "test": out_split}
            else:
                sources += domain_clients(domain, np.sort(in_split), arrays.y, options, client_rng)
                holdout.append(ClientIndices(f"{domain}_out", domain, np.sort(out_split)))
        return self.partition(
            prepared,
            target,
            seed,
            options,
            sources,
            target_labelled=ClientIndices(
                "target_labelled", target, _labelled_order(target_parts["labelled"], options)
            ),
            target_unlabelled=ClientIndices("target_unlabelled", target, np.sort(target_parts["unlabelled"])),
            target_test=ClientIndices("target_test", target, np.sort(target_parts["test"])),
            holdout=holdout,
            transforms=_standardize_transform(options.get("standardize", False)),
        )


def split_dataset_selection(in_split: np.ndarray, wanted: float | int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(labelled, unlabelled) 'in' samples as DomainBed's misc.split_dataset(dataset, n, seed) splits them, with
    the n its Fed-Heart caller passes: n = int(len x fraction), a floor (a count is taken as is); the positions
    of `in_split` (the caller's stored order) shuffled by numpy's RandomState(seed), the first n labelled in that
    order (AutoFedGP 9b74449 domainbed/lib/misc.py:147-152; main_flamby_heart.py:260-265)."""
    total = len(in_split)
    count = int(wanted) if (isinstance(wanted, int) or wanted > 1) else int(wanted * total)
    if not 0 < count <= total:
        raise ValueError(f"target_labelled: {wanted} gives {count} of {total} samples")
    keys = list(range(total))
    np.random.RandomState(seed).shuffle(keys)
    keys = np.asarray(keys, dtype=np.int64)
    return in_split[keys[:count]], np.sort(in_split[keys[count:]])


def _labelled_order(labelled: np.ndarray, options: dict[str, Any]) -> np.ndarray:
    """The labelled target samples sorted, or in split_dataset's shuffled order (the order a fixed
    `train.target_order` trains them in)."""
    return labelled if options.get("target_selection") == "split_dataset" else np.sort(labelled)


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
