"""The method interface and its registry.

A method is the rules of the FDA round loop of Algorithm 1 (`fdabench.federation.rounds.run_rounds` runs every
method): a `Method` holds what a cell records and validates about it (name, family, hyper-parameters, required
settings), and a `RoundLoopMethod` adds what the loop asks of it (which clients train, how the server aggregates, the
hooks of `federation.rule_interface.RoundRules`).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import torch
from torch import Tensor

from fdabench.core.registry import Registry, derive_defaults
from fdabench.federation.client import Proximal, StepObserver
from fdabench.federation.client_state import StatefulRules
from fdabench.federation.delivery import Delivery
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import FederatedProblem
from fdabench.federation.rule_interface import Aggregate, Phase, RoundInputs, TargetContext, default_phases
from fdabench.federation.settings import TrainSettings

__all__ = [
    "METHODS",
    "Aggregate",
    "Method",
    "RoundInputs",
    "RoundLoopMethod",
    "TargetContext",
    "get_method",
]


class Method(ABC):
    """A registered method with validated hyper-parameters."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    #: the method's family, a key of fdabench.core.families.FAMILIES (recorded in its cells; figures group by it)
    family: ClassVar[str]
    #: whether training reads the target's unlabelled training inputs (recorded in cells, marked in tables)
    uses_unlabelled_target: ClassVar[bool] = False
    #: whether the method chooses β per source and round itself (its rounds log `betas`; plotted per source)
    logs_betas: ClassVar[bool] = False
    #: JSON-schema properties of the method's hyper-parameters (params.yaml `methods.<variant>`), each with its
    #: `default`; `default_hparams` is derived from them.
    hparams_schema: ClassVar[dict[str, Any]] = {}
    default_hparams: ClassVar[dict[str, Any]] = {}
    #: training settings the method cannot run without (nested like params.yaml's `train`, e.g. {"optimizer":
    #: "sgd"}), and why: `check` refuses other values before any job, and `fdabench check-method` runs with them
    requires_train: ClassVar[dict[str, Any]] = {}
    requires_because: ClassVar[str] = ""

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
            f"{self.name} needs train.{path}: {wanted!r} ({self.requires_because}); it is {actual!r}"
            for path, wanted, actual in unmet_requirements(self.requires_train, train)
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

    Class attributes say which clients train: sources (`sources_train`; in warm-up rounds only when
    `sources_train_after_warmup` is False), the target on its labelled samples, on all its training samples with
    labels, or on all its training inputs without labels under the method's `target_batch_loss`
    (`target_split` = "labelled" | "all" | "unlabelled" | None),
    whether FedAvg warm-up rounds precede (`warmup`), and what the server forwards to the target before it trains
    beside θ (`delivery`, `federation.delivery.Delivery`: the source updates, needed by auto-weighting). A method that
    keeps state on its clients between rounds sets `keeps_client_state` and implements the client-side hooks of
    `federation.client_state.StatefulRules` (SCAFFOLD, FedBN; the personalised methods, whose clients train their own
    way, `local_round`, and whose cell reports the target's personalised predictor, `personalised`). The rounds come in
    `phases` (default: the warm-up, then the FDA rounds; Finetune_Offline adds the target's local fine-tuning).
    """

    sources_train: ClassVar[bool] = True
    #: whether the sources keep training after the warm-up rounds (False: they train in warm-up only)
    sources_train_after_warmup: ClassVar[bool] = True
    target_split: ClassVar[str | None] = "labelled"
    warmup: ClassVar[bool] = False
    #: who receives what beside θ: the source updates, buffers and messages the server forwards to the target, and
    #: whether the `broadcast` reaches the target (default: nothing forwarded; the broadcast goes to every client)
    delivery: ClassVar[Delivery] = Delivery()

    def phases(self, settings: TrainSettings, has_sources: bool) -> list[Phase]:
        """The loop's rounds, phase by phase (`federation.rule_interface.Phase`); default: the FedAvg warm-up rounds
        where `warmup` asks for them and the cell has sources, then `settings.rounds` FDA rounds."""
        return default_phases(self, settings, has_sources)

    def fda_settings(self, settings: TrainSettings) -> TrainSettings:
        """The settings in force in FDA rounds (warm-up rounds use `settings`); default: unchanged."""
        return settings

    def prepare_model(self, model: torch.nn.Module, problem: FederatedProblem) -> torch.nn.Module:
        """The model the loop trains (e.g. with auxiliary heads added); default: as built."""
        return model

    def source_batch_loss(self, loss_fn):
        """The sources' batch loss (model, data, index) -> scalar; None: loss_fn on the main task."""
        return None

    def target_batch_loss(self, context: TargetContext):
        """The target's batch loss (model, data, index) -> scalar, built where the target trains from what it holds
        (`context`: the round's inputs as the target has them, its data, the task loss, the cell's seed); None: the
        task loss on its labels. A method whose `target_split` is "unlabelled" needs one (its target's labels are
        all -1)."""
        return None

    def message_shapes(self) -> set[tuple[int, ...]]:
        """Shapes of the documented tensors beyond updates and counts that reach the server or leave it (the
        `broadcast`, the clients' messages), for the privacy checks; default: none beyond those of SCAFFOLD's
        kind, (N, m) and (m,)."""
        return set()

    def target_start(self, inputs: RoundInputs) -> Tensor:
        """Where the target's local training starts in an FDA round (sources' updates are in `inputs`);
        default: the global parameters, as in Algorithm 1."""
        return inputs.global_params

    def local_proximal(self) -> Proximal | None:
        """A proximal penalty every client adds to its local objective (FedProx); default: none."""
        return None

    def target_observer(self, context: TargetContext) -> tuple[StepObserver | None, Any]:
        """Optionally a callback that sees each target optimiser step, and the statistics it fills
        (handed to `aggregate` as `inputs.target_statistics`)."""
        return None, None

    def update_bytes(self, space: ParameterSpace, phase: Phase) -> int:
        """Bytes of θ or of an update as it crosses a client boundary in a round of `phase` (FedBN: the shared entries
        only; FedDaDiL: the encoder in its FedAvg rounds, the atoms in the dictionary's); default: every parameter."""
        return space.update_bytes

    @abstractmethod
    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        """The server's step for an FDA round."""

    def round_state(self) -> dict[str, Any]:
        """What the method carries from round to round (saved in checkpoints); default: nothing."""
        return {}

    def restore_round_state(self, state: dict[str, Any]) -> None:
        """Continue from `round_state()` of an interrupted run."""


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
