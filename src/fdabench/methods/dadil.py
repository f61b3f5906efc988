"""FedDaDiL: federated Wasserstein dataset dictionary learning (Castellon et al., ICASSP 2024), with the
DaDiL-R and DaDiL-E target classifiers (Montesuma et al., ECAI 2023). docs/design/methods.md, FedDaDiL.

Stage 1, the encoder φ: FedAvg over the sources (exactly the `source_only` run of the cell's settings), or
the identity for pre-extracted features (`encoder: auto` picks the identity when the inputs are feature
vectors). Clients then work on φ(x), scaled to unit L2 norm per sample (`normalise_features`).

Stage 2, the dictionary: K atoms P_k, each an empirical distribution of n points with features x and soft
labels y = softmax(label logits), held by the server. Every client ℓ — each source and the unlabelled
target — keeps private barycentric coordinates α_ℓ on the simplex. Each round the server sends the atoms to
every client; the client runs E local steps: draw a mini-batch of its data and one of each atom, compute the
barycentre B(α_ℓ; P) by the free-support fixed-point iteration with exact OT on the cost
‖x − x'‖² + β‖y − y'‖², take the OT cost W_c(batch, B) as loss (features only, W_2², for the target),
and step on the atoms and on α_ℓ (Adam), then project α_ℓ onto the simplex. It sends back its version of the
atoms — features, plus label logits when it has labels — and never α_ℓ. The server averages the returned
versions (label logits over the labelled clients only).

After every round the target, which holds α_T and the atoms, builds its classifier and is evaluated on its
test split: DaDiL-R trains a classifier on the reconstruction B(α_T; P) (full atoms, labels = the
barycentre's soft labels); DaDiL-E trains one classifier per atom and predicts Σ_k α_T,k h_k(x).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor

from fdabench.core.streams import stream
from fdabench.federation.client import adam
from fdabench.federation.problem import FederatedProblem
from fdabench.federation.records import round_record
from fdabench.federation.rounds import build_cell_model, run_rounds
from fdabench.federation.settings import TrainSettings
from fdabench.federation.validation import validation_metrics, validation_splits
from fdabench.methods.base import METHODS, Method
from fdabench.methods.baselines import SourceOnly
from fdabench.tensor_math.dataset_dictionary import barycentre, project_simplex, wasserstein_cost

FLOAT_BYTES = 4  # atoms travel as float32
LABEL_INIT_LOGIT = 5.0  # initial label logits: 5 on the point's class, 0 elsewhere (softmax ≈ 0.94 with 10 classes)

HPARAMS_SCHEMA: dict[str, Any] = {
    "atoms": {"type": "integer", "minimum": 1, "description": "K, the number of atoms", "default": 4},
    "support_size": {
        "type": "integer",
        "minimum": 1,
        "description": "n, points per atom (classes assigned round robin)",
        "default": 200,
    },
    "label_weight": {
        "type": "number",
        "minimum": 0,
        "description": "β of the cost ‖x − x'‖² + β‖y − y'‖²",
        "default": 1.0,
    },
    "local_steps": {
        "type": "integer",
        "minimum": 1,
        "description": "E, a client's local steps per round",
        "default": 10,
    },
    "batch_size": {
        "type": "integer",
        "minimum": 1,
        "description": "mini-batch size drawn from the client's data and from each atom",
        "default": 100,
    },
    "atom_lr": {
        "type": "number",
        "exclusiveMinimum": 0,
        "description": "Adam step size of atom features and label logits",
        "default": 0.01,
    },
    "alpha_lr": {
        "type": "number",
        "exclusiveMinimum": 0,
        "description": "Adam step size of the barycentric coordinates",
        "default": 0.01,
    },
    "barycentre_iterations": {
        "type": "integer",
        "minimum": 1,
        "description": "fixed-point iterations of each barycentre",
        "default": 3,
    },
    "rounds": {
        "type": ["integer", "null"],
        "minimum": 1,
        "description": "dictionary rounds (null: the experiment's train.rounds)",
        "default": 30,
    },
    "encoder": {
        "enum": ["auto", "identity", "fedavg"],
        "description": "stage 1; auto: identity for feature-vector inputs, else FedAvg",
        "default": "auto",
    },
    "encoder_rounds": {
        "type": ["integer", "null"],
        "minimum": 1,
        "description": "FedAvg rounds of the encoder (null: train.rounds)",
        "default": None,
    },
    "normalise_features": {
        "type": "boolean",
        "description": "scale every encoded sample to unit L2 norm",
        "default": True,
    },
    "atom_init_std": {
        "type": ["number", "null"],
        "exclusiveMinimum": 0,
        "description": "std of the atoms' initial features (null: 1/sqrt(d))",
        "default": None,
    },
    "classifier_hidden": {
        "type": "array",
        "items": {"type": "integer", "minimum": 1},
        "description": "hidden widths of the target classifier(s); [] = linear",
        "default": [],
    },
    "classifier_steps": {
        "type": "integer",
        "minimum": 1,
        "description": "full-batch Adam steps of each classifier",
        "default": 300,
    },
    "classifier_lr": {"type": "number", "exclusiveMinimum": 0, "default": 0.01},
}


@dataclass
class AtomsMessage:
    """What crosses a client boundary in stage 2, either way: the atoms' features (K, n, d) and label
    logits (K, n, C), or None where the sender did not update them (the unlabelled target). Nothing else:
    the barycentric coordinates α are not a field of this message."""

    features: Tensor
    label_logits: Tensor | None

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * FLOAT_BYTES for t in (self.features, self.label_logits) if t is not None)


def average_messages(messages: list[AtomsMessage]) -> AtomsMessage:
    """The server's aggregate: the mean of the returned atom versions (label logits over the clients that
    sent them)."""
    features = torch.stack([m.features for m in messages]).mean(0)
    logits = [m.label_logits for m in messages if m.label_logits is not None]
    return AtomsMessage(features, torch.stack(logits).mean(0) if logits else None)


@dataclass
class DictionaryClient:
    """One client of stage 2: its encoded samples, one-hot labels (None for the target), its private α and
    its own random stream."""

    name: str
    x: Tensor
    y: Tensor | None
    alpha: Tensor
    generator: torch.Generator

    def local_round(self, atoms: AtomsMessage, hparams: dict[str, Any]) -> tuple[AtomsMessage, float]:
        """E local steps from the received atoms; returns the atoms' new version and the mean local loss.
        α is updated in place here and stays with the client."""
        features = atoms.features.clone().requires_grad_(True)
        labelled = self.y is not None
        logits = atoms.label_logits.clone().requires_grad_(labelled)
        alpha = self.alpha.clone().requires_grad_(True)
        atom_optimizer = adam([features, logits] if labelled else [features], lr=hparams["atom_lr"])
        alpha_optimizer = adam([alpha], lr=hparams["alpha_lr"])
        atoms_count, support = features.shape[:2]
        batch = min(hparams["batch_size"], support)
        client_batch = min(hparams["batch_size"], len(self.x))
        total = 0.0
        for _ in range(hparams["local_steps"]):
            rows = torch.randperm(len(self.x), generator=self.generator)[:client_batch].to(self.x.device)
            picks = [
                torch.randperm(support, generator=self.generator)[:batch].to(self.x.device) for _ in range(atoms_count)
            ]
            atom_x = [features[k, picks[k]] for k in range(atoms_count)]
            atom_y = [F.softmax(logits[k, picks[k]], dim=1) for k in range(atoms_count)]
            start = int(alpha.detach().argmax())
            bary_x, bary_y = barycentre(
                atom_x,
                alpha,
                atom_x[start].detach(),
                atom_y,
                atom_y[start].detach(),
                hparams["label_weight"],
                hparams["barycentre_iterations"],
            )
            if labelled:
                loss = wasserstein_cost(self.x[rows], bary_x, self.y[rows], bary_y, hparams["label_weight"])
            else:
                loss = wasserstein_cost(self.x[rows], bary_x)
            atom_optimizer.zero_grad()
            alpha_optimizer.zero_grad()
            loss.backward()
            atom_optimizer.step()
            alpha_optimizer.step()
            with torch.no_grad():
                alpha.copy_(project_simplex(alpha))
            total += float(loss.detach())
        self.alpha = alpha.detach()
        message = AtomsMessage(features.detach(), logits.detach() if labelled else None)
        return message, total / hparams["local_steps"]


class Classifiers:
    """G independent softmax classifiers (linear, or MLPs with `hidden` widths), held as batched weights so
    that they train together: group g sees only its own inputs, so the summed loss gives each classifier
    exactly its own gradient, and Adam's element-wise steps are those of G separate runs."""

    def __init__(self, groups: int, dim: int, classes: int, hidden: list[int], generator: torch.Generator, device):
        widths = [dim, *hidden, classes]
        self.weights, self.biases = [], []
        for width_in, width_out in zip(widths[:-1], widths[1:]):
            bound = 1.0 / math.sqrt(width_in)  # torch.nn.Linear's default initialisation range
            self.weights.append(
                ((torch.rand(groups, width_in, width_out, generator=generator) * 2 - 1) * bound)
                .to(device)
                .requires_grad_()
            )
            self.biases.append(
                ((torch.rand(groups, 1, width_out, generator=generator) * 2 - 1) * bound).to(device).requires_grad_()
            )

    def parameters(self) -> list[Tensor]:
        return [*self.weights, *self.biases]

    def logits(self, x: Tensor) -> Tensor:
        """(G, m, C) logits of inputs x (G, m, d), or of shared inputs x (m, d)."""
        hidden = x if x.dim() == 3 else x.expand(len(self.weights[0]), -1, -1)
        for layer, (weight, bias) in enumerate(zip(self.weights, self.biases)):
            hidden = torch.baddbmm(bias, hidden, weight)
            if layer < len(self.weights) - 1:
                hidden = F.relu(hidden)
        return hidden


