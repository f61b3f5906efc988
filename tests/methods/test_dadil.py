"""FedDaDiL (dadil_r, dadil_e): what crosses a client boundary, α on the simplex, records, determinism."""

import dataclasses

import pytest
import torch

from fdabench.federation.problem import ClientData, FederatedProblem
from fdabench.federation.rounds import build_cell_model, run_rounds
from fdabench.federation.rule_interface import RoundInputs
from fdabench.federation.settings import TrainSettings
from fdabench.methods import METHODS, dadil, get_method

SMALL = {
    "atoms": 3,
    "support_size": 12,
    "batch_size": 8,
    "local_steps": 2,
    "rounds": 3,
    "classifier_steps": 30,
    "barycentre_iterations": 2,
}
SETTINGS = TrainSettings.from_dict(
    {
        "model": "mlp",
        "model_options": {"hidden": [16]},
        "rounds": 2,
        "warmup_rounds": 0,
        "local_epochs": 1,
        "optimizer": "adam",
        "source_lr": 1e-2,
        "target_lr": 1e-2,
        "source_batch_size": 16,
        "target_batch_size": 16,
    }
)


def _domain(name, count, shift, seed, classes=3, dim=4):
    """Gaussian blobs, one per class, moved by `shift` (the domain's offset)."""
    generator = torch.Generator().manual_seed(seed)
    y = torch.arange(count) % classes
    centres = 3.0 * torch.eye(classes, dim)
    x = centres[y] + shift + 0.3 * torch.randn(count, dim, generator=generator)
    return ClientData(name, x, y)


@pytest.fixture(scope="module")
def blobs():
    """Feature-vector domains (the identity encoder): two sources and a shifted target."""
    sources = [
        _domain("s0", 30, torch.tensor([0.0, 0.0, 0.0, 1.0]), 0),
        _domain("s1", 30, torch.tensor([0.0, 0.0, 0.0, -1.0]), 1),
    ]
    target = _domain("t", 40, torch.tensor([0.5, 0.5, 0.0, 0.0]), 2)
    return FederatedProblem(
        task="classification",
        num_outputs=3,
        input_shape=(4,),
        sources=sources,
        target_labelled=ClientData("target_labelled", target.x[:6], target.y[:6]),
        target_unlabelled=ClientData("target_unlabelled", target.x[6:25], target.y[6:25]),
        target_test=ClientData("target_test", target.x[25:], target.y[25:]),
    )


def test_methods_are_registered_with_valid_defaults():
    assert {"dadil_r", "dadil_e"} <= set(METHODS.names())
    for name in ("dadil_r", "dadil_e"):
        assert set(METHODS.get(name).default_hparams) == set(METHODS.get(name).hparams_schema)


def _run(name, problem, hparams=SMALL, seed=0):
    return run_rounds(get_method(name, hparams), problem, SETTINGS, seed, torch.device("cpu"))


def test_clients_send_atom_updates_only(blobs, monkeypatch):
    """What reaches the server each round: every client's update of the atoms and its count. The α slot of θ is zero
    in every update and in θ itself (no client's α leaves it); the unlabelled target's label logits do not move. Bytes:
    the atoms' floats (the target's update counted at the atoms' size, as every update of the round) and the counts."""
    received = []
    aggregate = dadil.FedDaDiL.aggregate

    def server(self, inputs):
        received.append(inputs)
        return aggregate(self, inputs)

    monkeypatch.setattr(dadil.FedDaDiL, "aggregate", server)
    history = _run("dadil_e", blobs)
    assert len(received) == SMALL["rounds"] == len(history["rounds"])
    dim, classes, atoms = 4, 3, SMALL["atoms"]
    features = atoms * SMALL["support_size"] * dim
    logits = atoms * SMALL["support_size"] * classes
    atoms_bytes = 4 * (features + logits)
    for inputs, record in zip(received, history["rounds"]):
        assert inputs.layer_names == ("atom_features", "atom_label_logits", "alpha")
        assert inputs.layer_sizes == (features, logits, atoms)
        assert inputs.source_updates.shape == (2, features + logits + atoms)
        every = torch.cat([inputs.source_updates, inputs.target_update[None], inputs.global_params[None]])
        assert (every[:, features + logits :] == 0).all()  # α: never in an update, never in θ
        assert (inputs.source_updates[:, :features] != 0).any(dim=1).all()
        assert (inputs.source_updates[:, features : features + logits] != 0).any(dim=1).all()
        assert (inputs.target_update[:features] != 0).any()
        assert (inputs.target_update[features : features + logits] == 0).all()  # no labels: no label logits
        assert record["bytes_uplink"] == 3 * (atoms_bytes + 8)
        assert record["bytes_downlink"] == 3 * atoms_bytes
        assert not {key for key in record if "alpha" in key or "objective" in key}  # α stays out of the record too


