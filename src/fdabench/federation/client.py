"""Local training and evaluation of one client, with batches drawn by index from device tensors."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import ClientData

StepObserver = Callable[[Tensor], None]
_GROUP = threading.local()  # the group of cells this thread's cell trains in (`federation.lockstep`), if any


class Group(Protocol):
    """What a cell's group (`federation.lockstep`) offers its local training and evaluation: the result computed with
    the stacked kernels, together with the other cells' requests, or None where the call is computed one by one."""

    stacked: bool  # whether the cell computes with the stacked kernels (its `batching` setting)

    def train(self, space, start, data, settings, loss_fn, generator) -> LocalResult | None: ...

    def train_all(self, requests) -> list[LocalResult] | None:
        """Several plain local trainings at once (`federation.stacked.TrainRequest`s: a cell's sources), in order."""
        ...

    def evaluate(self, model, data, task, batch_size) -> dict[str, float] | None: ...

    def cpu_seconds(self) -> float:
        """CPU seconds the cell has used so far in its group (`cpu_seconds`)."""
        ...


def active_group() -> Group | None:
    """The group this thread's cell trains in, or None (a cell alone)."""
    return getattr(_GROUP, "group", None)


def join_group(group: Group | None) -> None:
    """Make this thread's local training and evaluation go through `group` (None: alone again)."""
    _GROUP.group = group


def cpu_seconds() -> float:
    """The CPU time this thread's cell has used so far: the process's (`time.process_time`) for a cell alone; in a
    group, whose cells share the process, the CPU spent while the cell ran and its share of what the group computed
    for it (`Group.cpu_seconds`), so that the cells' times add up to the group's."""
    group = active_group()
    return time.process_time() if group is None else group.cpu_seconds()


#: loss of one batch: (model, client data, batch index or None for all samples) -> scalar
BatchLoss = Callable[[nn.Module, "ClientData", "Tensor | None"], Tensor]


@dataclass(frozen=True)
class LocalSettings:
    lr: float
    batch_size: int  # 0 = full batch
    epochs: int
    optimizer: str = "adam"
    momentum: float = 0.0
    weight_decay: float = 0.0
    shuffle: bool = True  # False: every epoch visits the samples in their stored order (`batch_indices`)
    #: the name of the round's phase (`rule_interface.Phase`), for a method whose clients train differently per phase
    #: (FedDaDiL: the encoder's FedAvg rounds, then the dictionary's); "" outside the round loop
    phase: str = ""


@dataclass(frozen=True)
class Proximal:
    """The penalty (mu/2)·‖θ − anchor‖² added to a client's local objective (FedProx, Li et al. 2020, Eq. 2;
    Ditto, Li et al. 2021, Eq. 2). It is applied by its proximal operator after every optimiser step,
    θ ← (θ + lr·mu·anchor) / (1 + lr·mu): for small lr·mu the same pull lr·mu·(θ − anchor) per step as the
    penalty's gradient under SGD, stable for any mu, and θ → anchor as mu → ∞."""

    mu: float
    anchor: Tensor | None = None  # None: the parameters local training starts from (FedProx's w^t)


@dataclass
class LocalResult:
    update: Tensor  # θ_local − θ_start, flat
    steps: int
    samples: int


def loss_function(task: str) -> Callable[[Tensor, Tensor], Tensor]:
    if task == "classification":
        return classification_loss
    if task == "regression":
        return squared_error_loss
    raise ValueError(f"unknown task {task!r}")


def classification_loss(output: Tensor, target: Tensor) -> Tensor:
    """Cross-entropy over the classes; for a one-output model (the binary log-odds, e.g. `logistic`) the
    binary cross-entropy of its sigmoid, as FLamby's Fed-Heart BaselineLoss (torch.nn.BCELoss on the sigmoid),
    here on the logit for stability (BCELoss clamps log at -100: the same loss below |logit| ~ 36)."""
    if output.dim() == 2 and output.shape[1] == 1:
        return F.binary_cross_entropy_with_logits(output[:, 0], target.to(output.dtype))
    return F.cross_entropy(output, target)


