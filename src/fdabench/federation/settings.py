"""Training settings of one cell: the `train` block of params.yaml after dataset defaults are applied."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass
from typing import Any

# JSON-schema properties of the `train` block (all optional in params.yaml; datasets supply defaults).
TRAIN_SCHEMA: dict[str, Any] = {
    "model": {"type": "string", "description": "model registry name"},
    "model_options": {"type": "object", "description": "keyword arguments of the model factory", "default": {}},
    "rounds": {
        "type": "integer",
        "minimum": 1,
        "description": "FDA rounds (after warm-up)",
        "search": {"int": [10, 100]},
    },
    "warmup_rounds": {
        "type": "integer",
        "minimum": 0,
        "description": "FedAvg rounds over the sources before FDA rounds, for methods that combine sources and target",
    },
    "local_epochs": {
        "type": "integer",
        "minimum": 1,
        "description": "source local epochs per round",
        "search": {"int": [1, 5]},
    },
    "target_local_epochs": {
        "type": "integer",
        "minimum": 1,
        "description": "target local epochs per round",
        "default": 1,
        "search": {"int": [1, 5]},
    },
    "optimizer": {"enum": ["adam", "sgd"], "description": "a fresh optimiser for every local training call"},
    "momentum": {"type": "number", "minimum": 0, "exclusiveMaximum": 1, "description": "SGD momentum", "default": 0.0},
    "weight_decay": {"type": "number", "minimum": 0, "default": 0.0, "search": {"log_uniform": [1e-6, 1e-2]}},
    "source_lr": {"type": "number", "exclusiveMinimum": 0, "search": {"log_uniform": [1e-4, 1e-1]}},
    "target_lr": {"type": "number", "exclusiveMinimum": 0, "search": {"log_uniform": [1e-4, 1e-1]}},
    "source_batch_size": {
        "type": "integer",
        "minimum": 0,
        "description": "0 = full batch",
        "search": {"choice": [16, 32, 64, 128]},
    },
    "target_batch_size": {
        "type": "integer",
        "minimum": 0,
        "description": "0 = full batch",
        "search": {"choice": [4, 8, 16, 32]},
    },
    "target_order": {
        "enum": ["shuffled", "fixed"],
        "description": "the order of the target's labelled samples in its local epochs: shuffled (unset: a fresh "
        "seeded order every epoch) or fixed (their stored order every epoch, as a DataLoader with shuffle=False; the "
        "partition fixes that order, e.g. leave_one_domain_out's target_selection)",
    },
    "eval_batch_size": {"type": "integer", "minimum": 1, "default": 1024},
    "server_momentum": {
        "type": "number",
        "minimum": 0,
        "exclusiveMaximum": 1,
        "description": "server momentum μ: v ← μ v + Δ, θ ← θ + server_lr · v (0: θ ← θ + Δ)",
        "default": 0.0,
    },
    "server_lr": {
        "type": "number",
        "exclusiveMinimum": 0,
        "description": "server step on the aggregate (with momentum)",
        "default": 1.0,
    },
    "cohort": {
        "enum": ["auto", "on", "off"],
        "description": "whether sources that can (fdabench.federation.cohort) train as one vectorised cohort: "
        "on, off, or auto (one by one until a measurement shows the cohort faster on the device: not on a CPU; "
        "not yet measured on a GPU)",
        "default": "auto",
    },
    "batching": {
        "enum": ["off", "stacked"],
        "description": "how the cell's plain local training and evaluation are computed: off (unset), one by one; "
        "stacked, with batched kernels (fdabench.federation.stacked), alone or together with the other cells of a "
        "group, with the same result either way (it may differ from one-by-one training in the last bits, so it is "
        "part of the cell's identity)",
    },
    "participation": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 1,
        "description": "the fraction of the sources asked each round (at least one; a seeded sample per round, "
        "fdabench.federation.participation)",
        "default": 1.0,
    },
    "source_dropout": {
        "type": "number",
        "minimum": 0,
        "exclusiveMaximum": 1,
        "description": "the probability that an asked source drops out of a round in the in-process simulator (it "
        "neither trains nor answers; over Flower, dropouts are the sites' own or injected faults)",
        "default": 0.0,
    },
    "final_rounds": {
        "type": "integer",
        "minimum": 1,
        "description": "the final metric is the mean over this many last rounds",
        "default": 5,
    },  # docs/design/methods.md, The FDA round
}

# Settings with a schema default may be left out everywhere; the others come from the dataset or params.
TRAIN_DEFAULTS: dict[str, Any] = {
    key: copy.deepcopy(spec["default"]) for key, spec in TRAIN_SCHEMA.items() if "default" in spec
}
#: settings whose absence means "not set" (their description says what that does): neither defaulted nor required
OPTIONAL_TRAIN: tuple[str, ...] = ("target_order", "batching")
REQUIRED_TRAIN: tuple[str, ...] = tuple(
    key for key, spec in TRAIN_SCHEMA.items() if "default" not in spec and key not in OPTIONAL_TRAIN
)


def with_train_defaults(*layers: dict[str, Any]) -> dict[str, Any]:
    """TRAIN_DEFAULTS < each of `layers` in turn, key by key (a copy): the one merge of the training settings'
    defaults, for params.yaml (a dataset's `default_train` < suite < experiment: `fdabench.config.resolve`) and for
    a `train` block given whole (`TrainSettings.from_dict`)."""
    merged = copy.deepcopy(TRAIN_DEFAULTS)
    for layer in layers:
        merged.update(copy.deepcopy(layer))
    return merged


@dataclass(frozen=True)
class TrainSettings:
    """Every key of TRAIN_SCHEMA; build it with `from_dict`, which fills the schema defaults."""

    model: str
    rounds: int
    warmup_rounds: int
    local_epochs: int
    optimizer: str
    source_lr: float
    target_lr: float
    source_batch_size: int
    target_batch_size: int
    model_options: dict[str, Any]
    target_local_epochs: int
    momentum: float
    weight_decay: float
    eval_batch_size: int
    final_rounds: int
    server_momentum: float
    server_lr: float
    cohort: str
    participation: float
    source_dropout: float
    target_order: str = "shuffled"
    batching: str = "off"

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainSettings:
        unknown = set(values) - set(TRAIN_SCHEMA)
        if unknown:
            raise ValueError(f"unknown train settings: {sorted(unknown)}")
        return cls(**with_train_defaults(values))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
