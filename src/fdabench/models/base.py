"""The model registry and how a registered model is built."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from torch import nn

from fdabench.core.registry import Registry

ModelFactory = Callable[..., nn.Module]
MODELS: Registry[ModelFactory] = Registry("model")


def build_model(name: str, input_shape: tuple[int, ...], num_outputs: int, **options: Any) -> nn.Module:
    return MODELS.get(name)(tuple(input_shape), int(num_outputs), **options)


def resolved_model_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments a model is built with: its factory's defaults overlaid with `options`."""
    parameters = inspect.signature(MODELS.get(name)).parameters.values()
    defaults = {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}
    return {**defaults, **options}
