"""Every other domain a source that trains on all of it; the target labels some of its samples and is tested on
the others (the weakly-supervised paper's Amazon protocol)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fdabench.data.base import PreparedDataset
from fdabench.data.partition import (
    PARTITIONERS,
    ClientIndices,
    Partition,
    Partitioner,
    fraction_or_count,
    require_domain,
)


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
        require_domain(prepared, target)
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(prepared.domains[target].y))
        labelled = fraction_or_count(options["target_labelled"], len(order) - 1, "target_labelled")
        sources = [
            ClientIndices(domain, domain, np.arange(len(arrays.y)))
            for domain, arrays in prepared.domains.items()
            if domain != target
        ]
        return self.partition(
            prepared,
            target,
            seed,
            options,
            sources,
            target_labelled=ClientIndices("target_labelled", target, np.sort(order[:labelled])),
            target_unlabelled=ClientIndices("target_unlabelled", target, np.array([], dtype=np.int64)),
            target_test=ClientIndices("target_test", target, np.sort(order[labelled:])),
        )
