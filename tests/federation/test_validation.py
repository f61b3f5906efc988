"""Validation splits: the target's validation samples are carved from its labelled samples and never trained on,
the sources' held-out samples are scored, and every method records the validation metrics each round."""

import dataclasses

import numpy as np
import pytest
import torch

from fdabench.data import get_partitioner
from fdabench.federation import client_state as client_state_module
from fdabench.federation import sites as sites_module
from fdabench.federation.problem import build_problem, target_validation_positions
from fdabench.federation.rounds import run_rounds
from fdabench.federation.settings import TrainSettings
from fdabench.federation.validation import mean_metrics
from fdabench.methods import get_method
from tiny import TINY_TRAIN

MARK = 1e6  # an input value no real sample has


@pytest.fixture(scope="module")
def partition(colored_digits):
    return get_partitioner("leave_one_domain_out").split(
        colored_digits, "-90", 0, {"holdout_fraction": 0.2, "target_labelled": 48}
    )


def test_hold_out_and_k_fold_positions_partition_the_labelled_samples():
    kept, held = target_validation_positions(48, 3, {"target_holdout": 12})
    assert len(held) == 12 and len(kept) == 36 and not set(kept) & set(held)
    assert sorted([*kept, *held]) == list(range(48))
    assert np.array_equal(held, target_validation_positions(48, 3, {"target_holdout": 12})[1])  # seeded
    assert not np.array_equal(held, target_validation_positions(48, 4, {"target_holdout": 12})[1])
    folds = [target_validation_positions(48, 3, {"target_folds": 4, "target_fold": f})[1] for f in range(4)]
    assert sorted(np.concatenate(folds).tolist()) == list(range(48))  # every sample validates exactly once
    with pytest.raises(ValueError, match="keep at least one"):
        target_validation_positions(12, 0, {"target_holdout": 12})


def test_the_problem_trains_on_the_rest_and_scores_the_sources_held_out_samples(colored_digits, partition):
    plain = build_problem(colored_digits, partition, "cpu")
    split = build_problem(colored_digits, partition, "cpu", {"target_holdout": 12})
    kept, held = target_validation_positions(48, 0, {"target_holdout": 12})
    assert torch.equal(split.target_labelled.x, plain.target_labelled.x[kept])
    assert torch.equal(split.target_validation.x, plain.target_labelled.x[held])
    assert torch.equal(split.target_validation.y, plain.target_labelled.y[held])
    assert plain.target_validation is None
    assert [len(v) for v in plain.source_validation] == [len(h.indices) for h in partition.holdout]
    assert len(plain.source_validation) == len(plain.sources) == 2


def _marked(problem):
    """The problem with its target validation inputs set to MARK, so any training batch holding one shows."""
    validation = problem.target_validation
    marked = dataclasses.replace(validation, x=torch.full_like(validation.x, MARK))
    return dataclasses.replace(problem, target_validation=marked)


@pytest.mark.parametrize("method", ["fedgp", "oracle", "ditto", "fedda_auto"])
def test_no_method_trains_on_the_target_validation_samples(colored_digits, partition, monkeypatch, method):
    problem = _marked(build_problem(colored_digits, partition, "cpu", {"target_holdout": 12}))
    trained = []
    for module in (sites_module, client_state_module):  # plain local training, and a method's own rounds
        original = module.train_locally

        def spy(space, start, data, *args, _original=original, **kwargs):
            trained.append(bool((data.inputs() == MARK).any()))
            return _original(space, start, data, *args, **kwargs)

        monkeypatch.setattr(module, "train_locally", spy)
    settings = TrainSettings.from_dict({**TINY_TRAIN, "rounds": 2, "warmup_rounds": 1})
    history = run_rounds(get_method(method), problem, settings, 0, torch.device("cpu"))
    assert trained and not any(trained)
    last = history["rounds"][-1]
    # the validation split is scored: the marked inputs give the model something it never saw
    assert {"target_val_accuracy", "target_val_loss", "source_val_accuracy", "source_val_loss"} <= set(last)


def test_mean_metrics_weigh_each_split_once():
    assert mean_metrics([{"accuracy": 1.0, "loss": 0.0}, {"accuracy": 0.0, "loss": 2.0, "auc": 0.5}]) == {
        "accuracy": 0.5,
        "loss": 1.0,
    }
    assert mean_metrics([]) == {}
