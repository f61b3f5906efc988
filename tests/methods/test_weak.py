"""Weakly-supervised methods: multi-task loss, auxiliary heads kept out of the target's model, GP."""

import pytest
import torch
import torch.nn.functional as F

from fdabench.aggregation import fedavg, fedgp
from fdabench.federation.problem import ClientData, FederatedProblem
from fdabench.federation.settings import TrainSettings
from fdabench.methods import RoundInputs, get_method
from fdabench.methods.weak import multitask_loss
from fdabench.models import build_model
from fdabench.models.multitask import MultiTaskModel

SETTINGS = TrainSettings.from_dict({
    "model": "mlp", "model_options": {"hidden": [8]}, "rounds": 2, "warmup_rounds": 1, "local_epochs": 1,
    "optimizer": "adam", "source_lr": 1e-2, "target_lr": 1e-2, "source_batch_size": 16, "target_batch_size": 8,
})


def _client(name, n, seed):
    g = torch.Generator().manual_seed(seed)
    return ClientData(name, torch.randn(n, 5, generator=g), torch.randint(0, 2, (n,), generator=g),
                      aux={"sex": torch.randint(0, 2, (n,), generator=g), "age_decade": torch.randint(-1, 5, (n,), generator=g)})


@pytest.fixture
def problem():
    return FederatedProblem("classification", 2, (5,), [_client("a", 40, 0), _client("b", 30, 1)],
                            _client("t", 16, 2), _client("u", 10, 3), _client("test", 20, 4), aux_classes={"sex": 2, "age_decade": 5})


def test_alpha_zero_multitask_loss_is_the_main_loss(problem):
    model = MultiTaskModel(build_model("mlp", (5,), 2, hidden=[8]), problem.aux_classes)
    data = problem.sources[0]
    index = torch.arange(10)
    plain = F.cross_entropy(model(data.inputs(index)), data.labels(index))
    assert torch.allclose(multitask_loss(F.cross_entropy, 0.0)(model, data, index), plain)
    weighted = multitask_loss(F.cross_entropy, 2.0)(model, data, index)
    main, aux = model.forward_with_aux(data.inputs(index))
    expected = plain + 2.0 * (F.cross_entropy(aux["sex"], data.aux["sex"][index]) + F.cross_entropy(aux["age_decade"], data.aux["age_decade"][index], ignore_index=-1))
    assert torch.allclose(weighted, expected)
    assert torch.equal(main, model(data.inputs(index)))  # evaluation sees the main head only


@pytest.mark.parametrize("name", ["auxinfo", "auxinfo_gp"])
def test_auxiliary_heads_follow_the_sources_only(problem, name):
    method = get_method(name)
    captured = {}
    original = method.aggregate

    def spy(inputs):
        aggregate = original(inputs)
        captured["inputs"], captured["delta"] = inputs, aggregate.delta
        return aggregate

    method.aggregate = spy
    history = method.run(problem, SETTINGS, 0, torch.device("cpu"))
    inputs, delta = captured["inputs"], captured["delta"]
    aux = torch.tensor([n.startswith("aux_heads.") for n, size in zip(inputs.layer_names, inputs.layer_sizes) for _ in range(size)])
    assert aux.any() and history["layer_names"][-1].startswith("aux_heads.")
    assert torch.allclose(delta[aux], fedavg(inputs.source_updates, inputs.source_counts)[aux])  # never projected
    assert torch.all(inputs.target_update[aux] == 0)  # the target never trains them (main-task loss only)


def test_gp_is_cosine_scaled_fedgp_on_the_shared_layers(problem):
    method = get_method("auxinfo_gp")
    n = [("features.1.weight", 6), ("head.weight", 4), ("aux_heads.sex.weight", 2)]
    generator = torch.Generator().manual_seed(0)
    target, sources = torch.randn(12, generator=generator), torch.randn(2, 12, generator=generator)
    inputs = RoundInputs(3, torch.zeros(12), tuple(s for _, s in n), SETTINGS, tuple(name for name, _ in n),
                         source_updates=sources, source_counts=torch.tensor([3.0, 1.0]), source_steps=torch.tensor([4, 2]),
                         target_update=target, target_steps=2)
    delta = method.aggregate(inputs).delta
    scale = (SETTINGS.target_lr / SETTINGS.source_lr) * 2 / torch.tensor([4.0, 2.0])
    expected = fedgp(target, sources, 0.5, [3.0, 1.0], mode="cosine_scaled", scale=scale, layer_sizes=[6, 4, 2])
    assert torch.allclose(delta[:10], expected[:10])
    assert torch.allclose(delta[10:], fedavg(sources, [3.0, 1.0])[10:])


def test_fedavg_finetune_starts_the_target_from_the_sources_aggregate(problem):
    method = get_method("fedavg_finetune")
    sources = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    inputs = RoundInputs(0, torch.tensor([10.0, 10.0]), (2,), SETTINGS, ("w",), source_updates=sources, source_counts=torch.tensor([1.0, 1.0]))
    assert torch.allclose(method.target_start(inputs), torch.tensor([12.0, 13.0]))
    inputs.target_update = torch.tensor([0.5, -0.5])
    assert torch.allclose(method.aggregate(inputs).delta, torch.tensor([2.5, 2.5]))  # θ_T − θ


def test_auxinfo_without_auxiliary_labels_is_a_clear_error(problem):
    problem.aux_classes = {}
    with pytest.raises(ValueError, match="needs auxiliary labels"):
        get_method("auxinfo").run(problem, SETTINGS, 0, torch.device("cpu"))
    with pytest.raises(ValueError, match="are not in the data"):
        get_method("auxinfo", {"auxiliary": ["race"]}).run(problem, SETTINGS, 0, torch.device("cpu"))


def test_binary_tasks_report_auc(problem):
    history = get_method("fedavg_finetune").run(problem, SETTINGS, 0, torch.device("cpu"))
    assert all(0 <= r["auc"] <= 1 for r in history["rounds"])
