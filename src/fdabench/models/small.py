"""Small networks for the embedded datasets and for tabular or pre-extracted features."""

from __future__ import annotations

import math

import torch
from torch import nn

from fdabench.models.base import MODELS


class BodyHead(nn.Module):
    """features -> head, with the body's output width in `feature_dim`."""

    def __init__(self, features: nn.Module, feature_dim: int, num_outputs: int):
        super().__init__()
        self.features = features
        self.feature_dim = feature_dim
        self.head = nn.Linear(feature_dim, num_outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


#: the normalisation layers a small model may use (`norm`): FedBN needs "batch"
NORMS = ("none", "group", "batch")


def _norm_layer(norm: str, channels: int, dims: int) -> list[nn.Module]:
    """The normalisation after a layer of `channels` outputs (`dims` = 1: features, 2: images)."""
    if norm == "none":
        return []
    if norm == "group":
        return [nn.GroupNorm(8, channels)]
    if norm == "batch":
        return [nn.BatchNorm1d(channels) if dims == 1 else nn.BatchNorm2d(channels)]
    raise ValueError(f"unknown norm {norm!r}; allowed: {', '.join(NORMS)}")


@MODELS.register
def digits_cnn(input_shape, num_outputs, width: int = 16, norm: str = "group") -> nn.Module:
    """DomainBed's MNIST CNN scaled to 8x8 inputs: three 3x3 convolutions with ReLU and GroupNorm(8) (`norm`:
    "batch" for BatchNorm, as FedBN's models, Li et al. 2021; "none"), the second with stride 2, global average
    pooling, then a linear head."""
    channels = input_shape[0]
    layers: list[nn.Module] = []
    for index, (inputs, outputs) in enumerate([(channels, width), (width, 2 * width), (2 * width, 2 * width)]):
        layers += [nn.Conv2d(inputs, outputs, 3, stride=2 if index == 1 else 1, padding=1), nn.ReLU()]
        layers += _norm_layer(norm, outputs, 2)
    features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
    return BodyHead(features, 2 * width, num_outputs)


@MODELS.register
def mlp(input_shape, num_outputs, hidden: tuple[int, ...] | list[int] = (64,), norm: str = "none") -> nn.Module:
    """ReLU multi-layer perceptron for tabular and pre-extracted features; `norm: batch` puts BatchNorm1d after
    each hidden linear layer, before its ReLU (FedBN's placement, Li et al. 2021)."""
    if norm == "group":
        raise ValueError("mlp: norm 'group' is for convolutions; allowed: none, batch")
    layers: list[nn.Module] = [nn.Flatten()]
    width = math.prod(input_shape)
    for size in hidden:
        layers += [nn.Linear(width, size), *_norm_layer(norm, size, 1), nn.ReLU()]
        width = size
    return BodyHead(nn.Sequential(*layers), width, num_outputs)


@MODELS.register
def logistic(input_shape, num_outputs) -> nn.Module:
    """Logistic regression for two classes: one linear layer with one output, the log-odds of class 1, trained
    with the binary cross-entropy of its sigmoid and predicted positive above probability 0.5
    (`fdabench.federation.client.loss_function` and `evaluate` on a one-output model): FLamby's Fed-Heart
    Baseline, Linear(13, 1) + sigmoid under BCELoss, with PyTorch's default initialisation as there. `mlp` with
    `hidden: []` is the same model class with one output per class under cross-entropy."""
    if num_outputs != 2:
        raise ValueError(f"logistic: a binary model needs two classes, not {num_outputs}")
    return BodyHead(nn.Flatten(), math.prod(input_shape), 1)


@MODELS.register
def sigmoid_mlp(input_shape, num_outputs, hidden: int = 100, init_scale: float = 0.5) -> nn.Module:
    """One hidden sigmoid layer (FedGP appendix B); weights ~ U(-init_scale, init_scale) as published."""
    model = BodyHead(
        nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), hidden), nn.Sigmoid()), hidden, num_outputs
    )
    if init_scale > 0:
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.uniform_(-init_scale, init_scale)
    return model
