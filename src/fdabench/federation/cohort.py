"""Cohort training: clients with the same model, local settings and sample count train in one vectorised pass.

Each client's parameters are a slice of stacked tensors (a leading client axis); `torch.func.vmap` runs the
clients' forward passes on their own batches at once, and the sum of the clients' mean losses has, as its
gradient with respect to the stacked parameters, every client's own gradient in its slice. Adam and SGD are
elementwise, so one optimiser over the stacked tensors keeps exactly one state per client. Each client draws
its batches from its own generator (`batch_indices`), in the same order as when it trains alone, so a cohort
computes the same updates as training the clients one after another, up to the float rounding of batched
kernels (`train_locally`, tested).

"Same" holds step by step, not for a whole run: after one step of the FMNIST CNN (9 sources, Adam) a cohort's
updates differ from the one-by-one updates by 2e-5 (relative L2), but over an epoch of 94 steps such rounding
differences grow, as they do for any two float orders: 0.31 for the cohort, and 0.18 for the same client
trained with 1 vs 2 threads.

Eligible (`cohort_eligible`): equal sample counts (so equal steps and batch sizes), a model without buffers
(BatchNorm statistics) or dropout (its random masks would be drawn in another order), and plain local
training (no per-step observer, custom loss or proximal term). Clients whose sample counts differ train in one
cohort per sample count (`train_grouped`; a count held by one client alone trains that client alone)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from fdabench.federation.client import LocalResult, LocalSettings, batch_indices, make_optimizer, train_locally
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import ClientData
from fdabench.models import model_name

#: `cohort: auto` per device type: whether a cohort trains faster there, as `fdabench bench cell ... --cohort both`
#: measured. CPU: no (FMNIST noise-0.4 fedgp cell, 9 x 6,000 samples, 2 threads: 2.53 s per round one by one, 3.28 s
#: as a cohort). CUDA: one by one, except where AUTO_COHORT_BY_MODEL has a measurement.
AUTO_COHORT = {"cpu": False, "cuda": False}
#: `cohort: auto` per (device type, model family: the registered model name) where a measurement of that family
#: decided it, over AUTO_COHORT: the `cohort_auto` decisions of the committed `fdabench bench gpu` run,
#: docs/benchmarks/gpu.json, entered here (tests/speed/test_bench_gpu.py checks that the two agree). fmnist_cnn on CUDA:
#: the FedGP and FedGP-auto-threshold cells ran 3.31x and 3.16x faster as cohorts on an H200 (at 919b01e; 4.09x and
#: 3.33x at 3268e53, 3.68x and 3.32x in the first run, at a3ad42e).
AUTO_COHORT_BY_MODEL: dict[tuple[str, str], bool] = {("cuda", "fmnist_cnn"): True}


def auto_cohort(device_type: str, model: str | None) -> bool:
    """Whether `cohort: auto` trains cohorts on this device type for this model family: its measured entry in
    AUTO_COHORT_BY_MODEL, else the device type's AUTO_COHORT."""
    if model is not None and (device_type, model) in AUTO_COHORT_BY_MODEL:
        return AUTO_COHORT_BY_MODEL[(device_type, model)]
    return AUTO_COHORT.get(device_type, False)


def use_cohort(mode: str, device: torch.device, model: nn.Module, clients: Sequence[ClientData]) -> bool:
    """Whether sources train in cohorts (`train_grouped`) under the `cohort` setting: on (where the model allows
    it and two or more clients share a sample count), off, or auto (the same, where `auto_cohort` says a cohort
    is faster for the device and the model's family)."""
    if mode == "off" or (mode == "auto" and not auto_cohort(device.type, model_name(model))):
        return False
    return model_eligible(model) and any(len(group) > 1 for group in size_groups(clients))


def model_eligible(model: nn.Module) -> bool:
    """A model whose forward pass does not depend on state or randomness: no buffers, no dropout."""
    if any(True for _ in model.buffers()):
        return False
    return not any(isinstance(module, nn.modules.dropout._DropoutNd) for module in model.modules())


def cohort_eligible(model: nn.Module, clients: Sequence[ClientData]) -> bool:
    """Whether `train_cohort` computes what training the clients one by one computes."""
    return len(clients) > 1 and len({len(client) for client in clients}) == 1 and model_eligible(model)


def size_groups(clients: Sequence[ClientData]) -> list[list[int]]:
    """The clients' positions grouped by sample count (so by step count), groups in order of first appearance."""
    groups: dict[int, list[int]] = {}
    for index, client in enumerate(clients):
        groups.setdefault(len(client), []).append(index)
    return list(groups.values())


def train_grouped(
    space: ParameterSpace,
    start: Tensor,
    clients: Sequence[ClientData],
    settings: LocalSettings,
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    generators: Sequence[torch.Generator],
) -> list[LocalResult]:
    """Every client's update, in client order: one cohort per sample count (`size_groups`); a client whose count
    no other client shares trains alone (`train_locally`)."""
    if len(generators) != len(clients):
        raise ValueError(f"{len(clients)} clients but {len(generators)} generators")
    results: list[LocalResult | None] = [None] * len(clients)
    for group in size_groups(clients):
        members = [clients[index] for index in group]
        streams = [generators[index] for index in group]
        if len(group) > 1:
            trained = train_cohort(space, start, members, settings, loss_fn, streams)
        else:
            trained = [train_locally(space, start, members[0], settings, loss_fn, streams[0])]
        for index, result in zip(group, trained, strict=True):
            results[index] = result
    return results


def train_cohort(
    space: ParameterSpace,
    start: Tensor,
    clients: Sequence[ClientData],
    settings: LocalSettings,
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    generators: Sequence[torch.Generator],
) -> list[LocalResult]:
    """Every client trains from `start` for `settings.epochs` epochs with a fresh optimiser, all at once;
    their updates, as `train_locally` returns them one by one."""
    if not cohort_eligible(space.model, clients):
        raise ValueError("these clients cannot train as a cohort (cohort_eligible): train them one by one")
    if len(generators) != len(clients):
        raise ValueError(f"{len(clients)} clients but {len(generators)} generators")
    model = space.model
    model.train()
    count = len(clients)
    pieces = torch.split(start, space.layer_sizes)
    stacked = {
        name: piece.view_as(parameter).unsqueeze(0).repeat(count, *([1] * parameter.dim())).requires_grad_()
        for name, piece, parameter in zip(space.layer_names, pieces, space.parameters, strict=True)
    }
    frozen = {name: p.detach() for name, p in model.named_parameters() if name not in stacked}
    optimizer = make_optimizer(list(stacked.values()), settings)

    def client_loss(parameters: dict[str, Tensor], inputs: Tensor, labels: Tensor) -> Tensor:
        return loss_fn(functional_call(model, {**frozen, **parameters}, (inputs,)), labels)

    losses = vmap(client_loss)
    samples = len(clients[0])
    batches = [
        batch_indices(samples, settings.batch_size, settings.epochs, g, start.device, settings.shuffle)
        for g in generators
    ]
    steps = 0
    for indices in zip(*batches, strict=True):
        inputs = torch.stack([client.inputs(index) for client, index in zip(clients, indices, strict=True)])
        labels = torch.stack([client.labels(index) for client, index in zip(clients, indices, strict=True)])
        optimizer.zero_grad()
        losses(stacked, inputs, labels).sum().backward()
        optimizer.step()
        steps += 1
    with torch.no_grad():
        flat = torch.cat([stacked[name].reshape(count, -1) for name in space.layer_names], dim=1)
        updates = flat - start
    return [LocalResult(update=update.clone(), steps=steps, samples=samples) for update in updates]
