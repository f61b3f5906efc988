"""Personalised federated learning over all clients, the target included, evaluated on the target's
personalised model: Ditto, FedRep, APFL and kNN-Per.

Protocol shared by the four (`PersonalisedMethod.run`): every round each client (the sources, then the
target on its labelled samples) trains locally from the global parameters it receives and sends the update
of the shared parameters with its sample count; the server adds their FedAvg, w_i = n_i / Σ n
(docs/design/methods.md, Baselines). What is personal never leaves its client. Each record reports the target's
personalised model on the target's test split (the cell's metric and `loss`) and the global model
(`global_<metric>`, `global_loss`).

In Ditto, APFL and kNN-Per a client's personal state influences no other client and no reported number
unless the client is the target, so only the target's is computed; FedRep trains every client's head,
because each client's body update depends on its own head.
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor, nn

from fdabench.federation.checkpoint import loop_state, restore_loop
from fdabench.federation.client import (
    LocalSettings,
    Proximal,
    batch_indices,
    evaluate,
    loss_function,
    make_optimizer,
    steps_per_epoch,
    train_locally,
)
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import ClientData, FederatedProblem
from fdabench.federation.records import primary_metric, round_record
from fdabench.federation.rounds import COUNT_BYTES, build_cell_model, local_settings
from fdabench.federation.sites import client_generator
from fdabench.federation.validation import validation_metrics
from fdabench.methods.base import METHODS, Method
from fdabench.tensor_math.aggregation import fedavg


@dataclass
class Federation:
    """One personalised run: the model, its parameter space and the clients (sources first, the target last)."""

    model: nn.Module
    space: ParameterSpace
    clients: list[ClientData]
    local: list[LocalSettings]  # per client: the source settings, the target's for the target
    generators: list[torch.Generator]
    loss_fn: Callable[[Tensor, Tensor], Tensor]

    @property
    def target_index(self) -> int:
        return len(self.clients) - 1

    def train(self, index: int, start: Tensor, **options) -> Tensor:
        """Client `index`'s plain local training from `start`; its update."""
        return train_locally(
            self.space, start, self.clients[index], self.local[index], self.loss_fn, self.generators[index], **options
        ).update


class PersonalisedMethod(Method):
    """FL over every client (sources and target); the target is evaluated with its personalised model."""

    family = "federated"
    resumes = True

    def run(self, problem, settings, seed, device, on_round=None, checkpoints=None):
        model = build_cell_model(problem, settings, seed, device)
        space = ParameterSpace(model)
        if space.buffers:
            raise ValueError(
                f"{self.name}: models with buffers (e.g. BatchNorm statistics) are not supported by personalised "
                f"methods"
            )
        source_local, target_local = local_settings(settings)
        clients = [*problem.sources, problem.target_labelled]
        federation = Federation(
            model,
            space,
            clients,
            [source_local] * len(problem.sources) + [target_local],
            [
                client_generator(seed, index) for index in range(len(clients))
            ],  # the target's stream as in the round loop
            loss_function(problem.task),
        )
        counts = torch.tensor([len(client) for client in clients], dtype=torch.float32, device=device)
        metric = primary_metric(problem.task)
        global_params = space.get()
        self.start(federation, global_params)
        shared_bytes = self.shared_bytes(federation)
        records: list[dict[str, Any]] = []
        first_round = 0
        saved = checkpoints.load() if checkpoints is not None else None
        if saved is not None:
            global_params = saved["global_params"].to(device)
            self.restore_round_state({key: value.to(device) for key, value in saved["personal"].items()})
            first_round, records = restore_loop(saved, federation.generators, device)
        for round_index in range(first_round, settings.rounds):
            started = time.perf_counter()
            self.begin_round(federation, global_params)
            updates = torch.stack(
                [self.train_client(federation, index, global_params) for index in range(len(clients))]
            )
            global_params = global_params + fedavg(updates, counts)
            space.set(global_params)
            global_metrics = evaluate(model, problem.target_test, problem.task, settings.eval_batch_size)
            score = functools.partial(
                self.evaluate_target, federation, global_params, problem, batch_size=settings.eval_batch_size
            )
            metrics = score(problem.target_test)
            target_metrics = {
                metric: metrics[metric],
                "loss": metrics["loss"],
                f"global_{metric}": global_metrics[metric],
                "global_loss": global_metrics["loss"],
                **validation_metrics(problem, score),
            }
            uplink, downlink = len(clients) * (shared_bytes + COUNT_BYTES), len(clients) * shared_bytes
            record = round_record(round_index, "fda", target_metrics, uplink, downlink, started)
            records.append(record)
            if checkpoints is not None and checkpoints.due(round_index, settings.rounds):
                checkpoints.save(
                    loop_state(
                        round_index + 1,
                        federation.generators,
                        records,
                        device,
                        global_params=global_params,
                        personal=self.round_state(),
                    )
                )
            if on_round is not None:
                on_round(record, settings.rounds)
        sources = [source.name for source in problem.sources]
        return {
            "metric": metric,
            "model_size": space.size,
            "layer_names": list(space.layer_names),
            "sources": sources,
            "rounds": records,
        }

    def start(self, federation: Federation, global_params: Tensor) -> None:
        """Initialise the personal state (every personal model starts from the initial global model)."""

    def round_state(self) -> dict[str, Tensor]:
        """The personal state carried from round to round (saved in checkpoints); default: none."""
        return {}

    def restore_round_state(self, state: dict[str, Tensor]) -> None:
        """Continue from `round_state()` of an interrupted run."""

    def shared_bytes(self, federation: Federation) -> int:
        """Bytes of the parameters that cross the client boundary each way (default: the whole model)."""
        return federation.space.update_bytes

    def begin_round(self, federation: Federation, global_params: Tensor) -> None:
        """Work of the round that precedes the clients' updates (default: none)."""

    def train_client(self, federation: Federation, index: int, global_params: Tensor) -> Tensor:
        """Client `index`'s round: its update of the shared parameters (zeros elsewhere)."""
        return federation.train(index, global_params)

    def personalised_params(self, federation: Federation, global_params: Tensor) -> Tensor:
        raise NotImplementedError

    def evaluate_target(
        self,
        federation: Federation,
        global_params: Tensor,
        problem: FederatedProblem,
        data: ClientData,
        batch_size: int,
    ) -> dict[str, float]:
        """The target's personalised predictor on `data` (its test split, or a validation split)."""
        federation.space.set(self.personalised_params(federation, global_params))
        return evaluate(federation.model, data, problem.task, batch_size)


