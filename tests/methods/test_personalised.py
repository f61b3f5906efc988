"""Personalised FL over all clients, evaluated on the target's personalised model: Ditto, FedRep, APFL, kNN-Per."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from fdabench.federation.client import LocalSettings, evaluate, train_locally
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import ClientData
from fdabench.federation.rounds import build_cell_model
from fdabench.federation.sites import client_generator
from fdabench.methods.personalised import knn_probabilities

PERSONALISED = ["ditto", "fedrep", "apfl", "knn_per"]


def _accuracies(history, key="accuracy"):
    return [r[key] for r in history["rounds"]]


def _initial_accuracy(problem, settings):
    model = build_cell_model(problem, settings, 0, torch.device("cpu"))
    return evaluate(model, problem.target_test, problem.task)["accuracy"]


@pytest.mark.parametrize("name", PERSONALISED)
def test_every_client_takes_part_and_bytes_count_the_shared_parameters(run_method, tiny_problem, name):
    history = run_method(name)
    clients = len(tiny_problem.sources) + 1
    shared = history["model_size"] - (17 * 2 if name == "fedrep" else 0)  # FedRep: the 16->2 head stays local
    assert all(
        r["bytes_downlink"] == clients * 4 * shared and r["bytes_uplink"] == clients * (4 * shared + 8)
        for r in history["rounds"]
    )
    assert len(history["rounds"]) == 4 and all("global_accuracy" in r for r in history["rounds"])


def test_ditto_infinite_penalty_is_the_global_model_it_received(run_method, tiny_problem, tiny_settings):
    """λ → ∞ pins the personal model to w^t: its accuracy in round r is the global model's of round r − 1."""
    history = run_method("ditto", {"penalty": 1e12})
    personal, global_ = _accuracies(history), _accuracies(history, "global_accuracy")
    assert personal[0] == _initial_accuracy(tiny_problem, tiny_settings)
    assert personal[1:] == global_[:-1]


def test_ditto_penalty_changes_the_personal_model_not_the_global_one(run_method):
    weak, strong = run_method("ditto", {"penalty": 0.0}), run_method("ditto", {"penalty": 1e3})
    assert _accuracies(weak, "global_loss") == _accuracies(strong, "global_loss")
    assert [r["loss"] for r in weak["rounds"]] != [r["loss"] for r in strong["rounds"]]


def _target_local_training_losses(problem, settings, rounds, shuffle=True):
    """The target alone: local training from the initial model, round after round, with its batch stream (in the
    stored order where `shuffle` is False)."""
    model = build_cell_model(problem, settings, 0, torch.device("cpu"))
    space = ParameterSpace(model)
    params, generator, losses = space.get(), client_generator(0, len(problem.sources)), []
    for _ in range(rounds):
        params = (
            params
            + train_locally(
                space,
                params,
                problem.target_labelled,
                LocalSettings(1e-3, 16, 1, shuffle=shuffle),
                F.cross_entropy,
                generator,
            ).update
        )
        space.set(params)
        losses.append(evaluate(model, problem.target_test, problem.task)["loss"])
    return losses


@pytest.mark.parametrize("order", ["shuffled", "fixed"])
def test_apfl_alpha1_is_local_training(run_method, tiny_problem, tiny_settings, order):
    """α = 1 (all weight on the local model v): v̄ = v, trained on the target's loss alone, its batches in the
    target's order (`target_order`)."""
    losses = [r["loss"] for r in run_method("apfl", {"alpha": 1.0}, target_order=order)["rounds"]]
    expected = _target_local_training_losses(tiny_problem, tiny_settings, 4, shuffle=order == "shuffled")
    assert losses == pytest.approx(expected, rel=1e-6)


def test_apfl_alpha0_is_the_global_model(run_method):
    history = run_method("apfl", {"alpha": 0.0})
    assert _accuracies(history) == _accuracies(history, "global_accuracy")
    assert [r["loss"] for r in history["rounds"]] == pytest.approx(_accuracies(history, "global_loss"), rel=1e-6)


def test_apfl_global_model_is_fedavg_over_all_clients(run_method):
    """The local model never feeds back into w: APFL's global model is kNN-Per's (FedAvg over all clients)."""
    assert _accuracies(run_method("apfl"), "global_loss") == pytest.approx(
        _accuracies(run_method("knn_per"), "global_loss"), rel=1e-6
    )


def test_knn_per_interpolation0_is_the_global_model(run_method):
    history = run_method("knn_per", {"interpolation": 0.0})
    assert _accuracies(history) == _accuracies(history, "global_accuracy")


def test_knn_per_interpolation_changes_predictions(run_method):
    assert _accuracies(run_method("knn_per", {"interpolation": 1.0})) != _accuracies(
        run_method("knn_per", {"interpolation": 0.0})
    )


