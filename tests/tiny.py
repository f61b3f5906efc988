"""Short training settings shared by the round-loop and method tests (override per test: {**TINY_TRAIN, ...})."""

TINY_TRAIN = {
    "model": "mlp",
    "model_options": {"hidden": [16]},
    "rounds": 4,
    "warmup_rounds": 0,
    "local_epochs": 1,
    "optimizer": "adam",
    "source_lr": 1e-3,
    "target_lr": 1e-3,
    "source_batch_size": 64,
    "target_batch_size": 16,
}
