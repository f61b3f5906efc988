"""Label shift (FedGP paper): a minority group of classes shared between the sources and the target in
proportions η and 1 − η."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from fdabench.data.base import PreparedDataset
from fdabench.data.partition import (
    PARTITIONERS,
    ClientIndices,
    Partition,
    Partitioner,
    fraction_or_count,
)

_ETA_TARGET = re.compile(r"^eta(?P<eta>\d+(\.\d+)?)$")


@PARTITIONERS.register
class LabelShift(Partitioner):
    """Label shift (FedGP paper): the `train` domain's classes split into a minority group (default
    {8, 6, 9}) and the rest. The sources hold a fraction η of the minority group and 1 − η of the rest; the
    target holds the remainder (1 − η of the minority group, η of the rest), labels a fraction
    `target_labelled` of it (published: 15%) and is tested on the rest. Targets are named "eta<η>".

    `deal` says how the samples are dealt:
    - "per_class" (the authors' code, noniid_utils.py's imbalance-class-η): class by class, the shuffled samples
      of a minority class give their first ⌊η·n_c⌋ to the sources and of any other class their first ⌊η·n_c⌋ to
      the target; each class's source share is split into N − 1 near-equal consecutive parts, part i to source
      i (`np.array_split`); the target labels ⌊target_labelled · n_T⌋ of its shuffled samples (floors as the
      code's `int(...)`).
    - "pooled" (fdabench's first reading of the paper's text): the cuts are rounded over each group at once and
      the sources' pool is split iid over the sources, so a class's share per source varies by chance.
    """

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
        "deal": {
            "enum": ["per_class", "pooled"],
            "default": "per_class",
            "description": "per_class: the authors' code's class-by-class deal with floors; pooled: rounded cuts "
            "per group and an iid split of the sources' pool",
        },
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
        minority = options["minority_classes"]
        deal = per_class_deal if options["deal"] == "per_class" else pooled_deal
        source_parts, target_pool, labelled_count = deal(labels, minority, eta, options, rng)
        sources = [ClientIndices(f"client{i}", "train", np.sort(part)) for i, part in enumerate(source_parts)]
        return self.partition(
            prepared,
            target,
            seed,
            options,
            sources,
            target_labelled=ClientIndices("target_labelled", "train", np.sort(target_pool[:labelled_count])),
            target_unlabelled=ClientIndices("target_unlabelled", "train", np.array([], dtype=np.int64)),
            target_test=ClientIndices("target_test", "train", np.sort(target_pool[labelled_count:])),
        )


def per_class_deal(
    labels: np.ndarray, minority: list[int], eta: float, options: dict[str, Any], rng: np.random.Generator
) -> tuple[list[np.ndarray], np.ndarray, int]:
    """(per-source indices, the target's shuffled indices, its labelled count) as the authors' code deals them
    (`LabelShift`): minority classes first in their listed order, then the others in increasing order."""
    sources = options["clients"] - 1
    source_parts: list[list[np.ndarray]] = [[] for _ in range(sources)]
    target = []
    others = [c for c in np.unique(labels).tolist() if c not in minority]
    for label in [*minority, *others]:
        shuffled = rng.permutation(np.flatnonzero(labels == label))
        cut = int(len(shuffled) * eta)
        to_sources, to_target = (
            (shuffled[:cut], shuffled[cut:]) if label in minority else (shuffled[cut:], shuffled[:cut])
        )
        for part, share in zip(source_parts, np.array_split(to_sources, sources)):
            part.append(share)
        target.append(to_target)
    target_pool = rng.permutation(np.concatenate(target))
    labelled_count = int(len(target_pool) * float(options["target_labelled"]))
    if labelled_count < 1:
        raise ValueError(
            f"target_labelled = {options['target_labelled']} selects 0 of {len(target_pool)} samples; need at least 1"
        )
    return [np.concatenate(part) for part in source_parts], target_pool, labelled_count


def pooled_deal(
    labels: np.ndarray, minority: list[int], eta: float, options: dict[str, Any], rng: np.random.Generator
) -> tuple[list[np.ndarray], np.ndarray, int]:
    """(per-source indices, the target's shuffled indices, its labelled count): rounded cuts per group, the
    sources' pool split iid (`LabelShift`, deal "pooled")."""
    in_minority = np.isin(labels, minority)
    group_a, group_b = rng.permutation(np.flatnonzero(in_minority)), rng.permutation(np.flatnonzero(~in_minority))
    cut_a, cut_b = int(round(eta * len(group_a))), int(round((1 - eta) * len(group_b)))
    source_pool = rng.permutation(np.concatenate([group_a[:cut_a], group_b[:cut_b]]))
    target_pool = rng.permutation(np.concatenate([group_a[cut_a:], group_b[cut_b:]]))
    labelled_count = fraction_or_count(float(options["target_labelled"]), len(target_pool), "target_labelled")
    return np.array_split(source_pool, options["clients"] - 1), target_pool, labelled_count
