"""The clients of the FDA round loop, behind one small interface: what the server asks of the sites in a round
and what comes back (Algorithm 1 of the FedGP paper).

The round loop (`federation.rounds`) holds the global parameters, the method's aggregation rule and the records;
`Sites` does everything that touches a client's data: the sources' local training, the target's local training
(with the method's observer, e.g. auto-weighting's estimates from the forwarded source updates; or the method's own
`local_round`, e.g. Ditto's personal model) and the evaluation on the target's test split (the target's personalised
predictor beside the global model, for a `personalised` method). `LocalSites` runs them in this process;
`fdabench.flower` sends them as messages to sites that each hold only their own data, so both run the same loop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import torch
from torch import Tensor

from fdabench.core.streams import stream
from fdabench.federation.client import LocalResult, LocalSettings, active_group, evaluate, train_locally
from fdabench.federation.client_state import (
    ClientState,
    LocalClient,
    StatefulRules,
    client_view,
    holds_state,
    personal_scorer,
    personalised_record,
)
from fdabench.federation.cohort import size_groups, train_grouped, use_cohort
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.participation import dropped_sources
from fdabench.federation.problem import ClientData, FederatedProblem, concatenate
from fdabench.federation.records import primary_metric
from fdabench.federation.rule_interface import LocalContext, Objective, RoundInputs, RoundRules, target_broadcast
from fdabench.federation.stacked import TrainRequest
from fdabench.federation.validation import validation_metrics


def client_generator(seed: int, client_index: int) -> torch.Generator:
    """The batch-order random stream of one client in one cell (independent of every other client)."""
    return torch.Generator().manual_seed(stream(seed, "batches", client_index))


def target_training_data(split: str | None, labelled: ClientData, unlabelled: ClientData) -> ClientData | None:
    """What the target trains on under a method's `roles.target`: its labelled samples, labelled and unlabelled
    together with their labels (the oracle, `FederatedProblem.target_all`), the inputs of both without any label
    (`unlabelled`: every label -1 and no auxiliary label, so no loss can read one), or nothing."""
    if split == "labelled":
        return labelled
    if split == "all":
        return concatenate("target_all", [labelled, unlabelled])
    if split == "unlabelled":
        inputs = concatenate("target_inputs", [labelled, unlabelled])
        return replace(inputs, y=torch.full_like(inputs.y, -1), aux={})
    return None


@dataclass
class SourceRound:
    """The sources' replies of one round, in source order: every source's, or (`present`) the positions of those
    that answered, where a transport lets a round go on without the others."""

    results: list[LocalResult]
    buffers: list[list[Tensor]] = field(default_factory=list)  # per source, where the model has buffers
    present: list[int] | None = None  # None: every source
    messages: list[Tensor] = field(default_factory=list)  # per answering source, where the method sends one


@dataclass
class TargetRound:
    """The target's reply: its update, what the method's observer accumulated, its buffers."""

    result: LocalResult
    statistics: Any = None
    buffers: list[Tensor] = field(default_factory=list)
    message: Tensor | None = None  # the method's extra message (`federation.client_state`)
    state: ClientState | None = None  # the target's client state after the round (stays at the target)


class Sites(Protocol):
    """The clients of one cell, as the round loop sees them: train the sources from the global parameters, train the
    target from its start (with the method's observer), evaluate the global model at the target."""

    source_names: tuple[str, ...]
    source_counts: Tensor  # (N,) samples per source, float32 on the loop's device
    has_target: bool

    def train_sources(
        self,
        start: Tensor,
        settings: LocalSettings,
        round_index: int = 0,
        asked: list[int] | None = None,
        broadcast: Tensor | None = None,
    ) -> SourceRound: ...

    def train_target(self, inputs: RoundInputs, start: Tensor, settings: LocalSettings) -> TargetRound: ...

    def evaluate(self, params: Tensor, buffers: list[Tensor]) -> dict[str, float]: ...

    def random_streams(self) -> list[torch.Generator]: ...

    def client_states(self) -> dict[str, ClientState]:
        """The state each client keeps (`federation.client_state`), by client name, for the loop's checkpoint;
        empty where the states are saved at the sites (Flower)."""
        ...

    def restore_client_states(self, states: dict[str, ClientState]) -> None: ...


def train_target(
    method: RoundRules,
    space: ParameterSpace,
    data: ClientData,
    inputs: RoundInputs,
    start: Tensor,
    settings: LocalSettings,
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    generator: torch.Generator,
    seed: int,
    state: ClientState | None = None,
) -> TargetRound:
    """The target's plain local training in a round, wherever the target is: from `start`, under the method's
    objective (`local_objective`: its batch loss, None: the task loss on its labels; an observer over its steps, e.g.
    auto-weighting's statistics from the forwarded source updates in `inputs`); its state is kept as it is."""
    space.set(start)
    objective = method.local_objective(LocalContext("target", loss_fn, inputs, space, data, seed))
    result = train_under(objective, space, start, data, settings, loss_fn, generator)
    return TargetRound(result, objective.statistics, space.get_buffers(), None, state)


def train_under(
    objective: Objective,
    space: ParameterSpace,
    start: Tensor,
    data: ClientData,
    settings: LocalSettings,
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    generator: torch.Generator,
) -> LocalResult:
    """`train_locally` from `start` under the method's `objective` (its batch loss, proximal term and observer)."""
    return train_locally(
        space,
        start,
        data,
        settings,
        loss_fn,
        generator,
        on_step=objective.observer,
        batch_loss=objective.batch_loss,
        proximal=objective.proximal,
    )


def train_source(
    method: RoundRules,
    space: ParameterSpace,
    data: ClientData,
    start: Tensor,
    settings: LocalSettings,
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    generator: torch.Generator,
    state: ClientState | None = None,
    broadcast: Tensor | None = None,
) -> tuple[LocalResult, ClientState | None, Tensor | None]:
    """One source's local training from the global `start`, wherever the source is: its method's own `local_round`
    where it has one for the source, else plain training under the method's objective: (what it sends, its state
    after the round, its extra message)."""
    space.set(start)
    own = method.local_round(LocalClient(space, data, settings, loss_fn, generator, "source"), state, start, broadcast)
    if own is not None:
        return own.result, own.state, own.message
    objective = method.local_objective(LocalContext("source", loss_fn, space=space, data=data))
    return train_under(objective, space, start, data, settings, loss_fn, generator), state, None


def train_target_round(
    method: RoundRules,
    space: ParameterSpace,
    data: ClientData,
    inputs: RoundInputs,
    start: Tensor,
    settings: LocalSettings,
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    generator: torch.Generator,
    seed: int,
    state: ClientState | None = None,
) -> TargetRound:
    """The target's local training in a round, wherever the target is: the method's own `local_round` where it has
    one for the target (Ditto's global copy and personal model, Finetune_Offline's epoch, SCAFFOLD's corrected steps),
    else `train_target`."""
    space.set(start)
    client = LocalClient(space, data, settings, loss_fn, generator, "target", inputs=inputs, seed=seed)
    own = method.local_round(client, state, start, target_broadcast(method, inputs))
    if own is None:
        return train_target(method, space, data, inputs, start, settings, loss_fn, generator, seed, state)
    return TargetRound(own.result, own.statistics, space.get_buffers(), own.message, own.state)


class LocalSites:
    """Every client in this process, sharing the loop's model (`space`): the sources train one after another, or
    in cohorts where `cohort` allows; the target trains with the method's observer; the model is evaluated on the
    target's test split at the parameters the loop last set."""

    def __init__(
        self,
        method: RoundRules,
        problem: FederatedProblem,
        space: ParameterSpace,
        loss_fn: Callable[[Tensor, Tensor], Tensor],
        seed: int,
        cohort: str,
        device: torch.device,
        eval_batch_size: int,
        dropout: float = 0.0,
    ):
        self.method, self.problem, self.space, self.loss_fn, self.seed = method, problem, space, loss_fn, seed
        self.eval_batch_size = eval_batch_size
        self.dropout = dropout  # the probability that an asked source drops out of a round (simulated)
        self.sources: list[ClientData] = problem.sources if method.roles.sources_train else []
        self.target = target_training_data(method.roles.target, problem.target_labelled, problem.target_unlabelled)
        if not self.sources and self.target is None:
            raise ValueError(f"{method.name}: no client trains")
        self.source_names = tuple(s.name for s in self.sources)
        self.source_counts = torch.tensor([len(s) for s in self.sources], dtype=torch.float32, device=device)
        self.has_target = self.target is not None
        self.generators = [client_generator(seed, index) for index in range(len(self.sources) + 1)]
        #: whether the sources train plainly (no batch loss, proximal term, observer, client state or round of their
        #: own)
        self.plain_sources = (
            method.local_objective(LocalContext("source", loss_fn)).plain
            and method.roles.state is None
            and type(method).local_round is StatefulRules.local_round
        )
        # the sources train in vectorised cohorts (one per sample count) where the setting, the model and plain
        # local training allow it
        self.cohort = self.plain_sources and use_cohort(cohort, device, space.model, self.sources)
        #: vectorised cohorts a source round trains (0: the sources train one by one)
        self.cohorts_per_round = sum(len(group) > 1 for group in size_groups(self.sources)) if self.cohort else 0
        #: each client's state between rounds (`federation.client_state`), by name (the target's under its name),
        #: made from the freshly built model before the first round
        self.target_name = problem.target_labelled.name
        self.states: dict[str, ClientState] = {}
        roles = [*((name, "source") for name in self.source_names), *([(self.target_name, "target")] * self.has_target)]
        for name, role in roles:
            state = method.client_state(space) if holds_state(method, role) else None
            if state is not None:
                self.states[name] = state

    def train_sources(
        self,
        start: Tensor,
        settings: LocalSettings,
        round_index: int = 0,
        asked: list[int] | None = None,
        broadcast: Tensor | None = None,
    ) -> SourceRound:
        """The `asked` sources (default: all) train from `start`, but those the simulated dropout drops
        (`dropped_sources`); `present` names the ones that answered when some did not or were not asked. Each
        starts from the global buffers (BatchNorm statistics), and the shared model holds them again afterwards."""
        everyone = list(range(len(self.sources)))
        asked = everyone if asked is None else list(asked)
        dropped = set(dropped_sources(asked, self.dropout, self.seed, round_index))
        training = [index for index in asked if index not in dropped]
        present = None if training == everyone else training
        stacked = self._train_stacked(start, settings, training)
        if stacked is not None:
            return SourceRound(stacked, present=present)
        if self.cohort and training:
            sources = [self.sources[index] for index in training]
            generators = [self.generators[index] for index in training]
            results = train_grouped(self.space, start, sources, settings, self.loss_fn, generators)
            return SourceRound(results, present=present)
        replies = SourceRound([], present=present)
        together = None  # the sources' rounds, trained together where the method vectorises them (FedRep's heads)
        if training and not self.space.buffers:
            clients = [
                LocalClient(self.space, self.sources[i], settings, self.loss_fn, self.generators[i], "source")
                for i in training
            ]
            states = [self.states.get(self.sources[i].name) for i in training]
            together = self.method.local_rounds(clients, states, start, broadcast)
        shared = self.space.get_buffers()  # every source starts from the global buffers, as a site does
        for position, index in enumerate(training):
            data = self.sources[index]
            self.space.set_buffers(shared)
            if together is not None:
                own = together[position]
                result, state, message = own.result, own.state, own.message
            else:
                result, state, message = train_source(
                    self.method,
                    self.space,
                    data,
                    start,
                    settings,
                    self.loss_fn,
                    self.generators[index],
                    self.states.get(data.name),
                    broadcast,
                )
            replies.results.append(result)
            if state is not None:
                self.states[data.name] = state
            if message is not None:
                replies.messages.append(message)
            if self.space.buffers:
                replies.buffers.append(self.space.get_buffers())
        self.space.set_buffers(shared)  # and so does the target after them
        return replies

    def _train_stacked(self, start: Tensor, settings: LocalSettings, training: list[int]) -> list[LocalResult] | None:
        """The `training` sources' updates, computed together by the cell's group where the cell computes stacked
        (`federation.lockstep`: `batching: stacked`) and the sources train plainly; None: they train one by one."""
        group = active_group()
        if group is None or not group.stacked or not training or not self.plain_sources:
            return None
        requests = [
            TrainRequest(self.space, start, self.sources[i], settings, self.loss_fn, self.generators[i])
            for i in training
        ]
        return group.train_all(requests)

    def train_target(self, inputs: RoundInputs, start: Tensor, settings: LocalSettings) -> TargetRound:
        reply = train_target_round(
            self.method,
            self.space,
            self.target,
            inputs,
            start,
            settings,
            self.loss_fn,
            self.generators[-1],
            self.seed,
            self.states.get(self.target_name),
        )
        if reply.state is not None:
            self.states[self.target_name] = reply.state
        return reply

    def evaluate(self, params: Tensor, buffers: list[Tensor]) -> dict[str, float]:
        """The model on the target's test split, and on the validation splits (`validation_metrics`); the loop's
        model (shared) already holds `params` and `buffers`. Where the method keeps client state, each client scores
        its own view of the model (`client_view`: FedBN's normalisation layers): the target its test and
        validation splits, each source its held-out samples, as their sites do over Flower; the shared model is
        left at `params` and `buffers`. A `personalised` method's target reports its personalised predictor and the
        global model beside it (`personalised_record`); its predictor scores every validation split here (over Flower
        only the target's: it never leaves the target)."""
        score = lambda data: evaluate(self.space.model, data, self.problem.task, self.eval_batch_size)
        if self.method.roles.personalised:
            problem = self.problem
            global_metrics = score(problem.target_test)
            personal = personal_scorer(
                self.method,
                self.space,
                self.states.get(self.target_name),
                params,
                buffers,
                problem.task,
                self.eval_batch_size,
                problem.target_labelled,
            )
            test = personalised_record(primary_metric(problem.task), personal(problem.target_test), global_metrics)
            metrics = {**test, **validation_metrics(problem, personal)}
            self.space.set(params)
            self.space.set_buffers(buffers)
            return metrics
        if not self.states:
            return {**score(self.problem.target_test), **validation_metrics(self.problem, score)}
        target_state = self.states.get(self.target_name)
        owner = {
            id(split): self.states.get(source.name)
            for source, split in zip(self.problem.sources, self.problem.source_validation)
        }

        def score_as_owner(data: ClientData) -> dict[str, float]:
            view = client_view(self.method, owner.get(id(data), target_state), params)
            self.space.set(view.params)
            self.space.set_buffers(buffers if view.buffers is None else view.buffers)
            return score(data)

        metrics = {**score_as_owner(self.problem.target_test), **validation_metrics(self.problem, score_as_owner)}
        self.space.set(params)
        self.space.set_buffers(buffers)
        return metrics

    def client_states(self) -> dict[str, ClientState]:
        return self.states

    def restore_client_states(self, states: dict[str, ClientState]) -> None:
        self.states = dict(states)

    def random_streams(self) -> list[torch.Generator]:
        return [*self.generators, *self.problem.noise_generators()]


#: the parts of a round `TimedSites` times
ROUND_PARTS = ("source_training", "target_training", "aggregation", "evaluation")


class TimedSites:
    """Any `Sites`, timed: the wall-clock seconds of each call, summed per part of a round (`ROUND_PARTS`). The
    server's aggregation is the time from the round's last training reply to its evaluation call (the rule, the
    server step, setting the model). `clock` is read before and after each call (it waits for CUDA work where
    the sites compute on a GPU). The benchmark's hook into the round loop (`run_rounds(sites_hook=...)`)."""

    def __init__(self, inner: Sites, clock: Callable[[], float]):
        self.inner, self.clock = inner, clock
        self.source_names, self.source_counts, self.has_target = (
            inner.source_names,
            inner.source_counts,
            inner.has_target,
        )
        self.seconds = dict.fromkeys(ROUND_PARTS, 0.0)
        self.cohorts = 0  # vectorised cohorts trained (`LocalSites.cohorts_per_round` per source round)
        self._replied: float | None = None

    def _timed(self, part: str, call: Callable[[], Any]) -> Any:
        started = self.clock()
        reply = call()
        self._replied = self.clock()
        self.seconds[part] += self._replied - started
        return reply

    def train_sources(
        self,
        start: Tensor,
        settings: LocalSettings,
        round_index: int = 0,
        asked: list[int] | None = None,
        broadcast: Tensor | None = None,
    ) -> SourceRound:
        self.cohorts += getattr(self.inner, "cohorts_per_round", 0)
        return self._timed(
            "source_training", lambda: self.inner.train_sources(start, settings, round_index, asked, broadcast)
        )

    def train_target(self, inputs: RoundInputs, start: Tensor, settings: LocalSettings) -> TargetRound:
        return self._timed("target_training", lambda: self.inner.train_target(inputs, start, settings))

    def evaluate(self, params: Tensor, buffers: list[Tensor]) -> dict[str, float]:
        started = self.clock()
        if self._replied is not None:
            self.seconds["aggregation"] += started - self._replied
        metrics = self.inner.evaluate(params, buffers)
        self.seconds["evaluation"] += self.clock() - started
        self._replied = None
        return metrics

    def random_streams(self) -> list[torch.Generator]:
        return self.inner.random_streams()

    def client_states(self) -> dict[str, ClientState]:
        return self.inner.client_states()

    def restore_client_states(self, states: dict[str, ClientState]) -> None:
        self.inner.restore_client_states(states)
