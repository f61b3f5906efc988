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
(`Aggregate.params`: KD3A's weighted average of the models). A method whose target receives the source updates may
have it receive the sources' buffers with them (`target_receives_source_buffers`: `RoundInputs.source_buffers`), and a
method may have the server forward the sources' messages to the target (`target_receives_source_messages`: Co-MDA's
source predictions) and keep its broadcast from the target (`broadcast_to_target`: Co-MDA's queries go to the sources
only); both are counted where they cross.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from fdabench.core.streams import stream
from fdabench.federation.checkpoint import Checkpoints, loop_state, restore_loop
from fdabench.federation.client import LocalSettings, loss_function
from fdabench.federation.parameters import ParameterSpace, average_buffers
from fdabench.federation.participation import asked_sources
from fdabench.federation.problem import FederatedProblem
from fdabench.federation.records import primary_metric, round_record
from fdabench.federation.rule_interface import Aggregate, RoundInputs, RoundRules
from fdabench.federation.settings import TrainSettings
from fdabench.federation.sites import LocalSites, Sites
from fdabench.federation.validation import SOURCE_PREFIX, TARGET_PREFIX
from fdabench.models import build_model
from fdabench.tensor_math.aggregation import fedavg

RoundCallback = Callable[[dict[str, Any], int], None]
COUNT_BYTES = 8  # each client also reports its sample count (int64)


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
    source_names, source_counts = clients.source_names, clients.source_counts
    fda_settings = method.fda_settings(settings)
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
        method.restore_round_state(saved["method"])
        clients.restore_client_states(saved.get("clients") or {})
        first_round, records = restore_loop(saved, generators, device)
    for round_index in range(first_round, total_rounds):
        started = time.perf_counter()
        phase = schedule[round_index]
        update_bytes = method.update_bytes(space, phase)
        in_force = fda_settings if phase.step == "rule" else settings
        source_local, target_local = local_settings(in_force, phase.name)
        counted = phase.step != "local"  # a local round's training sends nothing
        broadcast = method.broadcast() if phase.step == "rule" else None
        broadcast_bytes = 0 if broadcast is None else broadcast.numel() * broadcast.element_size()
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
        buffer_states, target_buffers, downlink, uplink = [], [], 0, 0
        round_counts = source_counts  # of the sources that answered
        participation: dict[str, Any] = {}  # who was asked and who answered, where not every source always is
        silent = False  # the sources were asked and none answered

        if source_names and phase.sources:
            asked = asked_sources(len(source_names), settings.participation, seed, round_index)
            replies = clients.train_sources(global_params, source_local, round_index, asked, broadcast)
            buffer_states = replies.buffers
            answered = list(range(len(source_names))) if replies.present is None else list(replies.present)
            if replies.present is not None:  # some sources were not asked, dropped out, or were left behind
                round_counts = source_counts[answered]
                inputs.source_names = tuple(source_names[index] for index in answered)
            silent = not replies.results
            if not silent:
                inputs.source_updates = torch.stack([r.update for r in replies.results])
                inputs.source_counts = round_counts
                inputs.source_steps = torch.tensor([r.steps for r in replies.results], device=device)
                if replies.messages:
                    inputs.source_messages = torch.stack(replies.messages)
            downlink += len(asked) * (update_bytes + broadcast_bytes)
            uplink += len(replies.results) * (update_bytes + COUNT_BYTES)
            uplink += sum(message.numel() * message.element_size() for message in replies.messages)
            if settings.participation < 1 or settings.source_dropout > 0:
                participation = {
                    "asked": [source_names[index] for index in asked],
                    "answered": [source_names[index] for index in answered],
                }

        target_trains = clients.has_target and phase.target
        if method.target_receives_source_buffers and buffer_states and not silent:
            inputs.source_buffers = buffer_states
        if target_trains:
            reply = clients.train_target(inputs, method.target_start(inputs), target_local)
            target_buffers = reply.buffers
            result = reply.result
            inputs.target_update, inputs.target_count, inputs.target_steps = result.update, result.samples, result.steps
            inputs.target_statistics = reply.statistics
            inputs.target_message = reply.message
            if counted:
                downlink += update_bytes + (broadcast_bytes if method.broadcast_to_target else 0)
                uplink += update_bytes + COUNT_BYTES
            if counted and reply.message is not None:
                uplink += reply.message.numel() * reply.message.element_size()
            if method.target_receives_source_updates and inputs.source_updates is not None:
                downlink += len(inputs.source_updates) * update_bytes
            if method.target_receives_source_messages and inputs.source_messages is not None:
                downlink += inputs.source_messages.numel() * inputs.source_messages.element_size()

        # no source answered (the target's update alone, or no step in a source-only round), or the target trained
        # alone in a local round
        if silent or phase.step == "local":
            aggregate = Aggregate(inputs.target_update if target_trains else torch.zeros_like(global_params))
        elif phase.step == "fedavg":
            aggregate = Aggregate(fedavg(inputs.source_updates, inputs.source_counts))
        else:
            aggregate = method.aggregate(inputs)
            uplink += aggregate.message_bytes
        if aggregate.params is not None:  # the method sets θ itself (KD3A's weighted average of the models)
            global_params = aggregate.params
        elif phase.step == "local":  # θ becomes the target's model, without a server step
            global_params = global_params + aggregate.delta
        elif settings.server_momentum:
            velocity = (
                aggregate.delta if velocity is None else velocity.mul(settings.server_momentum).add_(aggregate.delta)
            )
            global_params = global_params + settings.server_lr * velocity
        else:
            global_params = global_params + settings.server_lr * aggregate.delta
        space.set(global_params)
        if space.buffers and aggregate.buffer_weights is not None:  # the method's weights (KD3A's domain weights)
            space.set_buffers(average_buffers([*buffer_states, target_buffers], aggregate.buffer_weights))
        elif space.buffers and (target_trains or buffer_states):
            space.set_buffers(target_buffers if target_trains else average_buffers(buffer_states, round_counts))

        metrics = clients.evaluate(global_params, space.get_buffers())
        if phase.step == "local":
            metrics = local_record(metrics, metric)
        record = round_record(
            round_index, phase.name, metrics, uplink, downlink, started, **participation, **aggregate.log
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
                    method=method.round_state(),
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
