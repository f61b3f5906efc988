"""FedBN (Li et al., "FedBN: federated learning on non-IID features via local batch normalization", ICLR 2021):
FedAvg in which every client keeps its BatchNorm layers (their weights and biases, and their running statistics)
to itself; only the other parameters are averaged and sent.

Here the clients are the sources and the target (with its labelled samples): every round each trains from the
shared parameters with its own BatchNorm layers (client state), sends the update of the shared entries only
(Alg. 1 of the paper: the BN entries never leave a client), and the server averages them by sample count (as
fdabench's FedAvg; `weighting: uniform` as the authors' code). Local layers are found by module type, not by a
"bn" in the parameter name as in the authors' code. The
model is evaluated at the target with the target's own BatchNorm layers, which only the target's data ever
trained: the feature-shift adaptation FedBN is for. Needs a model with BatchNorm layers (`model_options.norm:
batch` on `mlp` and `digits_cnn`). A source scores its validation split with its own layers (`source_val`: the
target's layers never leave the target).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from fdabench.federation.client import LocalResult
from fdabench.federation.client_state import ClientState, LocalClient, LocalReply, View
from fdabench.federation.parameters import ParameterSpace, module_entries
from fdabench.federation.rule_interface import Phase
from fdabench.methods.base import METHODS, Aggregate, Requires, Roles, RoundInputs, RoundLoopMethod, every_client_update
from fdabench.tensor_math.aggregation import fedavg

#: the layers FedBN keeps local
LOCAL_LAYERS = (nn.modules.batchnorm._BatchNorm,)
BUFFER = "buffer."


@METHODS.register
class FedBN(RoundLoopMethod):
    """FedAvg over the sources and the target with local BatchNorm layers (module docstring)."""

    name = "fedbn"
    family = "federated"
    description = (
        "FedAvg over the sources and the target, each keeping its own BatchNorm layers; evaluated on the target"
    )
    roles = Roles(state="all")  # every client keeps its normalisation layers
    hparams_schema = {
        "weighting": {
            "enum": ["samples", "uniform"],
            "description": "the server's weights of the clients' updates: by sample count (fdabench's FedAvg) or "
            "uniform (the authors' code, med-air/FedBN federated/fed_digits.py: client_weights = 1/client_num)",
            "default": "samples",
        }
    }
    requires = Requires(
        {"model_options": {"norm": "batch"}}, "FedBN keeps BatchNorm layers local (models mlp and digits_cnn)"
    )

    def __init__(self, hparams: dict[str, Any] | None = None):
        super().__init__(hparams)
        self.local: Tensor | None = None  # mask of the BatchNorm entries of the flat parameters

    def prepare_model(self, model: nn.Module, problem: Any) -> nn.Module:
        self.local = module_entries(ParameterSpace(model), LOCAL_LAYERS)
        if not bool(self.local.any()):
            raise ValueError("fedbn: the model has no BatchNorm layers to keep local (model_options.norm: batch)")
        return model

    def update_bytes(self, space: ParameterSpace, phase: Phase) -> int:
        shared = space.size - int(self.local.sum())
        return shared * space.parameters[0].element_size()

    def client_state(self, space: ParameterSpace) -> ClientState:
        state = {"norm": space.get()[self.local]}
        state.update({f"{BUFFER}{index}": buffer for index, buffer in enumerate(space.get_buffers())})
        return state

    def evaluation_view(self, state: ClientState | None, params: Tensor) -> View:
        """The shared entries of `params` with the client's own BatchNorm layers and statistics."""
        if state is None:
            return View(params)
        own = params.clone()
        own[self.local] = state["norm"]
        buffers = [state[f"{BUFFER}{index}"] for index in range(sum(key.startswith(BUFFER) for key in state))]
        return View(own, buffers)

    def local_round(
        self, client: LocalClient, state: ClientState | None, start: Tensor, broadcast: Tensor | None
    ) -> LocalReply:
        """The client trains from its view of `start` (`evaluation_view`: its own BatchNorm layers and statistics)
        and keeps its trained BatchNorm entries and statistics; it sends the shared entries' update (the BatchNorm
        entries zero: they never leave the client)."""
        own = self.evaluation_view(state, start)
        if own.buffers is not None:
            client.space.set_buffers(own.buffers)
        result = client.train(own.params)
        trained = own.params + result.update
        kept = {"norm": trained[self.local]}
        kept.update({f"{BUFFER}{index}": buffer for index, buffer in enumerate(client.space.get_buffers())})
        sent = result.update.clone()
        sent[self.local] = 0
        return LocalReply(LocalResult(sent, result.steps, result.samples), kept)

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        """Σ_k w_k g_k over the sources and the target, w_k ∝ n_k (FedAvg; the BatchNorm entries stay zero)."""
        updates, counts = every_client_update(inputs)
        if self.hparams["weighting"] == "uniform":
            counts = torch.ones_like(counts)
        return Aggregate(fedavg(updates, counts))
