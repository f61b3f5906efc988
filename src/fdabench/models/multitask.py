"""A model with auxiliary heads: the base model's body and main head are shared, and one linear head per
auxiliary label (e.g. sex, age decade) sits on the same features. Calling the model gives the main task's
logits only, so evaluation never uses the auxiliary heads."""

from __future__ import annotations

import torch
from torch import nn

AUX_PREFIX = "aux_heads."


class MultiTaskModel(nn.Module):
    def __init__(self, base: nn.Module, aux_classes: dict[str, int]):
        super().__init__()
        self.features = base.features
        self.head = base.head
        self.feature_dim = base.feature_dim
        self.aux_heads = nn.ModuleDict(
            {name: nn.Linear(base.feature_dim, classes) for name, classes in aux_classes.items()}
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))

    def forward_with_aux(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        features = self.features(x)
        return self.head(features), {name: head(features) for name, head in self.aux_heads.items()}
