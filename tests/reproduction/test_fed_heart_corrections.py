"""Issue 38's Fed-Heart corrections, each read in the authors' code (AutoFedGP 9b74449 main_flamby_heart*.py and
FLamby's fed_heart_disease): the one-logit BCE model, the labelled target patients and their fixed order, FedGP's
unrounded n_T/bs_T with padded source weights, and the statistic the record says the table uses. Each test fails
on the behaviour before the correction."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fdabench.data import PreparedDataset, get_partitioner
from fdabench.data.base import DomainArrays
from fdabench.data.partitioners.leave_one_domain_out import flamby_split
from fdabench.federation.client import (
    LocalSettings,
    batch_indices,
    evaluate,
    loss_function,
    roc_auc,
    train_locally,
)
from fdabench.federation.cohort import train_cohort
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import ClientData, build_problem
from fdabench.federation.rounds import local_settings
from fdabench.federation.rule_interface import RoundInputs
from fdabench.federation.settings import TrainSettings
from fdabench.methods import get_method
from fdabench.models.base import build_model
from fdabench.reproduction.papers.protocols import PROTOCOLS, published_settings, settings_provenance
from fdabench.tensor_math.aggregation import fedda, fedgp

HEART_TRAIN = {
    "model": "logistic",
    "model_options": {},
    "rounds": 2,
    "warmup_rounds": 0,
    "local_epochs": 1,
    "optimizer": "adam",
    "source_lr": 1e-3,
    "target_lr": 1e-3,
    "source_batch_size": 4,
    "target_batch_size": 4,
}


def _clients(count: int, samples: int, seed: int = 0) -> list[ClientData]:
    generator = torch.Generator().manual_seed(seed)
    return [
        ClientData(
            f"c{i}", torch.randn(samples, 13, generator=generator), torch.randint(0, 2, (samples,), generator=generator)
        )
        for i in range(count)
    ]


# --- 1. FLamby's Baseline: Linear(13, 1) + sigmoid under BCELoss ------------------------------------------------


def test_the_logistic_model_is_flambys_baseline_and_trains_under_its_bce_loss():
    torch.manual_seed(0)
    model = build_model("logistic", (13,), 2)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(13, 1)]
    bound = 1 / np.sqrt(13)  # PyTorch's default init, as FLamby's Linear(13, 1)
    assert all(float(p.detach().abs().max()) <= bound for p in model.parameters())
    x, y = torch.randn(8, 13), torch.tensor([0, 1, 1, 0, 1, 0, 0, 1])
    logit = model(x).detach()
    assert logit.shape == (8, 1)
    ours = loss_function("classification")(logit, y)
    flamby = torch.nn.BCELoss()(torch.sigmoid(logit), y.float()[:, None])  # BaselineLoss on the sigmoid output
    assert float(ours) == pytest.approx(float(flamby), rel=1e-6)
    # every other model keeps one output per class under cross-entropy
    two = build_model("mlp", (13,), 2, hidden=[])
    outputs = two(x).detach()
    assert outputs.shape == (8, 2)
    assert float(loss_function("classification")(outputs, y)) == pytest.approx(float(F.cross_entropy(outputs, y)))
    with pytest.raises(ValueError, match="two classes"):
        build_model("logistic", (13,), 3)


def test_a_single_logit_is_evaluated_at_probability_one_half_with_its_auc():
    model = build_model("logistic", (13,), 2)
    data = _clients(1, 40, seed=3)[0]
    metrics = evaluate(model, data, "classification")
    with torch.no_grad():
        logit = model(data.x)[:, 0]
    flamby_accuracy = float(((torch.sigmoid(logit) > 0.5).long() == data.y).float().mean())  # FLamby metric.py
    assert metrics["accuracy"] == pytest.approx(flamby_accuracy)
    assert metrics["auc"] == pytest.approx(roc_auc(logit, data.y))
    assert metrics["loss"] == pytest.approx(float(F.binary_cross_entropy_with_logits(logit, data.y.float())), rel=1e-5)


def test_two_outputs_under_adam_train_as_one_logit_at_twice_the_lr():
    """Why the two-output model is a different run: the logit difference of two-output cross-entropy at lr η moves
    as one-logit BCE at 2η under Adam (the rows get opposite gradients)."""
    torch.manual_seed(1)
    data = _clients(1, 24, seed=1)[0]
    two = build_model("mlp", (13,), 2, hidden=[])
    one = build_model("logistic", (13,), 2)
    with torch.no_grad():
        one.head.weight.copy_(two.head.weight[1:] - two.head.weight[:1])
        one.head.bias.copy_(two.head.bias[1:] - two.head.bias[:1])
    loss = loss_function("classification")
    for model, lr in ((two, 1e-2), (one, 2e-2)):
        space = ParameterSpace(model)
        train_locally(space, space.get(), data, LocalSettings(lr, 4, 2), loss, torch.Generator().manual_seed(0))
    with torch.no_grad():
        difference = two(data.x)[:, 1] - two(data.x)[:, 0]
        assert torch.allclose(difference, one(data.x)[:, 0], atol=1e-5)


def test_a_cohort_trains_the_logistic_model_as_one_by_one():
    model = build_model("logistic", (13,), 2)
    space = ParameterSpace(model)
    start = space.get().clone()
    clients, settings, loss = _clients(3, 20), LocalSettings(1e-3, 4, 1), loss_function("classification")
    alone = [
        train_locally(space, start, client, settings, loss, torch.Generator().manual_seed(i)).update
        for i, client in enumerate(clients)
    ]
    together = train_cohort(space, start, clients, settings, loss, [torch.Generator().manual_seed(i) for i in range(3)])
    for one, cohort in zip(alone, together, strict=True):
        assert torch.allclose(one, cohort.update, atol=1e-6)


# --- 2. which target patients are labelled, and in which order they train ---------------------------------------


def _heart_like(sizes=(303, 261, 46, 130), seed=0) -> PreparedDataset:
    rng = np.random.default_rng(seed)
    domains = {
        name: DomainArrays(rng.normal(size=(size, 13)).astype(np.float32), rng.integers(0, 2, size))
        for name, size in zip(("cleveland", "hungarian", "switzerland", "va"), sizes)
    }
    return PreparedDataset("fed_heart", "classification", 2, (13,), domains)


def _split_dataset(n_rows: int, n: int, seed: int) -> list[int]:
    """DomainBed misc.split_dataset's keys_1 (AutoFedGP 9b74449 domainbed/lib/misc.py:147-152)."""
    keys = list(range(n_rows))
    np.random.RandomState(seed).shuffle(keys)
    return keys[:n]