def squared_error_loss(prediction: Tensor, target: Tensor) -> Tensor:
    """Σ over outputs of the squared error, averaged over samples (FedGP appendix B's MSE)."""
    return (prediction - target).square().sum(dim=1).mean()


def adam(parameters, lr: float, weight_decay: float = 0.0) -> torch.optim.Adam:
    """torch.optim.Adam on its fused kernel (one pass over every parameter; 7x faster than the foreach form on
    a 5.6M-parameter MLP on one CPU thread) where the parameters allow it, else the foreach form."""
    parameters = list(parameters)
    try:
        return torch.optim.Adam(parameters, lr=lr, weight_decay=weight_decay, fused=True)
    except (RuntimeError, ValueError):  # a device or dtype without the fused kernel
        return torch.optim.Adam(parameters, lr=lr, weight_decay=weight_decay)


def make_optimizer(parameters, settings: LocalSettings) -> torch.optim.Optimizer:
    """A fresh local optimiser (torch.optim; the fork server preloads what its first construction imports)."""
    if settings.optimizer == "adam":
        return adam(parameters, settings.lr, settings.weight_decay)
    if settings.optimizer == "sgd":
        return torch.optim.SGD(
            parameters, lr=settings.lr, momentum=settings.momentum, weight_decay=settings.weight_decay
        )
    raise ValueError(f"unknown optimizer {settings.optimizer!r}; allowed: adam, sgd")


def steps_per_epoch(samples: int, batch_size: int) -> int:
    return 1 if batch_size <= 0 else math.ceil(samples / batch_size)


def batch_indices(
    samples: int, batch_size: int, epochs: int, generator: torch.Generator, device, shuffle: bool = True
) -> Iterator[Tensor | None]:
    """The batches of local training: each epoch visits the samples once in a fresh random order drawn
    from `generator` (the last batch may be smaller); `shuffle=False`: in their stored order every epoch, drawing
    nothing (a DataLoader with shuffle=False). None stands for the whole data set: a full batch draws no
    permutation and copies nothing."""
    batch_size = samples if batch_size <= 0 else min(batch_size, samples)
    for _ in range(epochs):
        if batch_size >= samples:
            yield None
            continue
        if shuffle:
            order = torch.randperm(samples, generator=generator).to(device)
        else:
            order = torch.arange(samples, device=device)
        for begin in range(0, samples, batch_size):
            yield order[begin : begin + batch_size]


def train_locally(
    space: ParameterSpace,
    start: Tensor,
    data: ClientData,
    settings: LocalSettings,
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    generator: torch.Generator,
    on_step: StepObserver | None = None,
    batch_loss: BatchLoss | None = None,
    proximal: Proximal | None = None,
    correction: Tensor | None = None,
) -> LocalResult:
    """Train from `start` for `settings.epochs` epochs with a fresh optimiser; return the update.

    Batches come from `batch_indices`. `on_step`, if given, receives every optimiser step's parameter
    change (the per-batch updates G_b). `batch_loss` replaces loss_fn(model(x), y) (e.g. a multi-task
    loss). `proximal` adds the penalty (mu/2)‖θ − anchor‖² (see `Proximal`). `correction` (flat, m) is added to
    the gradient of every step before the optimiser sees it (SCAFFOLD's c − c_i, Karimireddy et al. 2020, Alg. 1
    line 10).
    """
    group = active_group()
    if group is not None and on_step is None and batch_loss is None and proximal is None and correction is None:
        result = group.train(space, start, data, settings, loss_fn, generator)
        if result is not None:
            return result
    if batch_loss is None:
        batch_loss = lambda net, client, index: loss_fn(net(client.inputs(index)), client.labels(index))
    model: nn.Module = space.model
    space.set(start)
    model.train()
    optimizer = make_optimizer(space.parameters, settings)
    samples = len(data)
    steps = 0
    before = start.clone() if on_step is not None else None
    pull = settings.lr * proximal.mu if proximal is not None else 0.0
    if pull:
        anchor = start if proximal.anchor is None else proximal.anchor
        anchors = [piece.view_as(p) for piece, p in zip(torch.split(anchor, space.layer_sizes), space.parameters)]
    if correction is not None:
        offsets = [piece.view_as(p) for piece, p in zip(torch.split(correction, space.layer_sizes), space.parameters)]
    batches = batch_indices(samples, settings.batch_size, settings.epochs, generator, data.x.device, settings.shuffle)
    # a BatchNorm layer in training mode cannot normalise one sample: a last batch of one is skipped (a DataLoader's
    # drop_last for that batch alone); models without such layers, or with frozen ones, train on every batch
    batch_statistics = any(isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training for m in model.modules())
    for batch in batches:
        if batch_statistics and batch is not None and len(batch) < 2:
            continue
        optimizer.zero_grad()
        batch_loss(model, data, batch).backward()
        if correction is not None:
            torch._foreach_add_([p.grad for p in space.parameters], offsets)
        optimizer.step()
        if pull:
            with torch.no_grad():
                torch._foreach_add_(space.parameters, anchors, alpha=pull)
                torch._foreach_div_(space.parameters, 1.0 + pull)
        steps += 1
        if on_step is not None:
            after = space.get()
            on_step(before.neg_().add_(after))  # G_b = after − before, in place: no extra m-vector
            before = after
    return LocalResult(update=space.get() - start, steps=steps, samples=samples)


