"""What the methods whose target trains on its unlabelled inputs like a source share (KD3A, Co-MDA): the target's
training settings, and its numpy mixup stream kept as its client state between rounds."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import torch

from fdabench.core.streams import stream
from fdabench.federation.client_state import ClientState
from fdabench.federation.settings import TrainSettings


def like_a_source(settings: TrainSettings) -> TrainSettings:
    """The target trains every domain alike: with the sources' learning rate, batch size and local epochs, its batches
    shuffled (it has about as many inputs as a source; the target_* settings are for its few labelled samples)."""
    return replace(
        settings,
        target_lr=settings.source_lr,
        target_batch_size=settings.source_batch_size,
        target_local_epochs=settings.local_epochs,
        target_order="shuffled",
    )


def mixup_generator(state: ClientState | None, seed: int | None, purpose: str) -> np.random.Generator:
    """The target's mixup generator: as its last round left it (its client state, `encode_generator`), else fresh from
    the cell's stream `purpose` (`core.streams`)."""
    if state and "mixup" in state:
        rng = np.random.default_rng()
        rng.bit_generator.state = json.loads(bytes(state["mixup"].tolist()).decode())
        return rng
    return np.random.default_rng(stream(seed, purpose))


def encode_generator(rng: np.random.Generator) -> ClientState:
    """The mixup generator's state as client state (bytes of its JSON)."""
    return {"mixup": torch.tensor(list(json.dumps(rng.bit_generator.state).encode()), dtype=torch.uint8)}
