"""The FDA round loop (Algorithm 1 of the FedGP paper, docs/design/methods.md, The FDA round).

Per round, from global parameters θ: each source trains locally and sends g_i = θ_i − θ; the target
trains on its labelled samples and sends g_T; the server adds the method's aggregate Δ to θ (with server
momentum μ > 0: v ← μ v + Δ, θ ← θ + server_lr · v, as the synthetic theory check's published code); the
model is evaluated on the target's test split. The rounds come in the method's `phases`: methods with `warmup` first
run FedAvg rounds over the sources; Finetune_Offline ends with the target's local fine-tuning epochs (a "local" phase:
nothing crosses, no byte is counted). Only updates and sample counts cross a client boundary, and the bytes they take
are counted. A method that keeps state on its clients (`federation.client_state`: SCAFFOLD, FedBN, the personalised
methods' personal models and heads) adds its broadcast and its clients' messages to that count; the state itself stays
on the clients (and in the loop's checkpoints). A personalised method's record reports the target's personalised
predictor and the global model beside it (`client_state.personalised_record`).

Buffers (e.g. BatchNorm statistics) are not updates and are never projected or weighted by β: the
global buffers become the target's after a round in which the target trained (the model is evaluated on
the target domain), and the sample-weighted source average otherwise; a method may weigh them itself
(`Aggregate.buffer_weights`: KD3A's domain weights over the sources and the target), and may set θ itself
(`Aggregate.params`: KD3A's weighted average of the models). Who receives what beside θ is the method's `delivery`
(`federation.delivery.Delivery`): the source updates forwarded to the target (auto-weighting), with their buffers
(`RoundInputs.source_buffers`: KD3A's source models), the sources' messages forwarded to it (Co-MDA's predictions),
the broadcast kept from it (Co-MDA's queries go to the sources only); the loop forwards by it and counts the bytes
from it (`delivery.sources_traffic`, `delivery.target_traffic`).

A round is a short sequence of named steps: the sources train (`train_sources`), the target trains
(`train_target`), the server aggregates (`server_aggregate`) and steps θ (`server_step`), the buffers merge
(`merged_buffers`), the global model is evaluated and the round recorded (and checkpointed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from fdabench.core.streams import stream
from fdabench.federation.checkpoint import Checkpoints, loop_state, restore_loop
from fdabench.federation.client import LocalSettings, loss_function
from fdabench.federation.delivery import Traffic, sources_traffic, target_traffic, tensor_bytes
from fdabench.federation.lockstep import batching_scope
from fdabench.federation.parameters import ParameterSpace, average_buffers
from fdabench.federation.participation import asked_sources
from fdabench.federation.problem import FederatedProblem
from fdabench.federation.records import primary_metric, round_record
from fdabench.federation.rule_interface import Aggregate, Phase, RoundInputs, RoundRules
from fdabench.federation.settings import TrainSettings
from fdabench.federation.sites import LocalSites, Sites
from fdabench.federation.validation import SOURCE_PREFIX, TARGET_PREFIX
from fdabench.models import build_model
from fdabench.tensor_math.aggregation import fedavg

RoundCallback = Callable[[dict[str, Any], int], None]


def build_cell_model(
    problem: FederatedProblem, settings: TrainSettings, seed: int, device: torch.device
) -> torch.nn.Module:
    """The cell's model at its initial parameters: seeded with the cell's seed, so every method of a cell
    starts from the same parameters."""
    torch.manual_seed(stream(seed, "model_init"))
    return build_model(settings.model, problem.input_shape, problem.num_outputs, **settings.model_options).to(device)


def local_settings(settings: TrainSettings, phase: str = "") -> tuple[LocalSettings, LocalSettings]:
    """(source, target) local training settings (in a round of the phase named `phase`)."""
    common = {
        "optimizer": settings.optimizer,
        "momentum": settings.momentum,
        "weight_decay": settings.weight_decay,
        "phase": phase,
    }
    return (
        LocalSettings(settings.source_lr, settings.source_batch_size, settings.local_epochs, **common),
        LocalSettings(
            settings.target_lr,
            settings.target_batch_size,
            settings.target_local_epochs,
            **common,
            shuffle=settings.target_order != "fixed",
        ),
    )


def local_record(metrics: dict[str, Any], metric: str) -> dict[str, Any]:
    """A "local" round's target entries: the metric, the loss and the validation metrics."""
    kept = (metric, "loss")
    return {k: v for k, v in metrics.items() if k in kept or k.startswith((SOURCE_PREFIX, TARGET_PREFIX))}


