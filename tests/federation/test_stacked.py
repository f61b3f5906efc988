"""Stacked local training and evaluation (`federation.stacked`) give every request the same result, bit for bit,
whatever the other requests of its group and however many there are (one included); that result is one-by-one
training's (`train_locally`) up to float rounding; requests whose step counts differ never share a group."""

import pytest
import torch

from fdabench.federation.client import (
    LocalSettings,
    classification_loss,
    evaluate,
    squared_error_loss,
    steps_per_epoch,
    train_locally,
)
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import ClientData
from fdabench.federation.stacked import (
    EvaluationRequest,
    FusedAdamSteps,
    TrainRequest,
    aligned_stack,
    evaluate_stacked,
    groups_by_signature,
    stackable_model,
    train_stacked,
)
from fdabench.models import build_model


def _client(name, n, seed, features=12, classes=4, noise=0.0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    fixed = noise * torch.randn(n, features, generator=g) if noise else None
    return ClientData(name, x, torch.randint(0, classes, (n,), generator=g), noise, fixed)


def _model(seed, classes=4, hidden=(16,)):
    torch.manual_seed(seed)
    return build_model("mlp", (12,), classes, hidden=list(hidden))


def _request(seed, n=50, settings=None, prefix="", loss_fn=classification_loss, classes=4):
    model = _model(seed, classes)
    space = ParameterSpace(model, prefix)
    settings = settings or LocalSettings(lr=0.05, batch_size=16, epochs=2)
    generator = torch.Generator().manual_seed(1000 + seed)
    return TrainRequest(space, space.get(), _client(f"c{seed}", n, seed, classes=classes), settings, loss_fn, generator)


def _alone(request):
    """The request's stacked result as a group of one, on a fresh copy of its inputs."""
    return train_stacked([_request_twin(request)])[0]


def _one_by_one(request):
    """The request's `train_locally` result on a fresh copy of its inputs."""
    twin = _request_twin(request)
    return train_locally(twin.space, twin.start, twin.data, twin.settings, twin.loss_fn, twin.generator)


def _close(a, b):
    """Equal up to float rounding (the batched kernels round some shapes otherwise: stacked.py)."""
    return torch.allclose(a, b, rtol=0, atol=1e-5)


_MADE = {}


def _made(seed, **options):
    request = _request(seed, **options)
    _MADE[id(request)] = (seed, options)
    return request


def _request_twin(request):
    seed, options = _MADE[id(request)]
    return _request(seed, **options)


SETTINGS = [
    LocalSettings(lr=0.05, batch_size=16, epochs=2),  # Adam (fused), a smaller last batch
    LocalSettings(lr=0.1, batch_size=16, epochs=2, optimizer="sgd", momentum=0.9, weight_decay=1e-3),
    LocalSettings(lr=0.05, batch_size=0, epochs=3),  # full batch
    LocalSettings(lr=0.05, batch_size=16, epochs=2, shuffle=False),
]


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # the stacked kernels compute on one CPU thread


@pytest.mark.parametrize("settings", SETTINGS, ids=["adam", "sgd-momentum", "full-batch", "stored-order"])
def test_stacked_training_is_training_alone(settings):
    requests = [_made(seed, settings=settings) for seed in range(3)]
    stacked = train_stacked(requests)
    for request, result in zip(requests, stacked, strict=True):
        alone, one_by_one = _alone(request), _one_by_one(request)
        assert torch.equal(result.update, alone.update)
        assert _close(result.update, one_by_one.update)
        assert not torch.equal(result.update, torch.zeros_like(result.update))
        assert (result.steps, result.samples) == (one_by_one.steps, one_by_one.samples)
        assert torch.equal(request.space.get() - request.start, result.update)  # the model ends trained


def test_a_request_does_not_depend_on_its_group():
    first = train_stacked([_made(seed) for seed in (0, 1, 2)])[2]
    second = train_stacked([_made(seed) for seed in (5, 2)])[1]
    third = train_stacked([_made(2)])[0]
    assert torch.equal(first.update, second.update)
    assert torch.equal(first.update, third.update)


def test_frozen_parameters_stay_each_models_own():
    """A space over part of the model (a body trained under a frozen head): each model's frozen layers are its own."""
    requests = [_made(seed, prefix="features.") for seed in range(3)]
    for request, result in zip(requests, train_stacked(requests), strict=True):
        assert torch.equal(result.update, _alone(request).update)
        assert _close(result.update, _one_by_one(request).update)


def test_fixed_feature_noise_is_each_clients_own():
    requests = [_request(seed) for seed in range(2)]
    for request in requests:
        request.data = _client(request.data.name, 50, 7 + int(request.data.name[1:]), noise=0.3)
    twins = [_request(seed) for seed in range(2)]
    for twin, request in zip(twins, requests, strict=True):
        twin.data = request.data
    for twin, result in zip(twins, train_stacked(requests), strict=True):
        alone = train_locally(twin.space, twin.start, twin.data, twin.settings, twin.loss_fn, twin.generator)
        assert _close(result.update, alone.update)


def test_unequal_step_counts_never_share_a_group():
    """Requests whose sample counts or batch settings give other step counts are grouped apart, and each trains
    every one of its steps (a group that dropped a longer request's extra steps would fail here)."""
    short, long, other_batch = _made(0, n=32), _made(1, n=80), _made(2, n=32, settings=LocalSettings(0.05, 8, 2))
    assert groups_by_signature([short, long, other_batch, _made(3, n=32)]) == [[0, 3], [1], [2]]
    with pytest.raises(ValueError, match="different signatures"):
        train_stacked([short, long])
    (result,) = train_stacked([long])
    assert result.steps == 2 * steps_per_epoch(80, 16)
    assert _close(result.update, _one_by_one(long).update)


def test_only_measured_models_are_stackable():
    """MLPs whose layers have more than one output; not buffers, dropout, a one-output layer or a convolution."""
    assert stackable_model(_model(0))
    assert stackable_model(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Sigmoid(), torch.nn.Linear(4, 2)))
    assert not stackable_model(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3)))
    assert not stackable_model(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout(0.5)))
    assert not stackable_model(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1)))
    assert not stackable_model(torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Flatten(), torch.nn.Linear(8, 2)))


