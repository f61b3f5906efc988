"""The local optimisers equal torch.optim step for step."""

import pytest
import torch

from fdabench.federation.optim import SGD, Adam


def _run(make_optimizer, steps=6):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))
    optimizer = make_optimizer(list(model.parameters()))
    data = torch.randn(steps, 8, 5)
    trajectory = []
    for batch in data:
        optimizer.zero_grad()
        model(batch).square().mean().backward()
        optimizer.step()
        trajectory.append(torch.cat([p.detach().flatten().clone() for p in model.parameters()]))
    return torch.stack(trajectory)


class _ForeachAdam(Adam):
    """The foreach fallback (builds without the fused kernel, or mixed step counts)."""

    def _fused(self, *args) -> bool:
        return False


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
@pytest.mark.parametrize("adam", [Adam, _ForeachAdam])
def test_adam_matches_torch(weight_decay, adam):
    ours = _run(lambda p: adam(p, lr=0.01, weight_decay=weight_decay))
    reference = _run(lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=weight_decay))
    assert torch.allclose(ours, reference, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("momentum, weight_decay", [(0.0, 0.0), (0.9, 0.0), (0.9, 0.001)])
def test_sgd_matches_torch(momentum, weight_decay):
    ours = _run(lambda p: SGD(p, lr=0.05, momentum=momentum, weight_decay=weight_decay))
    reference = _run(lambda p: torch.optim.SGD(p, lr=0.05, momentum=momentum, weight_decay=weight_decay))
    assert torch.allclose(ours, reference, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("ours, reference", [
    (lambda p: Adam(p, lr=0.01), lambda p: torch.optim.Adam(p, lr=0.01)),
    (lambda p: SGD(p, lr=0.05, momentum=0.9), lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
])
def test_parameters_without_gradients_are_skipped_as_in_torch(ours, reference):
    """The second layer gets no gradient on odd steps (as an auxiliary head the target never trains)."""

    def run(factory):
        torch.manual_seed(0)
        first, second = torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)
        optimizer = factory(list(first.parameters()) + list(second.parameters()))
        for step in range(6):
            optimizer.zero_grad()
            hidden = first(torch.randn(5, 4))
            (hidden.square().mean() if step % 2 else second(hidden).square().mean()).backward()
            optimizer.step()
        return torch.cat([p.detach().flatten() for p in list(first.parameters()) + list(second.parameters())])

    assert torch.allclose(run(ours), run(reference), rtol=1e-5, atol=1e-7)


def test_adam_takes_the_fused_kernel_on_cpu():
    """The fast path is the one the matching test above exercises (not silently the fallback)."""
    parameter = torch.nn.Parameter(torch.ones(3))
    optimizer = Adam([parameter], lr=0.1)
    parameter.grad = torch.ones(3)
    assert optimizer._fused([parameter], [parameter.grad], optimizer.exp_avg, optimizer.exp_avg_sq, 1)
    assert torch.allclose(parameter.detach(), torch.full((3,), 0.9))