def test_server_averages_features_over_every_client_and_labels_over_the_sources():
    """The server's step by hand: atoms = θ + mean of the updates, features over the sources and the target, label
    logits over the sources only; the α slot and everything else are left; θ is set (no server momentum)."""
    method = get_method("dadil_e", SMALL)
    names, sizes = ("encoder.w", "atom_features", "atom_label_logits", "alpha"), (2, 3, 2, 2)
    theta = torch.tensor([1.0, 2.0, 0.0, 0.0, 0.0, 5.0, 5.0, 0.0, 0.0])
    sources = torch.tensor(
        [
            [0.0, 0.0, 3.0, 6.0, 0.0, 1.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, 3.0, 9.0, 3.0, 2.0, 0.0, 0.0],
        ]
    )
    target = torch.tensor([0.0, 0.0, 3.0, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0])
    inputs = RoundInputs(0, theta, sizes, SETTINGS, names, source_updates=sources, target_update=target)
    step = method.aggregate(inputs)
    expected = torch.tensor([1.0, 2.0, 2.0, 3.0, 4.0, 7.0, 6.0, 0.0, 0.0])
    assert torch.equal(step.params, expected) and torch.equal(step.delta, expected - theta)


def test_alpha_stays_on_the_simplex(blobs):
    """Large α steps: the projection acts, α moves onto a face of the simplex and stays a distribution."""
    hparams = {**dadil.FedDaDiL.default_hparams, **SMALL, "alpha_lr": 0.5, "local_steps": 5}
    features, logits = dadil.FedDaDiL.initial_atoms(hparams, 4, 3, key=0, device=torch.device("cpu"))
    alpha = torch.full((3,), 1 / 3)
    labels = torch.nn.functional.one_hot(blobs.sources[0].y, 3).float()
    generator = torch.Generator().manual_seed(0)
    for _ in range(4):
        features, logits, alpha, objective = dadil.dictionary_steps(
            features, logits, alpha, blobs.sources[0].x, labels, generator, hparams
        )
        assert (alpha >= 0).all() and float(alpha.sum()) == pytest.approx(1.0, abs=1e-6)
        assert objective > 0
    assert not torch.allclose(alpha, torch.full((3,), 1 / 3))  # α moved...
    assert (alpha == 0).any()  # ...onto a face of the simplex at this step size


def test_unlabelled_steps_leave_the_label_logits():
    """The target's loss reads no label (W_2² on the features): its label logits come back as they went."""
    hparams = {**dadil.FedDaDiL.default_hparams, **SMALL}
    features, logits = dadil.FedDaDiL.initial_atoms(hparams, 4, 3, key=1, device=torch.device("cpu"))
    x = torch.randn(20, 4, generator=torch.Generator().manual_seed(2))
    new_features, new_logits, _, _ = dadil.dictionary_steps(
        features, logits, torch.full((3,), 1 / 3), x, None, torch.Generator().manual_seed(0), hparams
    )
    assert torch.equal(new_logits, logits) and not torch.equal(new_features, features)


def test_the_target_evaluates_with_its_own_alpha(blobs, monkeypatch):
    """The cell reports the target's classifier at its α (θ's α slot holds α_T in the target's view; θ's own is
    zero) on its test split and on every validation split, from one classifier per round, and θ's own predictor
    beside it (the identity encoder: the dictionary's classifier at uniform coordinates)."""
    validated = dataclasses.replace(
        blobs,
        source_validation=[_domain(f"v{index}", 9, torch.zeros(4), 10 + index) for index in range(2)],
        target_validation=_domain("target_validation", 7, torch.tensor([0.5, 0.5, 0.0, 0.0]), 12),
    )
    built = []
    classifier = dadil.DaDiLE.classifier

    def spy(self, features, labels, alpha, seed):
        built.append(alpha.clone())
        return classifier(self, features, labels, alpha, seed)

    monkeypatch.setattr(dadil.DaDiLE, "classifier", spy)
    history = _run("dadil_e", validated)
    rounds = history["rounds"]
    assert len(built) == 2 * SMALL["rounds"] == 2 * len(rounds)  # θ's, then the target's for all its splits
    uniform = torch.full((SMALL["atoms"],), 1 / SMALL["atoms"])
    for global_alpha, target_alpha in zip(built[::2], built[1::2]):
        assert torch.equal(global_alpha, uniform)
        assert float(target_alpha.sum()) == pytest.approx(1.0, abs=1e-6) and not torch.equal(target_alpha, uniform)
    assert not torch.equal(built[1], built[-1])  # α_T moves round by round
    for record in rounds:
        assert {"global_accuracy", "global_loss", "source_val_accuracy", "target_val_accuracy"} <= set(record)


def test_rounds_log_accuracy_loss_and_the_encoder(blobs):
    for name in ("dadil_r", "dadil_e"):
        history = _run(name, blobs)
        rounds = history["rounds"]
        assert [r["round"] for r in rounds] == [0, 1, 2] and {r["phase"] for r in rounds} == {"dictionary"}
        for record in rounds:
            assert 0.0 <= record["accuracy"] <= 1.0 and record["loss"] > 0 and record["encoder"] == "identity"
        atoms = SMALL["atoms"] * SMALL["support_size"] * (4 + 3)
        assert history["model_size"] == atoms + SMALL["atoms"]  # the atoms and θ's α slot
        assert history["sources"] == ["s0", "s1"]


