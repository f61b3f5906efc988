"""FedDaDiL: federated Wasserstein dataset dictionary learning (Castellon et al., ICASSP 2024), with the
DaDiL-R and DaDiL-E target classifiers (Montesuma et al., ECAI 2023). docs/design/methods.md, FedDaDiL.

Both stages run in the round loop (`federation.rounds`), as two phases of one cell, in process and over Flower.

Stage 1, "encoder" rounds: the encoder φ is trained by FedAvg over the sources (exactly the `source_only` rounds of
the cell's settings), or is the identity for pre-extracted features (`encoder: auto` picks the identity when the inputs
are feature vectors, and the stage has no rounds). Clients then work on φ(x), scaled to unit L2 norm per sample
(`normalise_features`).

Stage 2, "dictionary" rounds: K atoms P_k, each an empirical distribution of n points with features x and soft labels
y = softmax(label logits), are the global parameters θ (`DictionaryModel`, with the frozen encoder). Every client ℓ —
each source and the unlabelled target — keeps private barycentric coordinates α_ℓ on the simplex (its client state).
Each round the server sends the atoms to every client; the client runs E local steps: draw a mini-batch of its data
and one of each atom, compute the barycentre B(α_ℓ; P) by the free-support fixed-point iteration with exact OT on the
cost ‖x − x'‖² + β‖y − y'‖², take the OT cost W_c(batch, B) as loss (features only, W_2², for the target), and step on
the atoms and on α_ℓ (Adam), then project α_ℓ onto the simplex. It sends back the change of its version of the
atoms — features, plus label logits when it has labels — and never α_ℓ. The server averages the returned versions
(label logits over the labelled clients only).

After every round the target, which holds α_T and the atoms, builds its classifier and is evaluated on its test split
(its view of θ carries α_T: `DictionaryModel.forward`): DaDiL-R trains a classifier on the reconstruction B(α_T; P)
(full atoms, labels = the barycentre's soft labels); DaDiL-E trains one classifier per atom and predicts
Σ_k α_T,k h_k(x).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fdabench.core.streams import SEED_STRIDE, Purpose, register_purpose, stream, tensor_seed
from fdabench.federation.client import LocalResult, adam
from fdabench.federation.client_state import ClientState, LocalClient, LocalReply, View
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import FederatedProblem
from fdabench.federation.records import register_phase
from fdabench.federation.rule_interface import Phase
from fdabench.federation.settings import TrainSettings
from fdabench.methods.base import METHODS, Aggregate, Roles, RoundInputs, RoundLoopMethod
from fdabench.tensor_math.dataset_dictionary import barycentre, project_simplex, wasserstein_cost

ENCODER = register_phase("encoder", "FedDaDiL's FedAvg rounds over the sources that train its encoder")
DICTIONARY = register_phase("dictionary", "FedDaDiL's dictionary rounds: the atoms, every client's α kept at home")
#: the target's classifiers and the server's initial atoms, both from the cell's model key (`tensor_seed`)
CLASSIFIER_STREAM = register_purpose(
    "dadil_classifier", Purpose(SEED_STRIDE, 299_993, 0, "FedDaDiL's classifiers (seed: the cell's model key)")
)
ATOMS_STREAM = register_purpose(
    "dadil_atoms", Purpose(SEED_STRIDE, 999_983, 0, "FedDaDiL's initial atoms (seed: the cell's model key)")
)
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


#: the atoms' entries of θ (`DictionaryModel`), and the evaluating client's coordinates
FEATURES, LABEL_LOGITS, ALPHA = "atom_features", "atom_label_logits", "alpha"
ENCODER_PREFIX, ATOMS_PREFIX = "encoder.", "atom_"  # the encoder's entries; the atoms' (features, label logits)


class DictionaryModel(nn.Module):
    """θ of FedDaDiL: the encoder φ (the cell's model, trained in the encoder rounds; none for the identity), the
    atoms' features (K, n, d) and label logits (K, n, C), and an α slot of K entries that holds the coordinates of
    the client that evaluates: zero in θ itself (the server never holds a client's α), a client's own α_ℓ in its view
    (`FedDaDiL.evaluation_view`). It predicts log-probabilities of the method's classifier built from the atoms and α
    (`classify`), trained once per distinct (atoms, α) and kept until they change, its initialisation seeded from the
    cell (`key`). θ itself (α zero) is the encoder's classifier (the encoder rounds' metric, and in the dictionary
    rounds the FedAvg model the dictionary was built on) or, with the identity encoder, the dictionary's classifier
    at uniform coordinates: the global model the record reports beside the target's (`personalised`)."""

    def __init__(
        self,
        encoder: nn.Module | None,
        features: Tensor,
        label_logits: Tensor,
        classify: Callable[[Tensor, Tensor, Tensor, int], Callable[[Tensor], Tensor]],
        normalise: bool,
        key: int,
    ):
        super().__init__()
        self.encoder = encoder
        self.atom_features = nn.Parameter(features)
        self.atom_label_logits = nn.Parameter(label_logits)
        self.alpha = nn.Parameter(torch.zeros(len(features), device=features.device))
        self.classify, self.normalise, self.key = classify, normalise, key
        self._predictor: tuple[tuple[Tensor, ...], Callable[[Tensor], Tensor]] | None = None

    def encode(self, x: Tensor) -> Tensor:
        """φ(x) (the encoder's body, in evaluation mode; x flattened for the identity), scaled to unit norm."""
        with torch.no_grad():
            if self.encoder is None:
                z = x.flatten(1)
            else:
                training = self.encoder.training
                self.encoder.eval()
                z = self.encoder.features(x)
                self.encoder.train(training)
            return F.normalize(z, dim=1) if self.normalise else z

    def predictor(self, alpha: Tensor) -> Callable[[Tensor], Tensor]:
        """The classifier of the current atoms and coordinates `alpha` (class probabilities of encoded inputs)."""
        view = (self.atom_features.detach(), self.atom_label_logits.detach(), alpha)
        if self._predictor is None or not all(torch.equal(kept, now) for kept, now in zip(self._predictor[0], view)):
            kept = tuple(value.clone() for value in view)
            with torch.enable_grad():
                self._predictor = kept, self.classify(*kept, stream(self.key, CLASSIFIER_STREAM))
        return self._predictor[1]

    def forward(self, x: Tensor) -> Tensor:
        alpha = self.alpha.detach()
        if not bool(alpha.any()):  # θ itself: the encoder's classifier, or the dictionary's at uniform coordinates
            if self.encoder is not None:
                return self.encoder(x)
            alpha = torch.full_like(alpha, 1.0 / len(alpha))
        return self.predictor(alpha)(self.encode(x)).clamp_min(1e-12).log()


def entry_slices(names: tuple[str, ...], sizes: tuple[int, ...]) -> dict[str, slice]:
    """Where each named parameter (`names`, with its entry count in `sizes`) lies in the flat vector."""
    slices, offset = {}, 0
    for name, size in zip(names, sizes):
        slices[name] = slice(offset, offset + size)
        offset += size
    return slices


def dictionary_steps(
    features: Tensor,
    logits: Tensor,
    alpha: Tensor,
    x: Tensor,
    y: Tensor | None,
    generator: torch.Generator,
    hparams: dict[str, Any],
) -> tuple[Tensor, Tensor, Tensor, float]:
    """A client's E local steps from the received atoms (features (K, n, d), label logits (K, n, C)) with its
    coordinates α, on its encoded samples x and one-hot labels y (None: the unlabelled target, whose loss is W_2² on
    the features and which leaves the label logits as they came); (new features, new logits, new α, mean loss)."""
    features = features.clone().requires_grad_(True)
    labelled = y is not None
    logits = logits.clone().requires_grad_(labelled)
    alpha = alpha.clone().requires_grad_(True)
    atom_optimizer = adam([features, logits] if labelled else [features], lr=hparams["atom_lr"])
    alpha_optimizer = adam([alpha], lr=hparams["alpha_lr"])
    atoms_count, support = features.shape[:2]
    batch = min(hparams["batch_size"], support)
    client_batch = min(hparams["batch_size"], len(x))
    total = 0.0
    for _ in range(hparams["local_steps"]):
        rows = torch.randperm(len(x), generator=generator)[:client_batch].to(x.device)
        picks = [torch.randperm(support, generator=generator)[:batch].to(x.device) for _ in range(atoms_count)]
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
            loss = wasserstein_cost(x[rows], bary_x, y[rows], bary_y, hparams["label_weight"])
        else:
            loss = wasserstein_cost(x[rows], bary_x)
        atom_optimizer.zero_grad()
        alpha_optimizer.zero_grad()
        loss.backward()
        atom_optimizer.step()
        alpha_optimizer.step()
        with torch.no_grad():
            alpha.copy_(project_simplex(alpha))
        total += float(loss.detach())
    return features.detach(), logits.detach(), alpha.detach(), total / hparams["local_steps"]


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


class FedDaDiL(RoundLoopMethod):
    """Shared protocol of dadil_r and dadil_e; subclasses say how the target classifies (`classifier`)."""

    family = "unsupervised"
    #: the target's client reads all its training inputs, no label; every client keeps its α (and how many dictionary
    #: rounds it has trained); the cell reports the target's classifier (at α_T), on its test split and on every
    #: validation split, and θ's own beside it (`global_accuracy`, `global_loss`); the classifier never leaves it
    roles = Roles(target="unlabelled", unlabelled=True, state="all", personalised=True)
    hparams_schema: ClassVar[dict[str, Any]] = HPARAMS_SCHEMA

    def __init__(self, hparams: dict[str, Any] | None = None):
        super().__init__(hparams)
        self.encoder_kind = "identity"  # set from the problem's inputs by `prepare_model`
        self.alpha_entries = slice(0)  # where θ holds the α slot (`prepare_model`)

    def classifier(self, features: Tensor, labels: Tensor, alpha: Tensor, seed: int) -> Callable[[Tensor], Tensor]:
        """The target's classifier from the atoms (features, soft labels) and its α: class probabilities of encoded
        inputs."""
        raise NotImplementedError

    # -- the model and the phases -----------------------------------------------------------------------------------
    def prepare_model(self, model: nn.Module, problem: FederatedProblem) -> DictionaryModel:
        """θ (`DictionaryModel`) around the cell's model: its encoder (or the identity), the initial atoms."""
        if problem.task != "classification":
            raise ValueError(f"{self.name} needs a classification task, not {problem.task}")
        hp = self.hparams
        kind = hp["encoder"]
        if kind == "auto":
            kind = "identity" if len(problem.input_shape) == 1 else "fedavg"
        self.encoder_kind = kind
        initial = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        key = tensor_seed(initial)  # the cell's: its model's seeded initialisation
        device = initial.device
        if kind == "identity":
            encoder, dim = None, math.prod(problem.input_shape)
        else:
            encoder = model
            with torch.no_grad():
                training = model.training
                model.eval()
                dim = model.features(torch.zeros(1, *problem.input_shape, device=device)).shape[1]
                model.train(training)
        features, logits = self.initial_atoms(hp, dim, problem.num_outputs, key, device)

        def classify(features: Tensor, logits: Tensor, alpha: Tensor, seed: int) -> Callable[[Tensor], Tensor]:
            return self.classifier(features, F.softmax(logits, dim=2), alpha, seed)

        dictionary = DictionaryModel(encoder, features, logits, classify, hp["normalise_features"], key)
        space = ParameterSpace(dictionary)
        self.alpha_entries = entry_slices(space.layer_names, space.layer_sizes)[ALPHA]
        return dictionary

    def phases(self, settings: TrainSettings, has_sources: bool) -> list[Phase]:
        """The encoder's FedAvg rounds over the sources (`encoder_rounds`, default train.rounds; none for the identity
        encoder), then the dictionary rounds (`rounds`, default train.rounds), where every client trains."""
        hp = self.hparams
        encoder_rounds = (hp["encoder_rounds"] or settings.rounds) if self.encoder_kind == "fedavg" else 0
        return [
            Phase(ENCODER, encoder_rounds if has_sources else 0, sources=True, target=False, step="fedavg"),
            Phase(DICTIONARY, hp["rounds"] or settings.rounds, sources=True, target=True),
        ]

    def update_bytes(self, space: ParameterSpace, phase: Phase) -> int:
        """What crosses in a round: the encoder's parameters in its rounds, the atoms (features and label logits)
        in the dictionary's; never α."""
        prefix = ENCODER_PREFIX if phase.name == ENCODER else ATOMS_PREFIX
        return ParameterSpace(space.model, prefix=prefix).update_bytes

    @staticmethod
    def initial_atoms(
        hp: dict[str, Any], dim: int, classes: int, key: int, device: torch.device
    ) -> tuple[Tensor, Tensor]:
        """The server's initial atoms: features ~ N(0, std²) (std = 1/sqrt(d) by default, so ‖x‖ ≈ 1 like the
        normalised features), label logits balanced over the classes (point j has class j mod C)."""
        generator = torch.Generator().manual_seed(stream(key, ATOMS_STREAM))
        std = hp["atom_init_std"] or 1.0 / math.sqrt(dim)
        features = torch.randn(hp["atoms"], hp["support_size"], dim, generator=generator) * std
        classes_of_points = torch.arange(hp["support_size"]) % classes
        logits = LABEL_INIT_LOGIT * F.one_hot(classes_of_points, classes).float().expand(hp["atoms"], -1, -1).clone()
        return features.to(device), logits.to(device)

    # -- the clients ------------------------------------------------------------------------------------------------
    def client_state(self, space: ParameterSpace) -> ClientState:
        """α = 1/K on every coordinate, and no dictionary round trained yet."""
        atoms = self.hparams["atoms"]
        device = space.parameters[0].device
        return {"alpha": torch.full((atoms,), 1.0 / atoms, device=device), "rounds": torch.zeros((), dtype=torch.int64)}

    def evaluation_view(self, state: ClientState | None, params: Tensor) -> View:
        """θ with the client's α in the α slot, once it has trained a dictionary round (before: θ, the encoder)."""
        if int(state["rounds"]) == 0:
            return View(params)
        view = params.clone()
        view[self.alpha_entries] = state["alpha"]
        return View(view)

    def local_round(
        self, client: LocalClient, state: ClientState | None, start: Tensor, broadcast: Tensor | None
    ) -> LocalReply | None:
        """A dictionary round (`dictionary_steps` on the client's encoded samples); in the encoder rounds, plain
        local training (None)."""
        if client.settings.phase != DICTIONARY:
            return None
        model: DictionaryModel = client.space.model
        at = entry_slices(client.space.layer_names, client.space.layer_sizes)
        shape = model.atom_features.shape, model.atom_label_logits.shape
        labelled = client.role == "source"
        x = model.encode(client.data.inputs())
        y = F.one_hot(client.data.labels(), model.atom_label_logits.shape[2]).float() if labelled else None
        features, logits, alpha, _ = dictionary_steps(
            start[at[FEATURES]].view(shape[0]),
            start[at[LABEL_LOGITS]].view(shape[1]),
            state["alpha"],
            x,
            y,
            client.generator,
            self.hparams,
        )
        update = torch.zeros_like(start)
        update[at[FEATURES]] = features.reshape(-1) - start[at[FEATURES]]
        if labelled:  # the unlabelled target sends no label logits (its update's are zero)
            update[at[LABEL_LOGITS]] = logits.reshape(-1) - start[at[LABEL_LOGITS]]
        kept = {"alpha": alpha, "rounds": state["rounds"] + 1}  # α stays: not even the record receives it
        return LocalReply(LocalResult(update, self.hparams["local_steps"], len(client.data)), kept)

    # -- the server -------------------------------------------------------------------------------------------------
    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        """The atoms become the mean of the returned versions: features over every client that answered, label
        logits over the labelled ones (the sources); θ is set, not stepped."""
        at = entry_slices(inputs.layer_names, inputs.layer_sizes)
        delta = torch.zeros_like(inputs.global_params)
        sources = inputs.source_updates
        every = sources if inputs.target_update is None else torch.cat([sources, inputs.target_update[None]])
        delta[at[FEATURES]] = every[:, at[FEATURES]].mean(0)
        delta[at[LABEL_LOGITS]] = sources[:, at[LABEL_LOGITS]].mean(0)
        return Aggregate(delta, {"encoder": self.encoder_kind}, params=inputs.global_params + delta)


@METHODS.register
class DaDiLR(FedDaDiL):
    """FedDaDiL, then DaDiL-R: a classifier trained on the target's reconstruction B(α_T; P)."""

    name = "dadil_r"
    description = "federated dataset dictionary learning; classifier on the target's reconstruction"

    def classifier(self, features, labels, alpha, seed):
        hp = self.hparams
        start = int(alpha.argmax())
        with torch.no_grad():
            x, y = barycentre(
                list(features),
                alpha,
                features[start],
                list(labels),
                labels[start],
                hp["label_weight"],
                hp["barycentre_iterations"],
            )
        trained = train_classifiers(
            x[None], y[None], hp["classifier_hidden"], hp["classifier_steps"], hp["classifier_lr"], seed
        )

        def probabilities(z: Tensor) -> Tensor:
            with torch.no_grad():
                return F.softmax(trained.logits(z)[0], dim=1)

        return probabilities


@METHODS.register
class DaDiLE(FedDaDiL):
    """FedDaDiL, then DaDiL-E: one classifier per atom, predictions weighted by α_T."""

    name = "dadil_e"
    description = "federated dataset dictionary learning; ensemble of per-atom classifiers weighted by the target's α"

    def classifier(self, features, labels, alpha, seed):
        hp = self.hparams
        trained = train_classifiers(
            features, labels, hp["classifier_hidden"], hp["classifier_steps"], hp["classifier_lr"], seed
        )

        def probabilities(z: Tensor) -> Tensor:
            with torch.no_grad():
                per_atom = F.softmax(trained.logits(z), dim=2)  # (K, m, C)
                return (alpha[:, None, None] * per_atom).sum(0)

        return probabilities