def train_classifiers(
    x: Tensor, soft_labels: Tensor, hidden: list[int], steps: int, lr: float, seed: int
) -> Classifiers:
    """One classifier per group g on (x[g], soft_labels[g]) ((G, m, d) and (G, m, C)), fitted by full-batch
    Adam on the soft-label cross-entropy −Σ_c y_c log p_c (mean over samples, summed over groups)."""
    classifiers = Classifiers(
        x.shape[0], x.shape[2], soft_labels.shape[2], hidden, torch.Generator().manual_seed(seed), x.device
    )
    optimizer = adam(classifiers.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        (-(soft_labels * F.log_softmax(classifiers.logits(x), dim=2)).sum(2).mean(1).sum()).backward()
        optimizer.step()
    return classifiers


def _accuracy_and_loss(probabilities: Tensor, y: Tensor) -> dict[str, float]:
    return {
        "accuracy": float((probabilities.argmax(1) == y).float().mean()),
        "loss": float(F.nll_loss(probabilities.clamp_min(1e-12).log(), y)),
    }


class FedDaDiL(Method):
    """Shared protocol of dadil_r and dadil_e; subclasses say how the target classifies (`classify`)."""

    family = "unsupervised"
    resumes = True  # the encoder's FedAvg rounds resume from a checkpoint; the dictionary rounds rerun

    uses_unlabelled_target: ClassVar[bool] = True  # the target's client reads all its training inputs, no label
    hparams_schema: ClassVar[dict[str, Any]] = HPARAMS_SCHEMA

    def classify(self, atoms: AtomsMessage, alpha_target: Tensor, test_x: Tensor, seed: int) -> Tensor:
        """Class probabilities of the target's test samples."""
        raise NotImplementedError

    def run(
        self,
        problem: FederatedProblem,
        settings: TrainSettings,
        seed: int,
        device: torch.device,
        on_round=None,
        checkpoints=None,
    ):
        if problem.task != "classification":
            raise ValueError(f"{self.name} needs a classification task, not {problem.task}")
        hp = self.hparams
        records: list[dict[str, Any]] = []
        dictionary_rounds = hp["rounds"] or settings.rounds
        encoder_kind = hp["encoder"]
        if encoder_kind == "auto":
            encoder_kind = "identity" if len(problem.input_shape) == 1 else "fedavg"
        encoder_rounds = (hp["encoder_rounds"] or settings.rounds) if encoder_kind == "fedavg" else 0
        total_rounds = encoder_rounds + dictionary_rounds
        encode = (
            self._train_encoder(
                problem, settings, seed, device, encoder_rounds, total_rounds, records, on_round, checkpoints
            )
            if encoder_rounds
            else None
        )

        def features_of(x: Tensor) -> Tensor:
            with torch.no_grad():
                z = encode(x) if encode is not None else x.flatten(1)
                return F.normalize(z, dim=1) if hp["normalise_features"] else z

        classes = problem.num_outputs
        clients = [
            DictionaryClient(
                s.name,
                features_of(s.inputs()),
                F.one_hot(s.labels(), classes).float(),
                torch.full((hp["atoms"],), 1.0 / hp["atoms"], device=device),
                torch.Generator().manual_seed(stream(seed, "dadil_clients", index)),
            )
            for index, s in enumerate(problem.sources)
        ]
        target_x = torch.cat(
            [problem.target_labelled.inputs(), problem.target_unlabelled.inputs()]
        )  # labels unused: the target is unlabelled
        target = DictionaryClient(
            "target",
            features_of(target_x),
            None,
            torch.full((hp["atoms"],), 1.0 / hp["atoms"], device=device),
            torch.Generator().manual_seed(stream(seed, "dadil_clients", len(clients))),
        )
        clients.append(target)
        # the test split, then the validation splits: one classifier scores them all in one call
        scored = [problem.target_test, *validation_splits(problem)]
        scored_x = torch.cat([features_of(split.inputs()) for split in scored])
        scored_sizes = [len(split) for split in scored]

        atoms = self.initial_atoms(hp, clients[0].x.shape[1], classes, seed, device)
        for dictionary_round in range(dictionary_rounds):
            started = time.perf_counter()
            messages, objectives = [], []
            for client in clients:
                message, objective = client.local_round(
                    atoms, hp
                )  # the server sends `atoms`, the client answers `message`
                messages.append(message)
                objectives.append(objective)
            averaged = average_messages(messages)
            atoms = AtomsMessage(
                averaged.features, averaged.label_logits if averaged.label_logits is not None else atoms.label_logits
            )
            probabilities = self.classify(
                atoms, target.alpha, scored_x, stream(seed, "dadil_classifier", dictionary_round)
            )
            by_split = {
                id(split): _accuracy_and_loss(part, split.labels())
                for split, part in zip(scored, probabilities.split(scored_sizes))
            }
            metrics = by_split[id(problem.target_test)]
            uplink = [m.nbytes for m in messages]
            record = round_record(
                encoder_rounds + dictionary_round,
                "dictionary",
                {
                    "accuracy": metrics["accuracy"],
                    "loss": metrics["loss"],
                    **validation_metrics(problem, lambda split, scores=by_split: scores[id(split)]),
                },
                sum(uplink),
                len(clients) * atoms.nbytes,
                started,
                objective=sum(objectives) / len(objectives),
                objective_per_client=objectives,
                bytes_uplink_per_client=uplink,
                clients=[c.name for c in clients],
                alpha_target=target.alpha.tolist(),
                encoder=encoder_kind,
            )
            records.append(record)
            if on_round is not None:
                on_round(record, total_rounds)
        dictionary_size = atoms.features.numel() + atoms.label_logits.numel()
        return {
            "metric": "accuracy",
            "model_size": dictionary_size,
            "sources": [s.name for s in problem.sources],
            "rounds": records,
        }

    @staticmethod
    def initial_atoms(hp: dict[str, Any], dim: int, classes: int, seed: int, device: torch.device) -> AtomsMessage:
        """The server's initial atoms: features ~ N(0, std²) (std = 1/sqrt(d) by default, so ‖x‖ ≈ 1 like the
        normalised features), labels balanced over the classes (point j has class j mod C)."""
        generator = torch.Generator().manual_seed(stream(seed, "dadil_atoms"))
        std = hp["atom_init_std"] or 1.0 / math.sqrt(dim)
        features = torch.randn(hp["atoms"], hp["support_size"], dim, generator=generator) * std
        classes_of_points = torch.arange(hp["support_size"]) % classes
        logits = LABEL_INIT_LOGIT * F.one_hot(classes_of_points, classes).float().expand(hp["atoms"], -1, -1).clone()
        return AtomsMessage(features.to(device), logits.to(device))

    def _train_encoder(
        self, problem, settings, seed, device, encoder_rounds, total_rounds, records, on_round, checkpoints
    ) -> Callable[[Tensor], Tensor]:
        """Stage 1: FedAvg over the sources for `encoder_rounds` rounds (the `source_only` method with the
        cell's settings; resumed from `checkpoints`); its records are logged with phase "encoder"; returns
        the trained body."""
        model = build_cell_model(problem, settings, seed, device)  # the same initial weights as source_only

        def forward(record: dict[str, Any], _total: int) -> None:
            record["phase"] = "encoder"
            if on_round is not None:
                on_round(record, total_rounds)

        history = run_rounds(
            SourceOnly(),
            problem,
            replace(settings, rounds=encoder_rounds),
            seed,
            device,
            forward,
            model=model,
            checkpoints=checkpoints,
        )
        records.extend({**record, "phase": "encoder"} for record in history["rounds"])
        model.eval()
        return model.features


@METHODS.register
class DaDiLR(FedDaDiL):
    """FedDaDiL, then DaDiL-R: a classifier trained on the target's reconstruction B(α_T; P)."""

    name = "dadil_r"
    description = "federated dataset dictionary learning; classifier on the target's reconstruction"

    def classify(self, atoms, alpha_target, test_x, seed):
        hp = self.hparams
        labels = F.softmax(atoms.label_logits, dim=2)
        start = int(alpha_target.argmax())
        with torch.no_grad():
            x, y = barycentre(
                list(atoms.features),
                alpha_target,
                atoms.features[start],
                list(labels),
                labels[start],
                hp["label_weight"],
                hp["barycentre_iterations"],
            )
        classifier = train_classifiers(
            x[None], y[None], hp["classifier_hidden"], hp["classifier_steps"], hp["classifier_lr"], seed
        )
        with torch.no_grad():
            return F.softmax(classifier.logits(test_x)[0], dim=1)


@METHODS.register
class DaDiLE(FedDaDiL):
    """FedDaDiL, then DaDiL-E: one classifier per atom, predictions weighted by α_T."""

    name = "dadil_e"
    description = "federated dataset dictionary learning; ensemble of per-atom classifiers weighted by the target's α"

    def classify(self, atoms, alpha_target, test_x, seed):
        hp = self.hparams
        labels = F.softmax(atoms.label_logits, dim=2)
        classifiers = train_classifiers(
            atoms.features, labels, hp["classifier_hidden"], hp["classifier_steps"], hp["classifier_lr"], seed
        )
        with torch.no_grad():
            per_atom = F.softmax(classifiers.logits(test_x), dim=2)  # (K, m, C)
            return (alpha_target[:, None, None] * per_atom).sum(0)
