"""Auto-weighted methods inside the round loop."""

import dataclasses

import numpy as np
import pytest
import torch

from estimators import reference_auto_weights
from fdabench.federation.rounds import run_rounds
from fdabench.federation.rule_interface import LocalContext, RoundInputs
from fdabench.federation.settings import TrainSettings
from fdabench.methods import get_method
from fdabench.methods.fda import estimation_scale
from fdabench.tensor_math.aggregation import auto_weights, fedda, fedgp
from tiny import TINY_TRAIN

SETTINGS = {**TINY_TRAIN, "rounds": 3, "warmup_rounds": 1, "source_lr": 2e-3}


@pytest.fixture(scope="module")
def problem(digits_problem):
    return digits_problem("+80")


def _run(name, problem, hparams=None, **settings):
    method = get_method(name, hparams or {})
    return method, run_rounds(
        method, problem, TrainSettings.from_dict({**SETTINGS, **settings}), 0, torch.device("cpu")
    )


@pytest.mark.parametrize(
    "name, rule", [("fedda_auto", "fedda"), ("fedgp_auto", "fedgp"), ("fedgp_auto_threshold", "fedgp_threshold")]
)
def test_logged_betas_equal_the_stored_oracle(problem, name, rule):
    """Capture every per-step target update next to the streaming statistics; recompute β from the stored
    matrix with the formulas written independently in numpy (tests/estimators.py); the logged β must match."""
    method = get_method(name)
    captured = []
    original = method.local_objective

    def observer(context):
        objective = original(context)
        if context.role != "target":
            return objective
        on_step, steps = objective.observer, []
        scale = estimation_scale(context.inputs, "steps_and_lr")
        captured.append((steps, context.inputs, scale))

        def both(update):
            steps.append(update.clone())
            on_step(update)

        return dataclasses.replace(objective, observer=both)

    method.local_objective = observer
    history = run_rounds(method, problem, TrainSettings.from_dict(SETTINGS), 0, torch.device("cpu"))
    fda_rounds = [r for r in history["rounds"] if r["phase"] == "fda"]
    assert len(captured) == len(fda_rounds) == 3
    for (steps, inputs, scale), record in zip(captured, fda_rounds):
        assert len(steps) == record["estimation_batches"] == 3  # 48 labelled samples / batch 16
        # the scale is (lr_T / lr_S) / steps_i = 0.5 / 8 for 479 source samples in batches of 64
        assert torch.allclose(scale, torch.full((2,), 0.5 / 8))
        betas, estimates = reference_auto_weights(
            torch.stack(steps).numpy(), inputs.source_updates.numpy(), rule, scale.numpy()
        )
        assert record["betas"] == pytest.approx(betas.tolist(), rel=1e-5)
        assert record["d2_hat"] == pytest.approx(estimates["d2"].tolist(), rel=1e-5)
        assert record["tau2d2_hat"] == pytest.approx(estimates["tau2d2"].tolist(), rel=1e-5, abs=1e-12)
        assert record["sigma2_hat"] == pytest.approx(float(estimates["sigma2"]), rel=1e-5)


def test_auto_methods_forward_source_updates_to_the_target(problem):
    _, history = _run("fedda_auto", problem)
    model_bytes = 4 * history["model_size"]
    fda = history["rounds"][-1]
    assert fda["bytes_downlink"] == (2 + 1 + 2) * model_bytes  # global to 2 sources and target, 2 updates forwarded
    assert history["sources"] == ["+90", "-90"]
    assert all(0 <= b <= 1 for r in history["rounds"] if r["phase"] == "fda" for b in r["betas"])


def test_recompute_once_keeps_the_first_betas(problem):
    _, history = _run("fedgp_auto", problem, {"recompute": "once"})
    betas = [r["betas"] for r in history["rounds"] if r["phase"] == "fda"]
    assert betas[0] == betas[1] == betas[2]


