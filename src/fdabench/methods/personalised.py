"""Personalised federated learning over all clients, the target included, evaluated on the target's
personalised model: Ditto, FedRep, APFL and kNN-Per.

Each is a round-loop method (`methods.base.RoundLoopMethod`, run by `federation.rounds.run_rounds`, in process or
over Flower): every round each client (the sources, then the target on its labelled samples) trains locally from the
global parameters it receives and sends the update of the shared parameters with its sample count; the server adds
their FedAvg, w_i = n_i / Σ n (docs/design/methods.md, Baselines). What is personal is a client's state
(`federation.client_state`): it never leaves its client. A client's round is the method's `local_round` (Ditto's
global copy then its personal model, FedRep's head then body, APFL's global copy and personal model on the same
batches). Each record reports the target's personalised model on the target's test split (the cell's metric and
`loss`; its `evaluation_view`, kNN-Per's with its own scoring) and the global model (`global_<metric>`, `global_loss`);
the personalised model also scores the validation splits (in process; over Flower only the target's own).

In Ditto and APFL a client's personal state influences no other client and no reported number unless the client is
the target, so only the target keeps one (`Roles(state="target")`); FedRep trains every client's head, because
each client's body update depends on its own head.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor, nn

from fdabench.federation.client import (
    LocalResult,
    LocalSettings,
    Proximal,
    batch_indices,
    make_optimizer,
    steps_per_epoch,
)
from fdabench.federation.client_state import ClientState, LocalClient, LocalReply, View
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import ClientData, FederatedProblem
from fdabench.federation.rule_interface import Phase
from fdabench.methods.base import METHODS, Aggregate, Roles, RoundInputs, RoundLoopMethod, every_client_update
from fdabench.tensor_math.aggregation import fedavg

BODY = "features."


class PersonalisedMethod(RoundLoopMethod):
    """FL over every client (sources and target); the target is evaluated with its personalised model."""

    family = "federated"
    roles = Roles(personalised=True)

    def prepare_model(self, model: nn.Module, problem: FederatedProblem) -> nn.Module:
        if any(True for _ in model.buffers()):
            raise ValueError(
                f"{self.name}: models with buffers (e.g. BatchNorm statistics) are not supported by personalised "
                f"methods"
            )
        return model

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        """Σ_k w_k g_k over the sources and the target, w_k = n_k / Σ n (FedAvg over all clients)."""
        updates, counts = every_client_update(inputs)
        return Aggregate(fedavg(updates, counts))


@METHODS.register
class Ditto(PersonalisedMethod):
    """Ditto (Li et al. 2021): FedAvg of the global model w over all clients; the target also trains a
    personal model v, kept across rounds (its client state), on its loss plus (λ/2)‖v − w^t‖² (Eq. 2) towards the
    global model w^t it received, for as many steps as its global training. Evaluated: v. λ → ∞ gives v = w^t."""

    name = "ditto"
    description = "personalised FL: the target's personal model is pulled towards the global model (penalty λ)"
    # λ = 1: the Ditto paper's default
    hparams_schema = {
        "penalty": {
            "type": "number",
            "minimum": 0,
            "description": "λ of the penalty (λ/2)‖v − w‖²",
            "default": 1.0,
            "search": {"log_uniform": [0.01, 10.0]},
        }
    }

    roles = Roles(state="target", personalised=True)

    def client_state(self, space: ParameterSpace) -> ClientState:
        return {"personal": space.get()}  # every personal model starts from the initial global model

    def local_round(
        self, client: LocalClient, state: ClientState | None, start: Tensor, broadcast: Tensor | None
    ) -> LocalReply | None:
        """The global copy from w^t (sent), then the personal model v with the proximal pull to w^t (kept)."""
        if state is None:  # a source: FedAvg's local training
            return None
        result = client.train(start)
        pull = Proximal(self.hparams["penalty"], anchor=start)
        personal = state["personal"] + client.train(state["personal"], proximal=pull).update
        return LocalReply(result, {"personal": personal})

    def evaluation_view(self, state: ClientState | None, params: Tensor) -> View:
        return View(state["personal"])


def train_linear_heads(
    starts: Tensor,
    features: list[Tensor],
    targets: list[Tensor],
    settings: LocalSettings,
    generators: list[torch.Generator],
) -> Tensor:
    """`train_locally` of C linear heads on fixed features, one per client, all at once: each client draws
    its batch order from its own generator (none where `settings.shuffle` is False: the stored order) and takes the
    same optimiser steps as alone, but the C heads step together through batched matrix products, with gradients in
    closed form instead of autograd (the heads' many tiny steps are overhead-bound). The clients must share the number
    of batches per epoch.

    Loss: cross-entropy for integer targets (∂/∂z = (softmax(z) − onehot(y)) / B), else the squared error
    Σ_k (z_k − y_k)² averaged over samples (∂/∂z = 2 (z − y) / B). `starts`: (C, K·D + K), each row the
    head's weight then bias, flat. Returns the (C, K·D + K) updates."""
    clients, dim = len(features), features[0].shape[1]
    outputs = starts.shape[1] // (dim + 1)
    sizes = [len(x) for x in features]
    steps = {steps_per_epoch(size, settings.batch_size) for size in sizes}
    if len(steps) != 1:
        raise ValueError(f"clients with {sorted(steps)} batches per epoch cannot train together")
    steps = steps.pop()
    batch = max(sizes) if steps == 1 else settings.batch_size  # rows per step; shorter batches are padded
    rows = steps * batch
    # θ = [weight | bias] against inputs [x, 1]
    theta = torch.cat(
        [starts[:, : outputs * dim].reshape(clients, outputs, dim), starts[:, outputs * dim :, None]], dim=2
    )
    optimizer = make_optimizer([theta], settings)
    device, dtype = features[0].device, features[0].dtype
    classification = not targets[0].is_floating_point()
    # every client's rows stacked, plus one zero row that padding points to
    inputs = torch.cat(
        [
            torch.cat([torch.cat(features), torch.ones(sum(sizes), 1, dtype=dtype, device=device)], dim=1),
            torch.zeros(1, dim + 1, dtype=dtype, device=device),
        ]
    )
    labels = torch.cat(targets)
    labels = torch.nn.functional.one_hot(labels, outputs).to(dtype) if classification else labels
    labels = torch.cat([labels, torch.zeros(1, outputs, dtype=dtype, device=device)])
    offsets = [sum(sizes[:client]) for client in range(clients)]
    rows_of = torch.full((clients, rows), len(inputs) - 1, dtype=torch.long, device=device)
    # per row: 1 / (its batch's size), 0 on padding
    row_weights = torch.zeros(clients, rows, 1, dtype=dtype, device=device)
    for client, size in enumerate(sizes):
        rows_of[client, :size] = torch.arange(offsets[client], offsets[client] + size, device=device)
        for step in range(steps):
            begin = step * batch
            row_weights[client, begin : min(begin + batch, size)] = 1.0 / (min(begin + batch, size) - begin)
    for _ in range(settings.epochs):
        if steps > 1 and settings.shuffle:  # a full batch, or the stored order, draws no permutation (train_locally)
            rows_of = rows_of.clone()
            for client, (size, generator) in enumerate(zip(sizes, generators)):
                rows_of[client, :size] = torch.randperm(size, generator=generator).to(device) + offsets[client]
        x_epoch, y_epoch = inputs[rows_of], labels[rows_of]
        for step in range(steps):
            window = slice(step * batch, (step + 1) * batch)
            x = x_epoch[:, window]
            logits = torch.bmm(x, theta.transpose(1, 2))
            residual = (
                torch.softmax(logits, dim=2).sub_(y_epoch[:, window])
                if classification
                else (logits - y_epoch[:, window]).mul_(2.0)
            )
            residual.mul_(row_weights[:, window])
            theta.grad = torch.bmm(residual.transpose(1, 2), x)
            optimizer.step()
    return torch.cat([theta[:, :, :dim].reshape(clients, -1), theta[:, :, dim]], dim=1) - starts


@METHODS.register
class FedRep(PersonalisedMethod):
    """FedRep (Collins et al. 2021): the body (`features`) is shared, every client keeps its own head (its client
    state). Each round a client trains its head for `head_epochs` with the received body frozen (its features computed
    once; `train_linear_heads`), then the body for `body_epochs` with its head frozen, and sends the body update; the
    server averages bodies only. The target's personalised model: the global body with the target's head. Only body
    bytes are exchanged. A model without a body (a one-layer network, e.g. Fed-Heart's) shares nothing: every client
    trains its head alone and the target's model is its own head."""

    name = "fedrep"
    description = "personalised FL: shared body averaged by the server, a local head per client"
    # the FedRep paper: 10 head epochs, 1 body epoch
    hparams_schema = {
        "head_epochs": {
            "type": "integer",
            "minimum": 0,
            "description": "local epochs on the head per round (body frozen)",
            "default": 10,
            "search": {"int": [1, 10]},
        },
        "body_epochs": {
            "type": "integer",
            "minimum": 0,
            "description": "local epochs on the body per round (head frozen)",
            "default": 1,
        },
    }

    roles = Roles(state="all", personalised=True)

    def __init__(self, hparams: dict[str, Any] | None = None):
        super().__init__(hparams)
        self.body_size = 0  # the body's entries come first in the flat parameters

    def prepare_model(self, model: nn.Module, problem: FederatedProblem) -> nn.Module:
        model = super().prepare_model(model, problem)
        space = ParameterSpace(model)
        body_names = tuple(name for name in space.layer_names if name.startswith(BODY))
        head = ParameterSpace(model.head)
        self.body_size = ParameterSpace(model, prefix=BODY).size if body_names else 0
        if space.layer_names[: len(body_names)] != body_names or self.body_size + head.size != space.size:
            raise ValueError(f"{self.name}: the model must be `features` followed by `head`")
        return model

    def update_bytes(self, space: ParameterSpace, phase: Phase) -> int:
        return ParameterSpace(space.model, prefix=BODY).update_bytes if self.body_size else 0

    def client_state(self, space: ParameterSpace) -> ClientState:
        return {"head": space.get()[self.body_size :].clone()}

    def local_round(
        self, client: LocalClient, state: ClientState | None, start: Tensor, broadcast: Tensor | None
    ) -> LocalReply:
        """The head's epochs on the received body's features (the body frozen: features computed once), then the
        body's epochs with the new head frozen; the body's update is sent (zeros on the head)."""
        return self.local_rounds([client], [state], start, broadcast)[0]

    def local_rounds(
        self,
        clients: list[LocalClient],
        states: list[ClientState | None],
        start: Tensor,
        broadcast: Tensor | None,
    ) -> list[LocalReply]:
        """`local_round` of each client, their heads trained together where they share their local settings and
        batches per epoch (`train_linear_heads`), then each body."""
        heads = [state["head"] for state in states]
        if self.hparams["head_epochs"]:
            model = clients[0].space.model
            clients[0].space.set(start)
            model.train()
            with torch.no_grad():
                features = [model.features(client.data.inputs()) for client in clients]
            groups: dict[tuple, list[int]] = {}
            for index, client in enumerate(clients):
                key = (steps_per_epoch(len(client.data), client.settings.batch_size), client.settings)
                groups.setdefault(key, []).append(index)
            for (_, local), members in groups.items():
                updates = train_linear_heads(
                    torch.stack([heads[i] for i in members]),
                    [features[i] for i in members],
                    [clients[i].data.labels() for i in members],
                    replace(local, epochs=self.hparams["head_epochs"]),
                    [clients[i].generator for i in members],
                )
                for i, update in zip(members, updates):
                    heads[i] = heads[i] + update
        return [self.train_body(client, head, start) for client, head in zip(clients, heads)]

    def train_body(self, client: LocalClient, head: Tensor, start: Tensor) -> LocalReply:
        """The body's epochs from the global body with the client's `head` frozen; the body's update is sent."""
        update, steps = torch.zeros_like(start), 0
        if self.hparams["body_epochs"] and self.body_size:
            model = client.space.model
            ParameterSpace(model.head).set(head)
            body_settings = replace(client.settings, epochs=self.hparams["body_epochs"])
            body = client.train(start[: self.body_size], ParameterSpace(model, prefix=BODY), settings=body_settings)
            update[: self.body_size] = body.update
            steps = body.steps
        return LocalReply(LocalResult(update, steps, len(client.data)), {"head": head})

    def evaluation_view(self, state: ClientState | None, params: Tensor) -> View:
        return View(torch.cat([params[: self.body_size], state["head"]]))


@METHODS.register
class APFL(PersonalisedMethod):
    """APFL (Deng et al. 2020), fixed α: every client trains its copy w of the global model as in FedAvg;
    the target also keeps a local model v (its client state) and, on the same batches, steps v along
    ∇_v f(α v + (1 − α) w) = α ∇f(v̄) at the current w. The server averages w only. Evaluated: the
    mixture v̄ = α v + (1 − α) w with the new global w. α = 1 is local training of v alone; α = 0 the
    global model."""

    name = "apfl"
    description = (
        "personalised FL: the target's model mixes a local model and the global model (weight α on the local one)"
    )
    # α = 0.5: the APFL paper's mixing weight
    hparams_schema = {
        "alpha": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "weight α of the local model in v̄ = α v + (1 − α) w",
            "default": 0.5,
            "search": {"uniform": [0.0, 1.0]},
        }
    }

    roles = Roles(state="target", personalised=True)

    def __init__(self, hparams: dict[str, Any] | None = None):
        super().__init__(hparams)
        self.copies: tuple[nn.Module, ParameterSpace, ParameterSpace] | None = None  # (model, v's, v̄'s)

    def client_state(self, space: ParameterSpace) -> ClientState:
        return {"personal": space.get()}  # v starts from the initial global model

    def spaces(self, model: nn.Module) -> tuple[ParameterSpace, ParameterSpace]:
        """Copies of the client's model that hold v and the mixture v̄ (made once per model)."""
        if self.copies is None or self.copies[0] is not model:
            self.copies = (model, ParameterSpace(copy.deepcopy(model)), ParameterSpace(copy.deepcopy(model)))
        return self.copies[1], self.copies[2]

    def local_round(
        self, client: LocalClient, state: ClientState | None, start: Tensor, broadcast: Tensor | None
    ) -> LocalReply | None:
        if state is None:  # a source: FedAvg's local training
            return None
        alpha = self.hparams["alpha"]
        data, local, loss_fn, space = client.data, client.settings, client.loss_fn, client.space
        personal, mixture = self.spaces(space.model)
        space.set(start)
        personal.set(state["personal"])
        space.model.train()
        mixture.model.train()
        global_optimizer = make_optimizer(space.parameters, local)
        personal_optimizer = make_optimizer(personal.parameters, local)
        steps = 0
        batches = batch_indices(
            len(data), local.batch_size, local.epochs, client.generator, data.x.device, local.shuffle
        )
        for batch in batches:
            x, y = data.inputs(batch), data.labels(batch)
            with torch.no_grad():  # v̄ = α v + (1 − α) w at the step's start
                for mixed, v, w in zip(mixture.parameters, personal.parameters, space.parameters):
                    mixed.copy_(v * alpha + w * (1 - alpha))
                    mixed.grad = None
            global_optimizer.zero_grad()
            loss_fn(space.model(x), y).backward()
            loss_fn(mixture.model(x), y).backward()
            for v, mixed in zip(personal.parameters, mixture.parameters):
                v.grad = mixed.grad * alpha
            global_optimizer.step()
            personal_optimizer.step()
            steps += 1
        return LocalReply(LocalResult(space.get() - start, steps, len(data)), {"personal": personal.get()})

    def evaluation_view(self, state: ClientState | None, params: Tensor) -> View:
        alpha = self.hparams["alpha"]
        return View(state["personal"] * alpha + params * (1 - alpha))


