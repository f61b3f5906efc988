"""A tiny FDA problem (ColoredDigits, target -90) and short settings shared by the method tests."""

import pytest
import torch

from fdabench.federation.rounds import run_rounds
from fdabench.federation.settings import TrainSettings
from fdabench.methods import get_method
from tiny import TINY_TRAIN


@pytest.fixture(autouse=True, scope="module")
def _methods_on_one_torch_thread(one_torch_thread):
    """Every method test module runs on one torch thread (tests/conftest.py `one_torch_thread`)."""


@pytest.fixture(scope="module")
def tiny_problem(digits_problem):
    return digits_problem("-90")


@pytest.fixture(scope="module")
def tiny_settings():
    return TrainSettings.from_dict(TINY_TRAIN)


@pytest.fixture(scope="module")
def run_method(tiny_problem):
    """run_method(name, hparams=None, problem=None, seed=0, **settings) -> history."""

    def run(name, hparams=None, problem=None, seed=0, **settings):
        method = get_method(name, hparams or {})
        return run_rounds(
            method,
            problem or tiny_problem,
            TrainSettings.from_dict({**TINY_TRAIN, **settings}),
            seed,
            torch.device("cpu"),
        )

    return run
