"""The method interface and its registry.

A method turns a federated problem into a per-round history. Most methods are `RoundLoopMethod`s: the
FDA round loop of Algorithm 1 (fdabench.federation.rounds) runs them and asks them only which clients
train and how the server aggregates. Families with a different protocol subclass `Method` directly.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import Tensor

from fdabench.core.registry import Registry, derive_defaults
from fdabench.federation.checkpoint import Checkpoints
from fdabench.federation.client import Proximal, StepObserver
from fdabench.federation.problem import FederatedProblem
from fdabench.federation.rounds import run_rounds
from fdabench.federation.rule_interface import Aggregate, RoundInputs, TargetContext
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
    #: whether `run` saves its state to `checkpoints` and continues from it (every registered method does); a
    #: method that does not starts an interrupted cell over and gets no checkpoint
    resumes: ClassVar[bool] = False

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
        """Problems with running this method under the experiment's resolved `train` settings
        (reported by params validation before any job runs); default: none."""
        return []

    @abstractmethod
    def run(
        self,
        problem: FederatedProblem,
        settings: TrainSettings,
        seed: int,
        device: torch.device,
        on_round: Callable[[dict[str, Any], int], None] | None = None,
        checkpoints: Checkpoints | None = None,
    ) -> dict[str, Any]:
        """Train and evaluate; return {"metric": name, "rounds": [per-round records], ...}.

        `on_round(record, total_rounds)` is called after every round (progress display). Methods that
        `resumes` save their state to `checkpoints` and continue from it; the others start over."""


class RoundLoopMethod(Method):
    """A method run by the FDA round loop (Algorithm 1).

    Class attributes say which clients train: sources (`sources_train`; in warm-up rounds only when
    `sources_train_after_warmup` is False), the target on its labelled
    samples or on all its training samples with labels (`target_split` = "labelled" | "all" | None),
    whether FedAvg warm-up rounds precede (`warmup`), and whether the server forwards the source updates
    to the target before it trains (`target_receives_source_updates`, needed by auto-weighting).
    """

    sources_train: ClassVar[bool] = True
    #: whether the sources keep training after the warm-up rounds (False: they train in warm-up only)
    sources_train_after_warmup: ClassVar[bool] = True
    target_split: ClassVar[str | None] = "labelled"
    warmup: ClassVar[bool] = False
    target_receives_source_updates: ClassVar[bool] = False
    resumes = True

    def run(self, problem, settings, seed, device, on_round=None, checkpoints=None, sites_hook=None):
        """The round loop (`run_rounds`); `sites_hook` wraps the sites it talks to (e.g. the bench's timing)."""
        return run_rounds(
            self, problem, settings, seed, device, on_round, checkpoints=checkpoints, sites_hook=sites_hook
        )

    def fda_settings(self, settings: TrainSettings) -> TrainSettings:
        """The settings in force in FDA rounds (warm-up rounds use `settings`); default: unchanged."""
        return settings

    def prepare_model(self, model: torch.nn.Module, problem: FederatedProblem) -> torch.nn.Module:
        """The model the loop trains (e.g. with auxiliary heads added); default: as built."""
        return model

    def source_batch_loss(self, loss_fn):
        """The sources' batch loss (model, data, index) -> scalar; None: loss_fn on the main task."""
        return None

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

    @abstractmethod
    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        """The server's step for an FDA round."""

    def round_state(self) -> dict[str, Any]:
        """What the method carries from round to round (saved in checkpoints); default: nothing."""
        return {}

    def restore_round_state(self, state: dict[str, Any]) -> None:
        """Continue from `round_state()` of an interrupted run."""


METHODS: Registry[type[Method]] = Registry("method")


def get_method(name: str, hparams: dict[str, Any] | None = None) -> Method:
    return METHODS.get(name)(hparams)
