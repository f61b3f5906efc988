"""What a partition job would refuse about a suite, `validate` refuses first (fdabench.config.partition_checks): on
the embedded datasets (prepared in memory) and on a downloaded one whose prepared data lie under data.root."""

import copy

import numpy as np

from fdabench.config import resolve, validate_params
from fdabench.core import paths
from fdabench.core.io import content_hash
from fdabench.data.base import DomainArrays, PreparedDataset
from workflows import TINY_PARAMS, params_refusal


def _tiny(partition=None, **experiment):
    raw = copy.deepcopy(TINY_PARAMS)
    exp = raw["suites"]["tiny"]["experiments"]["colored_digits"]
    exp.update(experiment)
    if partition is not None:
        exp["partition"] = partition
    return raw


def test_target_labelled_above_the_domains_count_is_refused_and_the_count_itself_accepted():
    # colored_digits: 1797 digits over 3 domains, 599 each; 80 % of -90's (479) is its 'in' split
    message = params_refusal(_tiny({"target_labelled": 480}))
    assert "partition: target '-90', seed 0: target_labelled = 480 selects 480 of 479 samples" in message
    assert "its partition job would refuse it" in message
    assert list(validate_params(_tiny({"target_labelled": 479})).cells())


def test_a_dirichlet_split_that_leaves_a_client_empty_is_refused():
    message = params_refusal(_tiny({"clients_per_domain": 50, "quantity_skew": 0.01}))
    assert "no Dirichlet(0.01) quantity split in 1000 draws gives each of 50 clients" in message
    assert list(validate_params(_tiny({"clients_per_domain": 2, "quantity_skew": 10.0})).cells())


def test_a_partitioner_that_does_not_fit_the_dataset_is_refused():
    message = params_refusal(_tiny({"clients": 5}, partitioner="feature_noise", targets="all"))
    assert "feature_noise reads a domain 'train' that colored_digits does not have (its domains: +90, +80, -90)" in (
        message
    )


def _mnist_params(root, partition) -> dict:
    raw = copy.deepcopy(TINY_PARAMS)
    raw["data"] = {"root": str(root)}
    raw["suites"]["tiny"]["experiments"] = {
        "mnist": {"dataset": "mnist", "targets": ["noise0.4"], "partition": partition}
    }
    raw["suites"]["tiny"]["tables"]["table1"]["experiments"] = ["mnist"]
    return raw


def _prepare_mnist_stand_in(root, raw) -> None:
    """A tiny MNIST in the prepared format where the workflow keeps it: 10 classes, 20 train and 10 test samples
    of each."""
    exp = raw["suites"]["tiny"]["experiments"]["mnist"]
    options = resolve.dataset_options(raw, "mnist", exp)
    folder = paths.fill(paths.PREPARED, data=str(root), dataset="mnist", options_hash=content_hash(options)[:12])
    rng = np.random.default_rng(0)
    domains = {
        name: DomainArrays(
            rng.random((10 * per_class, 1, 28, 28), dtype=np.float32), np.repeat(np.arange(10), per_class)
        )
        for name, per_class in (("train", 20), ("test", 10))
    }
    PreparedDataset("mnist", "classification", 10, (1, 28, 28), domains, meta={"options": options}).save(folder)


def test_an_impossible_label_deal_is_refused_from_the_prepared_header_of_a_downloaded_dataset(tmp_path):
    impossible = _mnist_params(tmp_path / "data", {"clients": 4, "split": "label11"})
    assert list(validate_params(impossible).cells())  # not prepared yet: the partition jobs check it
    _prepare_mnist_stand_in(tmp_path / "data", impossible)
    assert "label11: need between 1 and 10 classes per client" in params_refusal(impossible)
    assert list(
        validate_params(
            _mnist_params(tmp_path / "data", {"clients": 4, "split": "label10", "target_labelled": 40})
        ).cells()
    )


def test_target_labelled_above_a_prepared_downloaded_domain_is_refused(tmp_path):
    raw = _mnist_params(tmp_path / "data", {"clients": 4, "target_labelled": 1000})
    _prepare_mnist_stand_in(tmp_path / "data", raw)
    assert "partition: target 'noise0.4', seed 0:" in params_refusal(raw)


def _synthetic(**dataset_options):
    raw = copy.deepcopy(TINY_PARAMS)
    raw["suites"]["tiny"]["experiments"] = {
        "synthetic": {
            "dataset": "synthetic_regression",
            "targets": ["s1-n49"],
            "dataset_options": dataset_options,
            "train": {"model": "sigmoid_mlp", "model_options": {"hidden": 8}},
        }
    }
    raw["suites"]["tiny"]["tables"] = {"table1": {"title": "t", "experiments": ["synthetic"]}}
    return raw


def test_a_generated_dataset_larger_than_the_machine_is_refused_before_it_is_generated():
    message = params_refusal(_synthetic(samples_per_domain=10**12))
    assert "dataset_options of synthetic_regression need about" in message and "more than this machine's" in message
    assert list(validate_params(_synthetic(samples_per_domain=200)).cells())


def test_the_prepare_job_refuses_it_too(tmp_path, capsys):
    from fdabench.cli import main

    argv = ["prepare", "--dataset", "synthetic_regression", "--output", str(tmp_path / "prepared")]
    assert main([*argv, "--options", '{"samples_per_domain": 1000000000000}']) == 2
    assert "more than this machine's" in capsys.readouterr().err
    assert not (tmp_path / "prepared").exists()


def test_the_generation_estimate_covers_the_peak_it_measures():
    """tracemalloc sees numpy's allocations: the estimate must not be below the measured peak."""
    import tracemalloc

    from fdabench.config.resolve import given_dataset_options
    from fdabench.data import get_dataset

    source = get_dataset("synthetic_regression")
    options = given_dataset_options("synthetic_regression", {"samples_per_domain": 2000})
    tracemalloc.start()
    source.prepare(options)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak <= source.generation_bytes(options) <= 3 * peak
