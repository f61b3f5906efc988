"""Weakly-supervised methods: multi-task loss, auxiliary heads kept out of the target's model, GP."""

import pytest
import torch
import torch.nn.functional as F

from fdabench.federation.rounds import run_rounds
from fdabench.federation.settings import TrainSettings
from fdabench.methods import RoundInputs, get_method
from fdabench.methods.weak import multitask_loss
from fdabench.models import build_model
from fdabench.models.multitask import MultiTaskModel
from fdabench.tensor_math.aggregation import fedavg, fedgp
from tiny import AUX_TRAIN, aux_problem

SETTINGS = TrainSettings.from_dict(AUX_TRAIN)


@pytest.fixture
def problem():
    return aux_problem()


def test_alpha_zero_multitask_loss_is_the_main_loss(problem):
    model = MultiTaskModel(build_model("mlp", (5,), 2, hidden=[8]), problem.aux_classes)
    data = problem.sources[0]
    index = torch.arange(10)
    plain = F.cross_entropy(model(data.inputs(index)), data.labels(index))
    assert torch.allclose(multitask_loss(F.cross_entropy, 0.0)(model, data, index), plain)
    weighted = multitask_loss(F.cross_entropy, 2.0)(model, data, index)
    main, aux = model.forward_with_aux(data.inputs(index))
    expected = plain + 2.0 * (
        F.cross_entropy(aux["sex"], data.aux["sex"][index])
        + F.cross_entropy(aux["age_decade"], data.aux["age_decade"][index], ignore_index=-1)
    )
    assert torch.allclose(weighted, expected)
    assert torch.equal(main, model(data.inputs(index)))  # evaluation sees the main head only


def _spy(method):
    captured = []
    original_start, original_aggregate = method.target_start, method.aggregate

    def start(inputs):
        point = original_start(inputs)
        captured.append({"start": point.clone(), "global": inputs.global_params.clone()})
        return point

    def aggregate(inputs):
        result = original_aggregate(inputs)
        captured[-1].update(inputs=inputs, delta=result.delta)
        return result

    method.target_start, method.aggregate = start, aggregate
    return captured


def _aux_mask(inputs):
    return torch.tensor(
        [n.startswith("aux_heads.") for n, size in zip(inputs.layer_names, inputs.layer_sizes) for _ in range(size)]
    )


def test_auxinfo_heads_follow_the_sources_fedavg(problem):
    method = get_method("auxinfo")
    captured = _spy(method)
    history = run_rounds(method, problem, SETTINGS, 0, torch.device("cpu"))
    assert history["layer_names"][-1].startswith("aux_heads.")
    for record in captured:
        inputs, aux = record["inputs"], _aux_mask(record["inputs"])
        assert torch.allclose(record["delta"][aux], fedavg(inputs.source_updates, inputs.source_counts)[aux])
        assert torch.all(inputs.target_update[aux] == 0)  # the target never trains them (main-task loss only)


def test_auxinfo_gp_follows_the_authors_rounds(problem):
    """Rounds < averaging_rounds: θ moves to the sources' FedAvg, the target fine-tunes from it, the sources'
    deviations from the average are projected, the auxiliary heads take the average. Later rounds: GP
    relative to θ, the auxiliary heads keep the global model's values."""
    settings = TrainSettings.from_dict({**SETTINGS.to_dict(), "rounds": 3})
    method = get_method("auxinfo_gp", {"averaging_rounds": 1})
    captured = _spy(method)
    history = run_rounds(method, problem, settings, 0, torch.device("cpu"))
    assert [r["phase"] for r in history["rounds"]] == ["fda"] * 3  # no separate source-only warm-up
    for index, record in enumerate(captured):
        inputs, delta, aux = record["inputs"], record["delta"], _aux_mask(record["inputs"])
        average = fedavg(inputs.source_updates, inputs.source_counts)
        scale = (settings.target_lr / settings.source_lr) * inputs.target_steps / inputs.source_steps.float()
        if index == 0:
            assert torch.allclose(record["start"], record["global"] + average)
            shared = average + fedgp(
                inputs.target_update,
                inputs.source_updates - average,
                0.5,
                inputs.source_counts,
                mode="cosine_scaled",
                scale=scale,
                layer_sizes=inputs.layer_sizes,
            )
            assert torch.allclose(delta[aux], average[aux])
        else:
            assert torch.equal(record["start"], record["global"])
            shared = fedgp(
                inputs.target_update,
                inputs.source_updates,
                0.5,
                inputs.source_counts,
                mode="cosine_scaled",
                scale=scale,
                layer_sizes=inputs.layer_sizes,
            )
            assert torch.all(delta[aux] == 0)  # kept at the global model's values
        assert torch.allclose(delta[~aux], shared[~aux], atol=1e-7)


def test_gp_is_cosine_scaled_fedgp_on_the_shared_layers(problem):
    method = get_method("auxinfo_gp")
    n = [("features.1.weight", 6), ("head.weight", 4), ("aux_heads.sex.weight", 2)]
    generator = torch.Generator().manual_seed(0)
    target, sources = torch.randn(12, generator=generator), torch.randn(2, 12, generator=generator)
    inputs = RoundInputs(
        7,
        torch.zeros(12),
        tuple(s for _, s in n),
        SETTINGS,
        tuple(name for name, _ in n),
        source_updates=sources,
        source_counts=torch.tensor([3.0, 1.0]),
        source_steps=torch.tensor([4, 2]),
    )
    method.target_start(inputs)  # round 7: after the averaging rounds
    inputs.target_update, inputs.target_steps = target, 2
    delta = method.aggregate(inputs).delta
    scale = (SETTINGS.target_lr / SETTINGS.source_lr) * 2 / torch.tensor([4.0, 2.0])
    expected = fedgp(target, sources, 0.5, [3.0, 1.0], mode="cosine_scaled", scale=scale, layer_sizes=[6, 4, 2])
    assert torch.allclose(delta[:10], expected[:10])
    assert torch.all(delta[10:] == 0)


def test_fedavg_finetune_starts_the_target_from_the_sources_aggregate(problem):
    method = get_method("fedavg_finetune")
    sources = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    inputs = RoundInputs(
        0,
        torch.tensor([10.0, 10.0]),
        (2,),
        SETTINGS,
        ("w",),
        source_updates=sources,
        source_counts=torch.tensor([1.0, 1.0]),
    )
    assert torch.allclose(method.target_start(inputs), torch.tensor([12.0, 13.0]))
    inputs.target_update = torch.tensor([0.5, -0.5])
    assert torch.allclose(method.aggregate(inputs).delta, torch.tensor([2.5, 2.5]))  # θ_T − θ


def test_auxinfo_without_auxiliary_labels_is_a_clear_error(problem):
    problem.aux_classes = {}
    with pytest.raises(ValueError, match="needs auxiliary labels"):
        run_rounds(get_method("auxinfo"), problem, SETTINGS, 0, torch.device("cpu"))
    with pytest.raises(ValueError, match="are not in the data"):
        run_rounds(get_method("auxinfo", {"auxiliary": ["race"]}), problem, SETTINGS, 0, torch.device("cpu"))


def test_binary_tasks_report_auc(problem):
    history = run_rounds(get_method("fedavg_finetune"), problem, SETTINGS, 0, torch.device("cpu"))
    assert all(0 <= r["auc"] <= 1 for r in history["rounds"])
