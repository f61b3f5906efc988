"""Federated adversarial domain alignment: f-DANN (`fdann`) and f-WDGRL (`fwdgrl`), the unsupervised baselines of
FedDaDiL (Castellon et al., ICASSP 2024, arXiv 2309.07670; extended as arXiv 2407.11647) after FADA's f-DANN (Peng
et al., ICLR 2020): labelled sources, an *unlabelled* target, each domain one client, and no raw input leaving it.

The centralised objectives, on features h = φ(x) of the model's body φ (`model.features`):

* DANN (Ganin et al., JMLR 2016): a domain classifier D (one logit, domain 0 = source, 1 = target) sits behind the
  gradient reversal layer R_λ, the identity forward with backward dR_λ/dh = −λ I; the model minimises
  L_y(head(h_s), y_s) + ½ [BCE(D(R_λ(h_s)), 0) + BCE(D(R_λ(h_t)), 1)], so D learns to tell the domains apart and φ,
  through −λ, to make them alike; λ_p = 2 / (1 + exp(−γ p)) − 1 with γ = 10 and p ∈ [0, 1] the training progress.
* WDGRL (Shen et al., AAAI 2018): a critic D estimates the Wasserstein-1 distance by maximising
  L_wd − γ L_grad, L_wd = mean D(h_s) − mean D(h_t), L_grad = mean over the points ĥ of (‖∇_ĥ D(ĥ)‖₂ − 1)², ĥ the
  interpolates h_s + α (h_t − h_s), α ~ U(0, 1), with h_s and h_t themselves (as the reference implementation,
  jvanvugt/pytorch-domain-adaptation wdgrl.py: k_critic = 5 critic steps on detached features, γ = 10, then one
  step of the model on L_y + w L_wd, w = 1; critic Adam at 1e-4).

What the papers say of the federated versions, in the text fdabench could read: FADA's Figure 1 caption, "models are
trained separately on each source domain and their gradients are aggregated with dynamic attention mechanism to
update the target model"; its introduction, that local data "cannot be shared, which hampers mainstream domain
adaptation methods as they need to access both the labeled source and unlabeled target data". The abstract of arXiv
2407.11647 compares FedDaDiL with "existing decentralized MSDA techniques" and their robustness "to client
parallelism". How f-DANN and f-WDGRL exchange information is not said in that text. The protocol below is therefore
fdabench's, each choice marked (docs/methods.md):

1. The model gains the domain head D on its features (`prepare_model`: an MLP with one output, part of θ, averaged).
2. The target trains on all its training inputs with every label removed (`target_split = "unlabelled"`) and sends,
   beside its update, the features of `bank_size` of its inputs under its new local model (evenly spaced over its
   inputs, shifted by the round: fdabench's choice). The server keeps them and broadcasts them in the next round
   (round 0: no bank), with the round, the round budget and whether D has met a bank yet (`HEADER`).
3. A source trains on its batch loss with the bank as the target batch (a seeded draw of as many bank rows as its
   batch): f-DANN L_y + ½ [BCE(D(R_λ(h_s)), 0) + BCE(D(h_bank), 1)]; f-WDGRL k_critic critic steps on (h_s detached,
   h_bank), then L_y + w (mean D(h_s) − mean D(h_bank)) with D frozen. Round 0 (no bank): L_y alone.
4. The target trains φ alone on its own term of the same objective, D frozen (it holds one domain, so it cannot train
   a domain classifier): f-DANN ½ BCE(D(R_λ(h_t)), 1) (the reversal makes φ move its features to where D says
   "source"), f-WDGRL −w mean D(h_t); before D has met a bank its loss is 0 (no step: D is still random).
5. The server takes FedAvg of every training client's update by sample count, the target's included
   (`aggregation: clients`), or of the sources' only (`aggregation: sources`).

λ_p uses p = r / R (round r of R, 0-based: constant within a round). What leaves a client: its update, its sample
count, and from the target the features of `bank_size` inputs (float32, `bank_size × feature_dim`); the server sends
θ and the broadcast (the same to every training client). Never a raw input, and the target's labels are not even
on the target's training data.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fdabench.federation.client import adam
from fdabench.federation.client_state import ClientState, LocalClient, LocalReply
from fdabench.federation.problem import ClientData
from fdabench.methods.base import (
    METHODS,
    Aggregate,
    LocalContext,
    Objective,
    Phase,
    Roles,
    RoundInputs,
    RoundLoopMethod,
    TrainSettings,
)
from fdabench.tensor_math.aggregation import fedavg

#: the broadcast's leading entries: round index, round budget, bank rows, feature width, D has met a bank (0/1)
HEADER = 5
SOURCE_DOMAIN, TARGET_DOMAIN = 0.0, 1.0  # DANN's domain labels (Ganin et al.: d = 0 source, d = 1 target)


# -- the math ------------------------------------------------------------------------------------------------------
class _GradientReversal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, lam: float) -> Tensor:
        ctx.lam = lam
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        return grad * -ctx.lam, None


def reverse_gradient(x: Tensor, lam: float) -> Tensor:
    """DANN's gradient reversal layer R_λ: R_λ(x) = x forward, dR_λ/dx = −λ I backward."""
    return _GradientReversal.apply(x, lam)


