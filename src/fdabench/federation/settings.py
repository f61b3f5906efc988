"""Training settings of one cell: the `train` block of params.yaml after dataset defaults are applied."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# JSON-schema properties of the `train` block (all optional in params.yaml; datasets supply defaults).
TRAIN_SCHEMA: dict[str, Any] = {
    "model": {"type": "string", "description": "model registry name"},
    "model_options": {"type": "object", "description": "keyword arguments of the model factory"},
    "rounds": {"type": "integer", "minimum": 1, "description": "FDA rounds (after warm-up)"},
    "warmup_rounds": {"type": "integer", "minimum": 0, "description": "FedAvg rounds over the sources before FDA rounds, for methods that combine sources and target"},
    "local_epochs": {"type": "integer", "minimum": 1, "description": "source local epochs per round"},
    "target_local_epochs": {"type": "integer", "minimum": 1, "description": "target local epochs per round"},
    "optimizer": {"enum": ["adam", "sgd"], "description": "a fresh optimiser for every local training call"},
    "momentum": {"type": "number", "minimum": 0, "exclusiveMaximum": 1, "description": "SGD momentum"},
    "weight_decay": {"type": "number", "minimum": 0},
    "source_lr": {"type": "number", "exclusiveMinimum": 0},
    "target_lr": {"type": "number", "exclusiveMinimum": 0},
    "source_batch_size": {"type": "integer", "minimum": 0, "description": "0 = full batch"},
    "target_batch_size": {"type": "integer", "minimum": 0, "description": "0 = full batch"},
    "eval_batch_size": {"type": "integer", "minimum": 1},
    "server_momentum": {"type": "number", "minimum": 0, "exclusiveMaximum": 1, "description": "server momentum μ: v ← μ v + Δ, θ ← θ + server_lr · v (0: θ ← θ + Δ)"},
    "server_lr": {"type": "number", "exclusiveMinimum": 0, "description": "server step on the aggregate (with momentum)"},
    "final_rounds": {"type": "integer", "minimum": 1, "description": "the final metric is the mean over this many last rounds"},
}

OPTIONAL_DEFAULTS: dict[str, Any] = {
    "model_options": {},
    "target_local_epochs": 1,
    "momentum": 0.0,
    "weight_decay": 0.0,
    "eval_batch_size": 1024,
    "final_rounds": 5,  # DESIGN.md §1: mean target accuracy of the last 5 rounds
    "server_momentum": 0.0,
    "server_lr": 1.0,
}


@dataclass(frozen=True)
class TrainSettings:
    model: str
    rounds: int
    warmup_rounds: int
    local_epochs: int
    optimizer: str
    source_lr: float
    target_lr: float
    source_batch_size: int
    target_batch_size: int
    model_options: dict[str, Any] = field(default_factory=dict)
    target_local_epochs: int = 1
    momentum: float = 0.0
    weight_decay: float = 0.0
    eval_batch_size: int = 1024
    final_rounds: int = 5
    server_momentum: float = 0.0
    server_lr: float = 1.0

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "TrainSettings":
        unknown = set(values) - set(TRAIN_SCHEMA)
        if unknown:
            raise ValueError(f"unknown train settings: {sorted(unknown)}")
        return cls(**{**OPTIONAL_DEFAULTS, **values})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
