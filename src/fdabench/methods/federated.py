"""Federated-learning baselines trained on the sources and evaluated on the target: FedProx, and
Finetune_Offline (source FedAvg, then the target fine-tunes alone)."""

from __future__ import annotations

import time

import torch

from fdabench.federation.client import LocalSettings, Proximal, evaluate, loss_function, train_locally
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import ClientData
from fdabench.federation.records import round_record
from fdabench.federation.rounds import build_cell_model, local_settings, round_budget, run_rounds
from fdabench.federation.sites import client_generator
from fdabench.federation.validation import validation_metrics
from fdabench.methods.base import METHODS, Aggregate, Method, RoundInputs, RoundLoopMethod
from fdabench.methods.baselines import SourceOnly
from fdabench.tensor_math.aggregation import fedavg


@METHODS.register
class FedProx(RoundLoopMethod):
    """FedProx (Li et al. 2020): FedAvg over the sources (θ += Σ w_i g_i) where each source minimises its
    loss plus (μ/2)‖θ − θ^t‖² (Eq. 2) locally. As the FDA papers' baseline, the target does not train; the
    global model is evaluated on it. μ = 0 is FedAvg (`source_only`)."""

    name = "fedprox"
    family = "federated"
    description = "FedAvg over the sources with FedProx's proximal term in local training; evaluated on the target"
    target_split = None
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

    def local_proximal(self) -> Proximal | None:
        return Proximal(self.hparams["mu"]) if self.hparams["mu"] > 0 else None

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        return Aggregate(fedavg(inputs.source_updates, inputs.source_counts))


@METHODS.register
class FinetuneOffline(Method):
    """Finetune_Offline: `source_only` (FedAvg over the sources) for the whole round budget, then the target
    fine-tunes the final global model alone on its labelled samples, one record (phase "finetune") per
    epoch. Each epoch is one local training call of the target's settings, exactly a `target_only` round
    started from the source model (fresh optimiser per call, as every local call here); nothing crosses a
    client boundary while fine-tuning. `head_only` freezes the body (`features`) and trains `head` alone."""

    name = "finetune_offline"
    family = "baseline"
    description = "source FedAvg for the whole budget, then the target fine-tunes locally"
    resumes = True  # the FedAvg rounds resume from a checkpoint; the (short) fine-tuning reruns
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

    def run(self, problem, settings, seed, device, on_round=None, checkpoints=None):
        epochs = self.finetune_epochs(settings)
        _, fedavg_rounds = round_budget(SourceOnly(), settings, bool(problem.sources))
        total_rounds = fedavg_rounds + epochs
        progress = None if on_round is None else (lambda record, _total: on_round(record, total_rounds))
        model = build_cell_model(problem, settings, seed, device)
        history = run_rounds(
            SourceOnly(), problem, settings, seed, device, progress, model=model, checkpoints=checkpoints
        )
        loss_fn = loss_function(problem.task)
        metric = history["metric"]
        _, target_local = local_settings(settings)
        one_epoch = LocalSettings(
            target_local.lr,
            target_local.batch_size,
            1,
            target_local.optimizer,
            target_local.momentum,
            target_local.weight_decay,
        )
        generator = client_generator(seed, len(problem.sources))  # the target's stream, as in the round loop
        data = problem.target_labelled
        if self.hparams["head_only"]:
            model.train()
            with torch.no_grad():  # the body is frozen: its features are computed once
                data = ClientData(data.name, model.features(data.inputs()), data.labels())
            space = ParameterSpace(model.head)
        else:
            space = ParameterSpace(model)
        params = space.get()
        for epoch in range(epochs):
            started = time.perf_counter()
            params = params + train_locally(space, params, data, one_epoch, loss_fn, generator).update
            space.set(params)
            score = lambda split: evaluate(model, split, problem.task, settings.eval_batch_size)
            metrics = score(problem.target_test)
            record = round_record(
                fedavg_rounds + epoch,
                "finetune",
                {metric: metrics[metric], "loss": metrics["loss"], **validation_metrics(problem, score)},
                0,
                0,
                started,
            )
            history["rounds"].append(record)
            if progress is not None:
                progress(record, total_rounds)
        return history