def grl_lambda(progress: float, gamma: float = 10.0) -> float:
    """DANN's schedule λ_p = 2 / (1 + exp(−γ p)) − 1 (Ganin et al. 2016: γ = 10), p ∈ [0, 1] the training progress."""
    return 2.0 / (1.0 + math.exp(-gamma * progress)) - 1.0


def domain_loss(logits: Tensor, domain: float) -> Tensor:
    """Mean binary cross-entropy of one-logit domain predictions against one domain label (0 source, 1 target)."""
    logits = logits.reshape(-1)
    return F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, domain))


def dann_domain_loss(source_logits: Tensor, target_logits: Tensor) -> Tensor:
    """½ [BCE(D(h_s), 0) + BCE(D(h_t), 1)]: the domain loss of equal source and target batches."""
    return 0.5 * (domain_loss(source_logits, SOURCE_DOMAIN) + domain_loss(target_logits, TARGET_DOMAIN))


def critic_objective(
    critic: Callable[[Tensor], Tensor], source: Tensor, target: Tensor, alpha: Tensor
) -> tuple[Tensor, Tensor]:
    """WDGRL's (L_wd, L_grad) on paired features (B, d): L_wd = mean D(h_s) − mean D(h_t); L_grad = the mean over
    the interpolates h_s + α (h_t − h_s) (α: (B, 1)), h_s and h_t of (‖∇D‖₂ − 1)², each point's gradient norm taken
    over its d features. The critic maximises L_wd − γ L_grad (`critic_cost`)."""
    wasserstein = critic(source).mean() - critic(target).mean()
    points = torch.cat([source + alpha * (target - source), source, target]).detach().requires_grad_(True)
    (gradient,) = torch.autograd.grad(critic(points).sum(), points, create_graph=True)
    return wasserstein, (gradient.norm(dim=1) - 1).square().mean()


def critic_cost(wasserstein: Tensor, penalty: Tensor, gamma: float) -> Tensor:
    """What the critic minimises: −L_wd + γ L_grad."""
    return gamma * penalty - wasserstein


