"""Local training: updates, per-step observation, batches drawn by index, no aliasing of the start."""

import math

import torch

from fdabench.federation.client import (
    LocalSettings,
    Proximal,
    batch_indices,
    evaluate,
    squared_error_loss,
    train_locally,
)
from fdabench.federation.parameters import ParameterSpace, average_buffers
from fdabench.federation.problem import ClientData
from fdabench.models import build_model


def _client(n=37, features=6, classes=3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return ClientData(
        "c", torch.randn(n, features, generator=generator), torch.randint(0, classes, (n,), generator=generator)
    )


def test_parameter_space_set_copies_instead_of_aliasing():
    model = build_model("mlp", (6,), 3)
    space = ParameterSpace(model)
    flat = torch.zeros(space.size)
    space.set(flat)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(1.0)
    assert flat.abs().sum() == 0
    assert torch.allclose(space.get(), torch.ones(space.size))
    assert space.update_bytes == 4 * space.size


def test_update_is_difference_and_start_is_untouched():
    model = build_model("mlp", (6,), 3)
    space = ParameterSpace(model)
    start = space.get()
    snapshot = start.clone()
    settings = LocalSettings(lr=0.01, batch_size=8, epochs=2)
    result = train_locally(
        space, start, _client(), settings, torch.nn.functional.cross_entropy, torch.Generator().manual_seed(1)
    )
    assert torch.equal(start, snapshot)
    assert torch.allclose(result.update, space.get() - start)
    assert result.steps == 2 * math.ceil(37 / 8) and result.samples == 37


def test_step_updates_sum_to_the_local_update():
    model = build_model("mlp", (6,), 3)
    space = ParameterSpace(model)
    steps = []
    result = train_locally(
        space,
        space.get(),
        _client(),
        LocalSettings(0.01, 16, 1),
        torch.nn.functional.cross_entropy,
        torch.Generator().manual_seed(2),
        on_step=steps.append,
    )
    assert len(steps) == result.steps == 3
    assert torch.allclose(torch.stack(steps).sum(0), result.update, atol=1e-6)


def test_each_epoch_visits_every_sample_once():
    seen = []

    def recording_loss(output, target):
        seen.append(target.clone())
        return output.sum() * 0.0

    data = ClientData("c", torch.randn(23, 4), torch.arange(23))
    space = ParameterSpace(build_model("mlp", (4,), 2))
    train_locally(space, space.get(), data, LocalSettings(0.1, 5, 2), recording_loss, torch.Generator().manual_seed(0))
    visited = torch.cat(seen)
    assert sorted(visited[:23].tolist()) == list(range(23)) and sorted(visited[23:].tolist()) == list(range(23))
    assert visited[:23].tolist() != visited[23:].tolist()  # a fresh order every epoch


def test_full_batch_is_one_step_per_epoch():
    space = ParameterSpace(build_model("mlp", (6,), 3))
    result = train_locally(
        space,
        space.get(),
        _client(),
        LocalSettings(0.1, 0, 3, optimizer="sgd"),
        torch.nn.functional.cross_entropy,
        torch.Generator(),
    )
    assert result.steps == 3


def test_evaluate_accuracy_and_regression_error():
    model = torch.nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.eye(2))
    data = ClientData("t", torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]), torch.tensor([0, 1, 1]))
    assert abs(evaluate(model, data, "classification", batch_size=2)["accuracy"] - 2 / 3) < 1e-9
    regression = ClientData("r", torch.eye(2), torch.zeros(2, 2))
    assert abs(evaluate(model, regression, "regression")["mse"] - 1.0) < 1e-6
    assert abs(squared_error_loss(torch.ones(4, 3), torch.zeros(4, 3)).item() - 3.0) < 1e-6


def test_average_buffers():
    states = [[torch.tensor([1.0, 2.0]), torch.tensor(3)], [torch.tensor([3.0, 6.0]), torch.tensor(5)]]
    averaged = average_buffers(states, torch.tensor([1.0, 3.0]))
    assert torch.allclose(averaged[0], torch.tensor([2.5, 5.0])) and averaged[1].item() == 5


def test_proximal_step_is_the_penalty_s_proximal_operator():
    """One full-batch SGD step on the loss, then θ ← (θ + lr·μ·a) / (1 + lr·μ) towards the anchor a."""
    space = ParameterSpace(build_model("mlp", (6,), 3))
    start, data, lr, mu = space.get(), _client(), 0.1, 3.0
    anchor = torch.linspace(-1, 1, space.size)
    plain = train_locally(
        space,
        start,
        data,
        LocalSettings(lr, 0, 1, optimizer="sgd"),
        torch.nn.functional.cross_entropy,
        torch.Generator(),
    )
    proximal = train_locally(
        space,
        start,
        data,
        LocalSettings(lr, 0, 1, optimizer="sgd"),
        torch.nn.functional.cross_entropy,
        torch.Generator(),
        proximal=Proximal(mu, anchor),
    )
    expected = (start + plain.update + lr * mu * anchor) / (1 + lr * mu)
    assert torch.allclose(start + proximal.update, expected, atol=1e-6)


def test_batch_indices_full_batch_draws_nothing():
    generator = torch.Generator().manual_seed(0)
    state = generator.get_state()
    assert list(batch_indices(10, 0, 3, generator, "cpu")) == [None, None, None]
    assert torch.equal(generator.get_state(), state)
    batches = list(batch_indices(10, 4, 1, generator, "cpu"))
    assert [len(b) for b in batches] == [4, 4, 2] and sorted(torch.cat(batches).tolist()) == list(range(10))
