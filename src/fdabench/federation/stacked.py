"""Many independent local trainings, or evaluations, as one stacked computation, each as if it were alone.

Each request is what `client.train_locally` (plain: no observer, batch loss, proximal term or correction) or
`client.evaluate` would compute for one client of one cell. Requests with the same `signature` (model architecture,
trained parameters, sample count, local settings, loss, device) run together: every model's parameters are stacked
along a leading axis, `torch.func.vmap` of `torch.func.grad` computes every model's gradient on its own batch in one
pass, and one optimiser steps them all.

A request's result does not depend on the other requests of its group, nor on their number (one included): the
batched kernels compute each slice alike whatever the batch (`torch.func.grad` is used because `backward()` through a
vmapped loss is not slice-independent), and the optimiser is the one `train_locally` makes
(`client.make_optimizer`), over one tensor per model and layer (views into the stacked parameters), so its fused
kernel sees every tensor whole, as alone (over stacked tensors its vectorised loop would split a layer at other places
and round the tail elements differently). Each request draws its batches from its own generator, in the order it would
alone (tests/federation/test_stacked.py).

The batched kernels are not the lone ones, though: for some shapes (small batches) a batched matrix product rounds
otherwise than a lone one, so a stacked result can differ from `train_locally`'s in the last bits. That is why stacked
computation is a setting of the cell (`batching: stacked`, part of its identity), used for the cell whether it trains
alone or in a group (`federation.lockstep`), and its distance from one-by-one training is measured
(`fdabench bench cells`), never assumed.

Unequal step counts never meet: the sample count and batch settings are part of the signature, so requests that
would take different steps are in different groups.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from fdabench.federation.client import (
    LocalResult,
    LocalSettings,
    batch_indices,
    evaluation_metrics,
    loss_function,
    make_optimizer,
)
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import ClientData

LossFunction = Callable[[Tensor, Tensor], Tensor]


def stackable_model(model: nn.Module) -> bool:
    """A model the stacked kernels compute as alone, whatever the group: one whose parameters are all in linear layers
    of more than one output (an MLP; the measured case: a one-output layer's batched product depends on the batch,
    and convolutions are not yet measured), with no buffers (BatchNorm statistics) and no dropout (its masks would be
    drawn in another order)."""
    if any(True for _ in model.buffers()):
        return False
    for module in model.modules():
        if isinstance(module, nn.modules.dropout._DropoutNd):
            return False
        own = list(module.parameters(recurse=False))
        if own and not (isinstance(module, nn.Linear) and module.out_features > 1):
            return False
    return True


def aligned_stack(tensors: Sequence[Tensor]) -> Tensor:
    """`torch.stack(tensors)`, with every slice starting on a 64-byte boundary, as a lone tensor does: the CPU matrix
    products round a misaligned operand otherwise, so without it a slice's result would depend on its position."""
    first = tensors[0]
    per_line = max(1, 64 // first.element_size())
    size = first.numel()
    padded = -(-size // per_line) * per_line
    buffer = first.new_empty((len(tensors), padded))
    buffer[:, :size] = torch.stack([tensor.reshape(-1) for tensor in tensors])
    strides, step = [], 1
    for extent in reversed(first.shape):
        strides.insert(0, step)
        step *= extent
    return buffer.as_strided((len(tensors), *first.shape), (padded, *strides))


_ARCHITECTURES: weakref.WeakKeyDictionary[nn.Module, tuple] = weakref.WeakKeyDictionary()


def architecture(model: nn.Module) -> tuple:
    """What two models must share for one to compute the other's forward pass from its parameters: the module tree
    (types and settings, as `repr` shows them) and every parameter's name, shape, dtype and device. Worked out once
    per model (a cell's model keeps its architecture: a method that needs another builds another model)."""
    known = _ARCHITECTURES.get(model)
    if known is None:
        shapes = tuple((name, tuple(p.shape), p.dtype, str(p.device)) for name, p in model.named_parameters())
        known = _ARCHITECTURES[model] = (type(model).__qualname__, repr(model), shapes)
    return known


def named_parameters(model: nn.Module) -> dict[str, Tensor]:
    """The model's parameters by name, looked up once per model (as `architecture`)."""
    known = _PARAMETERS.get(model)
    if known is None:
        known = _PARAMETERS[model] = dict(model.named_parameters())
    return known


_PARAMETERS: weakref.WeakKeyDictionary[nn.Module, dict[str, Tensor]] = weakref.WeakKeyDictionary()


def inputs_signature(data: ClientData) -> tuple:
    """What stacked batches of two clients' inputs need in common: sample count, input shape, dtype and device, and
    how `ClientData.inputs` adds their feature noise (none, fixed per sample, or redrawn at each read)."""
    noise = "none" if not data.noise_std else "fixed" if data.noise is not None else "redrawn"
    return (len(data), tuple(data.x.shape[1:]), data.x.dtype, str(data.x.device), data.y.dtype, noise)


def aligned(tensor: Tensor) -> Tensor:
    """`tensor` ([K, ...]) with every slice on a 64-byte boundary (`aligned_stack`): itself where its slices already
    are, else an aligned copy."""
    if tensor.is_contiguous() and all(tensor[k].data_ptr() % 64 == 0 for k in range(min(2, len(tensor)))):
        return tensor
    return aligned_stack(list(tensor.unbind(0)))


class StackedData:
    """The samples of a group's clients (one signature), stacked once, so that each step gathers every client's batch
    in one indexing operation, with the values `ClientData.inputs` and `labels` give (clients whose noise is redrawn
    at each read are read one by one, drawing in the same order)."""

    def __init__(self, clients: Sequence[ClientData]):
        self.clients = clients
        self.one_by_one = inputs_signature(clients[0])[-1] == "redrawn"
        self.x = None if self.one_by_one else torch.stack([client.x for client in clients])
        noisy = not self.one_by_one and bool(clients[0].noise_std)
        self.noise = torch.stack([client.noise for client in clients]) if noisy else None
        self.y = torch.stack([client.y for client in clients])
        self.rows = torch.arange(len(clients), device=self.y.device).unsqueeze(1)

    def batch(self, indices: Sequence[Tensor | None] | slice) -> tuple[Tensor, Tensor]:
        """(inputs, labels) of every client's batch (`indices`: one per client, None for all its samples; or one
        window for all), stacked, each slice as the client alone gives it."""
        if self.one_by_one:
            per_client = [indices] * len(self.clients) if isinstance(indices, slice) else indices
            return stacked_batch(self.clients, per_client)
        if isinstance(indices, slice):
            where = (slice(None), indices)
        elif indices[0] is None:
            where = (slice(None),)
        else:
            where = (self.rows, torch.stack(list(indices)))
        x = self.x[where]
        if x.dtype == torch.uint8:
            x = x.float().div_(255.0)
        if self.noise is not None:
            x = x + self.noise[where]
        return aligned(x), self.y[where]


@dataclass
class TrainRequest:
    """One client's plain local training (`client.train_locally` without hooks)."""

    space: ParameterSpace
    start: Tensor
    data: ClientData
    settings: LocalSettings
    loss_fn: LossFunction
    generator: torch.Generator

    def signature(self) -> tuple:
        return (
            "train",
            architecture(self.space.model),
            self.space.layer_names,
            inputs_signature(self.data),
            self.settings,
            self.loss_fn,
        )


@dataclass
class EvaluationRequest:
    """One evaluation of a model on a client's samples (`client.evaluate`)."""

    model: nn.Module
    data: ClientData
    task: str
    batch_size: int

    def signature(self) -> tuple:
        return ("evaluate", architecture(self.model), inputs_signature(self.data), self.task, self.batch_size)


def groups_by_signature(requests: Sequence[TrainRequest | EvaluationRequest]) -> list[list[int]]:
    """The requests' positions grouped by signature, groups in order of first appearance."""
    groups: dict[tuple, list[int]] = {}
    for index, request in enumerate(requests):
        groups.setdefault(request.signature(), []).append(index)
    return list(groups.values())


def stacked_batch(clients: Sequence[ClientData], indices: Sequence[Tensor | None]) -> tuple[Tensor, Tensor]:
    """(inputs, labels) of every client's batch, stacked along a leading axis; each slice as `ClientData.inputs` and
    `labels` give it."""
    inputs = aligned_stack([client.inputs(index) for client, index in zip(clients, indices, strict=True)])
    labels = torch.stack([client.labels(index) for client, index in zip(clients, indices, strict=True)])
    return inputs, labels


def train_stacked(requests: Sequence[TrainRequest]) -> list[LocalResult]:
    """Every request's `train_locally` result, computed as one stacked training; the requests share a signature.
    Each request's model ends at its trained parameters, as `train_locally` leaves it."""
    if len({request.signature() for request in requests}) > 1:
        raise ValueError("requests with different signatures cannot train together (groups_by_signature)")
    first = requests[0]
    template, names, settings = first.space.model, first.space.layer_names, first.settings
    for request in requests:
        if not request.space.model.training:
            request.space.model.train()  # as `train_locally` leaves each model
    trained = set(names)
    with torch.no_grad():
        stacked = _stacked_starts(requests)
        frozen = {
            name: aligned_stack([named_parameters(r.space.model)[name].detach() for r in requests])
            for name in named_parameters(template)
            if name not in trained
        }
    # one tensor per model and layer, as the optimiser sees a lone model's layers (module docstring)
    slices = {name: list(stacked[name].unbind(0)) for name in names}
    ordered = [slices[name][k] for k in range(len(requests)) for name in names]
    fused = FusedAdamSteps.applies(ordered, settings)
    optimizer = FusedAdamSteps(ordered, settings) if fused else make_optimizer(ordered, settings)
    gradient_buffers = {name: torch.empty_like(stacked[name]) for name in names} if fused else {}
    gradient_slices = {name: list(buffer.unbind(0)) for name, buffer in gradient_buffers.items()}
    ordered_gradients = [gradient_slices[name][k] for k in range(len(requests)) for name in names] if fused else []

    def loss(parameters: dict[str, Tensor], fixed: dict[str, Tensor], inputs: Tensor, labels: Tensor) -> Tensor:
        return first.loss_fn(functional_call(template, {**fixed, **parameters}, (inputs,)), labels)

    gradients = vmap(grad(loss))
    samples = len(first.data)
    device = first.start.device
    batches = [
        batch_indices(samples, settings.batch_size, settings.epochs, r.generator, device, settings.shuffle)
        for r in requests
    ]
    data = StackedData([r.data for r in requests])
    steps = 0
    for indices in zip(*batches, strict=True):
        inputs, labels = data.batch(indices)
        step = gradients(stacked, frozen, inputs, labels)
        if fused:
            # the gradients go into buffers whose per-slice views are made once (making K views a step costs more
            # than the copy)
            for name in names:
                gradient_buffers[name].copy_(step[name])
            optimizer.step(ordered_gradients)
        else:
            for name in names:
                for parameter, gradient in zip(slices[name], step[name].unbind(0), strict=True):
                    parameter.grad = gradient
            optimizer.step()
        steps += 1
    results = []
    with torch.no_grad():
        flat = torch.cat([stacked[name].flatten(1) for name in names], dim=1)
        for request, trained_params in zip(requests, flat, strict=True):
            request.space.set(trained_params)
            results.append(LocalResult(update=trained_params - request.start, steps=steps, samples=samples))
    return results


class FusedAdamSteps:
    """`torch.optim.Adam(fused=True)`'s steps (the optimiser `client.make_optimizer` gives a lone model on a device
    with the fused kernel) over a list of tensors, without the optimiser's per-tensor Python (state look-up and
    grouping, 40-60% of a group's optimiser time): the same `torch._fused_adam_` call, one per step, on the same
    per-tensor state, so every tensor gets what the optimiser gives it (tests/federation/test_stacked.py holds them
    equal bit for bit, so a torch that changes the kernel's call fails there)."""

    def __init__(self, parameters: list[Tensor], settings: LocalSettings):
        self.parameters = parameters
        self.settings = settings
        self.exp_avgs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in parameters]
        self.exp_avg_sqs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in parameters]
        # torch.optim keeps a float32 step count per tensor, on the CPU for the fused kernel's CPU path
        self.counts = torch.zeros(len(parameters), dtype=torch.float32, device=parameters[0].device)
        self.state_steps = list(self.counts.unbind(0))

    @staticmethod
    def applies(parameters: list[Tensor], settings: LocalSettings) -> bool:
        """Whether the lone optimiser would be fused Adam here: Adam, float32 tensors on one CPU or CUDA device."""
        return (
            settings.optimizer == "adam"
            and hasattr(torch, "_fused_adam_")
            and all(p.dtype == torch.float32 and p.device.type in ("cpu", "cuda") for p in parameters)
            and len({p.device for p in parameters}) == 1
        )

    def step(self, gradients: list[Tensor]) -> None:
        self.counts += 1  # every tensor's step count (`state_steps` are views of `counts`), in one operation
        torch._fused_adam_(
            self.parameters,
            gradients,
            self.exp_avgs,
            self.exp_avg_sqs,
            [],
            self.state_steps,
            amsgrad=False,
            lr=self.settings.lr,
            beta1=0.9,
            beta2=0.999,
            weight_decay=self.settings.weight_decay,
            eps=1e-8,
            maximize=False,
            grad_scale=None,
            found_inf=None,
        )