@torch.no_grad()
def evaluate(model: nn.Module, data: ClientData, task: str, batch_size: int = 1024) -> dict[str, float]:
    """Mean loss and accuracy (classification; plus ROC-AUC for two classes) or mean squared error
    (regression) on `data` (`evaluation_metrics`), in batches of `batch_size`. Inside a group of cells trained
    together (`federation.lockstep`), the group evaluates every cell's model at once, with the same numbers."""
    group = active_group()
    if group is not None:
        metrics = group.evaluate(model, data, task, batch_size)
        if metrics is not None:
            return metrics
    model.eval()
    loss_fn = loss_function(task)
    outputs, losses = [], []
    for begin in range(0, len(data), batch_size):
        window = slice(begin, begin + batch_size)
        output = model(data.inputs(window))
        outputs.append(output)
        losses.append(float(loss_fn(output, data.labels(window))))
    return evaluation_metrics(outputs, losses, data, task)


def evaluation_metrics(outputs: list[Tensor], losses: list[float], data: ClientData, task: str) -> dict[str, float]:
    """`evaluate`'s metrics from a model's outputs on `data`'s consecutive batches and each batch's mean loss. A
    one-output model's output is the log-odds of class 1: predicted 1 when its probability is above 0.5 (FLamby's
    Fed-Heart metric), and its AUC ranks by that logit."""
    total_loss, correct, binary_scores = 0.0, 0, []
    begin = 0
    for output, loss in zip(outputs, losses, strict=True):
        y = data.labels(slice(begin, begin + len(output)))
        begin += len(output)
        total_loss += loss * len(y)
        if task == "classification" and output.shape[1] == 1:  # binary log-odds (`classification_loss`)
            correct += int(((output[:, 0] > 0).long() == y).sum())
            binary_scores.append(output[:, 0])
        elif task == "classification":
            correct += int((output.argmax(dim=1) == y).sum())
            if output.shape[1] == 2:
                binary_scores.append(output[:, 1] - output[:, 0])  # log-odds of the positive class
    metrics = {"loss": total_loss / len(data)}
    if task == "classification":
        metrics["accuracy"] = correct / len(data)
        if binary_scores:
            metrics["auc"] = roc_auc(torch.cat(binary_scores), data.labels())
    else:
        metrics["mse"] = metrics["loss"]
    return metrics


def roc_auc(scores: Tensor, labels: Tensor) -> float:
    """Area under the ROC curve of binary scores (NaN when only one class is present)."""
    from sklearn.metrics import roc_auc_score

    labels = labels.cpu().numpy()
    if labels.min() == labels.max():
        return float("nan")
    return float(roc_auc_score(labels, scores.cpu().numpy()))
