"""Local optimisers are torch.optim's, built fresh for every local training call."""

import pytest
import torch

from fdabench.federation.client import LocalSettings, adam, make_optimizer


def test_adam_runs_torchs_fused_kernel_where_it_can():
    parameters = [torch.nn.Parameter(torch.ones(3))]
    optimizer = adam(parameters, lr=0.1, weight_decay=0.01)
    assert isinstance(optimizer, torch.optim.Adam) and optimizer.defaults["fused"]
    assert optimizer.defaults["lr"] == 0.1 and optimizer.defaults["weight_decay"] == 0.01


@pytest.mark.parametrize("name, kind", [("adam", torch.optim.Adam), ("sgd", torch.optim.SGD)])
def test_make_optimizer_applies_the_local_settings(name, kind):
    settings = LocalSettings(lr=0.05, batch_size=8, epochs=1, optimizer=name, momentum=0.9, weight_decay=0.001)
    optimizer = make_optimizer([torch.nn.Parameter(torch.zeros(2))], settings)
    assert (
        isinstance(optimizer, kind) and optimizer.defaults["lr"] == 0.05 and optimizer.defaults["weight_decay"] == 0.001
    )
    if name == "sgd":
        assert optimizer.defaults["momentum"] == 0.9


def test_unknown_optimizer_is_refused():
    with pytest.raises(ValueError, match="allowed: adam, sgd"):
        make_optimizer([torch.nn.Parameter(torch.zeros(2))], LocalSettings(0.1, 8, 1, optimizer="lbfgs"))
