"""What the FDA round loop and a method's aggregation rule exchange (Algorithm 1): the server's inputs of a
round, the target's context before it trains, the server's step, and the rules the loop asks a method for.
The loop (`federation.rounds`) is written against `RoundRules`; `methods.base.RoundLoopMethod` implements it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor

from fdabench.federation.client import Proximal, StepObserver
from fdabench.federation.client_state import ClientState, LocalPlan, LocalReply
from fdabench.federation.delivery import Delivery
from fdabench.federation.problem import FederatedProblem
from fdabench.federation.records import FDA, WARMUP
from fdabench.federation.settings import TrainSettings


@dataclass
class RoundInputs:
    """Everything the server holds when it aggregates one round (flat updates)."""

    round_index: int
    global_params: Tensor
    layer_sizes: tuple[int, ...]
    settings: TrainSettings
    layer_names: tuple[str, ...] = ()
    source_updates: Tensor | None = None  # (N, m)
    source_counts: Tensor | None = None  # (N,) samples per source
    source_steps: Tensor | None = None  # (N,) local optimiser steps per source
    target_update: Tensor | None = None  # (m,)
    target_count: int = 0
    target_steps: int = 0
    target_statistics: Any = None  # what the method's target observer accumulated
    source_names: tuple[str, ...] = ()  # of the sources that answered
    #: (N, k...) the answered sources' extra messages (SCAFFOLD's Δc_i; at the target only where the method's `delivery`
    #: forwards them: Co-MDA's source predictions)
    source_messages: Tensor | None = None
    target_message: Tensor | None = None  # (k,)
    source_total: int = 0  # every source of the cell, asked this round or not (SCAFFOLD's N)
    #: what the server sent every training client beside θ (SCAFFOLD's c; the sources only where the method's
    #: `delivery` keeps it from the target: `target_broadcast`)
    broadcast: Tensor | None = None
    #: the answered sources' buffers (BatchNorm statistics), in source order, where the model has buffers: forwarded to
    #: the target with the source updates where the method's `delivery` says so (KD3A's source models, buffers too)
    source_buffers: list[list[Tensor]] | None = None


def target_broadcast(method: RoundRules, inputs: RoundInputs) -> Tensor | None:
    """The round's broadcast as it reaches the target: none where the method sends it to the sources only."""
    return inputs.broadcast if method.delivery.broadcast_to_target else None


@dataclass
class TargetContext:
    """What the target holds when it is about to train in an FDA round (for the method's observer)."""

    inputs: RoundInputs
    space: Any  # ParameterSpace of the shared model (parameters are at `inputs.global_params`)
    data: Any  # ClientData the target trains on
    loss_fn: Callable[[Tensor, Tensor], Tensor]
    seed: int


@dataclass
class Aggregate:
    """The server's step (added to the global parameters) and what to log for this round."""

    delta: Tensor
    log: dict[str, Any] = field(default_factory=dict)
    #: bytes of documented messages beyond updates and sample counts that reached the server this round
    #: (auto-weighting's estimates), counted in the round's uplink
    message_bytes: int = 0
    #: the new global parameters themselves, where the server sets θ instead of stepping it (KD3A's weighted average
    #: of the clients' models); the server's momentum and learning rate do not apply. None: θ + server step of `delta`
    params: Tensor | None = None
    #: weights of the sources' buffers and then the target's (KD3A's domain weights) in the new global buffers; None:
    #: the target's buffers after a round in which it trained (else the sample-weighted source average)
    buffer_weights: Tensor | None = None


@dataclass(frozen=True)
class Phase:
    """A run of rounds of one kind, in the order a method's `phases` lists them; `name` is each round's recorded
    phase. Who trains: the sources (`sources`, where the cell has sources that train) and the target (`target`, where
    the method's `target_split` gives it data). The server's `step`: "fedavg" (FedAvg over the sources' updates: the
    warm-up), "rule" (the method's `aggregate`, with the server's momentum and learning rate), or "local" (the target
    trains alone on its copy of the model: θ becomes its model, nothing crosses a client boundary and no byte is
    counted; the loop brings the model back only to evaluate it, as every round; the record keeps the target's metric
    and loss, as Finetune_Offline's epochs always have)."""

    name: str
    rounds: int
    sources: bool = True
    target: bool = True
    step: str = "rule"


def round_budget(method: RoundRules, settings: TrainSettings, has_sources: bool) -> tuple[int, int]:
    """(warm-up rounds, warm-up and FDA rounds) of the loop: FedAvg warm-up rounds only for a method that asks for them
    and a problem with sources to average, then `settings.rounds`."""
    warmup_rounds = settings.warmup_rounds if (method.warmup and has_sources) else 0
    return warmup_rounds, warmup_rounds + settings.rounds


def default_phases(method: RoundRules, settings: TrainSettings, has_sources: bool) -> list[Phase]:
    """The warm-up rounds (FedAvg over the sources; `round_budget`), then the FDA rounds under the method's rule (the
    sources train unless `sources_train_after_warmup` is False)."""
    warmup_rounds, rounds = round_budget(method, settings, has_sources)
    return [
        Phase(WARMUP, warmup_rounds, sources=True, target=False, step="fedavg"),
        Phase(FDA, rounds - warmup_rounds, sources=method.sources_train_after_warmup, target=True),
    ]


class RoundRules(Protocol):
    """What the round loop asks of a method (see `methods.base.RoundLoopMethod` for the meaning of each; the
    client-side hooks: `federation.client_state`)."""

    name: str
    sources_train: bool
    sources_train_after_warmup: bool
    target_split: str | None
    warmup: bool
    delivery: Delivery
    keeps_client_state: bool
    state_clients: str
    personalised: bool

    def phases(self, settings: TrainSettings, has_sources: bool) -> list[Phase]: ...

    def fda_settings(self, settings: TrainSettings) -> TrainSettings: ...

    def prepare_model(self, model: torch.nn.Module, problem: FederatedProblem) -> torch.nn.Module: ...

    def source_batch_loss(self, loss_fn: Callable[[Tensor, Tensor], Tensor]) -> Callable | None: ...

    def target_batch_loss(self, context: TargetContext) -> Callable | None: ...

    def target_start(self, inputs: RoundInputs) -> Tensor: ...

    def local_proximal(self) -> Proximal | None: ...

    def target_observer(self, context: TargetContext) -> tuple[StepObserver | None, Any]: ...

    def aggregate(self, inputs: RoundInputs) -> Aggregate: ...

    def update_bytes(self, space: Any, phase: Phase) -> int: ...

    def client_state(self, space: Any) -> ClientState | None: ...

    def broadcast(self) -> Tensor | None: ...

    def local_plan(self, state: ClientState | None, start: Tensor, broadcast: Tensor | None) -> LocalPlan: ...

    def after_local(
        self, state: ClientState | None, plan: LocalPlan, result: Any, settings: Any, buffers: Any
    ) -> LocalReply: ...

    def local_round(
        self, client: Any, state: ClientState | None, start: Tensor, broadcast: Any
    ) -> LocalReply | None: ...

    def local_rounds(self, clients: list, states: list, start: Tensor, broadcast: Any) -> list[LocalReply] | None: ...

    def evaluation_plan(self, state: ClientState, params: Tensor) -> LocalPlan: ...

    def personal_metrics(self, model: Any, data: Any, task: str, batch_size: int, own: Any) -> dict | None: ...

    def round_state(self) -> dict[str, Any]: ...

    def restore_round_state(self, state: dict[str, Any]) -> None: ...