def test_knn_probabilities_by_hand():
    store = torch.tensor([[0.0, 0.0], [1.0, 0.0], [10.0, 0.0]])
    labels = torch.tensor([0, 1, 1])
    query = torch.tensor([[0.0, 0.0], [9.0, 0.0]])
    nearest = knn_probabilities(query, store, labels, num_classes=3, neighbours=1, temperature=1.0)
    assert torch.equal(nearest, torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
    two = knn_probabilities(query[:1], store, labels, num_classes=3, neighbours=2, temperature=0.5)
    weight = torch.softmax(torch.tensor([0.0, -1.0 / 0.5]), dim=0)  # distances 0 and 1
    assert torch.allclose(two, torch.tensor([[weight[0], weight[1], 0.0]]))
    assert torch.allclose(
        knn_probabilities(query, store, labels, 3, neighbours=50, temperature=1.0).sum(1), torch.ones(2)
    )


def _flip_source_labels(problem):
    return dataclasses.replace(problem, sources=[ClientData(s.name, s.x, 1 - s.y) for s in problem.sources])


def test_fedrep_never_averages_the_head(run_method, tiny_problem):
    """With the shared body frozen, the target's head sees only the target's data: flipping every source
    label changes nothing for the target (a method that averaged heads would change)."""
    frozen = {"body_epochs": 0}
    assert (
        run_method("fedrep", frozen)["rounds"][-1]["loss"]
        == run_method("fedrep", frozen, problem=_flip_source_labels(tiny_problem))["rounds"][-1]["loss"]
    )
    # with the body trained, the sources do shape the target's model through the shared body
    assert (
        run_method("fedrep")["rounds"][-1]["loss"]
        != run_method("fedrep", problem=_flip_source_labels(tiny_problem))["rounds"][-1]["loss"]
    )


def test_fedrep_on_a_one_layer_network_shares_nothing(run_method, tiny_problem):
    """A model without a body (Fed-Heart's one-layer network): no bytes cross, and the target's model is its
    own head, untouched by any source's data."""
    linear = {"model": "mlp", "model_options": {"hidden": []}}
    history = run_method("fedrep", **linear)
    assert all(
        r["bytes_uplink"] == 8 * (len(tiny_problem.sources) + 1) and r["bytes_downlink"] == 0 for r in history["rounds"]
    )
    flipped = run_method("fedrep", problem=_flip_source_labels(tiny_problem), **linear)
    assert (
        _accuracies(history) == _accuracies(flipped) and history["rounds"][-1]["loss"] == flipped["rounds"][-1]["loss"]
    )


def test_fedrep_without_head_training_is_the_global_model(run_method):
    """No client ever trains its head and the server never moves it: personalised model = global model."""
    history = run_method("fedrep", {"head_epochs": 0})
    assert _accuracies(history) == _accuracies(history, "global_accuracy")


@pytest.mark.parametrize(
    "task, batch_size, shuffle",
    [("classification", 8, True), ("regression", 8, True), ("classification", 0, True), ("classification", 8, False)],
)
def test_heads_trained_together_in_closed_form_equal_autograd_training_alone(task, batch_size, shuffle):
    """Three clients (37, 35 and 33 samples: 5 batches of 8 each) train their heads together; each must
    match train_locally of its head alone with its own generator (or in the stored order: `shuffle` False)."""
    from fdabench.federation.client import squared_error_loss
    from fdabench.methods.personalised import train_linear_heads

    generator = torch.Generator().manual_seed(0)
    heads = [torch.nn.Linear(5, 3) for _ in range(3)]
    features = [torch.randn(n, 5, generator=generator) for n in (37, 35, 33)]
    if task == "classification":
        targets = [torch.randint(0, 3, (n,), generator=generator) for n in (37, 35, 33)]
    else:
        targets = [torch.randn(n, 3, generator=generator) for n in (37, 35, 33)]
    loss_fn = F.cross_entropy if task == "classification" else squared_error_loss
    settings = LocalSettings(0.01, batch_size, 3, weight_decay=0.1, shuffle=shuffle)
    starts = torch.stack([ParameterSpace(head).get() for head in heads])
    updates = train_linear_heads(
        starts, features, targets, settings, [torch.Generator().manual_seed(c) for c in range(3)]
    )
    for client, head in enumerate(heads):
        space = ParameterSpace(head)
        data = ClientData("h", features[client], targets[client])
        expected = train_locally(
            space, starts[client], data, settings, loss_fn, torch.Generator().manual_seed(client)
        ).update
        assert torch.allclose(updates[client], expected, atol=1e-6)


def test_heads_with_different_batch_counts_are_refused():
    from fdabench.methods.personalised import train_linear_heads

    with pytest.raises(ValueError, match="batches per epoch"):
        train_linear_heads(
            torch.zeros(2, 8),
            [torch.zeros(10, 3), torch.zeros(20, 3)],
            [torch.zeros(10, dtype=torch.long), torch.zeros(20, dtype=torch.long)],
            LocalSettings(0.1, 8, 1),
            [torch.Generator(), torch.Generator()],
        )
