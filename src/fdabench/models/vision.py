"""The published image models: LeNet-style CNNs (FedGP noise experiments), DomainBed's MNIST CNN, and
torchvision ResNets with ImageNet input normalisation and (as DomainBed) frozen BatchNorm statistics."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from fdabench.core.readers import reading
from fdabench.models.base import MODELS
from fdabench.models.small import BodyHead


def _lenet(input_shape, num_outputs) -> nn.Module:
    """conv(6, 5x5) - pool - conv(16, 5x5) - pool - fc 120 - 84 - head (FedGP paper, FMNIST and CIFAR-10)."""
    channels, height, width = input_shape
    spatial = lambda size: ((size - 4) // 2 - 4) // 2
    features = nn.Sequential(
        nn.Conv2d(channels, 6, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * spatial(height) * spatial(width), 120),
        nn.ReLU(),
        nn.Linear(120, 84),
        nn.ReLU(),
    )
    return BodyHead(features, 84, num_outputs)


@MODELS.register
def fmnist_cnn(input_shape, num_outputs) -> nn.Module:
    return _lenet(input_shape, num_outputs)


@MODELS.register
def cifar_cnn(input_shape, num_outputs) -> nn.Module:
    return _lenet(input_shape, num_outputs)


@MODELS.register
def mnist_cnn(input_shape, num_outputs, width: int = 64) -> nn.Module:
    """DomainBed's MNIST_CNN: conv 64, 128 (stride 2), 128, 128, each ReLU + GroupNorm(8); average pool."""
    w = width
    features = nn.Sequential(
        nn.Conv2d(input_shape[0], w, 3, padding=1),
        nn.ReLU(),
        nn.GroupNorm(8, w),
        nn.Conv2d(w, 2 * w, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.GroupNorm(8, 2 * w),
        nn.Conv2d(2 * w, 2 * w, 3, padding=1),
        nn.ReLU(),
        nn.GroupNorm(8, 2 * w),
        nn.Conv2d(2 * w, 2 * w, 3, padding=1),
        nn.ReLU(),
        nn.GroupNorm(8, 2 * w),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    )
    return BodyHead(features, 2 * w, num_outputs)


class ImageNetNormalize(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        return (x - self.mean) / self.std


class FrozenBatchNormBodyHead(BodyHead):
    """BatchNorm layers stay in evaluation mode (their ImageNet statistics are fixed), as DomainBed's
    ResNet with freeze_bn: no buffer ever changes, so aggregation never has to treat them."""

    def train(self, mode: bool = True):
        super().train(mode)
        for module in self.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.eval()
        return self


def _weights_file(weights) -> Path:
    return Path(torch.hub.get_dir()) / "checkpoints" / Path(weights.url).name


def _resnet(depth: int, input_shape, num_outputs, weights: str, freeze_batchnorm: bool) -> nn.Module:
    import torchvision.models as models

    builder = getattr(models, f"resnet{depth}")
    enum = getattr(models, f"ResNet{depth}_Weights").IMAGENET1K_V1
    if weights == "imagenet":
        path = _weights_file(enum)
        if not path.exists():  # never a silent download at training time
            raise FileNotFoundError(
                f"ImageNet weights for resnet{depth} are not at {path}. Fetch them once on a machine with network "
                f"access (python -c \"import torchvision; torchvision.models.resnet{depth}(weights='IMAGENET1K_V1')\") "
                f"and copy "
                f"the file there (or set TORCH_HOME), or set model_options: {{weights: none}} to train from scratch."
            )
        network = builder(weights=None)
        with reading(path, f"ImageNet weights for resnet{depth}"):
            network.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    elif weights == "none":
        network = builder(weights=None)
    else:
        raise ValueError(f"weights must be 'imagenet' or 'none', got {weights!r}")
    feature_dim = network.fc.in_features
    network.fc = nn.Identity()
    body = nn.Sequential(ImageNetNormalize(), network)
    cls = FrozenBatchNormBodyHead if freeze_batchnorm else BodyHead
    return cls(body, feature_dim, num_outputs)


@MODELS.register
def resnet18(input_shape, num_outputs, weights: str = "imagenet", freeze_batchnorm: bool = True) -> nn.Module:
    return _resnet(18, input_shape, num_outputs, weights, freeze_batchnorm)


@MODELS.register
def resnet50(input_shape, num_outputs, weights: str = "imagenet", freeze_batchnorm: bool = True) -> nn.Module:
    return _resnet(50, input_shape, num_outputs, weights, freeze_batchnorm)