def test_a_slice_starts_where_a_lone_tensor_does():
    """Every slice of a stacked tensor starts on a 64-byte boundary (the CPU matrix products round a misaligned
    operand otherwise), and holds its tensor."""
    tensors = [torch.randn(3, 5) for _ in range(4)]
    stacked = aligned_stack(tensors)
    assert all(stacked[k].data_ptr() % 64 == 0 for k in range(4))
    assert all(torch.equal(stacked[k], tensors[k]) for k in range(4))


@pytest.mark.parametrize(
    ("task", "classes"),
    [("classification", 4), ("classification", 2), ("regression", 3)],
    ids=["multiclass", "two-class-auc", "regression"],
)
def test_stacked_evaluation_equals_evaluation_alone(task, classes):
    models = [_model(seed, classes) for seed in range(3)]
    data = []
    for seed in range(3):
        client = _client(f"e{seed}", 70, 20 + seed, classes=max(classes, 2))
        if task == "regression":
            client = ClientData(client.name, client.x, torch.randn(70, classes))
        data.append(client)
    requests = [EvaluationRequest(model, client, task, 32) for model, client in zip(models, data, strict=True)]
    for request, metrics in zip(requests, evaluate_stacked(requests), strict=True):
        assert metrics == evaluate_stacked([request])[0]  # whatever the group
        alone = evaluate(request.model, request.data, task, 32)
        assert metrics.keys() == alone.keys()
        assert all(abs(metrics[key] - alone[key]) < 1e-6 for key in metrics)


def test_regression_training_matches():
    requests = [_made(seed, loss_fn=squared_error_loss) for seed in range(2)]
    for request in requests:
        request.data = ClientData(request.data.name, request.data.x, torch.randn(50, 4))
    twins = [_request_twin(r) for r in requests]
    for twin, request in zip(twins, requests, strict=True):
        twin.data = request.data
    for twin, result in zip(twins, train_stacked(requests), strict=True):
        alone = train_locally(twin.space, twin.start, twin.data, twin.settings, twin.loss_fn, twin.generator)
        assert _close(result.update, alone.update)


@pytest.mark.parametrize("weight_decay", [0.0, 1e-2])
def test_the_direct_fused_adam_steps_are_torch_optims(weight_decay):
    """`FusedAdamSteps` over views of stacked tensors gives what `torch.optim.Adam(fused=True)` gives each tensor
    alone, bit for bit, step after step (a torch that changes the fused kernel's call fails here)."""
    settings = LocalSettings(lr=0.01, batch_size=8, epochs=1, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(0)
    shapes = [(7, 3), (10,), (33,), (4, 4)]
    starts = [torch.randn(3, *shape, generator=generator) for shape in shapes]
    gradients = [[torch.randn(3, *shape, generator=generator) for shape in shapes] for _ in range(4)]
    stacked = [aligned_stack(list(start.unbind(0))) for start in starts]
    views = [layer[k] for k in range(3) for layer in stacked]
    assert FusedAdamSteps.applies(views, settings)
    steps = FusedAdamSteps(views, settings)
    for step in gradients:
        steps.step([layer[k] for k in range(3) for layer in step])
    for k in range(3):
        alone = [start[k].clone() for start in starts]
        optimizer = torch.optim.Adam(alone, lr=0.01, weight_decay=weight_decay, fused=True)
        for step in gradients:
            for tensor, gradient in zip(alone, step, strict=True):
                tensor.grad = gradient[k].clone()
            optimizer.step()
        assert all(torch.equal(tensor, layer[k]) for tensor, layer in zip(alone, stacked, strict=True))
