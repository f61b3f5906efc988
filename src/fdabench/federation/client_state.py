"""A method's clients' part: how a client trains in a round, the state it keeps between rounds, what it evaluates.

Every local training call, in process or at a Flower site, goes through `federation.sites` (`train_source`,
`train_target_round`), so a method's client-side rule is written once:

- plainly, a client trains once from θ under the method's `local_objective` (`Objective`: a batch loss, a proximal
  term, an observer of its steps; `LocalContext` says what the client holds), and keeps nothing;
- a method whose clients train otherwise writes their whole round (`local_round`, handed a `LocalClient`: the model,
  the client's samples, settings, loss and batch stream, `LocalClient.train`): SCAFFOLD's steps corrected by c − c_i,
  FedBN's own normalisation layers, Ditto's global copy and then the target's personal model with a proximal pull to
  θ, FedRep a client's head and then the shared body, APFL the global copy and the personal model on the same
  batches, Finetune_Offline the target's fine-tuning epoch. It returns what the client sends (`LocalReply`: its
  update, its new state, an extra message such as SCAFFOLD's Δc_i).

A method may keep, on each client, tensors that survive from one round to the next (`client_state`: SCAFFOLD's control
variate c_i, FedBN's normalisation layers). The sites hold each client's state where the client is (in this process:
`LocalSites`; over Flower: the site's node state), save it in checkpoints, and never send it: only the method's
message and its update leave a client, and only the method's `broadcast` (SCAFFOLD's c) reaches one beside θ. The
method's `roles.state` says whether every client keeps state or only the target (Ditto's and APFL's personal models: a
source's would influence no reported number). At evaluation a client scores its own view of the global model
(`evaluation_view`, `View`); a `roles.personalised` method's cell reports the target's personalised predictor (its
view, with kNN-Per's own scoring: the interpolation with its stored features) and the global model beside it
(`personalised_record`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from fdabench.federation.client import LocalResult, LocalSettings, Proximal, StepObserver, evaluate, train_locally
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import ClientData

#: a client's state: named tensors (the same names every round; saved in checkpoints and in a Flower site's state)
ClientState = dict[str, Tensor]


@dataclass
class LocalContext:
    """What a client holds when it is about to train (for the method's `local_objective`): its `role` ("source" or
    "target") and task loss; the target's also the round's inputs as the server forwarded them, the model it trains in,
    its data and the cell's seed. A source's `local_objective` is also asked once with no model and no data, before the
    first round, to see whether the sources train plainly (in vectorised cohorts)."""

    role: str
    loss_fn: Callable[[Tensor, Tensor], Tensor]
    inputs: Any = None  # RoundInputs
    space: Any = None  # ParameterSpace of the shared model (at the client's start)
    data: Any = None  # ClientData the client trains on
    seed: int | None = None


@dataclass
class Objective:
    """How a client trains this round beyond its task loss: its batch loss (model, data, index) -> scalar (None: the
    task loss on its labels), a proximal term (FedProx), and a callback that sees each optimiser step with the
    statistics it fills (auto-weighting's estimates, handed to `aggregate` as `inputs.target_statistics`: the
    target's only)."""

    batch_loss: Callable | None = None
    proximal: Proximal | None = None
    observer: StepObserver | None = None
    statistics: Any = None

    @property
    def plain(self) -> bool:
        """Whether it adds nothing to local training (the task loss alone, no proximal term, no observer)."""
        return self.batch_loss is None and self.proximal is None and self.observer is None


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

    @property
    def context(self) -> LocalContext:
        """What the method's `local_objective` reads of this client."""
        return LocalContext(self.role, self.loss_fn, self.inputs, self.space, self.data, self.seed)


class StatefulRules:
    """The client-side hooks of a method that keeps state or trains its own way (`methods.base.RoundLoopMethod`
    implements them; the defaults keep no state and train plainly under the method's `local_objective`)."""

    def client_state(self, space: ParameterSpace) -> ClientState | None:
        """A client's state before its first round, from the freshly built model in `space` (its initial parameters
        and buffers; every client's model starts from the same seeded initialisation); None: the method keeps none."""
        return None

    def broadcast(self) -> Tensor | None:
        """What the server sends every training client beside θ this round (None: nothing)."""
        return None

    def local_round(
        self, client: LocalClient, state: ClientState | None, start: Tensor, broadcast: Tensor | None
    ) -> LocalReply | None:
        """A client's whole local training in a round, from the global `start` and the round's `broadcast`: the update
        it sends, its new state and a message (module docstring); None: the plain training, once from `start` under
        the method's `local_objective`, its state unchanged."""
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
        client's `local_round`, or its plain training."""
        return None

    def evaluation_view(self, state: ClientState | None, params: Tensor) -> View:
        """What a client holding `state` scores when the global model is at `params` (`View`: its parameters and
        buffers, FedBN's normalisation layers; a personalised predictor's own scoring, kNN-Per's); default: the global
        model. Asked with no state only for a `roles.personalised` method's target."""
        return View(params)


@dataclass
class View:
    """What a client evaluates: parameters (`params`), its own buffers (None: the global ones), and, for a
    personalised predictor that is not the model at `params` (kNN-Per's interpolation with a kNN over the features of
    the client's `own` training samples), its scoring `score(model, data, task, batch_size, own) -> metrics`."""

    params: Tensor
    buffers: list[Tensor] | None = None
    score: Callable[..., dict[str, float]] | None = None


def holds_state(method: Any, role: str) -> bool:
    """Whether a client of `role` ("source" or "target") keeps state under `method` (its `roles.state`)."""
    return method.roles.holds_state(role)


def client_view(method: StatefulRules, state: ClientState | None, params: Tensor) -> View:
    """What a client scores of the global `params`: its own view where it keeps state (FedBN: its normalisation
    layers; the method's `evaluation_view`), else `params` with the global buffers."""
    return View(params) if state is None else method.evaluation_view(state, params)


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
    """A client's personalised predictor (the method's `evaluation_view` of the global `params` and `buffers`, with
    its own scoring where it has one) as a function that scores a split; it leaves the model at the view."""

    def score(data: ClientData) -> dict[str, float]:
        view = method.evaluation_view(state, params)
        space.set(view.params)
        if space.buffers:
            space.set_buffers(buffers if view.buffers is None else view.buffers)
        if view.score is not None:
            return view.score(space.model, data, task, batch_size, own)
        return evaluate(space.model, data, task, batch_size)

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
