"""A tiny FDA problem (ColoredDigits, target -90) and short settings shared by the method tests."""

import pytest
import torch

from fdabench.federation.rounds import run_rounds
from fdabench.federation.settings import TrainSettings
from fdabench.methods import get_method
from tiny import TINY_TRAIN


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Method runs use one torch thread, as every training cell does (threads_per_cell: 1); tiny models
    only lose from a second thread."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


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
