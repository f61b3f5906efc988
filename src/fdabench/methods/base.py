"""The method interface and its registry.

A method is the rules of the FDA round loop of Algorithm 1 (`fdabench.federation.rounds.run_rounds` runs every
method): a `Method` holds what a cell records and validates about it (name, family, hyper-parameters, required
settings), and a `RoundLoopMethod` adds what the loop and the sites ask of it (its roles and deliveries, its server
part and its clients' part: `federation.rule_interface.ServerRule` and `ClientRule`).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor

from fdabench.core.registry import Registry, derive_defaults
from fdabench.federation.client_state import StatefulRules
from fdabench.federation.delivery import Delivery
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import FederatedProblem
from fdabench.federation.roles import Roles
from fdabench.federation.rule_interface import (
    Aggregate,
    LocalContext,
    Objective,
    Phase,
    RoundInputs,
    default_phases,
)
from fdabench.federation.settings import TrainSettings

__all__ = [
    "METHODS",
    "Aggregate",
    "Method",
    "Phase",
    "Requires",
    "Roles",
    "RoundInputs",
    "RoundLoopMethod",
    "LocalContext",
    "Objective",
    "TrainSettings",
    "default_phases",
    "get_method",
]


@dataclass(frozen=True)
class Requires:
    """Training settings a method cannot run without (`train`, nested like params.yaml's `train`, e.g.
    {"optimizer": "sgd"}) and why (`because`, quoted in the error)."""

    train: dict[str, Any] = field(default_factory=dict)
    because: str = ""


class Method(ABC):
    """A registered method with validated hyper-parameters."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    #: the method's family, a key of fdabench.core.families.FAMILIES (recorded in its cells; figures group by it; the
    #: "auto" family's methods choose β per source and round, `families.logs_betas`)
    family: ClassVar[str]
    #: JSON-schema properties of the method's hyper-parameters (params.yaml `methods.<variant>`), each with its
    #: `default`; `default_hparams` is derived from them.
    hparams_schema: ClassVar[dict[str, Any]] = {}
    default_hparams: ClassVar[dict[str, Any]] = {}
    #: training settings the method cannot run without, and why (`Requires`): `check` refuses other values before any
    #: job, and `fdabench check-method` runs with them
    requires: ClassVar[Requires] = Requires()

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        derive_defaults(cls, "hparams_schema", "default_hparams")

    def __init__(self, hparams: dict[str, Any] | None = None):
        unknown = set(hparams or {}) - set(self.hparams_schema)
        if unknown:
            raise ValueError(
                f"{self.name}: unknown hyper-parameters {sorted(unknown)}; allowed: {sorted(self.hparams_schema)}"
            )
        self.hparams = self.with_defaults(hparams or {})

    @classmethod
    def with_defaults(cls, hparams: dict[str, Any]) -> dict[str, Any]:
        """The method's schema defaults < `hparams` (a copy; the first step of the hyper-parameters' merge
        order, `fdabench.config.resolve`)."""
        return {**copy.deepcopy(cls.default_hparams), **copy.deepcopy(hparams)}

    def check(self, train: dict[str, Any]) -> list[str]:
        """Problems with running this method under the experiment's resolved `train` settings (reported by params
        validation before any job runs); default: each `requires_train` setting that `train` does not have."""
        return [
            f"{self.name} needs train.{path}: {wanted!r} ({self.requires.because}); it is {actual!r}"
            for path, wanted, actual in unmet_requirements(self.requires.train, train)
        ]


def unmet_requirements(required: dict[str, Any], train: dict[str, Any], prefix: str = "") -> list[tuple[str, Any, Any]]:
    """(dotted path, required value, actual value) of each `required` setting `train` lacks (nested mappings
    compared key by key; a missing setting is None)."""
    unmet = []
    for key, wanted in required.items():
        actual = (train or {}).get(key)
        if isinstance(wanted, dict):
            unmet += unmet_requirements(wanted, actual if isinstance(actual, dict) else {}, f"{prefix}{key}.")
        elif actual != wanted:
            unmet.append((f"{prefix}{key}", wanted, actual))
    return unmet


