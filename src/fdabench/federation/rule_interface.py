"""What the FDA round loop and a method exchange (Algorithm 1): the server's inputs of a round, the server's step,
the phases of rounds, and a method's two parts. Its server part (`ServerRule`: phases, the target's start, the
broadcast, the aggregation, the bytes on the wire, the server's state) is what the round loop (`federation.rounds`)
reads; its clients' part (`ClientRule`: the local objective, client state, a client's own round, what it evaluates)
is what the sites read (`federation.sites`, in this process and at Flower sites). `methods.base.RoundLoopMethod`
implements both; each method file writes them side by side."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor

from fdabench.federation.client_state import ClientState, LocalContext, LocalReply, Objective, View
from fdabench.federation.delivery import Delivery
from fdabench.federation.problem import FederatedProblem
from fdabench.federation.records import FDA, WARMUP
from fdabench.federation.roles import Roles
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


def target_broadcast(method: RuleBasics, inputs: RoundInputs) -> Tensor | None:
    """The round's broadcast as it reaches the target: none where the method sends it to the sources only."""
    return inputs.broadcast if method.delivery.broadcast_to_target else None


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
    the method's `roles.target` gives it data). The server's `step`: "fedavg" (FedAvg over the sources' updates: the
    warm-up), "rule" (the method's `aggregate`, with the server's momentum and learning rate), or "local" (the target
    trains alone on its copy of the model: θ becomes its model, nothing crosses a client boundary and no byte is
    counted; the loop brings the model back only to evaluate it, as every round; the record keeps the target's metric
    and loss, as Finetune_Offline's epochs always have). `settings`: the training settings in force in its rounds
    (auto-weighting's decayed learning rates in its FDA rounds); None: the cell's."""

    name: str
    rounds: int
    sources: bool = True
    target: bool = True
    step: str = "rule"
    settings: TrainSettings | None = None


def round_budget(method: RuleBasics, settings: TrainSettings, has_sources: bool) -> tuple[int, int]:
    """(warm-up rounds, warm-up and FDA rounds) of the loop: FedAvg warm-up rounds only for a method whose `roles` ask
    for them and a problem with sources to average, then `settings.rounds`."""
    warmup_rounds = settings.warmup_rounds if (method.roles.warmup and has_sources) else 0
    return warmup_rounds, warmup_rounds + settings.rounds


def default_phases(
    method: RuleBasics, settings: TrainSettings, has_sources: bool, fda_settings: TrainSettings | None = None
) -> list[Phase]:
    """The warm-up rounds (FedAvg over the sources; `round_budget`), then the FDA rounds under the method's rule, with
    `fda_settings` in force where given (the sources train in them unless the method's `roles` train them in the
    warm-up only)."""
    warmup_rounds, rounds = round_budget(method, settings, has_sources)
    return [
        Phase(WARMUP, warmup_rounds, sources=True, target=False, step="fedavg"),
        Phase(
            FDA,
            rounds - warmup_rounds,
            sources=method.roles.sources != "warmup",
            target=True,
            settings=fda_settings,
        ),
    ]


class RuleBasics(Protocol):
    """What both sides of a method read: its name, its clients' roles (`federation.roles.Roles`), who receives what
    (`federation.delivery.Delivery`) and the model both train (`prepare_model`)."""

    name: str
    roles: Roles
    delivery: Delivery

    def prepare_model(self, model: torch.nn.Module, problem: FederatedProblem) -> torch.nn.Module: ...


class ServerRule(RuleBasics, Protocol):
    """The server's part of a method: its rounds (`phases`), where the target starts, the broadcast, the aggregation,
    the bytes of θ on the wire, and what it carries from round to round (`round_state`, saved in checkpoints).
    The round loop (`federation.rounds`) reads a method through this and nothing else (a test holds it)."""

    def phases(self, settings: TrainSettings, has_sources: bool) -> list[Phase]: ...

    def target_start(self, inputs: RoundInputs) -> Tensor: ...

    def broadcast(self) -> Tensor | None: ...

    def aggregate(self, inputs: RoundInputs) -> Aggregate: ...

    def update_bytes(self, space: Any, phase: Phase) -> int: ...

    round_state: dict[str, Any]


class ClientRule(RuleBasics, Protocol):
    """The clients' part of a method (`federation.client_state`): how a client trains (its objective: batch loss,
    proximal term, observer; or its whole round), the state it keeps, and what it evaluates. The sites
    (`federation.sites`, `fdabench.flower.site_worker`) read a method through this."""

    def local_objective(self, context: LocalContext) -> Objective: ...

    def client_state(self, space: Any) -> ClientState | None: ...

    def local_round(
        self, client: Any, state: ClientState | None, start: Tensor, broadcast: Any
    ) -> LocalReply | None: ...

    def local_rounds(self, clients: list, states: list, start: Tensor, broadcast: Any) -> list[LocalReply] | None: ...

    def evaluation_view(self, state: ClientState | None, params: Tensor) -> View: ...


class RoundRules(ServerRule, ClientRule, Protocol):
    """A whole method as the loop and its sites in one process see it: its server part and its clients' part
    (`methods.base.RoundLoopMethod` implements both; each method file writes them side by side)."""