def test_same_seed_same_numbers(blobs):
    first = _run("dadil_r", blobs, seed=3)["rounds"]
    second = _run("dadil_r", blobs, seed=3)["rounds"]
    keys = ("accuracy", "loss", "bytes_uplink")
    assert [[r[k] for k in keys] for r in first] == [[r[k] for k in keys] for r in second]


def test_dictionary_learns_the_blobs(blobs):
    """Well-separated classes: the ensemble of per-atom classifiers labels the shifted target well."""
    hparams = {
        **SMALL,
        "rounds": 10,
        "local_steps": 5,
        "normalise_features": False,
        "atom_init_std": 1.0,
        "atom_lr": 0.1,
    }
    rounds = _run("dadil_e", blobs, hparams)["rounds"]
    assert rounds[-1]["loss"] < rounds[0]["loss"]
    assert rounds[-1]["accuracy"] >= 0.8


def test_fedavg_encoder_is_the_source_only_run(colored_digits):
    """With image inputs the encoder is FedAvg over the sources: its rounds are source_only's rounds."""
    from fdabench.data import get_partitioner
    from fdabench.federation.problem import build_problem

    partition = get_partitioner("leave_one_domain_out").split(
        colored_digits, "-90", 0, {"holdout_fraction": 0.2, "target_labelled": 48}
    )
    problem = build_problem(colored_digits, partition, "cpu")
    source_only = run_rounds(get_method("source_only"), problem, SETTINGS, 0, torch.device("cpu"))["rounds"]
    history = run_rounds(get_method("dadil_r", {**SMALL, "rounds": 1}), problem, SETTINGS, 0, torch.device("cpu"))
    encoder = [r for r in history["rounds"] if r["phase"] == "encoder"]
    assert [r["accuracy"] for r in encoder] == [r["accuracy"] for r in source_only]
    assert [r["bytes_uplink"] for r in encoder] == [r["bytes_uplink"] for r in source_only]
    dictionary = history["rounds"][len(encoder) :]
    assert [r["round"] for r in dictionary] == [2] and dictionary[0]["encoder"] == "fedavg"
    model = build_cell_model(problem, SETTINGS, 0, torch.device("cpu"))
    encoder_bytes = 4 * sum(p.numel() for p in model.parameters())
    assert encoder[0]["bytes_downlink"] == len(problem.sources) * encoder_bytes  # the encoder only, not the atoms
    dim = model.features(problem.target_test.inputs()[:1]).shape[1]
    atoms_bytes = 4 * SMALL["atoms"] * SMALL["support_size"] * (dim + problem.num_outputs)
    assert dictionary[0]["bytes_downlink"] == (len(problem.sources) + 1) * atoms_bytes  # the atoms only


def test_regression_is_refused(blobs):
    regression = dataclasses.replace(blobs, task="regression")
    with pytest.raises(ValueError, match="classification"):
        _run("dadil_e", regression)


@pytest.mark.parametrize("hidden", [[], [8]])
def test_batched_classifiers_train_independently(hidden):
    """Changing one group's data leaves the other groups' trained classifiers unchanged (no gradient mixes)."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 20, 5, generator=generator)
    labels = torch.softmax(torch.randn(3, 20, 4, generator=generator), dim=2)
    other_x, other_labels = x.clone(), labels.clone()
    other_x[1] = torch.randn(20, 5, generator=generator)
    other_labels[1] = labels[1].flip(1)
    first = dadil.train_classifiers(x, labels, hidden, steps=25, lr=0.05, seed=1)
    second = dadil.train_classifiers(other_x, other_labels, hidden, steps=25, lr=0.05, seed=1)
    probe = torch.randn(7, 5, generator=generator)
    with torch.no_grad():
        a, b = first.logits(probe), second.logits(probe)
    assert torch.allclose(a[[0, 2]], b[[0, 2]], atol=1e-6) and not torch.allclose(a[1], b[1])


def test_reads_the_targets_unlabelled_inputs_never_its_labels(blobs):
    """The target's dictionary client sees every training input of the target and no label, so the cells
    say `roles.unlabelled` (tables mark it †): moving the unlabelled inputs changes the run, and
    scrambling every target training label does not."""
    baseline = _run("dadil_e", blobs)["rounds"]
    moved = dataclasses.replace(
        blobs,
        target_unlabelled=ClientData("target_unlabelled", blobs.target_unlabelled.x + 1.0, blobs.target_unlabelled.y),
    )
    scrambled = dataclasses.replace(
        blobs,
        target_labelled=ClientData("target_labelled", blobs.target_labelled.x, (blobs.target_labelled.y + 1) % 3),
        target_unlabelled=ClientData(
            "target_unlabelled", blobs.target_unlabelled.x, (blobs.target_unlabelled.y + 1) % 3
        ),
    )
    losses = [r["loss"] for r in baseline]
    assert [r["loss"] for r in _run("dadil_e", moved)["rounds"]] != losses
    assert [r["loss"] for r in _run("dadil_e", scrambled)["rounds"]] == losses
    assert METHODS.get("dadil_e").roles.unlabelled and METHODS.get("dadil_r").roles.unlabelled
