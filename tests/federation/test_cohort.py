"""Cohort training equals training the clients one after another: same batches from each client's own
generator, one optimiser state per client, the same updates up to the rounding of batched kernels."""

import pytest
import torch
from torch import nn

from fdabench.federation.client import LocalSettings, loss_function, train_locally
from fdabench.federation.cohort import cohort_eligible, size_groups, train_cohort, train_grouped
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import ClientData
from fdabench.models import build_model

SHAPE = (1, 8, 8)


def _clients(count: int, samples: int, noise_std: float = 0.0, seed: int = 0) -> list[ClientData]:
    """Clients with different data (and, with noise, each its own noise generator, redrawn at every read)."""
    generator = torch.Generator().manual_seed(seed)
    return [
        ClientData(
            f"c{index}",
            torch.randn((samples, *SHAPE), generator=generator) + index,
            torch.randint(0, 3, (samples,), generator=generator),
            noise_std=noise_std,
            generator=torch.Generator().manual_seed(100 + index) if noise_std else None,
        )
        for index in range(count)
    ]


def _generators(count: int) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(7 * index + 1) for index in range(count)]


def _one_by_one(space, start, clients, settings, loss_fn):
    return [
        train_locally(space, start, client, settings, loss_fn, generator)
        for client, generator in zip(clients, _generators(len(clients)), strict=True)
    ]


CASES = [
    ("mlp", {"hidden": [32]}, LocalSettings(lr=1e-2, batch_size=16, epochs=2), 0.0),
    ("digits_cnn", {"width": 8}, LocalSettings(lr=1e-2, batch_size=10, epochs=2, weight_decay=1e-3), 0.0),
    ("mlp", {"hidden": [32]}, LocalSettings(lr=5e-2, batch_size=12, epochs=3, optimizer="sgd", momentum=0.9), 0.0),
    ("mlp", {"hidden": [16]}, LocalSettings(lr=1e-2, batch_size=0, epochs=4), 0.0),  # full batch
    ("mlp", {"hidden": [16]}, LocalSettings(lr=1e-2, batch_size=16, epochs=2), 0.5),  # noise redrawn per read
    ("mlp", {"hidden": [16]}, LocalSettings(lr=1e-2, batch_size=16, epochs=2, shuffle=False), 0.0),  # stored order
]


@pytest.mark.parametrize(("model_name", "options", "settings", "noise"), CASES)
def test_cohort_updates_equal_one_by_one(model_name, options, settings, noise):
    torch.manual_seed(0)
    model = build_model(model_name, SHAPE, 3, **options)
    space = ParameterSpace(model)
    start = space.get()
    loss_fn = loss_function("classification")
    alone = _one_by_one(space, start, _clients(4, 40, noise), settings, loss_fn)
    space.set(start)
    together = train_cohort(space, start, _clients(4, 40, noise), settings, loss_fn, _generators(4))
    for single, cohort in zip(alone, together, strict=True):
        assert (cohort.steps, cohort.samples) == (single.steps, single.samples)
        scale = single.update.abs().max()
        assert scale > 1e-3  # the clients moved
        # batched kernels round differently; Adam divides by √v, so entries with tiny gradients amplify that
        # rounding (measured: at most 4e-5 of the largest update, in 2 of 3,699 entries of the CNN)
        torch.testing.assert_close(cohort.update, single.update, rtol=0, atol=1e-4 * float(scale))
    # the clients' updates differ from each other: no client trained on another's batches
    assert not torch.allclose(together[0].update, together[1].update)
    assert torch.equal(space.get(), start)  # the model's own parameters are untouched


def test_who_can_train_as_a_cohort():
    clients = _clients(3, 20)
    assert cohort_eligible(build_model("mlp", SHAPE, 3), clients)
    assert not cohort_eligible(build_model("mlp", SHAPE, 3), clients[:1])  # nothing to batch
    assert not cohort_eligible(build_model("mlp", SHAPE, 3), clients[:2] + _clients(1, 21))  # other step counts
    dropout = nn.Sequential(nn.Flatten(), nn.Dropout(0.5), nn.Linear(64, 3))
    batchnorm = nn.Sequential(nn.Flatten(), nn.Linear(64, 8), nn.BatchNorm1d(8), nn.Linear(8, 3))
    assert not cohort_eligible(dropout, clients) and not cohort_eligible(batchnorm, clients)
    with pytest.raises(ValueError, match="cannot train as a cohort"):
        space = ParameterSpace(batchnorm)
        train_cohort(space, space.get(), clients, CASES[0][2], loss_function("classification"), _generators(3))


def test_clients_of_different_sizes_train_in_one_cohort_per_size():
    clients = [*_clients(2, 40, seed=1), *_clients(1, 24, seed=2), *_clients(1, 40, seed=3), *_clients(1, 30, seed=4)]
    assert size_groups(clients) == [[0, 1, 3], [2], [4]]
    settings = LocalSettings(lr=1e-2, batch_size=16, epochs=2)
    torch.manual_seed(0)
    space = ParameterSpace(build_model("mlp", SHAPE, 3, hidden=[16]))
    start = space.get()
    loss_fn = loss_function("classification")
    alone = _one_by_one(space, start, clients, settings, loss_fn)
    grouped = train_grouped(space, start, clients, settings, loss_fn, _generators(len(clients)))
    assert [(r.steps, r.samples) for r in grouped] == [(6, 40), (6, 40), (4, 24), (6, 40), (4, 30)]  # client order
    for single, result in zip(alone, grouped, strict=True):
        torch.testing.assert_close(result.update, single.update, rtol=0, atol=1e-4 * float(single.update.abs().max()))
    for index in (2, 4):  # a size no other client has: trained alone, bit for bit
        assert torch.equal(grouped[index].update, alone[index].update)
    with pytest.raises(ValueError, match="5 clients but 4 generators"):
        train_grouped(space, start, clients, settings, loss_fn, _generators(4))