@pytest.mark.parametrize("seed", [0, 1, 4])
def test_split_dataset_labels_the_codes_floor_of_20_percent_in_its_shuffled_order(seed):
    prepared = _heart_like()
    options = {
        "holdout_fraction": 0.34,
        "holdout_split": "flamby",
        "target_labelled": 0.2,
        "target_selection": "split_dataset",
    }
    partition = get_partitioner("leave_one_domain_out").split(prepared, "cleveland", seed, options)
    train_rows = np.sort(flamby_split(prepared.domains["cleveland"].y, 0.34)[0])  # FLamby's rows, file order
    assert len(train_rows) == 199
    keys = _split_dataset(199, int(199 * 0.2), seed)  # int(0.2 x 199) = 39 (round would give 40)
    assert partition.target_labelled.indices.tolist() == train_rows[keys].tolist()
    assert len(partition.target_unlabelled.indices) == 160
    assert set(partition.target_unlabelled.indices) == set(train_rows) - set(train_rows[keys])
    # the problem keeps that order: a fixed target order trains the patients as the code's DataLoader serves them
    problem = build_problem(prepared, partition, "cpu")
    assert problem.target_labelled.y.tolist() == prepared.domains["cleveland"].y[train_rows[keys]].tolist()
    # unset, the seed's permutation with a rounded count, sorted, as before
    seeded = get_partitioner("leave_one_domain_out").split(
        prepared, "cleveland", seed, {k: v for k, v in options.items() if k != "target_selection"}
    )
    assert len(seeded.target_labelled.indices) == 40
    assert seeded.target_labelled.indices.tolist() == sorted(seeded.target_labelled.indices.tolist())


def test_uda_holdout_fraction_1_labels_every_switzerland_patient():
    prepared = _heart_like()
    options = {
        "holdout_fraction": 0.34,
        "holdout_split": "flamby",
        "target_labelled": 0.2,
        "target_labelled_overrides": {"switzerland": 1.0},
        "target_selection": "split_dataset",
    }
    partition = get_partitioner("leave_one_domain_out").split(prepared, "switzerland", 0, options)
    train_rows = np.sort(flamby_split(prepared.domains["switzerland"].y, 0.34)[0])
    assert len(train_rows) == 30
    assert partition.target_labelled.indices.tolist() == train_rows[_split_dataset(30, 30, 0)].tolist()
    assert len(partition.target_unlabelled.indices) == 0


def test_a_fixed_target_order_visits_the_stored_order_every_epoch_and_draws_nothing():
    generator = torch.Generator().manual_seed(0)
    state = generator.get_state()
    batches = [b.tolist() for b in batch_indices(10, 4, 2, generator, "cpu", shuffle=False)]
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]] * 2
    assert torch.equal(generator.get_state(), state)
    fixed = TrainSettings.from_dict({**HEART_TRAIN, "target_order": "fixed"})
    source, target = local_settings(fixed)
    assert source.shuffle and not target.shuffle  # the code's sources shuffle, its target does not
    _, default_target = local_settings(TrainSettings.from_dict(HEART_TRAIN))
    assert default_target.shuffle


# --- 3. FedGP's n_T / bs_T without the ceil, sources weighed by batches x batch size ---------------------------


def _inputs(target_count=39, counts=(172.0, 30.0, 85.0)) -> RoundInputs:
    torch.manual_seed(2)
    settings = TrainSettings.from_dict(HEART_TRAIN)
    steps = torch.tensor([float(np.ceil(c / 4)) for c in counts])
    return RoundInputs(
        1,
        torch.zeros(14),
        (13, 1),
        settings,
        source_updates=torch.randn(len(counts), 14),
        source_counts=torch.tensor(counts),
        source_steps=steps,
        target_update=torch.randn(14),
        target_count=target_count,
        target_steps=int(np.ceil(target_count / 4)),
    )