@dataclass
class SourcesTrained:
    """What a round's source step leaves for the rest of the round (the updates themselves are in its inputs)."""

    buffers: list[list[Tensor]] = field(default_factory=list)  # of the sources that answered, where the model has any
    counts: Tensor | None = None  # samples of the sources that answered (None: the sources did not train)
    silent: bool = False  # the sources were asked and none answered
    participation: dict[str, Any] = field(default_factory=dict)  # who was asked and who answered, where not all
    traffic: Traffic = Traffic()


@dataclass
class TargetTrained:
    """What a round's target step leaves for the rest of the round (its update is in the round's inputs)."""

    trained: bool = False
    buffers: list[Tensor] = field(default_factory=list)
    traffic: Traffic = Traffic()


def train_sources(
    clients: Sites,
    inputs: RoundInputs,
    local: LocalSettings,
    settings: TrainSettings,
    seed: int,
    update_bytes: int,
    broadcast_bytes: int,
) -> SourcesTrained:
    """The asked sources train from θ (with the round's broadcast); the updates, counts, steps and messages of those
    that answered go into `inputs`, and their bytes are counted (`delivery.sources_traffic`)."""
    names, counts = clients.source_names, clients.source_counts
    asked = asked_sources(len(names), settings.participation, seed, inputs.round_index)
    replies = clients.train_sources(inputs.global_params, local, inputs.round_index, asked, inputs.broadcast)
    answered = list(range(len(names))) if replies.present is None else list(replies.present)
    if replies.present is not None:  # some sources were not asked, dropped out, or were left behind
        counts = counts[answered]
        inputs.source_names = tuple(names[index] for index in answered)
    silent = not replies.results
    if not silent:
        inputs.source_updates = torch.stack([r.update for r in replies.results])
        inputs.source_counts = counts
        inputs.source_steps = torch.tensor([r.steps for r in replies.results], device=inputs.global_params.device)
        if replies.messages:
            inputs.source_messages = torch.stack(replies.messages)
    participation = {}
    if settings.participation < 1 or settings.source_dropout > 0:
        participation = {"asked": [names[index] for index in asked], "answered": [names[index] for index in answered]}
    message_bytes = sum(tensor_bytes(message) for message in replies.messages)
    traffic = sources_traffic(len(asked), len(replies.results), update_bytes, broadcast_bytes, message_bytes)
    return SourcesTrained(replies.buffers, counts, silent, participation, traffic)


def train_target(
    clients: Sites,
    method: RoundRules,
    inputs: RoundInputs,
    local: LocalSettings,
    phase: Phase,
    update_bytes: int,
    broadcast_bytes: int,
) -> TargetTrained:
    """The target trains from the method's start (with what the method's `delivery` forwards to it), where the round
    has it train; its update, count, steps, statistics and message go into `inputs`, and its bytes are counted
    (`delivery.target_traffic`; a "local" round sends nothing)."""
    if not (clients.has_target and phase.target):
        return TargetTrained()
    reply = clients.train_target(inputs, method.target_start(inputs), local)
    result = reply.result
    inputs.target_update, inputs.target_count, inputs.target_steps = result.update, result.samples, result.steps
    inputs.target_statistics = reply.statistics
    inputs.target_message = reply.message
    traffic = target_traffic(
        method.delivery,
        update_bytes,
        broadcast_bytes,
        tensor_bytes(reply.message),
        forwarded_updates=0 if inputs.source_updates is None else len(inputs.source_updates),
        forwarded_message_bytes=tensor_bytes(inputs.source_messages),
        counted=phase.step != "local",
    )
    return TargetTrained(True, reply.buffers, traffic)


