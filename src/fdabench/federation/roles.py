"""What each client does under a method: one declarative value, read by the round loop (who is asked to train), the
sites in this process and over Flower (what the target trains on, who keeps state, what the target reports) and the
cell's record (whether the method reads the target's unlabelled inputs). Who receives what is its sibling,
`federation.delivery.Delivery`."""

from __future__ import annotations

from dataclasses import dataclass

#: when the sources train: in every round, in the FedAvg warm-up rounds only, or never
SOURCE_TRAINING = ("always", "warmup", "never")
#: what the target trains on (`federation.sites.target_training_data`); None: it does not train
TARGET_SPLITS = ("labelled", "all", "unlabelled", None)
#: which clients keep state between rounds (`federation.client_state`); None: none
STATE_CLIENTS = ("all", "target", None)


@dataclass(frozen=True)
class Roles:
    """The clients' roles under a method (default: FedAvg-style sources training every round, the target training on
    its labelled samples, no warm-up, no client state).

    - `sources`: "always", "warmup" (only in the FedAvg warm-up rounds) or "never" (the cell's sources do not train).
    - `target`: what the target trains on: "labelled" (its labelled samples), "all" (labelled and unlabelled, with
      their labels: the oracle), "unlabelled" (every training input, every label removed), or None (it never trains).
    - `warmup`: FedAvg warm-up rounds over the sources precede the method's rounds (`settings.warmup_rounds`).
    - `unlabelled`: the method reads the target's unlabelled training inputs (recorded in cells, marked in tables);
      true whenever `target` is "unlabelled".
    - `state`: which clients keep state between rounds: "all" (SCAFFOLD, FedBN, FedRep), only the "target" (Ditto's
      and APFL's personal models, Finetune_Offline's frozen features, KD3A's mixup stream), or None. Clients with state
      train one by one, never in cohorts, through the method's client-side hooks.
    - `personalised`: the cell reports the target's personalised predictor on its test split and every validation
      split, and the global model beside it (`global_<metric>`, `global_loss`): Ditto, FedRep, APFL, kNN-Per,
      FedDaDiL."""

    sources: str = "always"
    target: str | None = "labelled"
    warmup: bool = False
    unlabelled: bool = False
    state: str | None = None
    personalised: bool = False

    def __post_init__(self):
        for field, value, allowed in (
            ("sources", self.sources, SOURCE_TRAINING),
            ("target", self.target, TARGET_SPLITS),
            ("state", self.state, STATE_CLIENTS),
        ):
            if value not in allowed:
                raise ValueError(f"Roles.{field} is {value!r}; allowed: {', '.join(map(repr, allowed))}")
        if self.target == "unlabelled" and not self.unlabelled:
            raise ValueError("Roles: a target that trains on its unlabelled inputs reads them (unlabelled=True)")

    @property
    def sources_train(self) -> bool:
        """Whether the cell's sources train at all (in some round)."""
        return self.sources != "never"

    def holds_state(self, role: str) -> bool:
        """Whether a client of `role` ("source" or "target") keeps state between rounds."""
        return self.state == "all" or (self.state == "target" and role == "target")