def test_fedda_and_fedgp_weigh_sources_by_their_padded_batches_as_the_heart_code():
    inputs = _inputs()
    padded = torch.tensor([172.0, 32.0, 88.0])  # len(loader) x 4 (main_flamby_heart.py:312-313)
    fedda_rule = get_method("fedda", {"beta": 0.5, "source_weights": "padded_batches"})
    expected = fedda(inputs.target_update, inputs.source_updates, 0.5, padded, layer_sizes=(13, 1))
    assert torch.allclose(fedda_rule.aggregate(inputs).delta, expected)
    plain = get_method("fedda", {"beta": 0.5}).aggregate(inputs).delta
    assert not torch.allclose(plain, expected)
    assert torch.allclose(
        plain, fedda(inputs.target_update, inputs.source_updates, 0.5, inputs.source_counts, layer_sizes=(13, 1))
    )


def test_fedgps_factor_takes_n_t_over_bs_t_without_the_ceil():
    inputs = _inputs()
    hparams = {"beta": 0.5, "mode": "cosine_scaled", "source_weights": "padded_batches"}
    code = get_method("fedgp", {**hparams, "target_steps": "samples_over_batch"}).aggregate(inputs).delta
    scale = (39 / 4) / inputs.source_steps  # 9.75 / ceil(n_i / 4) (main_flamby_heart.py:158)
    padded = torch.tensor([172.0, 32.0, 88.0])
    expected = fedgp(
        inputs.target_update,
        inputs.source_updates,
        0.5,
        padded,
        mode="cosine_scaled",
        scale=scale,
        layer_sizes=(13, 1),
    )
    assert torch.allclose(code, expected)
    steps = get_method("fedgp", hparams).aggregate(inputs).delta  # k_T = ceil(39/4) = 10 steps
    assert not torch.allclose(steps, expected)


# --- 4. the record ------------------------------------------------------------------------------------------


def test_the_fed_heart_record_holds_the_corrections_with_their_code_lines():
    heart = PROTOCOLS["fed_heart"]
    fedgp_row = published_settings(heart, heart.rows["fedgp_0.5"])
    assert (fedgp_row["train"]["model"], fedgp_row["train"]["model_options"]) == ("logistic", {})
    assert fedgp_row["train"]["target_order"] == "fixed"
    assert fedgp_row["partition"]["target_selection"] == "split_dataset"
    assert fedgp_row["hparams"]["source_weights"] == "padded_batches"
    assert fedgp_row["hparams"]["target_steps"] == "samples_over_batch"
    assert published_settings(heart, heart.rows["fedda_0.5"])["hparams"]["source_weights"] == "padded_batches"
    sources = settings_provenance(heart, heart.rows["fedgp_0.5"])
    for key, line in (
        ("train.model", "main_flamby_heart.py:319-326"),
        ("train.target_order", "main_flamby_heart.py:266-269"),
        ("partition.target_selection", "misc.py:147-152"),
        ("hparams.source_weights", "main_flamby_heart.py:312-313"),
        ("hparams.target_steps", "main_flamby_heart.py:158"),
    ):
        assert sources[key].kind == "code" and line in sources[key].where, key
    # the statistic: the paper's, because the code averages nothing
    assert sources["train.final_rounds"].kind == "paper"
    assert "averages nothing" in sources["train.final_rounds"].where
    assert any("averages none" in note and "last 5" in note for note in heart.notes)
    assert any("--uda_holdout_fraction 1.0" in note for note in heart.notes)
    # the personalised rows (no code) run the two-output network their implementations need
    fedrep = published_settings(heart, heart.rows["fedrep"])
    assert (fedrep["train"]["model"], fedrep["train"]["model_options"]) == ("mlp", {"hidden": [], "norm": "none"})


def test_the_paper_suites_run_the_corrections_and_keep_the_variants():
    from fdabench.config.params import load_params

    for suite in ("paper", "paper_cpu"):
        params = load_params("params.yaml", suite=suite)
        config = params.cell("fed_heart", "fedgp_cosine", "switzerland", 0).config
        assert (config["train"]["model"], config["train"]["model_options"]) == ("logistic", {})
        assert config["train"]["target_order"] == "fixed"
        assert config["partition"]["target_selection"] == "split_dataset"
        assert config["hparams"]["source_weights"] == "padded_batches"
        assert config["hparams"]["target_steps"] == "samples_over_batch"
    cpu = load_params("params.yaml", suite="paper_cpu")
    two = cpu.cell("fed_heart_two_outputs", "fedda", "cleveland", 0).config
    assert two["train"]["model_options"] == {"hidden": []}
    swiss = cpu.cell("fed_heart_switzerland_100pct", "fedda", "switzerland", 0).config
    assert swiss["partition"]["target_labelled_overrides"] == {"switzerland": 1.0}
    assert swiss["partition"]["target_selection"] == "split_dataset"
