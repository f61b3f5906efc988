"""KD3A (Feng et al. 2021): decentralised unsupervised multi-source domain adaptation by knowledge
distillation. It trains on the target's *unlabelled* training inputs (all of them, labels never read): the
tables mark it, as the papers mark KD3A "100% data".

Per round, from global parameters θ:
1. each source trains locally on its labelled data (θ_i = θ + g_i) and sends its model with its buffers;
2. the server forwards the source models to the target, which predicts its unlabelled inputs with each
   and forms the consensus knowledge by the *knowledge vote* (`knowledge_vote`) under a confidence gate
   that rises linearly over the rounds (0.8 → 0.95 by default);
3. the target trains from θ on the inputs that have knowledge, with mixup of inputs, soft labels and
   consensus weights (`train_on_knowledge`), and sends its update, its sample count and the domain weights
   of *consensus focus* (`consensus_focus`, `domain_weights`). It trains on about as many inputs as a
   source and, as KD3A trains every domain alike, with the sources' learning rate, batch size and local
   epochs (the target_* settings are for its few labelled samples, which KD3A does not use as such);
4. θ ← Σ_k α_k θ_k over the sources and the target, and buffers (BatchNorm statistics) likewise.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from fdabench.core.streams import stream
from fdabench.federation.checkpoint import loop_state, restore_loop
from fdabench.federation.client import (
    LocalSettings,
    batch_indices,
    evaluate,
    loss_function,
    make_optimizer,
    train_locally,
)
from fdabench.federation.parameters import ParameterSpace, average_buffers
from fdabench.federation.records import round_record
from fdabench.federation.rounds import COUNT_BYTES, build_cell_model, local_settings
from fdabench.federation.sites import client_generator
from fdabench.federation.validation import validation_metrics
from fdabench.methods.base import METHODS, Method

WEIGHT_BYTES = 4  # each domain weight the target reports (float32)


def knowledge_vote(probabilities: Tensor, gate: float) -> tuple[Tensor, Tensor]:
    """Knowledge vote (KD3A §3.2) over K sources' class probabilities (K, n, C) for n target inputs.

    Per input: the sources whose top probability reaches `gate` are confident; each votes for its top
    class; the consensus class has the most votes (ties: the larger summed confidence of its voters). The
    consensus knowledge is the mean probability vector of the confident sources that voted for it, and
    its support is their number (0, with zero knowledge, when no source is confident).
    Returns (knowledge (n, C), support (n,) integer)."""
    sources, _, classes = probabilities.shape
    confidence, predicted = probabilities.max(dim=2)  # (K, n)
    confident = confidence >= gate
    votes = F.one_hot(predicted, classes).to(probabilities.dtype) * confident[..., None]  # (K, n, C)
    counts = votes.sum(0)
    voter_confidence = (votes * confidence[..., None]).sum(0)  # < K + 1: only breaks ties between counts
    consensus = (counts + voter_confidence / (sources + 1)).argmax(dim=1)
    supporting = confident & (predicted == consensus[None])  # (K, n)
    support = supporting.sum(0)
    knowledge = (probabilities * supporting[..., None]).sum(0) / support.clamp(min=1)[:, None]
    return knowledge, support


def consensus_quality(probabilities: Tensor, gate: float) -> Tensor:
    """Q = Σ_x support(x) · max_c knowledge(x)_c: how many sources back the consensus, times its confidence."""
    knowledge, support = knowledge_vote(probabilities, gate)
    return (support * knowledge.max(dim=1).values).sum()


def consensus_focus(probabilities: Tensor, gate: float) -> Tensor:
    """Consensus focus (KD3A §3.3): CF_k = Q(all sources) − Q(all sources but k), clipped at 0 — how much
    source k adds to the consensus on the target (irrelevant or malicious sources add nothing)."""
    total = consensus_quality(probabilities, gate)
    keep = torch.ones(probabilities.shape[0], dtype=torch.bool, device=probabilities.device)
    focus = []
    for source in range(probabilities.shape[0]):
        keep[source] = False
        focus.append(total - consensus_quality(probabilities[keep], gate) if keep.any() else total)
        keep[source] = True
    return torch.stack(focus).clamp_min(0)


def domain_weights(focus: Tensor, source_counts: Tensor, target_count: int) -> Tensor:
    """KD3A's aggregation weights, sources then target: α_T = n_T / (n_T + Σ n_k) and
    α_k = (1 − α_T) · CF_k / Σ CF. Without any consensus (Σ CF = 0) the sources share 1 − α_T by sample
    count, as in FedAvg."""
    source_counts = source_counts.to(torch.float64)
    target_weight = target_count / (target_count + float(source_counts.sum()))
    focus = focus.to(torch.float64)
    shares = focus / focus.sum() if focus.sum() > 0 else source_counts / source_counts.sum()
    return torch.cat([(1 - target_weight) * shares, torch.tensor([target_weight], dtype=torch.float64)])


def confidence_gate(round_index: int, rounds: int, start: float, end: float) -> float:
    """The gate rises linearly from `start` (first round) to `end` (last round)."""
    return start if rounds <= 1 else start + (end - start) * round_index / (rounds - 1)


def train_on_knowledge(
    space: ParameterSpace,
    start: Tensor,
    inputs: Tensor,
    knowledge: Tensor,
    weights: Tensor,
    settings: LocalSettings,
    mixup_alpha: float,
    generator: torch.Generator,
    mixup_rng: np.random.Generator,
) -> Tensor:
    """Local training on consensus knowledge; returns the update. Per batch, mixup (Zhang et al. 2018):
    λ ~ Beta(a, a) and a random pairing of the batch mix inputs, soft labels and weights alike; the loss
    is the batch mean of weight · cross-entropy(soft label, prediction)."""
    model = space.model
    space.set(start)
    model.train()
    optimizer = make_optimizer(space.parameters, settings)
    for batch in batch_indices(len(inputs), settings.batch_size, settings.epochs, generator, inputs.device):
        x, target, weight = (
            (inputs, knowledge, weights) if batch is None else (inputs[batch], knowledge[batch], weights[batch])
        )
        if mixup_alpha > 0:
            lam = float(mixup_rng.beta(mixup_alpha, mixup_alpha))
            pair = torch.randperm(len(x), generator=generator).to(x.device)
            x = lam * x + (1 - lam) * x[pair]
            target = lam * target + (1 - lam) * target[pair]
            weight = lam * weight + (1 - lam) * weight[pair]
        optimizer.zero_grad()
        (weight * -(target * F.log_softmax(model(x), dim=1)).sum(dim=1)).mean().backward()
        optimizer.step()
    return space.get() - start


def combine_models(weights: Tensor, source_models: list[Tensor], target_model: Tensor) -> Tensor:
    """The server's step: θ = α_T θ_T + Σ_k α_k θ_k, the domain weights `weights` in (sources..., target)
    order. The models are all that the clients send besides their counts and the target's weights."""
    return weights[-1] * target_model + sum(w * p for w, p in zip(weights[:-1], source_models))