@METHODS.register
class Ditto(PersonalisedMethod):
    """Ditto (Li et al. 2021): FedAvg of the global model w over all clients; the target also trains a
    personal model v, kept across rounds, on its loss plus (λ/2)‖v − w^t‖² (Eq. 2) towards the global
    model w^t it received, for as many steps as its global training. Evaluated: v. λ → ∞ gives v = w^t."""

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

    def start(self, federation, global_params):
        self.personal = global_params.clone()

    def round_state(self):
        return {"personal": self.personal}

    def restore_round_state(self, state):
        self.personal = state["personal"]

    def train_client(self, federation, index, global_params):
        update = federation.train(index, global_params)
        if index == federation.target_index:
            self.personal = self.personal + federation.train(
                index, self.personal, proximal=Proximal(self.hparams["penalty"], anchor=global_params)
            )
        return update

    def personalised_params(self, federation, global_params):
        return self.personal


def train_linear_heads(
    starts: Tensor,
    features: list[Tensor],
    targets: list[Tensor],
    settings: LocalSettings,
    generators: list[torch.Generator],
) -> Tensor:
    """`train_locally` of C linear heads on fixed features, one per client, all at once: each client draws
    its batch order from its own generator and takes the same optimiser steps as alone, but the C heads
    step together through batched matrix products, with gradients in closed form instead of autograd (the
    heads' many tiny steps are overhead-bound). The clients must share the number of batches per epoch.

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
        if steps > 1:  # a full batch draws no permutation, as in train_locally
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
    """FedRep (Collins et al. 2021): the body (`features`) is shared, every client keeps its own head. Each
    round a client trains its head for `head_epochs` with the received body frozen, then the body for
    `body_epochs` with its head frozen, and sends the body update; the server averages bodies only. The
    target's personalised model: the global body with the target's head. Only body bytes are exchanged.
    A model without a body (a one-layer network, e.g. Fed-Heart's) shares nothing: every client trains its
    head alone and the target's model is its own head."""

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

    def start(self, federation, global_params):
        has_body = any(name.startswith("features.") for name in federation.space.layer_names)
        self.body_space = ParameterSpace(federation.model, prefix="features.") if has_body else None
        self.head_space = ParameterSpace(federation.model.head)
        self.body_size = self.body_space.size if has_body else 0
        body_names = self.body_space.layer_names if has_body else ()
        if (
            federation.space.layer_names[: len(body_names)] != body_names
            or self.body_size + self.head_space.size != federation.space.size
        ):
            raise ValueError(f"{self.name}: the model must be `features` followed by `head`")
        self.heads = [global_params[self.body_size :].clone() for _ in federation.clients]

    def round_state(self):
        return {"heads": torch.stack(self.heads)}

    def restore_round_state(self, state):
        self.heads = list(state["heads"])

    def shared_bytes(self, federation):
        return self.body_space.update_bytes if self.body_space is not None else 0

    def begin_round(self, federation, global_params):
        """Every client trains its head on the received body's features (the body frozen: features computed
        once), clients with the same local settings and batches per epoch together (`train_linear_heads`)."""
        if not self.hparams["head_epochs"]:
            return
        model = federation.model
        federation.space.set(global_params)
        model.train()
        with torch.no_grad():
            features = [model.features(client.inputs()) for client in federation.clients]
        groups: dict[tuple, list[int]] = {}
        for index, (client, local) in enumerate(zip(federation.clients, federation.local)):
            groups.setdefault((steps_per_epoch(len(client), local.batch_size), local), []).append(index)
        for (_, local), members in groups.items():
            updates = train_linear_heads(
                torch.stack([self.heads[i] for i in members]),
                [features[i] for i in members],
                [federation.clients[i].labels() for i in members],
                replace(local, epochs=self.hparams["head_epochs"]),
                [federation.generators[i] for i in members],
            )
            for i, update in zip(members, updates):
                self.heads[i] = self.heads[i] + update

    def train_client(self, federation, index, global_params):
        """The body's epochs with the client's head (trained in `begin_round`) frozen."""
        update = torch.zeros_like(global_params)
        if self.hparams["body_epochs"] and self.body_space is not None:
            self.head_space.set(self.heads[index])
            body_local = replace(federation.local[index], epochs=self.hparams["body_epochs"])
            result = train_locally(
                self.body_space,
                global_params[: self.body_size],
                federation.clients[index],
                body_local,
                federation.loss_fn,
                federation.generators[index],
            )
            update[: self.body_size] = result.update
        return update

    def personalised_params(self, federation, global_params):
        return torch.cat([global_params[: self.body_size], self.heads[federation.target_index]])


@METHODS.register
class APFL(PersonalisedMethod):
    """APFL (Deng et al. 2020), fixed α: every client trains its copy w of the global model as in FedAvg;
    the target also keeps a local model v and, on the same batches, steps v along
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

    def start(self, federation, global_params):
        self.personal = global_params.clone()
        self.personal_space = ParameterSpace(copy.deepcopy(federation.model))
        self.mixture_space = ParameterSpace(copy.deepcopy(federation.model))

    def round_state(self):
        return {"personal": self.personal}

    def restore_round_state(self, state):
        self.personal = state["personal"]

    def train_client(self, federation, index, global_params):
        if index != federation.target_index:
            return federation.train(index, global_params)
        alpha = self.hparams["alpha"]
        data, local, loss_fn = federation.clients[index], federation.local[index], federation.loss_fn
        space, personal, mixture = federation.space, self.personal_space, self.mixture_space
        space.set(global_params)
        personal.set(self.personal)
        space.model.train()
        mixture.model.train()
        global_optimizer = make_optimizer(space.parameters, local)
        personal_optimizer = make_optimizer(personal.parameters, local)
        for batch in batch_indices(
            len(data), local.batch_size, local.epochs, federation.generators[index], data.x.device
        ):
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
        self.personal = personal.get()
        return space.get() - global_params

    def personalised_params(self, federation, global_params):
        alpha = self.hparams["alpha"]
        return self.personal * alpha + global_params * (1 - alpha)


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

    def run(self, problem, settings, seed, device, on_round=None, checkpoints=None):
        if problem.task != "classification":
            raise ValueError(f"{self.name}: classification only")
        return super().run(problem, settings, seed, device, on_round, checkpoints)

    @torch.no_grad()
    def evaluate_target(self, federation, global_params, problem, data, batch_size):
        model, store, test = federation.model, problem.target_labelled, data
        federation.space.set(global_params)
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
                problem.num_outputs,
                self.hparams["neighbours"],
                self.hparams["temperature"],
            )
            probabilities = interpolation * knn + (1 - interpolation) * global_probabilities
            total_loss += float(-probabilities.gather(1, y[:, None]).clamp_min(1e-12).log().sum())
            correct += int((probabilities.argmax(dim=1) == y).sum())
        return {"loss": total_loss / len(test), "accuracy": correct / len(test)}