def knn_probabilities(
    query: Tensor, store: Tensor, store_labels: Tensor, num_classes: int, neighbours: int, temperature: float
) -> Tensor:
    """kNN-Per's memorised distribution (Marfoq et al. 2022, Eq. 5): p_kNN(y | x) ∝ Σ_{j ∈ N_k(x)}
    1{y_j = y} exp(−‖φ(x) − φ(x_j)‖ / T) over the k nearest stored features (Euclidean); rows sum to 1."""
    distances = torch.cdist(query, store)
    nearest, index = distances.topk(min(neighbours, store.shape[0]), dim=1, largest=False)
    weights = torch.softmax(-nearest / temperature, dim=1)
    return torch.zeros(query.shape[0], num_classes, dtype=weights.dtype, device=query.device).scatter_add_(
        1, store_labels[index], weights
    )


@METHODS.register
class KNNPer(PersonalisedMethod):
    """kNN-Per (Marfoq et al. 2022): FedAvg of one global model over all clients; the target stores the
    global body's features of its labelled samples and predicts p = λ p_kNN + (1 − λ) p_global
    (`knn_probabilities`), with the datastore rebuilt from the current global model every round.
    λ = 0 is the global model."""

    name = "knn_per"
    description = (
        "personalised FL: the global model's prediction interpolated with a kNN over the target's stored features"
    )
    # k = 10: the kNN-Per paper
    hparams_schema = {
        "neighbours": {
            "type": "integer",
            "minimum": 1,
            "description": "k nearest stored samples",
            "default": 10,
            "search": {"int": [1, 20]},
        },
        "interpolation": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "weight λ of the kNN distribution",
            "default": 0.5,
            "search": {"uniform": [0.0, 1.0]},
        },
        "temperature": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "T in exp(−distance / T)",
            "default": 1.0,
        },
    }

    def prepare_model(self, model: nn.Module, problem: FederatedProblem) -> nn.Module:
        if problem.task != "classification":
            raise ValueError(f"{self.name}: classification only")
        return super().prepare_model(model, problem)

    def evaluation_view(self, state: ClientState | None, params: Tensor) -> View:
        """The global model, scored through its interpolation with the kNN over the target's stored features."""
        return View(params, score=self.interpolated_metrics)

    @torch.no_grad()
    def interpolated_metrics(
        self, model: nn.Module, data: ClientData, task: str, batch_size: int, own: ClientData
    ) -> dict[str, float]:
        """The interpolated prediction on `data`, the datastore the features of the target's labelled samples `own`
        under the global model (which `model` holds)."""
        store, test = own, data
        model.eval()
        store_features = model.features(store.inputs())
        interpolation = self.hparams["interpolation"]
        total_loss, correct = 0.0, 0
        for begin in range(0, len(test), batch_size):
            x, y = test.inputs(slice(begin, begin + batch_size)), test.labels(slice(begin, begin + batch_size))
            features = model.features(x)
            global_probabilities = torch.softmax(model.head(features), dim=1)
            knn = knn_probabilities(
                features,
                store_features,
                store.labels(),
                global_probabilities.shape[1],
                self.hparams["neighbours"],
                self.hparams["temperature"],
            )
            probabilities = interpolation * knn + (1 - interpolation) * global_probabilities
            total_loss += float(-probabilities.gather(1, y[:, None]).clamp_min(1e-12).log().sum())
            correct += int((probabilities.argmax(dim=1) == y).sum())
        return {"loss": total_loss / len(test), "accuracy": correct / len(test)}
