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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor

from fdabench.federation.client import LocalResult, LocalSettings
from fdabench.federation.parameters import ParameterSpace

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


class StatefulRules:
    """The client-side hooks of a method (`methods.base.RoundLoopMethod` implements them; the defaults keep no
    state, so every method without client state trains exactly as before)."""

    #: whether clients keep state between rounds (`client_state`); such clients train one by one, never in cohorts
    keeps_client_state: ClassVar[bool] = False

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
    if not method.keeps_client_state:
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
    plan = method.local_plan(state, params, None)
    return plan.start, plan.buffers


def state_bytes(state: ClientState | None) -> int:
    return 0 if not state else sum(value.numel() * value.element_size() for value in state.values())
