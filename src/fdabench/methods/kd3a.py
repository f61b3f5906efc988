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

On the round loop (`federation.rounds`): the sources train plainly; the target's round is its `local_round`, handed
the forwarded source updates and buffers (its `delivery`); its
mixup generator is its client state (kept at its site and in checkpoints); its message is the domain weights, its
`statistics` the round's diagnostics for the record (not counted in bytes, as before); the server sets θ itself
(`Aggregate.params`) and weighs the buffers by the domain weights (`Aggregate.buffer_weights`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from fdabench.core.streams import SEED_STRIDE, Purpose, register_purpose
from fdabench.federation.client import LocalResult, LocalSettings, batch_indices, make_optimizer
from fdabench.federation.client_state import ClientState, LocalClient, LocalReply
from fdabench.federation.delivery import Delivery
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.rule_interface import Phase
from fdabench.methods.base import METHODS, Aggregate, Roles, RoundInputs, RoundLoopMethod, TrainSettings, default_phases
from fdabench.methods.unlabelled_target import encode_generator, like_a_source, mixup_generator

WEIGHT_BYTES = 4  # each domain weight the target reports (float32)
#: the target's mixup coefficients (numpy; the cell's seed)
MIXUP_STREAM = register_purpose("kd3a_mixup", Purpose(SEED_STRIDE, 199_999, 0, "KD3A's mixup coefficients (numpy)"))


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
    return torch.cat([(1 - target_weight) * shares, shares.new_tensor([target_weight])])


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
) -> tuple[Tensor, int]:
    """Local training on consensus knowledge; returns (the update, its optimiser steps). Per batch, mixup (Zhang et
    al. 2018): λ ~ Beta(a, a) and a random pairing of the batch mix inputs, soft labels and weights alike; the loss
    is the batch mean of weight · cross-entropy(soft label, prediction)."""
    model = space.model
    space.set(start)
    model.train()
    optimizer = make_optimizer(space.parameters, settings)
    steps = 0
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
        steps += 1
    return space.get() - start, steps


def combine_models(weights: Tensor, source_models: list[Tensor], target_model: Tensor) -> Tensor:
    """The server's step: θ = α_T θ_T + Σ_k α_k θ_k, the domain weights `weights` in (sources..., target)
    order. The models are all that the clients send besides their counts and the target's weights."""
    return weights[-1] * target_model + sum(w * p for w, p in zip(weights[:-1], source_models))


