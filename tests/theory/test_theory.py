"""The synthetic theory check: quantities at initialisation and the report."""

import pytest

from fdabench.data import get_partitioner
from fdabench.federation.problem import build_problem
from fdabench.federation.settings import TrainSettings
from fdabench.theory.quantities import initial_quantities
from fdabench.theory.report import plot_theory, theory_frame, theory_markdown

SETTINGS = TrainSettings.from_dict(
    {
        "model": "sigmoid_mlp",
        "model_options": {"hidden": 20},
        "rounds": 3,
        "warmup_rounds": 0,
        "local_epochs": 1,
        "optimizer": "sgd",
        "source_lr": 0.02,
        "target_lr": 0.02,
        "source_batch_size": 0,
        "target_batch_size": 0,
    }
)
OPTIONS = {"test_fraction": 0.2, "target_sizes": [14, 200]}


def _quantities(prepared, target, draws=30):
    partition = get_partitioner("shift_and_subsample").split(prepared, target, 0, OPTIONS)
    return initial_quantities(build_problem(prepared, partition, "cpu"), SETTINGS, 0, 0.5, draws)


def test_initial_quantities_follow_shift_and_sample_size(synthetic_small):
    small_shift_few = _quantities(synthetic_small, "s0-n14")
    large_shift_few = _quantities(synthetic_small, "s8-n14")
    small_shift_many = _quantities(synthetic_small, "s0-n200")
    assert large_shift_few["d2"] > 5 * small_shift_few["d2"]  # the source moves away as the shift grows
    assert small_shift_few["sigma2"] > 5 * small_shift_many["sigma2"]  # fewer samples, noisier target gradient
    # τ²d² is the distance from g_T to the line through g_S, at most the distance to g_S itself (exactly)
    for quantities in (small_shift_few, large_shift_few, small_shift_many):
        assert 0 < quantities["tau2d2"] <= quantities["d2"] * (1 + 1e-6)
    errors = large_shift_few["delta_errors"]
    assert errors["target_only"] == pytest.approx(large_shift_few["sigma2"])
    assert errors["source_only"] == pytest.approx(large_shift_few["d2"])
    assert errors["fedda"] == pytest.approx(0.25 * large_shift_few["sigma2"] + 0.25 * large_shift_few["d2"])
    assert large_shift_few["predicted_winner"] == min(errors, key=errors.get)
    assert small_shift_few["predicted_winner"] == "source_only"  # identical function, 14 noisy target samples


def _cell(method, target, losses):
    return {
        "cell": {"method": method, "target": target, "seed": 0},
        "metric": "mse",
        "rounds": [{"mse": v} for v in losses],
    }


def test_report_winners_and_agreement(tmp_path):
    initial = [
        {
            "target": "s0-n14",
            "seed": 0,
            "d2": 1.0,
            "sigma2": 9.0,
            "tau2d2": 1.0,
            "target_samples": 14,
            "delta_errors": {"target_only": 9.0, "source_only": 1.0, "fedda": 2.5, "fedgp": 2.6},
        },
        {
            "target": "s8-n900",
            "seed": 0,
            "d2": 9.0,
            "sigma2": 1.0,
            "tau2d2": 2.0,
            "target_samples": 900,
            "delta_errors": {"target_only": 1.0, "source_only": 9.0, "fedda": 2.5, "fedgp": 0.8},
        },
    ]
    cells = []
    for target, best in (("s0-n14", "source_only"), ("s8-n900", "target_only")):
        for method in ("target_only", "source_only", "fedda", "fedgp", "fedda_auto_init", "fedgp_auto_init"):
            cells.append(_cell(method, target, [5.0, 1.0 if method == best else 2.0, 3.0]))
    roles = {
        "target_only": "target_only",
        "source_only": "source_only",
        "fedda": "fedda",
        "fedgp": "fedgp",
        "fedda_auto": "fedda_auto_init",
        "fedgp_auto": "fedgp_auto_init",
    }
    frame = theory_frame(initial, cells, roles)
    assert list(frame["predicted"]) == ["source_only", "fedgp"]
    assert list(frame["best_fixed"]) == ["source_only", "target_only"]
    assert frame["agree"].mean() == 0.5
    assert list(frame["n"]) == [14, 900] and list(frame["source"]) == ["s0", "s8"]
    text = theory_markdown(frame, "T")
    assert "in 50.0% of 2 settings" in text
    plot_theory(frame, tmp_path / "theory.png", "T")
    assert (tmp_path / "theory.png").stat().st_size > 10_000
