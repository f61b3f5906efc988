"""Federated-learning baselines trained on the sources and evaluated on the target: FedProx, and
Finetune_Offline (source FedAvg, then the target fine-tunes alone: the round loop's "local" phase)."""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor

from fdabench.federation.client import LocalResult, Proximal
from fdabench.federation.client_state import ClientState, LocalClient, LocalReply
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import ClientData
from fdabench.federation.records import register_phase
from fdabench.federation.settings import TrainSettings
from fdabench.methods.base import (
    METHODS,
    Aggregate,
    LocalContext,
    Objective,
    Phase,
    Roles,
    RoundInputs,
    RoundLoopMethod,
)
from fdabench.methods.baselines import SourceOnly
from fdabench.tensor_math.aggregation import fedavg

FINETUNE = register_phase("finetune", "Finetune_Offline's local epochs on the target after FedAvg; no bytes")


@METHODS.register
class FedProx(RoundLoopMethod):
    """FedProx (Li et al. 2020): FedAvg over the sources (θ += Σ w_i g_i) where each source minimises its
    loss plus (μ/2)‖θ − θ^t‖² (Eq. 2) locally. As the FDA papers' baseline, the target does not train; the
    global model is evaluated on it. μ = 0 is FedAvg (`source_only`)."""

    name = "fedprox"
    family = "federated"
    description = "FedAvg over the sources with FedProx's proximal term in local training; evaluated on the target"
    roles = Roles(target=None)
    # μ = 0.01 from FedProx's grid {0.001, 0.01, 0.1, 1} (Li et al. 2020, §5)
    hparams_schema = {
        "mu": {
            "type": "number",
            "minimum": 0,
            "description": "proximal coefficient μ",
            "default": 0.01,
            "search": {"log_uniform": [0.001, 1.0]},
        }
    }

    def local_objective(self, context: LocalContext) -> Objective:
        return Objective(proximal=Proximal(self.hparams["mu"])) if self.hparams["mu"] > 0 else Objective()

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        return Aggregate(fedavg(inputs.source_updates, inputs.source_counts))


@METHODS.register
class FinetuneOffline(SourceOnly):
    """Finetune_Offline: `source_only` (FedAvg over the sources) for the whole round budget, then the target
    fine-tunes the final global model alone on its labelled samples, one round (phase "finetune", a "local" phase
    of the round loop: nothing crosses a client boundary, no byte is counted) per epoch. Each epoch is one local
    training call of the target's settings for one epoch, exactly a `target_only` round started from the source model
    (fresh optimiser per call, as every local call here), its batches in the target's order (`target_order`).
    `head_only` freezes the body (`features`) and trains `head` alone, on the body's features of the target's samples
    computed once, at the first epoch (kept in the target's client state)."""

    name = "finetune_offline"
    family = "baseline"
    description = "source FedAvg for the whole budget, then the target fine-tunes locally"
    # the target trains on its labelled samples in the fine-tuning rounds only (`phases`); it keeps (head_only) its
    # frozen features, from its first fine-tuning epoch
    roles = Roles(target="labelled", warmup=True, state="target")
    hparams_schema = {
        "finetune_epochs": {
            "type": ["integer", "null"],
            "minimum": 0,
            "description": "target fine-tuning epochs after FedAvg (null: rounds x target_local_epochs, the target's "
            "epochs in an FDA run)",
            "default": None,
        },
        "head_only": {
            "type": "boolean",
            "description": "fine-tune only the last linear layer (head)",
            "default": False,
        },
    }

    def finetune_epochs(self, settings) -> int:
        epochs = self.hparams["finetune_epochs"]
        return settings.rounds * settings.target_local_epochs if epochs is None else epochs

    def phases(self, settings: TrainSettings, has_sources: bool) -> list[Phase]:
        """`source_only`'s rounds (the target does not train), then the target's fine-tuning epochs."""
        fedavg_rounds = [replace(phase, target=False) for phase in super().phases(settings, has_sources)]
        return [*fedavg_rounds, Phase(FINETUNE, self.finetune_epochs(settings), sources=False, step="local")]

    def local_round(
        self, client: LocalClient, state: ClientState | None, start: Tensor, broadcast: Tensor | None
    ) -> LocalReply | None:
        """The target's fine-tuning epoch from the global model it holds (a source: FedAvg's local training)."""
        if client.role != "target":
            return None
        one_epoch = replace(client.settings, epochs=1)
        if not self.hparams["head_only"]:
            return LocalReply(client.train(start, settings=one_epoch), state)
        model = client.space.model
        if state is None:  # the body is frozen: its features are computed once
            model.train()
            with torch.no_grad():
                state = {"features": model.features(client.data.inputs())}
        head = torch.cat(
            [
                torch.full((size,), name.startswith("head."), device=start.device)
                for name, size in zip(client.space.layer_names, client.space.layer_sizes)
            ]
        )
        data = ClientData(client.data.name, state["features"], client.data.labels())
        result = client.train(start[head], ParameterSpace(model.head), settings=one_epoch, data=data)
        update = torch.zeros_like(start)
        update[head] = result.update
        return LocalReply(LocalResult(update, result.steps, result.samples), state)
