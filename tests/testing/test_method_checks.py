"""The method test kit (fdabench.testing): every shipped round-loop rule passes it, and each check fails the
wrong rule it is there for (the planted 2 − β target coefficient among them)."""

import subprocess
import sys

import pytest
import torch

from fdabench.core.plugins import shipped_names
from fdabench.methods import METHODS, Aggregate, Objective, RoundLoopMethod
from fdabench.methods.fda import FedDA
from fdabench.tensor_math.aggregation import fedda
from fdabench.testing import check_method, failures
from tiny import TINY_DICTIONARY

pytest_plugins = ["fdabench.testing.fixtures"]

SHIPPED_RULES = [name for name in shipped_names(METHODS) if issubclass(METHODS.get(name), RoundLoopMethod)]
KIT_HPARAMS = {"dadil_e": TINY_DICTIONARY, "dadil_r": TINY_DICTIONARY}  # the kit checks properties, not size


class PlantedTargetCoefficient(FedDA):
    """FedDA with the target coefficient 2 − β instead of 1 − β."""

    name = "planted_target_coefficient"

    def aggregate(self, inputs):
        beta = self.hparams["beta"]
        return Aggregate(
            fedda(inputs.target_update, inputs.source_updates, beta, inputs.source_counts) + inputs.target_update
        )


class FirstSourceCountsDouble(FedDA):
    """Weights from the sources' positions: the first source counts twice."""

    name = "first_source_counts_double"

    def aggregate(self, inputs):
        counts = inputs.source_counts.clone().to(inputs.source_updates.dtype)
        counts[0] *= 2
        return Aggregate(fedda(inputs.target_update, inputs.source_updates, self.hparams["beta"], counts))


class DividesByTheNorm(FedDA):
    """Normalises each source update without guarding a zero norm."""

    name = "divides_by_the_norm"

    def aggregate(self, inputs):
        units = inputs.source_updates / inputs.source_updates.norm(dim=1, keepdim=True)
        return Aggregate(fedda(inputs.target_update, units, self.hparams["beta"], inputs.source_counts))


class ForgetsItsState(FedDA):
    """Carries a round counter that it does not save: a resumed run restarts it."""

    name = "forgets_its_state"

    def __init__(self, hparams=None):
        super().__init__(hparams)
        self.calls = 0

    def aggregate(self, inputs):
        self.calls += 1
        return Aggregate(super().aggregate(inputs).delta * (1 + 0.1 * self.calls))


class KeepsTheTargetsData(FedDA):
    """Sends the target's labelled inputs to the server beside the update (via the round's inputs)."""

    name = "keeps_the_targets_data"

    def local_objective(self, context):
        return Objective(statistics=context.data.x if context.role == "target" else None)


def _failed(results):
    return {result.check for result in failures(results)}


@pytest.mark.parametrize("name", SHIPPED_RULES)
def test_every_shipped_rule_passes_the_kit(name, method_checks):
    method_checks(name, KIT_HPARAMS.get(name))


def test_planted_target_coefficient_fails_beta0_only():
    assert _failed(check_method(PlantedTargetCoefficient)) == {"beta0_is_target_update"}


@pytest.mark.parametrize(
    ("rule", "check"),
    [
        (FirstSourceCountsDouble, "source_order"),
        (DividesByTheNorm, "zero_updates"),
        (ForgetsItsState, "resume"),
        (KeepsTheTargetsData, "privacy_boundary"),
    ],
)
def test_each_check_fails_its_wrong_rule(rule, check):
    assert check in _failed(check_method(rule))


def test_check_method_command_reports_and_exits_by_the_result():
    passed = subprocess.run(
        [sys.executable, "-m", "fdabench", "check-method", "fedda", "--hparams", '{"beta": 0.3}'],
        capture_output=True,
        text=True,
    )
    assert passed.returncode == 0, passed.stderr
    assert "fedda: 6 of 6 checks pass" in passed.stdout and "pass  beta0_is_target_update" in passed.stdout
    unknown = subprocess.run(
        [sys.executable, "-m", "fdabench", "check-method", "fedgpp"], capture_output=True, text=True
    )
    assert unknown.returncode != 0 and "unknown method 'fedgpp'" in unknown.stderr


def test_tiny_updates_are_checked_apart_from_zero_ones():
    """A rule that treats an exact zero specially but divides by the squared norm: 1e-30 squared underflows."""

    class SquaredNorm(FedDA):
        name = "squared_norm"

        def aggregate(self, inputs):
            squared = inputs.source_updates.square().sum(dim=1, keepdim=True)
            units = torch.where(inputs.source_updates == 0, 0.0, inputs.source_updates / squared.sqrt())
            return Aggregate(fedda(inputs.target_update, units, self.hparams["beta"], inputs.source_counts))

    assert _failed(check_method(SquaredNorm)) == {"tiny_updates"}
