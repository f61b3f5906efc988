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
        labelled_count = fraction_or_count(float(options["target_labelled"]), len(target_pool), "target_labelled")
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
