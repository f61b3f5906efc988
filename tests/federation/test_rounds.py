"""The FDA round loop (Algorithm 1): message accounting, consistency between rules, determinism."""

import pytest
import torch

from fdabench.federation.rounds import run_rounds
from fdabench.federation.rule_interface import round_budget
from fdabench.federation.settings import TrainSettings
from fdabench.methods import get_method
from tiny import TINY_TRAIN

SETTINGS = {**TINY_TRAIN, "warmup_rounds": 2}


@pytest.fixture(scope="module")
def problem(digits_problem):
    return digits_problem("-90")


def _run(name, problem, seed=0, **hparams):
    return run_rounds(get_method(name, hparams), problem, TrainSettings.from_dict(SETTINGS), seed, torch.device("cpu"))


@pytest.mark.parametrize(
    ("name", "has_sources", "budget"),
    [("fedgp", True, (2, 6)), ("fedgp", False, (0, 4)), ("target_only", True, (0, 4)), ("source_only", True, (2, 6))],
)
def test_round_budget_warms_up_only_a_method_that_asks_with_sources_to_average(name, has_sources, budget):
    settings = TrainSettings.from_dict({**SETTINGS, "rounds": 4})
    assert round_budget(get_method(name), settings, has_sources) == budget


def test_message_bytes(problem):
    model_bytes = 4 * _run("target_only", problem)["model_size"]
    source_only = _run("source_only", problem)["rounds"]
    # source_only runs the warm-up too: warmup_rounds + rounds FedAvg rounds (the published code's 2 + 50)
    assert [r["phase"] for r in source_only] == ["warmup", "warmup", "fda", "fda", "fda", "fda"]
    assert source_only[0]["bytes_downlink"] == 2 * model_bytes and source_only[0]["bytes_uplink"] == 2 * (
        model_bytes + 8
    )
    fedgp = _run("fedgp", problem)["rounds"]
    assert [r["phase"] for r in fedgp] == ["warmup", "warmup", "fda", "fda", "fda", "fda"]
    assert fedgp[0]["bytes_downlink"] == 2 * model_bytes  # warm-up: sources only
    assert fedgp[-1]["bytes_downlink"] == 3 * model_bytes and fedgp[-1]["bytes_uplink"] == 3 * (model_bytes + 8)
    target_only = _run("target_only", problem)["rounds"]
    assert target_only[0]["bytes_downlink"] == model_bytes
    after_warmup = _run("warmup_target_only", problem)["rounds"]
    assert [r["phase"] for r in after_warmup] == ["warmup", "warmup", "fda", "fda", "fda", "fda"]
    assert (
        after_warmup[0]["bytes_downlink"] == 2 * model_bytes and after_warmup[-1]["bytes_downlink"] == model_bytes
    )  # sources idle


def test_warmup_target_only_is_fedda_beta0_after_the_same_warmup(problem):
    """The published Target Only: FedAvg warm-up, then θ += g_T (FedDA with β = 0), without the sources'
    wasted training; its warm-up rounds are source_only's."""
    warm = [r["loss"] for r in _run("warmup_target_only", problem)["rounds"]]
    fedda0 = [r["loss"] for r in _run("fedda", problem, beta=0.0)["rounds"]]
    source_only = [r["loss"] for r in _run("source_only", problem)["rounds"]]
    assert warm == pytest.approx(fedda0, rel=1e-6) and warm[:2] == source_only[:2]
    pure = [r["loss"] for r in _run("target_only", problem)["rounds"]]
    assert len(pure) == 4 and pure != warm[2:]


def test_fedda_beta1_follows_source_only(problem):
    """β = 1 ignores the target update, so FedDA's global model is FedAvg's at every round."""
    settings = TrainSettings.from_dict({**SETTINGS, "warmup_rounds": 0})
    source_only = run_rounds(get_method("source_only"), problem, settings, 0, torch.device("cpu"))["rounds"]
    fedda = run_rounds(get_method("fedda", {"beta": 1.0}), problem, settings, 0, torch.device("cpu"))["rounds"]
    assert [r["loss"] for r in fedda] == pytest.approx([r["loss"] for r in source_only], rel=1e-5)


def test_beta0_rules_agree(problem):
    """β = 0 keeps only the target update: FedDA and FedGP (both modes) coincide."""
    fedda = [r["loss"] for r in _run("fedda", problem, beta=0.0)["rounds"]]
    fedgp = [r["loss"] for r in _run("fedgp", problem, beta=0.0)["rounds"]]
    cosine = [r["loss"] for r in _run("fedgp", problem, beta=0.0, mode="cosine_scaled")["rounds"]]
    assert fedda == pytest.approx(fedgp, rel=1e-6) and fedda == pytest.approx(cosine, rel=1e-6)


def test_same_seed_same_numbers_other_seed_other_numbers(problem):
    first = _run("fedgp", problem, seed=3)["rounds"]
    again = _run("fedgp", problem, seed=3)["rounds"]
    other = _run("fedgp", problem, seed=4)["rounds"]
    assert [r["loss"] for r in first] == [r["loss"] for r in again]
    assert [r["loss"] for r in first] != [r["loss"] for r in other]


@pytest.mark.parametrize("name", ["source_only", "fedda", "fedgp"])
def test_a_shorter_run_is_the_first_rounds_of_a_longer_one(problem, name):
    """Nothing in a round depends on the round budget: a run with fewer `rounds` is, bit for bit, the first
    rounds of a longer run: paper_vs_ours reads a gap's runs at fewer rounds without running them again, and
    paper_cpu's `fmnist_noise_rounds70` continues the published Source Only run."""
    short = run_rounds(
        get_method(name), problem, TrainSettings.from_dict({**SETTINGS, "rounds": 2}), 5, torch.device("cpu")
    )
    long = run_rounds(
        get_method(name), problem, TrainSettings.from_dict({**SETTINGS, "rounds": 4}), 5, torch.device("cpu")
    )
    drop = ("seconds",)
    assert len(short["rounds"]) == 4 and len(long["rounds"]) == 6
    assert [{k: v for k, v in r.items() if k not in drop} for r in short["rounds"]] == [
        {k: v for k, v in r.items() if k not in drop} for r in long["rounds"][:4]
    ]


def test_oracle_trains_on_all_target_training_samples(problem):
    assert len(problem.target_all()) == len(problem.target_labelled) + len(problem.target_unlabelled)
    assert torch.equal(problem.target_all().y[: len(problem.target_labelled)], problem.target_labelled.y)


def test_unknown_hyper_parameter_is_rejected():
    with pytest.raises(ValueError, match="unknown hyper-parameters"):
        get_method("fedgp", {"betta": 0.5})
