"""SCAFFOLD (Karimireddy et al., "SCAFFOLD: stochastic controlled averaging for federated learning", ICML 2020,
Algorithm 1 with option II) over the sources, evaluated on the target, as FedAvg and FedProx are here.

Each source i keeps a control variate c_i (client state, zero at first); the server keeps c (zero at first) and
sends it with θ. A source trains from y = θ with c − c_i added to every step's gradient (Alg. 1 line 10), then
    c_i⁺ = c_i − c + (θ − y) / (K η_l)                                           (option II, line 12)
with K its local steps this round and η_l its learning rate, and sends Δy_i = y − θ and Δc_i = c_i⁺ − c_i. The
server steps θ ← θ + η_g Σ_i w_i Δy_i (the loop's `server_lr` is η_g) and c ← c + (1/N) Σ_{i∈S} Δc_i (line 17:
|S|/N times the mean over the S sources that answered, N every source). Option II's (θ − y)/(K η_l) is the mean
corrected gradient only under plain SGD, so the method asks for `optimizer: sgd` without momentum (`check`). With
c = c_i = 0 the first round is FedAvg's.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from fdabench.federation.client_state import ClientState, LocalClient, LocalReply
from fdabench.federation.parameters import ParameterSpace
from fdabench.methods.base import METHODS, Aggregate, Requires, Roles, RoundInputs, RoundLoopMethod
from fdabench.tensor_math.aggregation import fedavg


def control_update(control: Tensor, server_control: Tensor, update: Tensor, steps: int, lr: float) -> Tensor:
    """c_i⁺ = c_i − c + (θ − y)/(K η_l), with `update` = y − θ (SCAFFOLD option II, Alg. 1 line 12); c_i unchanged
    by a client that took no step."""
    if steps == 0:
        return control
    return control - server_control - update / (steps * lr)


@METHODS.register
class Scaffold(RoundLoopMethod):
    """SCAFFOLD (option II) over the sources; the target does not train and is evaluated (module docstring)."""

    name = "scaffold"
    family = "federated"
    description = "SCAFFOLD over the source clients (control variates, option II); evaluated on the target"
    roles = Roles(target=None, state="all")  # every source keeps its control variate c_i; the target never trains
    # option II reads the mean corrected gradient off an SGD trajectory; Adam's steps or momentum make
    # (θ − y)/(K η_l) something else (measured: under Adam the corrections swamp the gradients)
    requires = Requires(
        {"optimizer": "sgd", "momentum": 0.0},
        "option II control variates estimate the mean gradient from plain SGD steps",
    )
    hparams_schema = {
        "weighting": {
            "enum": ["samples", "uniform"],
            "description": "the server's weights of the sources' Δy_i: by sample count (fdabench's FedAvg, so the "
            "first round equals FedAvg's) or uniform (Alg. 1 line 16)",
            "default": "samples",
        }
    }

    def __init__(self, hparams: dict[str, Any] | None = None):
        super().__init__(hparams)
        self.server_control: Tensor | None = None  # c

    def prepare_model(self, model: torch.nn.Module, problem: Any) -> torch.nn.Module:
        space = ParameterSpace(model)
        self.server_control = torch.zeros(space.size, device=space.parameters[0].device)
        return model

    def client_state(self, space: ParameterSpace) -> ClientState:
        return {"control": torch.zeros(space.size, device=space.parameters[0].device)}

    def broadcast(self) -> Tensor | None:
        return self.server_control

    def local_round(
        self, client: LocalClient, state: ClientState | None, start: Tensor, broadcast: Tensor | None
    ) -> LocalReply:
        """Local SGD with c − c_i added to every step's gradient, then c_i by option II, and Δc_i sent. A round
        without the broadcast (a FedAvg warm-up round) trains plainly and keeps c_i."""
        if state is None or broadcast is None:
            return LocalReply(client.train(start), state)
        correction = broadcast - state["control"]
        result = client.train(start, correction=correction)
        control = state["control"]
        server_control = correction + control
        updated = control_update(control, server_control, result.update, result.steps, client.settings.lr)
        return LocalReply(result, {"control": updated}, message=updated - control)

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        weights = inputs.source_counts
        if self.hparams["weighting"] == "uniform":
            weights = torch.ones_like(inputs.source_counts)
        delta = fedavg(inputs.source_updates, weights)
        self.server_control = self.server_control + inputs.source_messages.sum(0) / inputs.source_total
        return Aggregate(delta, {"server_control_norm": float(self.server_control.norm())})

    @property
    def round_state(self) -> dict[str, Any]:
        return {"server_control": self.server_control}

    @round_state.setter
    def round_state(self, state: dict[str, Any]) -> None:
        self.server_control = state["server_control"]