def server_aggregate(
    method: RoundRules, phase: Phase, inputs: RoundInputs, sources: SourcesTrained, target_trained: bool
) -> Aggregate:
    """The server's step of the round: FedAvg over the sources in a "fedavg" round, the method's `aggregate` in a "rule"
    round; the target's update alone where no source answered or the target trained alone ("local"), and no step
    where nobody trained."""
    if sources.silent or phase.step == "local":
        return Aggregate(inputs.target_update if target_trained else torch.zeros_like(inputs.global_params))
    if phase.step == "fedavg":
        return Aggregate(fedavg(inputs.source_updates, inputs.source_counts))
    return method.aggregate(inputs)


def server_step(
    global_params: Tensor, velocity: Tensor | None, aggregate: Aggregate, phase: Phase, settings: TrainSettings
) -> tuple[Tensor, Tensor | None]:
    """(θ, server momentum) after the round: θ as the method sets it (`Aggregate.params`); θ + Δ in a "local" round
    (θ becomes the target's model); else with server momentum μ > 0, v ← μ v + Δ and θ ← θ + server_lr · v, without,
    θ ← θ + server_lr · Δ."""
    if aggregate.params is not None:  # the method sets θ itself (KD3A's weighted average of the models)
        return aggregate.params, velocity
    if phase.step == "local":
        return global_params + aggregate.delta, velocity
    if settings.server_momentum:
        velocity = aggregate.delta if velocity is None else velocity.mul(settings.server_momentum).add_(aggregate.delta)
        return global_params + settings.server_lr * velocity, velocity
    return global_params + settings.server_lr * aggregate.delta, velocity


def merged_buffers(aggregate: Aggregate, sources: SourcesTrained, target: TargetTrained) -> list[Tensor] | None:
    """The global buffers after the round: weighted as the method says (`Aggregate.buffer_weights` over the sources'
    and then the target's: KD3A's domain weights), else the target's after a round in which it trained, else the
    average of the buffers of the sources that answered, weighted by their sample counts; None: unchanged (nobody
    trained)."""
    if aggregate.buffer_weights is not None:
        return average_buffers([*sources.buffers, target.buffers], aggregate.buffer_weights)
    if target.trained:
        return target.buffers
    if sources.buffers:
        return average_buffers(sources.buffers, sources.counts)
    return None


def run_rounds(
    method: RoundRules,
    problem: FederatedProblem,
    settings: TrainSettings,
    seed: int,
    device: torch.device,
    on_round: RoundCallback | None = None,
    model: torch.nn.Module | None = None,
    checkpoints: Checkpoints | None = None,
    sites: Callable[[ParameterSpace], Sites] | None = None,
    sites_hook: Callable[[Sites], Sites] | None = None,
) -> dict[str, Any]:
    """Run `method` for the round budget; return the history. `model` (default: `build_cell_model`) is
    trained in place and ends up holding the final global parameters, for methods that continue from
    them (Finetune_Offline, FedDaDiL's encoder). With `checkpoints`, the loop's state is saved every
    `checkpoints.every` rounds and a run continues from a saved state of the same cell, bit for bit.
    `sites` makes, from the loop's model, what trains and evaluates the clients (default: `LocalSites`, every
    client in this process; `fdabench.flower` sends the same calls to sites over Flower); `sites_hook` wraps
    them (the cell benchmark's timing, `TimedSites`)."""
    with batching_scope(settings.batching, device):
        return _run_rounds(method, problem, settings, seed, device, on_round, model, checkpoints, sites, sites_hook)


