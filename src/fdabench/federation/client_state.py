"""State that lives on a client between rounds, and what a method does with it around local training.

A method may keep, on each client, tensors that survive from one round to the next (SCAFFOLD's control variate
c_i, FedBN's normalisation layers). The sites hold each client's state where the client is (in this process:
`LocalSites`; over Flower: the site's node state), save it in checkpoints, and never send it: only the method's
`message` (e.g. SCAFFOLD's Δc_i) and its update leave a client, and only the method's `broadcast` (SCAFFOLD's c)
reaches one beside θ. Every local training call, in process or at a Flower site, goes through `train_with_state`,
so a method's client-side rule is written once:

    plan  = method.local_plan(state, θ, broadcast)          # where to start, a gradient offset, own buffers
    result = local training from plan.start (with plan.correction added to every step's gradient)
    reply = method.after_local(state, plan, result, settings, buffers)   # new state, the update to send, a message

A method whose clients train otherwise than once from a plan writes their whole round instead (`local_round`, handed a
`LocalClient`: the model, the client's samples, settings, loss and batch stream): Ditto trains the global copy and then
the target's personal model with a proximal pull to θ, FedRep a client's head and then the shared body, APFL the global
copy and the personal model on the same batches, Finetune_Offline the target's fine-tuning epoch. The method's
`roles.state` says whether every client keeps state or only the target (Ditto's and APFL's personal models: a source's
would influence no reported number). At evaluation a client scores its own view of the global model
(`evaluation_view`); a `roles.personalised` method's cell reports the target's personalised predictor (its view, or
`personal_metrics`: kNN-Per's interpolation with its stored features) and the global model beside it
(`personalised_record`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from fdabench.federation.client import LocalResult, LocalSettings, evaluate, train_locally
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import ClientData

#: a client's state: named tensors (the same names every round; saved in checkpoints and in a Flower site's state)
ClientState = dict[str, Tensor]


@dataclass
class LocalPlan:
    """How a client trains this round: from `start`, with `correction` added to the gradient of every step
    (SCAFFOLD's c − c_i), and with its own `buffers` (FedBN's local BatchNorm statistics) in place of the global
    ones (None: the global buffers)."""

    start: Tensor
    correction: Tensor | None = None
    buffers: list[Tensor] | None = None


@dataclass
class LocalReply:
    """What a client keeps and sends after training: its new `state`, the `result` it sends (its update may differ
    from θ_local − θ_start: FedBN zeroes the entries that stay local) and an extra `message` (SCAFFOLD's Δc_i)."""

    result: LocalResult
    state: ClientState | None
    message: Tensor | None = None
    #: what the target reports beside its update for the server's rule and record, as an observer's statistics do
    #: (`RoundInputs.target_statistics`; over Flower its `estimates()` travel as named tensors): KD3A's diagnostics
    statistics: Any = None


@dataclass
class LocalClient:
    """What a client trains with in one round, for a method that writes its clients' whole round (`local_round`): the
    model it trains in (`space`: the loop's shared model in process, the site's own over Flower; it holds the start θ),
    its samples, its local settings and loss, its batch-order stream, and its `role` ("source" or "target")."""

    space: ParameterSpace
    data: ClientData
    settings: LocalSettings
    loss_fn: Callable[[Tensor, Tensor], Tensor]
    generator: torch.Generator
    role: str
    #: the target's: the round's inputs as the server forwarded them (the source updates, and their buffers, where the
    #: method asks for them) and the cell's seed (the method's own random streams, e.g. KD3A's mixup)
    inputs: Any = None
    seed: int | None = None

    def train(self, start: Tensor, space: ParameterSpace | None = None, **options: Any) -> LocalResult:
        """`train_locally` of this client from `start` in `space` (default: the whole model), drawing its batches from
        the client's stream; `options`: `settings` or `data` in place of the client's (e.g. features of its samples),
        and `train_locally`'s (e.g. `proximal`)."""
        settings, data = options.pop("settings", self.settings), options.pop("data", self.data)
        return train_locally(space or self.space, start, data, settings, self.loss_fn, self.generator, **options)


class StatefulRules:
    """The client-side hooks of a method (`methods.base.RoundLoopMethod` implements them; the defaults keep no
    state, so every method without client state trains exactly as before)."""

    def client_state(self, space: ParameterSpace) -> ClientState | None:
        """A client's state before its first round, from the freshly built model in `space` (its initial parameters
        and buffers; every client's model starts from the same seeded initialisation); None: the method keeps none."""
        return None

    def broadcast(self) -> Tensor | None:
        """What the server sends every training client beside θ this round (None: nothing)."""
        return None

    def local_plan(self, state: ClientState | None, start: Tensor, broadcast: Tensor | None) -> LocalPlan:
        return LocalPlan(start)

    def after_local(
        self,
        state: ClientState | None,
        plan: LocalPlan,
        result: LocalResult,
        settings: LocalSettings,
        buffers: list[Tensor],
    ) -> LocalReply:
        return LocalReply(result, state)

    def local_round(
        self, client: LocalClient, state: ClientState | None, start: Tensor, broadcast: Tensor | None
    ) -> LocalReply | None:
        """A client's whole local training in a round, from the global `start` (the update it sends, its new state,
        a message), where the method trains otherwise than once from `local_plan` (module docstring); None: the
        plan's training (`train_with_state`), with the method's observer, batch losses and proximal term."""
        return None

    def local_rounds(
        self,
        clients: list[LocalClient],
        states: list[ClientState | None],
        start: Tensor,
        broadcast: Tensor | None,
    ) -> list[LocalReply] | None:
        """The rounds of several clients in one process (`LocalSites`' sources, models without buffers), where the
        method vectorises part of them across the clients, as a cohort (FedRep's heads); each reply is what the
        client's own `local_round` computes, to float rounding (over Flower every site trains alone). None: each
        client's `local_round`, or its plan."""
        return None

    def evaluation_plan(self, state: ClientState, params: Tensor) -> LocalPlan:
        """The parameters (and buffers) a client holding `state` evaluates the global `params` with; default: its
        `local_plan` without a broadcast (FedBN: its normalisation layers)."""
        return self.local_plan(state, params, None)

    def personal_metrics(
        self, model: torch.nn.Module, data: ClientData, task: str, batch_size: int, own: ClientData
    ) -> dict[str, float] | None:
        """A `personalised` method's predictor on `data`, where it is not the model at the client's view (kNN-Per:
        the model, at the view, interpolated with a kNN over the features of the client's `own` training samples);
        None: `evaluate` of the model."""
        return None


def holds_state(method: Any, role: str) -> bool:
    """Whether a client of `role` ("source" or "target") keeps state under `method` (its `roles.state`)."""
    return method.roles.holds_state(role)


def train_with_state(
    method: StatefulRules,
    space: ParameterSpace,
    state: ClientState | None,
    start: Tensor,
    broadcast: Tensor | None,
    settings: LocalSettings,
    train: Callable[[LocalPlan], LocalResult],
) -> LocalReply:
    """One client's local training under its method's client-side rule (the module docstring); `train(plan)` trains
    from `plan.start` with `plan.correction` (the caller's `train_locally` call, with its data and streams). `state`
    is the client's (made by `client_state` before the first round). A method without client state trains from
    `start` as it is and keeps nothing."""
    if method.roles.state is None:
        return LocalReply(train(LocalPlan(start)), None)
    plan = method.local_plan(state, start, broadcast)
    if plan.buffers is not None:
        space.set_buffers(plan.buffers)
    result = train(plan)
    return method.after_local(state, plan, result, settings, space.get_buffers())


def evaluation_view(
    method: StatefulRules, state: ClientState | None, params: Tensor
) -> tuple[Tensor, list[Tensor] | None]:
    """The parameters (and buffers) a client evaluates the global `params` with: its own local view where the method
    keeps client state (FedBN: its normalisation layers), else `params` and the global buffers (None)."""
    if state is None:
        return params, None
    plan = method.evaluation_plan(state, params)
    return plan.start, plan.buffers


def personal_scorer(
    method: StatefulRules,
    space: ParameterSpace,
    state: ClientState | None,
    params: Tensor,
    buffers: list[Tensor],
    task: str,
    batch_size: int,
    own: ClientData,
) -> Callable[[ClientData], dict[str, float]]:
    """A client's personalised predictor (its `evaluation_view` of the global `params` and `buffers`, or the method's
    `personal_metrics`) as a function that scores a split; it leaves the model at the view."""

    def score(data: ClientData) -> dict[str, float]:
        view, own_buffers = evaluation_view(method, state, params)
        space.set(view)
        if space.buffers:
            space.set_buffers(buffers if own_buffers is None else own_buffers)
        metrics = method.personal_metrics(space.model, data, task, batch_size, own)
        return evaluate(space.model, data, task, batch_size) if metrics is None else metrics

    return score


def personalised_record(metric: str, personal: dict[str, float], global_: dict[str, float]) -> dict[str, float]:
    """The target's test entries of a `personalised` method's record: its personalised predictor's metric and loss,
    and the global model's (`global_<metric>`, `global_loss`)."""
    return {
        metric: personal[metric],
        "loss": personal["loss"],
        f"global_{metric}": global_[metric],
        "global_loss": global_["loss"],
    }