@METHODS.register
class KD3A(RoundLoopMethod):
    """KD3A: knowledge vote, consensus focus, BatchNorm statistics in the weighted average, mixup (see the
    module docstring). Its BatchNorm MMD alignment term is not included."""

    name = "kd3a"
    family = "unsupervised"
    description = (
        "unsupervised multi-source FDA by knowledge distillation on the target's unlabelled data "
        "(100% of its training inputs)"
    )
    # the target trains on every training input (labelled and unlabelled; `knowledge_accuracy` alone reads the labels,
    # at the target, as a diagnostic), after the sources, on their forwarded models with their buffers; it keeps its
    # mixup generator between rounds (the client state: at its site over Flower, in checkpoints); the sources train
    # plainly (`local_round` is the target's own)
    roles = Roles(target="all", unlabelled=True, state="target")
    delivery = Delivery(source_updates=True, source_buffers=True)
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

    def prepare_model(self, model: torch.nn.Module, problem: Any) -> torch.nn.Module:
        if problem.task != "classification":
            raise ValueError(f"{self.name}: classification only")
        self.sources = len(getattr(problem, "sources", ()))
        return model

    def phases(self, settings: TrainSettings, has_sources: bool) -> list[Phase]:
        """KD3A trains every domain alike: the target with the sources' learning rate, batch size and local epochs."""
        return default_phases(self, settings, has_sources, fda_settings=like_a_source(settings))

    def update_bytes(self, space: ParameterSpace, phase: Phase) -> int:
        """Models cross with their buffers (BatchNorm statistics), both ways and to the target."""
        return space.update_bytes + sum(b.numel() * b.element_size() for b in space.buffers)

    def message_shapes(self) -> set[tuple[int, ...]]:
        return {(getattr(self, "sources", 0) + 1,)}  # the domain weights

    # -- the target's round (steps 2 and 3 of the module docstring) ---------------------------------------------
    def local_round(
        self, client: LocalClient, state: ClientState | None, start: Tensor, broadcast: Tensor | None
    ) -> LocalReply | None:
        if client.role != "target":
            return None  # a source trains on its labelled data
        inputs: RoundInputs = client.inputs
        space, data = client.space, client.data
        mixup_rng = mixup_generator(state, client.seed, MIXUP_STREAM)
        if inputs.source_updates is None:  # no source answered: no knowledge, no step
            zero = torch.zeros_like(start)
            return LocalReply(LocalResult(zero, 0, len(data)), encode_generator(mixup_rng))
        model, sources = space.model, len(inputs.source_updates)
        global_buffers = space.get_buffers()
        unlabelled = data.inputs()
        probabilities = []
        with torch.no_grad():  # each forwarded source model predicts the unlabelled inputs
            model.eval()
            for index, update in enumerate(inputs.source_updates):
                space.set(inputs.global_params + update)
                space.set_buffers(inputs.source_buffers[index] if inputs.source_buffers else [])
                probabilities.append(torch.softmax(model(unlabelled), dim=1))
        probabilities = torch.stack(probabilities)
        gate = self.gate(inputs)
        knowledge, support = knowledge_vote(probabilities, gate)
        kept = support > 0
        target_count = int(kept.sum())
        space.set_buffers(global_buffers)
        steps = 0
        if target_count:
            target_update, steps = train_on_knowledge(
                space,
                inputs.global_params,
                unlabelled[kept],
                knowledge[kept],
                support[kept].to(knowledge.dtype) / sources,
                client.settings,
                self.hparams["mixup_alpha"],
                client.generator,
                mixup_rng,
            )
        else:
            target_update = torch.zeros_like(inputs.global_params)
        focus = consensus_focus(probabilities, gate) if self.hparams["consensus_focus"] else torch.zeros(sources)
        weights = domain_weights(focus, inputs.source_counts, target_count).to(inputs.global_params.dtype)
        report = {
            "consensus_focus": focus.reshape(-1),
            "knowledge_fraction": torch.tensor(target_count / len(unlabelled), dtype=torch.float64),
        }
        if target_count:  # diagnostic: the hidden labels, never trained on
            correct = int((knowledge[kept].argmax(dim=1) == data.labels()[kept]).sum())
            report["knowledge_accuracy"] = torch.tensor(correct / target_count, dtype=torch.float64)
        return LocalReply(
            LocalResult(target_update, steps, len(data)),
            encode_generator(mixup_rng),
            message=weights,
            statistics=Knowledge(report),
        )

    def gate(self, inputs: RoundInputs) -> float:
        return confidence_gate(
            inputs.round_index, inputs.settings.rounds, self.hparams["gate_start"], self.hparams["gate_end"]
        )

    # -- the server (step 4) ------------------------------------------------------------------------------------
    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        weights, report = inputs.target_message, inputs.target_statistics.values
        source_models = [inputs.global_params + update for update in inputs.source_updates]
        params = combine_models(weights, source_models, inputs.global_params + inputs.target_update)
        accuracy = report.get("knowledge_accuracy")
        log = {
            "confidence_gate": self.gate(inputs),
            "knowledge_fraction": float(report["knowledge_fraction"]),
            "knowledge_accuracy": None if accuracy is None else float(accuracy),
            "consensus_focus": report["consensus_focus"].tolist(),
            "domain_weights": weights.tolist(),
        }
        return Aggregate(params - inputs.global_params, log, params=params, buffer_weights=weights)


class Knowledge:
    """What the target reports beside its update and domain weights, for the record: the consensus focus, the share
    of its inputs with knowledge and (diagnostic) the knowledge's accuracy, as named tensors (`estimates`)."""

    def __init__(self, values: dict[str, Tensor]):
        self.values = values

    def estimates(self) -> dict[str, Tensor]:
        return self.values