def bank_indices(samples: int, rows: int, round_index: int) -> Tensor:
    """`rows` positions evenly spaced over `samples` (each repeated when rows > samples), shifted by the round."""
    return (torch.arange(rows) * samples // rows + round_index) % samples


def frozen(module: nn.Module) -> Callable[[Tensor], Tensor]:
    """`module` as a function of its input only: its parameters enter detached, so no gradient reaches them."""
    values = {name: p.detach() for name, p in module.named_parameters()} | dict(module.named_buffers())
    return lambda x: torch.func.functional_call(module, values, (x,))


def domain_head(width: int, hidden: list[int]) -> nn.Sequential:
    """An MLP from the features (width) to one output: Linear and ReLU per hidden width, then Linear(·, 1)."""
    layers: list[nn.Module] = []
    for size in hidden:
        layers += [nn.Linear(width, size), nn.ReLU()]
        width = size
    return nn.Sequential(*layers, nn.Linear(width, 1))


# -- the broadcast -------------------------------------------------------------------------------------------------
class Received(NamedTuple):
    """What a client reads off the server's broadcast."""

    round_index: int
    rounds: int
    bank: Tensor | None  # (rows, d) target features of the previous round
    head_trained: bool  # D of the global model has met a bank (the sources trained it against target features)

    @property
    def progress(self) -> float:
        return self.round_index / max(self.rounds, 1)


def pack_broadcast(
    round_index: int, rounds: int, bank: Tensor | None, head_trained: bool, width: int, device
) -> Tensor:
    """The header (`HEADER` floats) followed by the bank, flat."""
    rows = 0 if bank is None else bank.numel() // width
    header = torch.tensor([round_index, rounds, rows, width, float(head_trained)], dtype=torch.float32, device=device)
    return header if bank is None else torch.cat([header, bank.reshape(-1).to(device)])


def read_broadcast(broadcast: Tensor | None) -> Received | None:
    """What `pack_broadcast` packed (None: no broadcast)."""
    if broadcast is None:
        return None
    round_index, rounds, rows, width, trained = (int(v) for v in broadcast[:HEADER].tolist())
    bank = broadcast[HEADER:].view(rows, width) if rows else None
    return Received(round_index, rounds, bank, bool(trained))


def _pair_generator(data: ClientData, round_index: int) -> torch.Generator:
    """The draws a source makes in one round (bank rows, WDGRL's α), seeded by its name and the round: the same in
    this process and at its Flower site, and after a resume."""
    return torch.Generator().manual_seed(zlib.crc32(f"{data.name}:{round_index}".encode()))


# -- the methods ---------------------------------------------------------------------------------------------------
class _FederatedAdversarial(RoundLoopMethod):
    """The shared protocol (module docstring): the domain head, the target's feature bank as its message and the
    server's broadcast, FedAvg. Subclasses give the sources' and the target's batch losses."""

    family = "unsupervised"
    # the target trains on its inputs, unlabelled; every client trains its own round (`local_round`: the broadcast
    # reaches the batch losses; the target's bank is its message, which a Flower server takes from a method with
    # client-side state), though none keeps state between rounds (`client_state` is None)
    roles = Roles(target="unlabelled", unlabelled=True, state="all")
    head_hidden_key: ClassVar[str]
    common_schema: ClassVar[dict[str, Any]] = {
        "bank_size": {
            "type": "integer",
            "minimum": 1,
            "description": "target feature vectors the target sends each round and the server broadcasts (fdabench's "
            "choice; the papers do not say what is exchanged)",
            "default": 256,
        },
        "aggregation": {
            "enum": ["clients", "sources"],
            "description": "the server's FedAvg by sample count over every training client, the target's update (of "
            "its features only) included, or over the sources only (fdabench's choice: the papers do not say)",
            "default": "clients",
        },
    }

    def __init__(self, hparams: dict[str, Any] | None = None):
        super().__init__(hparams)
        self.rounds = 1
        self.width = 0
        self.device = torch.device("cpu")
        self._reset()
        self._received: Tensor | None = None  # at a client: this round's broadcast (`local_round`)
        self._target: LocalContext | None = None  # at the target: what it trains on this round

    def _reset(self) -> None:
        self.next_round, self.bank, self.head_trained = 0, None, False

    # -- the model and the server --------------------------------------------------------------------------------
    def prepare_model(self, model: nn.Module, problem: Any) -> nn.Module:
        if not hasattr(model, "features") or not hasattr(model, "feature_dim"):
            raise ValueError(f"{self.name} needs a model with a body `features` and its width `feature_dim`")
        self.width = int(model.feature_dim)
        self.device = next(model.parameters()).device
        model.add_module("domain", domain_head(self.width, list(self.hparams[self.head_hidden_key])).to(self.device))
        self._reset()
        return model

    def phases(self, settings: TrainSettings, has_sources: bool) -> list[Phase]:
        self.rounds = settings.rounds  # the round budget, in the broadcast
        return super().phases(settings, has_sources)

    def broadcast(self) -> Tensor:
        """The round, the budget, the last target bank and whether D has met a bank (asked once per round)."""
        sent = pack_broadcast(self.next_round, self.rounds, self.bank, self.head_trained, self.width, self.device)
        self.head_trained = self.head_trained or self.bank is not None
        self.next_round += 1
        return sent

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        if inputs.target_message is not None:
            self.bank = inputs.target_message
        updates, counts = inputs.source_updates, inputs.source_counts
        if self.hparams["aggregation"] == "clients" and inputs.target_update is not None:
            updates = torch.cat([updates, inputs.target_update[None]])
            counts = torch.cat([counts, counts.new_tensor([inputs.target_count])])
        return Aggregate(fedavg(updates, counts), self.round_log(inputs))

    def round_log(self, inputs: RoundInputs) -> dict[str, Any]:
        return {}

    def message_shapes(self) -> set[tuple[int, ...]]:
        bank = self.hparams["bank_size"] * self.width
        return {(HEADER,), (HEADER + bank,), (bank,)}

    @property
    def round_state(self) -> dict[str, Any]:
        return {"next_round": self.next_round, "bank": self.bank, "head_trained": self.head_trained}

    @round_state.setter
    def round_state(self, state: dict[str, Any]) -> None:
        self.next_round, self.bank, self.head_trained = state["next_round"], state["bank"], state["head_trained"]

    # -- the clients ---------------------------------------------------------------------------------------------
    def local_round(
        self, client: LocalClient, state: ClientState | None, start: Tensor, broadcast: Tensor | None
    ) -> LocalReply:
        """Every client trains under its objective (`local_objective`) with this round's broadcast; the target
        sends its feature bank beside its update."""
        self._received, self._target = broadcast, None
        result = client.train(start, batch_loss=self.local_objective(client.context).batch_loss)
        context, self._target = self._target, None
        if context is None:  # a source: its update only
            return LocalReply(result, None)
        return LocalReply(result, None, message=self.feature_bank(context))

    def local_objective(self, context: LocalContext) -> Objective:
        """A source: the task loss with its adversarial term against the bank (the task loss alone in round 0, with
        no target features yet). The target: its own term of the objective (no step before D has met a bank)."""
        if context.role == "source":
            received = read_broadcast(self._received)
            if received is None or received.bank is None:
                return Objective()
            return Objective(self.source_loss(context.loss_fn, received))
        self._target = context
        received = read_broadcast(context.inputs.broadcast)
        if received is None or not received.head_trained:  # D is still random: no step, only the bank is sent
            return Objective(lambda model, data, index: torch.zeros((), device=self.device, requires_grad=True))
        return Objective(self.target_loss(received))

    def feature_bank(self, context: LocalContext) -> Tensor:
        """The target's message: the features of `bank_size` of its inputs under its new local model, flat."""
        model, data = context.space.model, context.data
        positions = bank_indices(len(data), self.hparams["bank_size"], context.inputs.round_index)
        training = model.training
        model.eval()
        with torch.no_grad():
            features = model.features(data.inputs(positions.to(data.x.device)))
        model.train(training)
        return features.reshape(-1).float()

    def source_loss(self, loss_fn, received: Received):
        raise NotImplementedError

    def target_loss(self, received: Received):
        raise NotImplementedError


def _paired(bank: Tensor, size: int, generator: torch.Generator) -> Tensor:
    """`size` bank rows drawn uniformly with replacement: the target batch paired with a source batch."""
    return bank[torch.randint(len(bank), (size,), generator=generator).to(bank.device)]


@METHODS.register
class FederatedDANN(_FederatedAdversarial):
    """f-DANN: DANN's domain classifier behind the gradient reversal layer, split over the clients (module doc)."""

    name = "fdann"
    description = (
        "federated DANN: sources align their features with the target's broadcast features through a gradient "
        "reversal layer; the target fools the averaged domain classifier; FedAvg"
    )
    head_hidden_key = "domain_hidden"
    hparams_schema = {
        "domain_hidden": {
            "type": "array",
            "items": {"type": "integer", "minimum": 1},
            "description": "hidden widths of the domain classifier on the features (one logit); fdabench's choice: "
            "the widths of the WDGRL reference implementation's critic",
            "default": [50, 20],
        },
        "domain_weight": {
            "type": "number",
            "minimum": 0,
            "description": "weight of the domain loss beside the task loss (DANN: 1)",
            "default": 1.0,
            "search": {"log_uniform": [0.1, 10.0]},
        },
        "schedule_gamma": {
            "type": "number",
            "minimum": 0,
            "description": "γ of λ_p = 2/(1 + exp(−γ p)) − 1, p = round / rounds (Ganin et al. 2016: 10)",
            "default": 10.0,
        },
        **_FederatedAdversarial.common_schema,
    }

    def lam(self, received: Received) -> float:
        return grl_lambda(received.progress, self.hparams["schedule_gamma"])

    def round_log(self, inputs: RoundInputs) -> dict[str, Any]:
        return {"grl_lambda": grl_lambda(inputs.round_index / max(self.rounds, 1), self.hparams["schedule_gamma"])}

    def source_loss(self, loss_fn, received: Received):
        lam, weight, bank = self.lam(received), self.hparams["domain_weight"], received.bank
        generators: dict[str, torch.Generator] = {}

        def batch_loss(model, data, index):
            features = model.features(data.inputs(index))
            generator = generators.setdefault("draws", _pair_generator(data, received.round_index))
            target = _paired(bank, len(features), generator)
            domains = dann_domain_loss(model.domain(reverse_gradient(features, lam)), model.domain(target))
            return loss_fn(model.head(features), data.labels(index)) + weight * domains

        return batch_loss

    def target_loss(self, received: Received):
        lam, weight = self.lam(received), self.hparams["domain_weight"]

        def batch_loss(model, data, index):
            logits = frozen(model.domain)(reverse_gradient(model.features(data.inputs(index)), lam))
            return weight * 0.5 * domain_loss(logits, TARGET_DOMAIN)

        return batch_loss


@METHODS.register
class FederatedWDGRL(_FederatedAdversarial):
    """f-WDGRL: WDGRL's critic with gradient penalty, split over the clients (module docstring)."""

    name = "fwdgrl"
    description = (
        "federated WDGRL: sources train a Wasserstein critic (gradient penalty) against the target's broadcast "
        "features and shrink the estimated distance; the target moves towards the sources under the averaged critic"
    )
    head_hidden_key = "critic_hidden"
    hparams_schema = {
        "critic_hidden": {
            "type": "array",
            "items": {"type": "integer", "minimum": 1},
            "description": "hidden widths of the critic on the features (one output; the reference implementation: "
            "50, 20)",
            "default": [50, 20],
        },
        "critic_steps": {
            "type": "integer",
            "minimum": 0,
            "description": "critic steps per batch before the model's step (k_critic; the reference: 5)",
            "default": 5,
        },
        "critic_lr": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "the critic's Adam learning rate (the reference: 1e-4), a fresh optimiser every round",
            "default": 1e-4,
            "search": {"log_uniform": [1e-5, 1e-2]},
        },
        "penalty_weight": {
            "type": "number",
            "minimum": 0,
            "description": "γ, the gradient penalty's weight in the critic's objective (the reference: 10)",
            "default": 10.0,
        },
        "wd_weight": {
            "type": "number",
            "minimum": 0,
            "description": "w, the weight of the estimated distance in the model's loss (the reference: wd_clf = 1)",
            "default": 1.0,
            "search": {"log_uniform": [0.1, 10.0]},
        },
        **_FederatedAdversarial.common_schema,
    }

    def source_loss(self, loss_fn, received: Received):
        bank, steps, gamma, weight = (
            received.bank,
            self.hparams["critic_steps"],
            self.hparams["penalty_weight"],
            self.hparams["wd_weight"],
        )
        held: dict[str, Any] = {}  # this round's draws and critic optimiser, made at the first batch

        def batch_loss(model, data, index):
            features = model.features(data.inputs(index))
            if not held:
                held["draws"] = _pair_generator(data, received.round_index)
                held["optimiser"] = adam(model.domain.parameters(), self.hparams["critic_lr"])
            target = _paired(bank, len(features), held["draws"])
            train_critic(model.domain, held["optimiser"], features.detach(), target, steps, gamma, held["draws"])
            critic = frozen(model.domain)
            distance = critic(features).mean() - critic(target).mean()
            return loss_fn(model.head(features), data.labels(index)) + weight * distance

        return batch_loss

    def target_loss(self, received: Received):
        weight = self.hparams["wd_weight"]

        def batch_loss(model, data, index):
            return -weight * frozen(model.domain)(model.features(data.inputs(index))).mean()

        return batch_loss


def train_critic(
    critic: nn.Module,
    optimiser: torch.optim.Optimizer,
    source: Tensor,
    target: Tensor,
    steps: int,
    gamma: float,
    generator: torch.Generator,
) -> None:
    """`steps` optimiser steps of the critic on −L_wd + γ L_grad of fixed (detached) features, a fresh α ~ U(0, 1) per
    pair and step; the critic's gradients are cleared after, so the model's own step leaves it as it is."""
    parameters = list(critic.parameters())
    for _ in range(steps):
        alpha = torch.rand(len(source), 1, generator=generator).to(source.device)
        optimiser.zero_grad()
        critic_cost(*critic_objective(critic, source, target, alpha), gamma).backward(inputs=parameters)
        optimiser.step()
    for parameter in parameters:
        parameter.grad = None