def _run_rounds(
    method: RoundRules,
    problem: FederatedProblem,
    settings: TrainSettings,
    seed: int,
    device: torch.device,
    on_round: RoundCallback | None = None,
    model: torch.nn.Module | None = None,
    checkpoints: Checkpoints | None = None,
    sites: Callable[[ParameterSpace], Sites] | None = None,
    sites_hook: Callable[[Sites], Sites] | None = None,
) -> dict[str, Any]:
    """`run_rounds` under the cell's `batching` scope."""
    if model is None:
        model = build_cell_model(problem, settings, seed, device)
    model = method.prepare_model(model, problem).to(device)
    space = ParameterSpace(model)
    global_params = space.get()
    loss_fn = loss_function(problem.task)
    metric = primary_metric(problem.task)

    if sites is None:
        clients: Sites = LocalSites(
            method,
            problem,
            space,
            loss_fn,
            seed,
            settings.cohort,
            device,
            settings.eval_batch_size,
            dropout=settings.source_dropout,
        )
    else:
        clients = sites(space)
    if sites_hook is not None:
        clients = sites_hook(clients)
    source_names = clients.source_names
    schedule = [phase for phase in method.phases(settings, bool(source_names)) for _ in range(phase.rounds)]
    total_rounds = len(schedule)
    velocity = None  # server momentum buffer
    generators = clients.random_streams()
    records: list[dict[str, Any]] = []
    first_round = 0
    saved = checkpoints.load() if checkpoints is not None else None
    if saved is not None:
        model.load_state_dict(saved["model"])
        global_params = space.get()
        velocity = None if saved["velocity"] is None else saved["velocity"].to(device)
        method.round_state = saved["method"]
        clients.restore_client_states(saved.get("clients") or {})
        first_round, records = restore_loop(saved, generators, device)
    for round_index in range(first_round, total_rounds):
        started = time.perf_counter()
        phase = schedule[round_index]
        update_bytes = method.update_bytes(space, phase)
        in_force = settings if phase.settings is None else phase.settings
        source_local, target_local = local_settings(in_force, phase.name)
        broadcast = method.broadcast() if phase.step == "rule" else None
        broadcast_bytes = tensor_bytes(broadcast)
        inputs = RoundInputs(
            round_index,
            global_params,
            space.layer_sizes,
            in_force,
            space.layer_names,
            source_names=source_names,
            source_total=len(source_names),
            broadcast=broadcast,
        )

        sources = SourcesTrained()
        if source_names and phase.sources:
            sources = train_sources(clients, inputs, source_local, settings, seed, update_bytes, broadcast_bytes)
        if method.delivery.source_buffers and sources.buffers and not sources.silent:
            inputs.source_buffers = sources.buffers
        target = train_target(clients, method, inputs, target_local, phase, update_bytes, broadcast_bytes)

        aggregate = server_aggregate(method, phase, inputs, sources, target.trained)
        traffic = sources.traffic + target.traffic + Traffic(uplink=aggregate.message_bytes)
        global_params, velocity = server_step(global_params, velocity, aggregate, phase, settings)
        space.set(global_params)
        buffers = merged_buffers(aggregate, sources, target) if space.buffers else None
        if buffers is not None:
            space.set_buffers(buffers)

        metrics = clients.evaluate(global_params, space.get_buffers())
        if phase.step == "local":
            metrics = local_record(metrics, metric)
        record = round_record(
            round_index,
            phase.name,
            metrics,
            traffic.uplink,
            traffic.downlink,
            started,
            **sources.participation,
            **aggregate.log,
        )
        records.append(record)
        if checkpoints is not None and checkpoints.due(round_index, total_rounds):
            checkpoints.save(
                loop_state(
                    round_index + 1,
                    generators,
                    records,
                    device,
                    model=model.state_dict(),
                    velocity=velocity,
                    method=method.round_state,
                    clients=clients.client_states(),
                )
            )
        if on_round is not None:
            on_round(record, total_rounds)
    return {
        "metric": metric,
        "model_size": space.size,
        "layer_names": list(space.layer_names),
        "sources": list(source_names),
        "rounds": records,
    }
