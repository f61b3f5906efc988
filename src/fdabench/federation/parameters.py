"""A model's trainable parameters as one flat vector, with the per-tensor ("layer") boundaries."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils import parameters_to_vector


class ParameterSpace:
    """Reads and writes a model's parameters as a flat float vector (layers in `named_parameters` order).

    With `prefix`, only the parameters whose names start with it (e.g. "features." for the body): training
    in such a space moves those and leaves the others frozen, while the forward pass is the whole model's."""

    def __init__(self, model: nn.Module, prefix: str = ""):
        self.model = model
        named = [(name, p) for name, p in model.named_parameters() if p.requires_grad and name.startswith(prefix)]
        if not named:
            raise ValueError(f"no trainable parameters named {prefix}...")
        self.layer_names = tuple(name for name, _ in named)
        self.parameters = [p for _, p in named]
        self.layer_sizes = tuple(p.numel() for p in self.parameters)
        self.size = sum(self.layer_sizes)
        self.update_bytes = sum(p.numel() * p.element_size() for p in self.parameters)
        self.buffers = [b for b in model.buffers()]

    def get(self) -> Tensor:
        return parameters_to_vector(self.parameters).detach().clone()

    def set(self, flat: Tensor) -> None:
        """Copy `flat` into the parameters (never aliasing it: training must not modify `flat`)."""
        if flat.numel() != self.size:
            raise ValueError(f"expected {self.size} parameters, got {flat.numel()}")
        with torch.no_grad():
            torch._foreach_copy_(
                self.parameters,
                [piece.view_as(p) for piece, p in zip(torch.split(flat, self.layer_sizes), self.parameters)],
            )

    def get_buffers(self) -> list[Tensor]:
        return [b.detach().clone() for b in self.buffers]

    def set_buffers(self, values: list[Tensor]) -> None:
        with torch.no_grad():
            for buffer, value in zip(self.buffers, values):
                buffer.copy_(value)


def module_entries(space: ParameterSpace, kinds: tuple[type[nn.Module], ...]) -> Tensor:
    """A boolean mask over the flat parameters: True at the entries of modules of the given kinds (e.g. BatchNorm
    layers, which FedBN keeps local)."""
    owned = {
        f"{module_name}.{name}" if module_name else name
        for module_name, module in space.model.named_modules()
        if isinstance(module, kinds)
        for name, _ in module.named_parameters(recurse=False)
    }
    device = space.parameters[0].device
    return torch.cat(
        [torch.full((size,), name in owned, device=device) for name, size in zip(space.layer_names, space.layer_sizes)]
    )


def average_buffers(states: list[list[Tensor]], weights: Tensor) -> list[Tensor]:
    """Sample-weighted average of floating-point buffers; integer buffers (counters) take the maximum."""
    if not states or not states[0]:
        return []
    averaged = []
    for values in zip(*states):
        stacked = torch.stack(values)
        if stacked.is_floating_point():
            w = (weights / weights.sum()).to(stacked.dtype).reshape(-1, *([1] * (stacked.dim() - 1)))
            averaged.append((w * stacked).sum(0))
        else:
            averaged.append(stacked.max(0).values)
    return averaged