class RoundLoopMethod(StatefulRules, Method):
    """A method run by the FDA round loop (Algorithm 1).

    Two declarative values say what each client does (`roles`, `federation.roles.Roles`: when the sources train,
    what the target trains on, whether FedAvg warm-up rounds precede, which clients keep state, whether the cell
    reports the target's personalised predictor) and who receives what beside θ (`delivery`,
    `federation.delivery.Delivery`: the source updates forwarded to the target, needed by auto-weighting). The
    server's part (`federation.rule_interface.ServerRule`): the rounds in `phases` (default: the warm-up, then the
    FDA rounds; Finetune_Offline adds the target's local fine-tuning), `target_start`, `broadcast`, `aggregate`,
    `update_bytes` and `round_state`. The clients' part (`federation.rule_interface.ClientRule`): the objective a
    client trains under (`local_objective`: batch loss, proximal term, observer), and, with defaults in
    `federation.client_state.StatefulRules`, the state a client keeps (`client_state`), a client's whole round where
    it trains otherwise (`local_round`: SCAFFOLD, FedBN, the adversarial and personalised methods), and what it
    evaluates (`evaluation_view`).
    """

    #: what each client does: when the sources train, what the target trains on, warm-up rounds, client state
    roles: ClassVar[Roles] = Roles()
    #: who receives what beside θ: the source updates, buffers and messages the server forwards to the target, and
    #: whether the `broadcast` reaches the target (default: nothing forwarded; the broadcast goes to every client)
    delivery: ClassVar[Delivery] = Delivery()

    # -- the server's part (ServerRule; `broadcast` is with the client state's hooks) ---------------------------
    def phases(self, settings: TrainSettings, has_sources: bool) -> list[Phase]:
        """The loop's rounds, phase by phase (`federation.rule_interface.Phase`, each with the settings in force);
        default: the FedAvg warm-up rounds where `roles.warmup` asks for them and the cell has sources, then
        `settings.rounds` FDA rounds under the cell's settings."""
        return default_phases(self, settings, has_sources)

    def target_start(self, inputs: RoundInputs) -> Tensor:
        """Where the target's local training starts in an FDA round (sources' updates are in `inputs`);
        default: the global parameters, as in Algorithm 1."""
        return inputs.global_params

    @abstractmethod
    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        """The server's step for an FDA round."""

    def update_bytes(self, space: ParameterSpace, phase: Phase) -> int:
        """Bytes of θ or of an update as it crosses a client boundary in a round of `phase` (FedBN: the shared entries
        only; FedDaDiL: the encoder in its FedAvg rounds, the atoms in the dictionary's); default: every parameter."""
        return space.update_bytes

    @property
    def round_state(self) -> dict[str, Any]:
        """What the server carries from round to round (saved in checkpoints; set from a saved one to continue an
        interrupted run); default: nothing."""
        return {}

    @round_state.setter
    def round_state(self, state: dict[str, Any]) -> None:
        pass

    # -- the clients' part (ClientRule; the client state's hooks: `federation.client_state.StatefulRules`) ------
    def prepare_model(self, model: torch.nn.Module, problem: FederatedProblem) -> torch.nn.Module:
        """The model the loop trains (e.g. with auxiliary heads added); default: as built."""
        return model

    def local_objective(self, context: LocalContext) -> Objective:
        """How a client trains this round beyond its task loss (`federation.rule_interface.Objective`: a batch loss, a
        proximal term, an observer of its steps with the statistics it fills), built where it trains from what it holds
        (`context`: its role and task loss; the target's round inputs as it has them, its model, data and the cell's
        seed); default: the task loss alone. A method whose `roles.target` is "unlabelled" gives the target a batch
        loss (its labels are all -1)."""
        return Objective()

    def message_shapes(self) -> set[tuple[int, ...]]:
        """Shapes of the documented tensors beyond updates and counts that reach the server or leave it (the
        `broadcast`, the clients' messages), for the privacy checks; default: none beyond those of SCAFFOLD's
        kind, (N, m) and (m,)."""
        return set()


def every_client_update(inputs: RoundInputs) -> tuple[Tensor, Tensor]:
    """(updates, sample counts) of the sources that answered, then the target's: the rows of a FedAvg over every
    client (the personalised methods, FedBN)."""
    updates = inputs.target_update.unsqueeze(0)
    counts = torch.tensor([float(inputs.target_count)], device=updates.device)
    if inputs.source_updates is not None:
        updates = torch.cat([inputs.source_updates, updates])
        counts = torch.cat([inputs.source_counts, counts])
    return updates, counts


METHODS: Registry[type[Method]] = Registry("method")


def get_method(name: str, hparams: dict[str, Any] | None = None) -> Method:
    return METHODS.get(name)(hparams)
