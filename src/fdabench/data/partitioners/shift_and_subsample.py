"""One source domain and a target subsample of size n: the synthetic theory check of the FedGP paper
(appendix B)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from fdabench.data.base import DatasetSource, PreparedDataset
from fdabench.data.partition import PARTITIONERS, ClientIndices, Partition, Partitioner

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
        return self.partition(
            prepared,
            target,
            seed,
            options,
            [ClientIndices(source_domain, source_domain, np.arange(source_size))],
            target_labelled=ClientIndices("target_labelled", "target", np.sort(pool[:size])),
            target_unlabelled=ClientIndices("target_unlabelled", "target", np.sort(pool[size:])),
            target_test=ClientIndices("target_test", "target", np.sort(test)),
        )
