"""Co-MDA (Liu, Xi, Li, Xu, Bai, Zhao, "Co-MDA: Federated multisource domain adaptation on black-box models", IEEE
TCSVT 2023): multi-source domain adaptation where each source is a *black box*: it answers the target's queries with
class probabilities and shares neither data, parameters nor gradients. The target is unlabelled (it trains on all its
training inputs, every label removed: `target_split = "unlabelled"`, marked like KD3A). The protocol is the authors'
code (github:Xinhui-99/CoMDA at b15662d; `main.py` is the epoch loop, `train/train.py` the steps, `lib/utils/loss.py`
the weights and the sample selection); one round here is one of its epochs.

Per round r of R (0-based):

1. Each source trains its own model (its client state, never averaged, never sent) on its labelled data for its local
   epochs (`source_train`, train.py:10-56), then answers the queries the server broadcast: softmax probabilities
   out_k (n_T × C) on the target's n_T training inputs (`visual_source`, train.py:213-249). It sends nothing else: no
   update crosses (`update_bytes` is 0).
2. The server forwards the answers to the target (its `delivery`). The target keeps, per source, a
   temporal ensemble Z_k ← α_z Z_k + (1 − α_z) out_k, bias-corrected z_k = Z_k / (1 − α_z^(u+2)) at its u-th update
   (0-based); as in the code, z_k becomes the next Z_k (main.py:374 keeps the corrected value; train.py:251-253)
   (`temporal_ensemble`).
3. Source weights from the between-class variance of each ensemble under the source's current hard predictions
   ŷ = argmax out_k (Otsu's criterion; train.py:256-279): with n_c the inputs predicted c, s_c = mean_n z_nc,
   pos_c = Σ_{ŷ_n = c} z_nc / (n_c + 0.001), neg_c = Σ_{ŷ_n ≠ c} z_nc / (n − n_c + 0.001),
   icvar = Σ_c n_c (pos_c − s_c)² / n + Σ_c (n − n_c)(neg_c − s_c)² / n (`icvar`), and
   w = softmax(p · icvar) (loss.py:29-36) (`source_weights`).
4. From round `warm_target` on (main.py:388), the target trains its two networks A and B in turn, each with the other
   as its peer (main.py:392-408; `train_cotaught`): per batch, the pseudo-label P = (1 − a) Σ_k w_k z_k + a ·
   softmax(f(x)) of the network f being trained, a = 0 while r ≤ round(R/2), else (2r − R)/R (train.py:75-78,
   `label_mixing`); the peer's per-input cross-entropy against argmax P keeps the ⌈(1 − (1 − a) ρ_r)·B⌉ inputs of
   smallest loss (co-teaching, loss.py:39-58, `remembered`), the forget rate ρ_r rising linearly from 0 to ρ over the
   first `warm_target + num_gradual` rounds (main.py:350-351, `forget_rate`); mixup of the kept inputs and their one-hot
   pseudo-labels with λ = max(λ₀, 1 − λ₀), λ₀ ~ Beta(β, β), over a random pairing; loss
   α_mix · mean(−Σ_c ỹ_c log softmax(f(x̃))_c), the only target loss (train.py:113-134: the co-teaching
   cross-entropy is computed and discarded).
5. Prediction: argmax of softmax(A(x)) + softmax(B(x)) (train.py:150-160): the model fdabench evaluates is the pair
   (`CoTaughtPair`, log of the mean of the two softmax outputs).

What fdabench records, and its choices: the target's training inputs reach the sources as the queries of their black
boxes (the protocol's own premise: the code applies each source model to the target's images, train.py:213-249). The
target sends them to the server in any round in which it received no answer (its first), and the server broadcasts
them to the sources every round (not to the target: `delivery`): the bytes count n_T inputs down to every source each
round, n_T × C probabilities up from each and forwarded to the target, as a deployment that queries every epoch sends
(the code queries every epoch). The target's labels never leave it (it holds none). The code's quirks kept as the
protocol: the corrected ensemble carried forward; the target's classifier heads never stepped (train.py:138,
`classifier_optimizer.step` without a call: `train_target_head` False trains the bodies only; a model whose body has no
parameters trains whole). fdabench's conventions instead of the code's: a fresh optimiser per local call (the code keeps
SGD's momentum across epochs), the sources' local epochs per round (the code: `epoch_samples / batch_size` batches), the
target's nets initialised independently from the cell's model (B re-initialised from a seed derived from A's initial
parameters), the final round's metric (the code reports the best test accuracy over epochs, `maxaccAB`).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fdabench.core.streams import SEED_STRIDE, Purpose, register_purpose, tensor_seed
from fdabench.federation.client import LocalResult, LocalSettings, batch_indices, make_optimizer
from fdabench.federation.client_state import ClientState, LocalClient, LocalReply, View
from fdabench.federation.delivery import Delivery
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.rule_interface import Phase
from fdabench.methods.base import METHODS, Aggregate, Roles, RoundInputs, RoundLoopMethod, TrainSettings, default_phases
from fdabench.methods.kd3a import Knowledge
from fdabench.methods.unlabelled_target import encode_generator, like_a_source, mixup_generator

QUERY_CHUNK = 4096  # target inputs a source predicts at once
#: the target's mixup coefficients (numpy; the cell's seed)
MIXUP_STREAM = register_purpose(
    "comda_mixup", Purpose(SEED_STRIDE, 399_989, 0, "Co-MDA's mixup coefficients at the target (numpy)")
)


class CoTaughtPair(nn.Module):
    """The target's two networks A and B (`nets`), predicting log((softmax A(x) + softmax B(x)) / 2): the argmax of
    Co-MDA's summed probabilities, and log-probabilities under which cross-entropy is the pair's negative
    log-likelihood. A source trains and answers with `nets[0]` alone (its own model)."""

    def __init__(self, first: nn.Module, second: nn.Module):
        super().__init__()
        self.nets = nn.ModuleList([first, second])

    def forward(self, x: Tensor) -> Tensor:
        log_probabilities = torch.stack([F.log_softmax(net(x), dim=1) for net in self.nets])
        return torch.logsumexp(log_probabilities, dim=0) - math.log(2.0)


def temporal_ensemble(accumulated: Tensor, outputs: Tensor, alpha: float, update: int) -> Tensor:
    """Co-MDA's temporal ensemble of each source's answers (train.py:251-253): Z ← α Z + (1 − α) out, corrected by
    1 / (1 − α^(u+2)) at the u-th update (0-based: the code's epoch + 1, plus one). The corrected value is also the next
    accumulator, as the code keeps it (main.py:374)."""
    return (alpha * accumulated + (1 - alpha) * outputs) / (1 - alpha ** (update + 2))


def icvar(ensembled: Tensor, predicted: Tensor) -> Tensor:
    """The between-class variance of each source's ensembled probabilities z (K, n, C) split by its current hard
    predictions ŷ (K, n) (train.py:256-279; module docstring, step 3). Returns (K,)."""
    n = ensembled.shape[1]
    hot = F.one_hot(predicted, ensembled.shape[2]).to(ensembled.dtype)  # (K, n, C)
    held = hot.sum(1)  # n_c
    mean = ensembled.mean(1)  # s_c
    positive = (ensembled * hot).sum(1) / (held + 0.001)
    negative = (ensembled * (1 - hot)).sum(1) / (n - held + 0.001)
    return (held * (positive - mean) ** 2).sum(1) / n + ((n - held) * (negative - mean) ** 2).sum(1) / n


def source_weights(variances: Tensor, sharpness: float) -> Tensor:
    """w = softmax(p · icvar) over the sources (loss.py:29-36)."""
    return torch.softmax(sharpness * variances.to(torch.float64), dim=0).to(variances.dtype)


def label_mixing(round_index: int, rounds: int) -> float:
    """a, the weight of the target network's own prediction in its pseudo-label: 0 while r ≤ round(R/2), then
    (2r − R)/R (train.py:75-78)."""
    return 0.0 if round_index <= round(rounds / 2) else (2 * round_index - rounds) / rounds


def forget_rate(round_index: int, rate: float, warm: int, gradual: int) -> float:
    """ρ_r: linear from 0 to ρ over the first warm + gradual rounds, then ρ (main.py:350-351)."""
    ramp = warm + gradual
    if round_index >= ramp:
        return rate
    return float(np.linspace(0, rate, ramp)[round_index])


def remembered(peer_losses: Tensor, keep_rate: float) -> Tensor:
    """The positions of the ⌈keep_rate · B⌉ inputs of smallest peer loss, smallest first (loss.py:39-58)."""
    kept = math.ceil(keep_rate * len(peer_losses))
    return torch.argsort(peer_losses, stable=True)[:kept]


def train_cotaught(
    net: ParameterSpace,
    peer: nn.Module,
    start: Tensor,
    inputs: Tensor,
    consensus: Tensor,
    mixing: float,
    keep_rate: float,
    settings: LocalSettings,
    generator: torch.Generator,
    mixup_rng: np.random.Generator,
    hparams: dict[str, Any],
) -> tuple[Tensor, int]:
    """One target network's round (module docstring, step 4); `net` holds the parameters it trains (the body, or the
    whole network), `consensus` the weighted source ensemble Σ_k w_k z_k (n_T, C). Returns (the update, its steps)."""
    net.set(start)
    model = net.model
    model.train()
    peer.eval()
    optimizer = make_optimizer(net.parameters, settings)
    steps = 0
    batches = batch_indices(
        len(inputs), settings.batch_size, settings.epochs, generator, inputs.device, settings.shuffle
    )
    for batch in batches:
        x, agreed = (inputs, consensus) if batch is None else (inputs[batch], consensus[batch])
        with torch.no_grad():
            label = (1 - mixing) * agreed + mixing * torch.softmax(model(x), dim=1)
            pseudo = label.argmax(dim=1)
            keep = remembered(F.cross_entropy(peer(x), pseudo, reduction="none"), keep_rate)
            lam0 = float(mixup_rng.beta(hparams["mixup_beta"], hparams["mixup_beta"]))
            lam = max(lam0, 1 - lam0)
            pair = torch.randperm(len(keep), generator=generator).to(x.device)
            kept_x, kept_y = x[keep], F.one_hot(pseudo[keep], consensus.shape[1]).to(x.dtype)
            mixed_x = lam * kept_x + (1 - lam) * kept_x[pair]
            mixed_y = lam * kept_y + (1 - lam) * kept_y[pair]
        optimizer.zero_grad()
        loss = -(mixed_y * F.log_softmax(model(mixed_x), dim=1)).sum(dim=1).mean()
        (hparams["mix_weight"] * loss).backward()
        optimizer.step()
        steps += 1
    return net.get() - start, steps


@METHODS.register
class CoMDA(RoundLoopMethod):
    """Co-MDA: black-box sources answer the target's queries; the target's temporal ensembles, icvar source weights and
    two co-taught networks with mixup (see the module docstring)."""

    name = "comda"
    family = "unsupervised"
    description = (
        "unsupervised multi-source DA on black-box sources: their predictions on the target's queries, "
        "co-teaching of two target networks (100% of the target's training inputs, unlabelled)"
    )
    # the target trains on its inputs, unlabelled; every client keeps state: each source's own model, the target's two
    # networks, ensembles and mixup stream
    roles = Roles(target="unlabelled", unlabelled=True, state="all")
    delivery = Delivery(source_messages=True, broadcast_to_target=False)
    hparams_schema = {
        "ensemble_alpha": {
            "type": "number",
            "minimum": 0,
            "exclusiveMaximum": 1,
            "description": "α_z of the temporal ensemble (main.py:57)",
            "default": 0.6,
        },
        "weight_sharpness": {
            "type": "number",
            "minimum": 0,
            "description": "p of the source weights softmax(p · icvar) (main.py:59)",
            "default": 5.0,
        },
        "forget_rate": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "ρ, the share of each batch co-teaching drops once ramped up (the code's run.sh sets it per "
            "Digit-Five target, 0.04 to 0.4; 0.2 is fdabench's default)",
            "default": 0.2,
            "search": {"uniform": [0.0, 0.4]},
        },
        "warm_target": {
            "type": "integer",
            "minimum": 0,
            "description": "rounds before the target trains (main.py: warm_target 5)",
            "default": 5,
        },
        "num_gradual": {
            "type": "integer",
            "minimum": 0,
            "description": "rounds after warm_target over which the forget rate finishes its ramp (main.py: 5)",
            "default": 5,
        },
        "mixup_beta": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "β of mixup's λ₀ ~ Beta(β, β) (main.py: beta 0.3)",
            "default": 0.3,
        },
        "mix_weight": {
            "type": "number",
            "minimum": 0,
            "description": "α_mix, the weight of the mixup loss (main.py: alpha_mix 1.0)",
            "default": 1.0,
        },
        "train_target_head": {
            "type": "boolean",
            "description": "step the target networks' heads too (the code never does: train.py:138)",
            "default": False,
        },
    }

    def __init__(self, hparams: dict[str, Any] | None = None):
        super().__init__(hparams)
        self.queries: Tensor | None = None  # at the server: the target's inputs, broadcast to the sources
        self.query_shape: tuple[int, ...] = ()
        self.sources, self.classes = 0, 0

    def check(self, train: dict[str, Any]) -> list[str]:
        problems = super().check(train)
        if float((train or {}).get("participation", 1.0)) < 1 or float((train or {}).get("source_dropout", 0.0)) > 0:
            problems.append(
                f"{self.name}: every source answers every round (its ensembles are per source): train.participation "
                "must be 1 and train.source_dropout 0"
            )
        return problems

    # -- the model ------------------------------------------------------------------------------------------------
    def prepare_model(self, model: nn.Module, problem: Any) -> nn.Module:
        if problem.task != "classification":
            raise ValueError(f"{self.name}: classification only")
        if any(True for _ in model.buffers()):
            raise ValueError(f"{self.name}: models with buffers (e.g. BatchNorm statistics) are not supported")
        second = _reinitialised(model)
        targets = [getattr(problem, name, None) for name in ("target_labelled", "target_unlabelled")]
        self.query_shape = (sum(len(t) for t in targets if t is not None), *problem.input_shape)
        self.sources, self.classes = len(getattr(problem, "sources", ())), problem.num_outputs
        return CoTaughtPair(model, second)

    def phases(self, settings: TrainSettings, has_sources: bool) -> list[Phase]:
        """Every domain trains alike (the code's one learning rate and batch size): the target's networks with the
        sources' learning rate, batch size and local epochs, in shuffled order."""
        return default_phases(self, settings, has_sources, fda_settings=like_a_source(settings))

    def update_bytes(self, space: ParameterSpace, phase: Phase) -> int:
        return 0  # no parameter crosses: the sources are black boxes and the target's networks stay with it

    def message_shapes(self) -> set[tuple[int, ...]]:
        """Flat, as every message: the queries (n_T · input size), a source's answers (n_T · C), all of them."""
        answers = self.query_shape[0] * self.classes
        return {(math.prod(self.query_shape),), (answers,), (self.sources, answers)}

    # -- client state -----------------------------------------------------------------------------------------------
    def client_state(self, space: ParameterSpace) -> ClientState:
        """A source: its own model (network A's initial parameters); the target: networks A and B, the ensembles
        (empty until the first answers) and their update count; its mixup stream joins at its first round."""
        params = space.get()
        half = len(params) // 2
        return {
            "model": params[:half].clone(),
            "second": params[half:].clone(),
            "ensemble": torch.zeros(0, device=params.device),
            "updates": torch.zeros((), dtype=torch.int64),
        }

    def evaluation_view(self, state: ClientState | None, params: Tensor) -> View:
        """A client scores its own networks: the target its pair, a source its model (as both members)."""
        return View(torch.cat([state["model"], state["second"]]))

    def local_round(
        self, client: LocalClient, state: ClientState | None, start: Tensor, broadcast: Tensor | None
    ) -> LocalReply:
        if client.role == "source":
            return self.source_round(client, state, start, broadcast)
        return self.target_round(client, state, start)

    def source_round(
        self, client: LocalClient, state: ClientState, start: Tensor, queries: Tensor | None
    ) -> LocalReply:
        """Step 1: train the source's own model, then answer the queries (if the server has them yet)."""
        pair = client.space.model
        own = ParameterSpace(pair.nets[0])
        result = client.train(state["model"], own)
        model = state["model"] + result.update
        answers = None
        if queries is not None:  # flat, as every message: the target's inputs in the source's input shape
            own.set(model)
            pair.nets[0].eval()
            with torch.no_grad():
                shaped = queries.reshape(-1, *client.data.x.shape[1:]).split(QUERY_CHUNK)
                answers = torch.cat([torch.softmax(pair.nets[0](chunk), dim=1) for chunk in shaped]).reshape(-1)
        kept = {**state, "model": model, "second": model}
        return LocalReply(LocalResult(torch.zeros_like(start), result.steps, result.samples), kept, message=answers)

    def target_round(self, client: LocalClient, state: ClientState, start: Tensor) -> LocalReply:
        """Steps 2 to 4 at the target; its queries as its message where no answer came."""
        inputs: RoundInputs = client.inputs
        data, pair = client.data, client.space.model
        queries = data.inputs()
        mixup_rng = mixup_generator(state, client.seed, MIXUP_STREAM)
        answers = inputs.source_messages  # (K, n_T · C), flat per source
        if answers is None:  # no answer yet: (re)send the queries
            kept = {**state, **encode_generator(mixup_rng)}
            message = queries.reshape(-1).clone()
            return LocalReply(LocalResult(torch.zeros_like(start), 0, len(data)), kept, message=message)
        answers = answers.reshape(len(answers), len(queries), -1)
        updates = int(state["updates"])
        accumulated = state["ensemble"] if updates else torch.zeros_like(answers)
        if accumulated.shape != answers.shape:
            raise ValueError(
                f"{self.name}: round {inputs.round_index + 1}: {len(answers)} sources answered, "
                f"the ensembles hold {len(accumulated)} (every source must answer every round)"
            )
        ensembled = temporal_ensemble(accumulated, answers, self.hparams["ensemble_alpha"], updates)
        variances = icvar(ensembled, answers.argmax(dim=2))
        weights = source_weights(variances, self.hparams["weight_sharpness"])
        consensus = (weights[:, None, None] * ensembled).sum(0)
        rounds = inputs.settings.rounds
        mixing = label_mixing(inputs.round_index, rounds)
        rate = forget_rate(
            inputs.round_index, self.hparams["forget_rate"], self.hparams["warm_target"], self.hparams["num_gradual"]
        )
        networks, steps = [state["model"], state["second"]], 0
        if inputs.round_index >= self.hparams["warm_target"]:
            for trained in (0, 1):  # A with B as its peer, then B with the new A
                peer = pair.nets[1 - trained]
                ParameterSpace(peer).set(networks[1 - trained])
                net = self.trained_space(pair.nets[trained])  # its entries lead the network's flat parameters
                ParameterSpace(pair.nets[trained]).set(networks[trained])
                update, taken = train_cotaught(
                    net,
                    peer,
                    networks[trained][: net.size],
                    queries,
                    consensus,
                    mixing,
                    1 - (1 - mixing) * rate,
                    client.settings,
                    client.generator,
                    mixup_rng,
                    self.hparams,
                )
                networks[trained] = torch.cat([networks[trained][: net.size] + update, networks[trained][net.size :]])
                steps += taken
        kept = {
            **state,
            "model": networks[0],
            "second": networks[1],
            "ensemble": ensembled,
            "updates": torch.tensor(updates + 1),
            **encode_generator(mixup_rng),
        }
        report = {
            "source_weights": weights.to(torch.float64),
            "icvar": variances.to(torch.float64),
            "label_mixing": torch.tensor(mixing, dtype=torch.float64),
            "keep_rate": torch.tensor(1 - (1 - mixing) * rate, dtype=torch.float64),
        }
        return LocalReply(LocalResult(torch.zeros_like(start), steps, len(data)), kept, statistics=Knowledge(report))

    def trained_space(self, net: nn.Module) -> ParameterSpace:
        """What a target network trains: its body (the code never steps its head), or the whole network where
        `train_target_head` is set or the body has no parameters."""
        names = [name for name, _ in net.named_parameters()]
        body = sum(name.startswith("features.") for name in names)
        if self.hparams["train_target_head"] or not body:
            return ParameterSpace(net)
        if not all(name.startswith("features.") for name in names[:body]):
            raise ValueError(f"{self.name}: the network's body (`features`) must come before its head")
        return ParameterSpace(net, prefix="features.")

    # -- the server -------------------------------------------------------------------------------------------------
    def broadcast(self) -> Tensor | None:
        return self.queries

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        """Nothing to aggregate (θ is never used): keep the target's queries, log its weights."""
        if inputs.target_message is not None:
            self.queries = inputs.target_message
        log: dict[str, Any] = {}
        if inputs.target_statistics is not None:
            report = inputs.target_statistics.values
            log = {
                "source_weights": report["source_weights"].tolist(),
                "icvar": report["icvar"].tolist(),
                "label_mixing": float(report["label_mixing"]),
                "keep_rate": float(report["keep_rate"]),
            }
        return Aggregate(torch.zeros_like(inputs.global_params), log)

    @property
    def round_state(self) -> dict[str, Any]:
        return {"queries": self.queries}

    @round_state.setter
    def round_state(self, state: dict[str, Any]) -> None:
        self.queries = state["queries"]


def _reinitialised(model: nn.Module) -> nn.Module:
    """A copy of `model` with fresh parameters, drawn from a seed derived from the model's own (seeded) initial
    parameters: network B, independent of A and the same wherever the cell's model is built."""
    seed = tensor_seed(torch.cat([p.detach().reshape(-1).cpu() for p in model.parameters()]))
    second = copy.deepcopy(model)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for module in second.modules():
            if module is not second and hasattr(module, "reset_parameters"):
                module.reset_parameters()
    return second
