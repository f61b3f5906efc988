"""The model registry and how a registered model is built."""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from typing import Any

from torch import nn

from fdabench.core.registry import Registry

ModelFactory = Callable[..., nn.Module]
MODELS: Registry[ModelFactory] = Registry("model")


#: the registered name each model `build_model` built (without keeping the model alive)
_BUILT_AS: weakref.WeakKeyDictionary[nn.Module, str] = weakref.WeakKeyDictionary()


def build_model(name: str, input_shape: tuple[int, ...], num_outputs: int, **options: Any) -> nn.Module:
    model = MODELS.get(name)(tuple(input_shape), int(num_outputs), **options)
    _BUILT_AS[model] = name
    return model


def model_name(model: nn.Module) -> str | None:
    """The registered name `build_model` built `model` under (its family, e.g. fmnist_cnn); None for a model built
    otherwise (a copy, or one made by hand)."""
    return _BUILT_AS.get(model)


def resolved_model_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments a model is built with: its factory's defaults overlaid with `options`."""
    parameters = inspect.signature(MODELS.get(name)).parameters.values()
    defaults = {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}
    return {**defaults, **options}
