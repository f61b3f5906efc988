"""FedDaDiL (dadil_r, dadil_e): what crosses a client boundary, α on the simplex, records, determinism."""

import dataclasses

import pytest
import torch

from fdabench.federation.problem import ClientData, FederatedProblem
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


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One torch thread, as every training cell runs (`threads_per_cell`): the tensors here are tiny, and
    a second intra-op thread only adds synchronisation on a busy machine."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


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


def test_client_messages_carry_the_atoms_only(blobs, monkeypatch):
    """Every message a client sends has the atoms' fields and shapes only; α is not among them."""
    received = []
    average = dadil.average_messages

    def spy(messages):
        received.append(messages)
        return average(messages)

    monkeypatch.setattr(dadil, "average_messages", spy)
    history = get_method("dadil_e", SMALL).run(blobs, SETTINGS, 0, torch.device("cpu"))
    assert len(received) == SMALL["rounds"]
    dim, classes = 4, 3
    atoms_bytes = 4 * SMALL["atoms"] * SMALL["support_size"] * (dim + classes)
    feature_bytes = 4 * SMALL["atoms"] * SMALL["support_size"] * dim
    assert {field.name for field in dataclasses.fields(dadil.AtomsMessage)} == {"features", "label_logits"}
    for messages, record in zip(received, history["rounds"]):
        assert len(messages) == 3  # two sources and the target
        for message in messages:
            assert type(message) is dadil.AtomsMessage and set(vars(message)) == {"features", "label_logits"}
            assert message.features.shape == (SMALL["atoms"], SMALL["support_size"], dim)
        assert all(m.label_logits.shape == (SMALL["atoms"], SMALL["support_size"], classes) for m in messages[:2])
        assert messages[2].label_logits is None  # the unlabelled target sends the features it updated only
        assert record["bytes_uplink_per_client"] == [atoms_bytes, atoms_bytes, feature_bytes]
        assert record["bytes_uplink"] == 2 * atoms_bytes + feature_bytes
        assert record["bytes_downlink"] == 3 * atoms_bytes


def test_alpha_stays_on_the_simplex_and_stays_private(blobs):
    hparams = {
        **dadil.FedDaDiL.default_hparams,
        **SMALL,
        "alpha_lr": 0.5,
        "local_steps": 5,
    }  # large steps: the projection acts
    client = dadil.DictionaryClient(
        "s0",
        blobs.sources[0].x,
        torch.nn.functional.one_hot(blobs.sources[0].y, 3).float(),
        torch.full((3,), 1 / 3),
        torch.Generator().manual_seed(0),
    )
    atoms = dadil.FedDaDiL.initial_atoms(hparams, 4, 3, seed=0, device=torch.device("cpu"))
    for _ in range(4):
        message, objective = client.local_round(atoms, hparams)
        assert (client.alpha >= 0).all() and float(client.alpha.sum()) == pytest.approx(1.0, abs=1e-6)
        assert objective > 0
        atoms = message
    assert not torch.allclose(client.alpha, torch.full((3,), 1 / 3))  # α moved...
    assert (client.alpha == 0).any()  # ...onto a face of the simplex at this step size


def test_rounds_log_objective_accuracy_and_alpha(blobs):
    for name in ("dadil_r", "dadil_e"):
        history = get_method(name, SMALL).run(blobs, SETTINGS, 0, torch.device("cpu"))
        rounds = history["rounds"]
        assert [r["round"] for r in rounds] == [0, 1, 2] and {r["phase"] for r in rounds} == {"dictionary"}
        for record in rounds:
            assert 0.0 <= record["accuracy"] <= 1.0 and record["loss"] > 0 and record["objective"] > 0
            assert len(record["objective_per_client"]) == 3 and record["clients"] == ["s0", "s1", "target"]
            assert sum(record["alpha_target"]) == pytest.approx(1.0, abs=1e-6) and record["encoder"] == "identity"
        assert history["model_size"] == SMALL["atoms"] * SMALL["support_size"] * (4 + 3)
        assert history["sources"] == ["s0", "s1"]


def test_same_seed_same_numbers(blobs):
    first = get_method("dadil_r", SMALL).run(blobs, SETTINGS, 3, torch.device("cpu"))["rounds"]
    second = get_method("dadil_r", SMALL).run(blobs, SETTINGS, 3, torch.device("cpu"))["rounds"]
    keys = ("accuracy", "loss", "objective", "alpha_target")
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
    rounds = get_method("dadil_e", hparams).run(blobs, SETTINGS, 0, torch.device("cpu"))["rounds"]
    assert rounds[-1]["objective"] < rounds[0]["objective"]
    assert rounds[-1]["accuracy"] >= 0.8


def test_fedavg_encoder_is_the_source_only_run(colored_digits):
    """With image inputs the encoder is FedAvg over the sources: its rounds are source_only's rounds."""
    from fdabench.data import get_partitioner
    from fdabench.federation.problem import build_problem

    partition = get_partitioner("leave_one_domain_out").split(
        colored_digits, "-90", 0, {"holdout_fraction": 0.2, "target_labelled": 48}
    )
    problem = build_problem(colored_digits, partition, "cpu")
    source_only = get_method("source_only").run(problem, SETTINGS, 0, torch.device("cpu"))["rounds"]
    history = get_method("dadil_r", {**SMALL, "rounds": 1}).run(problem, SETTINGS, 0, torch.device("cpu"))
    encoder = [r for r in history["rounds"] if r["phase"] == "encoder"]
    assert [r["accuracy"] for r in encoder] == [r["accuracy"] for r in source_only]
    assert [r["bytes_uplink"] for r in encoder] == [r["bytes_uplink"] for r in source_only]
    dictionary = history["rounds"][len(encoder) :]
    assert [r["round"] for r in dictionary] == [2] and dictionary[0]["encoder"] == "fedavg"


def test_regression_is_refused(blobs):
    regression = dataclasses.replace(blobs, task="regression")
    with pytest.raises(ValueError, match="classification"):
        get_method("dadil_e", SMALL).run(regression, SETTINGS, 0, torch.device("cpu"))


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
    say `uses_unlabelled_target` (tables mark it †): moving the unlabelled inputs changes the run, and
    scrambling every target training label does not."""
    baseline = get_method("dadil_e", SMALL).run(blobs, SETTINGS, 0, torch.device("cpu"))["rounds"]
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
    alpha = [r["alpha_target"] for r in baseline]
    assert [
        r["alpha_target"] for r in get_method("dadil_e", SMALL).run(moved, SETTINGS, 0, torch.device("cpu"))["rounds"]
    ] != alpha
    assert [
        r["alpha_target"]
        for r in get_method("dadil_e", SMALL).run(scrambled, SETTINGS, 0, torch.device("cpu"))["rounds"]
    ] == alpha
    assert METHODS.get("dadil_e").uses_unlabelled_target and METHODS.get("dadil_r").uses_unlabelled_target