@METHODS.register
class KD3A(Method):
    """KD3A: knowledge vote, consensus focus, BatchNorm statistics in the weighted average, mixup (see the
    module docstring). Its BatchNorm MMD alignment term is not included."""

    name = "kd3a"
    family = "unsupervised"
    resumes = True
    description = (
        "unsupervised multi-source FDA by knowledge distillation on the target's unlabelled data "
        "(100% of its training inputs)"
    )
    uses_unlabelled_target = True
    hparams_schema = {
        "gate_start": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "confidence gate in the first round",
            "default": 0.8,
        },
        "gate_end": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "confidence gate in the last round",
            "default": 0.95,
        },
        "mixup_alpha": {
            "type": "number",
            "minimum": 0,
            "description": "mixup λ ~ Beta(a, a); 0 turns mixup off",
            "default": 0.2,
        },
        "consensus_focus": {
            "type": "boolean",
            "description": "source weights by consensus focus (false: by sample count)",
            "default": True,
        },
    }
    # KD3A: gate 0.8 → 0.95; mixup a = 0.2 (the mixup paper's ImageNet setting)

    def run(self, problem, settings, seed, device, on_round=None, checkpoints=None):

        if problem.task != "classification":
            raise ValueError(f"{self.name}: classification only")
        model = build_cell_model(problem, settings, seed, device)
        space = ParameterSpace(model)
        loss_fn = loss_function(problem.task)
        source_local, _ = local_settings(settings)
        sources = problem.sources
        # the target's training inputs, labelled and unlabelled, all used without labels
        unlabelled = torch.cat([problem.target_labelled.inputs(), problem.target_unlabelled.inputs()])
        hidden_labels = torch.cat([problem.target_labelled.labels(), problem.target_unlabelled.labels()])  # logs only
        source_counts = torch.tensor([len(s) for s in sources], dtype=torch.float32, device=device)
        generators = [client_generator(seed, index) for index in range(len(sources) + 1)]
        mixup_rng = np.random.default_rng(stream(seed, "kd3a_mixup"))
        model_bytes = space.update_bytes + sum(b.numel() * b.element_size() for b in space.buffers)
        global_params = space.get()
        records: list[dict[str, Any]] = []
        first_round = 0
        saved = checkpoints.load() if checkpoints is not None else None
        if saved is not None:
            global_params = saved["global_params"].to(device)
            space.set(global_params)
            space.set_buffers([buffer.to(device) for buffer in saved["buffers"]])
            mixup_rng.bit_generator.state = saved["mixup"]
            first_round, records = restore_loop(saved, generators, device)
        for round_index in range(first_round, settings.rounds):
            started = time.perf_counter()
            global_buffers = space.get_buffers()
            source_params, buffer_states, probabilities = [], [], []
            for index, data in enumerate(sources):
                space.set_buffers(global_buffers)
                source_params.append(
                    global_params
                    + train_locally(space, global_params, data, source_local, loss_fn, generators[index]).update
                )
                buffer_states.append(space.get_buffers())
            with torch.no_grad():  # at the target: each forwarded source model predicts the unlabelled inputs
                model.eval()
                for params, buffers in zip(source_params, buffer_states):
                    space.set(params)
                    space.set_buffers(buffers)
                    probabilities.append(torch.softmax(model(unlabelled), dim=1))
            probabilities = torch.stack(probabilities)
            gate = confidence_gate(round_index, settings.rounds, self.hparams["gate_start"], self.hparams["gate_end"])
            knowledge, support = knowledge_vote(probabilities, gate)
            kept = support > 0
            target_count = int(kept.sum())
            space.set_buffers(global_buffers)
            if target_count:
                target_update = train_on_knowledge(
                    space,
                    global_params,
                    unlabelled[kept],
                    knowledge[kept],
                    support[kept].to(knowledge.dtype) / len(sources),
                    source_local,
                    self.hparams["mixup_alpha"],
                    generators[-1],
                    mixup_rng,
                )
            else:
                target_update = torch.zeros_like(global_params)
            buffer_states.append(space.get_buffers())
            focus = (
                consensus_focus(probabilities, gate) if self.hparams["consensus_focus"] else torch.zeros(len(sources))
            )
            weights = domain_weights(focus, source_counts, target_count).to(global_params.dtype)
            global_params = combine_models(weights, source_params, global_params + target_update)
            space.set(global_params)
            if space.buffers:
                space.set_buffers(average_buffers(buffer_states, weights.to(device)))
            score = lambda data: evaluate(model, data, problem.task, settings.eval_batch_size)
            metrics = score(problem.target_test)
            pseudo_correct = int((knowledge[kept].argmax(dim=1) == hidden_labels[kept]).sum())
            # global model to every client, the source models forwarded to the target; models and counts
            # up, and the target's domain weights
            uplink = (len(sources) + 1) * (model_bytes + COUNT_BYTES) + (len(sources) + 1) * WEIGHT_BYTES
            downlink = (len(sources) + 1) * model_bytes + len(sources) * model_bytes
            record = round_record(
                round_index,
                "fda",
                {"accuracy": metrics["accuracy"], "loss": metrics["loss"], **validation_metrics(problem, score)},
                uplink,
                downlink,
                started,
                confidence_gate=gate,
                knowledge_fraction=target_count / len(unlabelled),
                knowledge_accuracy=pseudo_correct / target_count
                if target_count
                else None,  # diagnostic: hidden labels, never trained on
                consensus_focus=focus.tolist(),
                domain_weights=weights.tolist(),
            )
            records.append(record)
            if checkpoints is not None and checkpoints.due(round_index, settings.rounds):
                buffers, mixup = space.get_buffers(), mixup_rng.bit_generator.state
                checkpoints.save(
                    loop_state(
                        round_index + 1,
                        generators,
                        records,
                        device,
                        global_params=global_params,
                        buffers=buffers,
                        mixup=mixup,
                    )
                )
            if on_round is not None:
                on_round(record, settings.rounds)
        return {
            "metric": "accuracy",
            "model_size": space.size,
            "layer_names": list(space.layer_names),
            "sources": [s.name for s in sources],
            "rounds": records,
        }
