"""Every random stream a cell derives from its seed, in one table: `stream(seed, purpose, index)`.

A stream's seed is `seed * multiplier + offset + stride * index` for its purpose (the formulas the results were
made with, kept where they were already independent; `tests/test_streams.py` checks that no two purposes or
indices of one cell meet, for up to `CHECKED_CLIENTS` clients and `CHECKED_ROUNDS` rounds). The purposes that used
to share a seed with another by accident have offsets of their own: the model's initialisation and the theory
check's draws (the seed itself and seed + 1: at seed 0, source 0's and source 1's batch streams), KD3A's mixup (the
target's batch stream), FedDaDiL's dictionary clients (the encoder's batch streams) and classifiers (batch streams
of the round's index). Not in the table, as they derive from no seed: streams keyed by a CRC-32 of the cell model's
initial parameters (themselves from `model_init`; `tensor_seed`), the same wherever the cell's model is built: Co-MDA's
second target network, FedDaDiL's initial atoms and classifiers (`stream(key, "dadil_atoms")`).
"""

from __future__ import annotations

import zlib
from typing import NamedTuple


class Purpose(NamedTuple):
    multiplier: int
    offset: int
    stride: int
    description: str


#: the multiplier that keeps the streams of different seeds apart
SEED_STRIDE = 1_000_003
PURPOSES: dict[str, Purpose] = {
    "model_init": Purpose(SEED_STRIDE, 700_001, 0, "the model's initial parameters (torch's global generator)"),
    "theory_draws": Purpose(SEED_STRIDE, 700_003, 0, "the theory check's Monte Carlo draws at initialisation"),
    "batches": Purpose(SEED_STRIDE, 0, 1, "client k's batch order (sources 0..N-1, the target N)"),
    "target_noise": Purpose(SEED_STRIDE, 104_729, 0, "the target's feature noise (fixed, or redrawn at each read)"),
    "auto_estimation": Purpose(SEED_STRIDE, 0, 7919, "auto-weighting's estimation batches, index round + 1"),
    "kd3a_mixup": Purpose(SEED_STRIDE, 199_999, 0, "KD3A's mixup coefficients (numpy)"),
    "comda_mixup": Purpose(SEED_STRIDE, 399_989, 0, "Co-MDA's mixup coefficients at the target (numpy)"),
    "dadil_classifier": Purpose(SEED_STRIDE, 299_993, 0, "FedDaDiL's classifiers (seed: the cell's model key)"),
    "dadil_atoms": Purpose(SEED_STRIDE, 999_983, 0, "FedDaDiL's initial atoms (seed: the cell's model key)"),
    "client_split": Purpose(SEED_STRIDE, 900_001, 0, "a domain's samples over its clients (partitions)"),
    "participation": Purpose(SEED_STRIDE, 600_011, 1, "the sources a round asks, index the round"),
    "dropout": Purpose(SEED_STRIDE, 800_011, 1, "the asked sources that drop out, index the round"),
}
#: the sizes `tests/test_streams.py` checks every purpose apart for
CHECKED_CLIENTS = 64
CHECKED_ROUNDS = 120


def tensor_seed(tensor) -> int:
    """A seed from a tensor's values: the CRC-32 of its bytes on the CPU (the same wherever it is computed alike)."""
    return zlib.crc32(tensor.detach().cpu().contiguous().numpy().tobytes())


def stream(seed: int, purpose: str, index: int = 0) -> int:
    """The seed of one derived random stream of a cell (`PURPOSES`)."""
    try:
        rule = PURPOSES[purpose]
    except KeyError:
        raise ValueError(f"unknown random stream {purpose!r}; known: {', '.join(PURPOSES)}") from None
    return int(seed) * rule.multiplier + rule.offset + rule.stride * int(index)
