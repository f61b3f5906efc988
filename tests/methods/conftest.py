"""A tiny FDA problem (ColoredDigits, target -90) and short settings shared by the method tests."""

import pytest
import torch

from fdabench.data import get_partitioner
from fdabench.federation.problem import build_problem
from fdabench.federation.settings import TrainSettings
from fdabench.methods import get_method

TINY_SETTINGS = {
    "model": "mlp",
    "model_options": {"hidden": [16]},
    "rounds": 4,
    "warmup_rounds": 0,
    "local_epochs": 1,
    "optimizer": "adam",
    "source_lr": 1e-3,
    "target_lr": 1e-3,
    "source_batch_size": 64,
    "target_batch_size": 16,
}


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Method runs use one torch thread, as every training cell does (threads_per_cell: 1); tiny models
    only lose from a second thread."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="module")
def tiny_problem(colored_digits):
    partition = get_partitioner("leave_one_domain_out").split(colored_digits, "-90", 0, {"holdout_fraction": 0.2, "target_labelled": 48})
    return build_problem(colored_digits, partition, "cpu")


@pytest.fixture(scope="module")
def tiny_settings():
    return TrainSettings.from_dict(TINY_SETTINGS)


@pytest.fixture(scope="module")
def run_method(tiny_problem):
    """run_method(name, hparams=None, problem=None, seed=0, **settings) -> history."""

    def run(name, hparams=None, problem=None, seed=0, **settings):
        method = get_method(name, hparams or {})
        return method.run(problem or tiny_problem, TrainSettings.from_dict({**TINY_SETTINGS, **settings}), seed, torch.device("cpu"))

    return run
