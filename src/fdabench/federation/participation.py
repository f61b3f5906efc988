"""Which sources a round asks, and which of them the in-process simulator lets drop out.

Partial participation: each round the server asks m = max(1, round(participation · N)) of the N sources, a uniform
sample without replacement drawn from the round's own stream (`stream(seed, "participation", round)`), so the same
cell asks the same sources on any machine and after a resume. Dropout: each asked source fails to answer with
probability `source_dropout`, drawn from `stream(seed, "dropout", round)`; a source that drops does not train and
sends nothing, as a site that left (the Flower path's `drop` fault). The rules then combine the sources that
answered (FedAvg's, FedDA's and FedGP's weights, the auto rules' β), and the round's record names who was asked and
who dropped.
"""

from __future__ import annotations

import numpy as np

from fdabench.core.streams import stream


def asked_sources(count: int, participation: float, seed: int, round_index: int) -> list[int]:
    """The positions of the sources a round asks (all of them at participation 1, drawing nothing)."""
    wanted = max(1, int(round(participation * count)))
    if wanted >= count:
        return list(range(count))
    rng = np.random.default_rng(stream(seed, "participation", round_index))
    return sorted(int(i) for i in rng.choice(count, size=wanted, replace=False))


def dropped_sources(asked: list[int], dropout: float, seed: int, round_index: int) -> list[int]:
    """The asked sources that drop out this round (none at dropout 0, drawing nothing)."""
    if dropout <= 0 or not asked:
        return []
    rng = np.random.default_rng(stream(seed, "dropout", round_index))
    fails = rng.random(len(asked)) < dropout
    return [index for index, fail in zip(asked, fails) if fail]