def _stacked_starts(requests: Sequence[TrainRequest]) -> dict[str, Tensor]:
    """Each layer's starting parameters of every request, stacked (a fresh tensor: training never writes a start)."""
    pieces = [torch.split(r.start, r.space.layer_sizes) for r in requests]
    first = requests[0].space
    return {
        name: aligned_stack([own[j].view_as(parameter) for own in pieces])
        for j, (name, parameter) in enumerate(zip(first.layer_names, first.parameters, strict=True))
    }


@torch.no_grad()
def evaluate_stacked(requests: Sequence[EvaluationRequest]) -> list[dict[str, float]]:
    """Every request's `client.evaluate` metrics, computed as one stacked evaluation; the requests share a
    signature."""
    if len({request.signature() for request in requests}) > 1:
        raise ValueError("requests with different signatures cannot be evaluated together (groups_by_signature)")
    first = requests[0]
    template, task, batch_size = first.model, first.task, first.batch_size
    for request in requests:
        if request.model.training:
            request.model.eval()  # as `evaluate` leaves each model
    parameters = {
        name: aligned_stack([named_parameters(r.model)[name].detach() for r in requests])
        for name in named_parameters(template)
    }
    loss_fn = loss_function(task)
    forward = vmap(lambda p, x: functional_call(template, p, (x,)))
    batch_loss = vmap(loss_fn)
    clients = [r.data for r in requests]
    data = StackedData(clients)
    samples = len(first.data)
    outputs, losses = [], []
    for begin in range(0, samples, batch_size):
        window = slice(begin, begin + batch_size)
        inputs, labels = data.batch(window)
        output = forward(parameters, inputs)
        outputs.append(output)
        losses.append(batch_loss(output, labels))
    return [
        evaluation_metrics(
            [output[k] for output in outputs],
            [float(loss[k]) for loss in losses],
            client,
            task,
        )
        for k, client in enumerate(clients)
    ]