def test_gradient_batches_estimation(problem):
    _, history = _run("fedda_auto", problem, {"estimation": "gradient_batches", "estimation_batch_size": 4})
    assert all(r["estimation_batches"] == 48 // 4 for r in history["rounds"] if r["phase"] == "fda")


def test_fda_settings_decay_and_target_batch(problem):
    method = get_method("fedda_auto", {"lr_decay_after_warmup": 0.25, "target_batch_size": 4})
    settings = method.phases(TrainSettings.from_dict(SETTINGS), True)[-1].settings
    assert settings.source_lr == pytest.approx(5e-4) and settings.target_lr == pytest.approx(2.5e-4)
    assert settings.target_batch_size == 4
    _, history = _run("fedda_auto", problem, {"target_batch_size": 4})
    assert history["rounds"][-1]["estimation_batches"] == 12


@pytest.mark.parametrize("name", ["fedda_auto", "fedgp_auto"])
def test_auto_methods_recover_a_planted_beta(name):
    """One FDA round with known statistics: per-step target updates G_b = g + ε_b (ε_b ~ N(0, v I), so
    σ² = M v / B) and two sources at known distances from g. The method's logged β must be within 0.03 of
    σ²/(σ² + D_i) computed from the planted quantities (D = d² for FedDA, τ²d² for FedGP), for β near 0.2
    and 0.8 (β ≡ 0, β ≡ 1 or β ≡ 0.5 fail it), and the server's step must be the rule applied with that β."""
    rng = np.random.default_rng(0)
    M, B, v = 20_000, 25, 1e-4
    g = rng.normal(0, 0.01, M)
    sigma2 = M * v / B
    unit = rng.normal(size=M)
    unit -= (unit @ g) / (g @ g) * g  # orthogonal to g: the distance is all off g's line
    unit /= np.linalg.norm(unit)
    distances = np.array([4 * sigma2, sigma2 / 4])  # β = 0.2 and 0.8
    sources = np.stack([g + np.sqrt(d) * unit for d in distances])
    if name == "fedgp_auto":  # τ²d² is the distance from g to the line through g_i
        planted = np.array([g @ g - (g @ s) ** 2 / (s @ s) for s in sources])
    else:
        planted = distances
    expected = sigma2 / (sigma2 + planted)
    assert abs(expected[0] - 0.2) < 0.05 and abs(expected[1] - 0.8) < 0.05

    method = get_method(name, {"scale_alignment": "none"})
    settings = TrainSettings.from_dict({**SETTINGS, "source_lr": 0.01, "target_lr": 0.01})
    inputs = RoundInputs(3, torch.zeros(M), (M,), settings, source_names=("a", "b"))
    inputs.source_updates = torch.tensor(sources, dtype=torch.float32)
    inputs.source_counts = torch.tensor([1.0, 1.0])
    inputs.source_steps = torch.tensor([10.0, 10.0])
    objective = method.local_objective(LocalContext("target", None, inputs, seed=0))
    on_step, statistics = objective.observer, objective.statistics
    steps = g + rng.normal(0, np.sqrt(v), (B, M))
    for step in steps:
        on_step(torch.tensor(step, dtype=torch.float32))
    inputs.target_update = torch.tensor(steps.sum(0), dtype=torch.float32)
    inputs.target_count, inputs.target_steps = 48, B
    inputs.target_statistics = statistics
    aggregate = method.aggregate(inputs)
    betas = np.array(aggregate.log["betas"])
    assert betas == pytest.approx(expected, abs=0.03), (betas, expected)
    rule = fedgp if name == "fedgp_auto" else fedda
    assert torch.allclose(
        aggregate.delta,
        rule(inputs.target_update, inputs.source_updates, torch.tensor(betas), inputs.source_counts, layer_sizes=(M,)),
        atol=1e-6,
    )


def _inputs(target_lr=0.005, source_lr=0.01, source_steps=(94.0, 47.0), target_steps=7):
    from fdabench.methods.base import RoundInputs

    settings = TrainSettings.from_dict({**SETTINGS, "source_lr": source_lr, "target_lr": target_lr})
    inputs = RoundInputs(0, torch.zeros(3), (3,), settings)
    inputs.source_updates = torch.ones(len(source_steps), 3)
    inputs.source_steps, inputs.target_steps = torch.tensor(source_steps), target_steps
    return inputs


def test_scale_alignment_conventions():
    """c_i against the target's per-step updates (r = lr_T/lr_S = 0.5): fdabench r/k_i; the non-iid code scales
    both sides by r (1/k_i); the DomainBed code scales the target by r (1/(r k_i)); the cosine factor r k_T/k_i."""
    from fdabench.methods.fda import cosine_scale

    inputs = _inputs()
    k = torch.tensor([94.0, 47.0])
    assert torch.allclose(estimation_scale(inputs, "steps_and_lr"), 0.5 / k)
    assert torch.allclose(estimation_scale(inputs, "noniid_code"), 1.0 / k)
    assert torch.allclose(estimation_scale(inputs, "domainbed_code"), 2.0 / k)
    assert torch.equal(estimation_scale(inputs, "none"), torch.ones(2))
    for alignment in ("steps_and_lr", "noniid_code", "domainbed_code"):
        assert torch.allclose(cosine_scale(inputs, alignment), 0.5 * 7 / k)
    assert torch.equal(cosine_scale(inputs, "none"), torch.ones(2))
    with pytest.raises(ValueError, match="unknown scale alignment"):
        estimation_scale(inputs, "lr")


def test_fedgp_beta_ignores_the_alignment_and_fedda_beta_does_not():
    generator = torch.Generator().manual_seed(0)
    steps = torch.randn(6, 40, generator=generator) * 0.1 + 0.05
    sources = torch.randn(2, 40, generator=generator)
    inputs = _inputs()
    betas = {}
    for alignment in ("steps_and_lr", "noniid_code", "domainbed_code"):
        for rule in ("fedda", "fedgp", "fedgp_threshold"):
            betas[alignment, rule] = auto_weights(
                steps, sources, rule=rule, source_scale=estimation_scale(inputs, alignment)
            )[0]
    for rule in ("fedgp", "fedgp_threshold"):
        assert torch.allclose(betas["steps_and_lr", rule], betas["noniid_code", rule])
        assert torch.allclose(betas["steps_and_lr", rule], betas["domainbed_code", rule])
    assert not torch.allclose(betas["steps_and_lr", "fedda"], betas["noniid_code", "fedda"], rtol=1e-3)
