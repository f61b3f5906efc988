"""The published models build with the expected shapes and never download weights silently."""

import pytest
import torch

from fdabench.models import build_model


@pytest.mark.parametrize(
    "name, shape, parameters",
    [
        ("fmnist_cnn", (1, 28, 28), 44426),  # conv6-conv16-fc120-84-10 on 28x28
        ("cifar_cnn", (3, 32, 32), 62006),  # the same on 32x32 colour images
        ("mnist_cnn", (2, 14, 14), 372426),  # DomainBed's MNIST CNN with a 10-way head
    ],
)
def test_cnn_shapes(name, shape, parameters):
    model = build_model(name, shape, 10)
    assert model(torch.rand(3, *shape)).shape == (3, 10)
    assert sum(p.numel() for p in model.parameters()) == parameters
    assert model.head.out_features == 10


def test_resnet_without_weights_and_frozen_batchnorm():
    model = build_model("resnet18", (3, 32, 32), 5, weights="none")
    model.train()
    assert not any(m.training for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d))
    before = [b.clone() for b in model.buffers()]
    model(torch.rand(2, 3, 32, 32)).sum().backward()
    assert all(torch.equal(a, b) for a, b in zip(before, model.buffers()))  # statistics untouched
    assert model.feature_dim == 512


def test_missing_imagenet_weights_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="weights: none"):
        build_model("resnet18", (3, 32, 32), 5)
