"""Every random stream a cell derives from its seed, in one table: `stream(seed, purpose, index)`.

A stream's seed is `seed * multiplier + offset + stride * index` for its purpose (the formulas the results were made
with, kept where they were already independent). The table holds the purposes of the round loop, the data and the
theory check, registered here; a method registers its own from its module (`register_purpose`: KD3A's and Co-MDA's
mixup, FedDaDiL's atoms and classifiers, auto-weighting's estimation batches), as a plugin method does. A purpose is
refused where one of its seeds meets another purpose's at the indices a cell uses each with (its `indices`, for up
to `CHECKED_CLIENTS` clients and `CHECKED_ROUNDS` rounds), at any of `CHECKED_SEEDS` (`tests/core/test_streams.py`
checks the whole table the same way). The purposes that used to share a seed with another by accident have offsets
of their own: the model's initialisation and the theory check's draws (the seed itself and seed + 1: at seed 0,
source 0's and source 1's batch streams), KD3A's mixup (the target's batch stream), FedDaDiL's dictionary clients
(the encoder's batch streams) and classifiers (batch streams of the round's index). Not derived from the cell's
seed: streams keyed by a CRC-32 of the cell model's initial parameters (themselves from `model_init`;
`tensor_seed`), the same wherever the cell's model is built: Co-MDA's second target network, FedDaDiL's initial
atoms and classifiers (`stream(key, "dadil_atoms")`).
"""

from __future__ import annotations

import zlib
from typing import NamedTuple

#: the sizes every purpose is checked apart for (`register_purpose`, `tests/core/test_streams.py`)
CHECKED_CLIENTS = 64
CHECKED_ROUNDS = 120
CHECKED_SEEDS = (0, 1, 2, 7, 123, 9999)


class Purpose(NamedTuple):
    multiplier: int
    offset: int
    stride: int
    description: str
    #: the indices a cell derives the purpose's streams with (checked apart from every other purpose's)
    indices: range = range(1)


#: the multiplier that keeps the streams of different seeds apart
SEED_STRIDE = 1_000_003
#: purpose -> its formula; `register_purpose` adds to it
PURPOSES: dict[str, Purpose] = {}


def _seeds(purpose: Purpose, seed: int) -> dict[int, int]:
    """stream seed -> index, for every index a cell uses `purpose` with."""
    return {
        int(seed) * purpose.multiplier + purpose.offset + purpose.stride * index: index for index in purpose.indices
    }


def meeting(name: str, purpose: Purpose) -> str:
    """Where `purpose`'s streams meet another registered purpose's (one line), or "" where they never do."""
    for seed in CHECKED_SEEDS:
        mine = _seeds(purpose, seed)
        for other, rule in PURPOSES.items():
            if other == name:
                continue
            common = sorted(mine.keys() & _seeds(rule, seed).keys())
            if common:
                theirs = _seeds(rule, seed)
                return f"{name}[{mine[common[0]]}] meets {other}[{theirs[common[0]]}] at seed {seed}"
    return ""


def register_purpose(name: str, purpose: Purpose) -> str:
    """Add a random stream's purpose to `PURPOSES` (again with the same formula: nothing happens); its name. Refused:
    a name registered with another formula, or a purpose whose streams meet another's (`meeting`)."""
    known = PURPOSES.get(name)
    if known is not None:
        if known == purpose:
            return name
        raise ValueError(f"random stream {name!r} is registered already, as {known}; give yours another name")
    clash = meeting(name, purpose)
    if clash:
        raise ValueError(
            f"random stream {name!r} refused: its seeds meet another stream's ({clash}); change its offset"
        )
    PURPOSES[name] = purpose
    return name


register_purpose(
    "model_init", Purpose(SEED_STRIDE, 700_001, 0, "the model's initial parameters (torch's global generator)")
)
register_purpose(
    "theory_draws", Purpose(SEED_STRIDE, 700_003, 0, "the theory check's Monte Carlo draws at initialisation")
)
register_purpose(
    "batches",
    Purpose(SEED_STRIDE, 0, 1, "client k's batch order (sources 0..N-1, the target N)", range(CHECKED_CLIENTS + 1)),
)
register_purpose(
    "target_noise", Purpose(SEED_STRIDE, 104_729, 0, "the target's feature noise (fixed, or redrawn at each read)")
)
register_purpose("client_split", Purpose(SEED_STRIDE, 900_001, 0, "a domain's samples over its clients (partitions)"))
register_purpose(
    "participation",
    Purpose(SEED_STRIDE, 600_011, 1, "the sources a round asks, index the round", range(CHECKED_ROUNDS)),
)
register_purpose(
    "dropout",
    Purpose(SEED_STRIDE, 800_011, 1, "the asked sources that drop out, index the round", range(CHECKED_ROUNDS)),
)


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
