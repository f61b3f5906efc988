"""Short training settings shared by the round-loop and method tests (override per test: {**TINY_TRAIN, ...}),
and a small random problem whose clients carry auxiliary labels (the weakly-supervised methods need them)."""

import torch

from fdabench.federation.problem import ClientData, FederatedProblem

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

#: a small FedDaDiL dictionary (hparams of dadil_e and dadil_r): the properties a test checks (resume, source order,
#: privacy, Flower equivalence) do not depend on its size; the defaults (200-point supports, 300 classifier steps) took
#: 70-120 s a case
TINY_DICTIONARY = {
    "atoms": 2,
    "support_size": 6,
    "batch_size": 4,
    "local_steps": 2,
    "encoder_rounds": 2,
    "classifier_steps": 5,
}

#: settings for `aux_problem` (five features, two classes)
AUX_TRAIN = {
    "model": "mlp",
    "model_options": {"hidden": [8]},
    "rounds": 2,
    "warmup_rounds": 1,
    "local_epochs": 1,
    "optimizer": "adam",
    "source_lr": 1e-2,
    "target_lr": 1e-2,
    "source_batch_size": 16,
    "target_batch_size": 8,
}


def aux_client(name: str, n: int, seed: int) -> ClientData:
    g = torch.Generator().manual_seed(seed)
    return ClientData(
        name,
        torch.randn(n, 5, generator=g),
        torch.randint(0, 2, (n,), generator=g),
        aux={"sex": torch.randint(0, 2, (n,), generator=g), "age_decade": torch.randint(-1, 5, (n,), generator=g)},
    )


def aux_problem() -> FederatedProblem:
    """Two sources (40 and 30 samples), a target with 16 labelled and 10 unlabelled samples, 20 test samples."""
    return FederatedProblem(
        "classification",
        2,
        (5,),
        [aux_client("a", 40, 0), aux_client("b", 30, 1)],
        aux_client("t", 16, 2),
        aux_client("u", 10, 3),
        aux_client("test", 20, 4),
        aux_classes={"sex": 2, "age_decade": 5},
    )
