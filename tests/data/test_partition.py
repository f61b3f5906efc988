"""Partition invariants: disjoint, complete, deterministic per seed, the configured sizes."""

import numpy as np
import pytest

from fdabench.data import Partition, get_partitioner
from fdabench.data.partition import ClientIndices

LODO = {"holdout_fraction": 0.2, "target_labelled": 48}


def _by_domain(partition):
    used: dict[str, list[np.ndarray]] = {}
    for _, client in partition.splits():
        used.setdefault(client.domain, []).append(client.indices)
    return used


@pytest.mark.parametrize("dataset_fixture, target", [("colored_digits", "-90"), ("rotated_digits", "45")])
def test_leave_one_domain_out_is_disjoint_and_complete(request, dataset_fixture, target):
    prepared = request.getfixturevalue(dataset_fixture)
    partition = get_partitioner("leave_one_domain_out").split(prepared, target, 0, LODO)
    for domain, index_sets in _by_domain(partition).items():
        combined = np.concatenate(index_sets)
        assert len(np.unique(combined)) == len(combined), f"overlap in {domain}"
        assert set(combined) == set(range(len(prepared.domains[domain].y))), f"{domain} not covered"
    assert [c.domain for c in partition.sources] == [d for d in prepared.domains if d != target]
    assert partition.target_labelled.domain == target and len(partition.target_labelled.indices) == 48
    n_target = len(prepared.domains[target].y)
    assert len(partition.target_test.indices) == round(0.2 * n_target)


def test_partition_is_deterministic_per_seed(colored_digits):
    partitioner = get_partitioner("leave_one_domain_out")
    first = partitioner.split(colored_digits, "+80", 3, LODO).to_json(colored_digits)
    again = partitioner.split(colored_digits, "+80", 3, LODO).to_json(colored_digits)
    other = partitioner.split(colored_digits, "+80", 4, LODO).to_json(colored_digits)
    assert first == again
    assert first["content_hash"] != other["content_hash"]


def test_fractional_target_labelled(rotated_digits):
    partition = get_partitioner("leave_one_domain_out").split(
        rotated_digits, "0", 0, {"holdout_fraction": 0.2, "target_labelled": 0.1}
    )
    in_split = len(partition.target_labelled.indices) + len(partition.target_unlabelled.indices)
    assert len(partition.target_labelled.indices) == round(0.1 * in_split)


def test_too_many_labelled_samples_is_a_clear_error(colored_digits):
    with pytest.raises(ValueError, match="target_labelled = 5000"):
        get_partitioner("leave_one_domain_out").split(
            colored_digits, "+90", 0, {"holdout_fraction": 0.2, "target_labelled": 5000}
        )


def test_manifest_round_trip_and_histograms(colored_digits):
    partition = get_partitioner("leave_one_domain_out").split(colored_digits, "-90", 1, LODO)
    payload = partition.to_json(colored_digits)
    assert payload["seed"] == 1 and payload["options"] == LODO
    labelled = next(c for c in payload["clients"] if c["role"] == "target_labelled")
    assert sum(labelled["class_histogram"]) == labelled["count"] == 48
    restored = Partition.from_json(payload)
    assert np.array_equal(restored.target_test.indices, partition.target_test.indices)
    assert [c.name for c in restored.sources] == [c.name for c in partition.sources]


def test_shift_and_subsample(synthetic_small):
    partitioner = get_partitioner("shift_and_subsample")
    options = {"test_fraction": 0.2, "target_sizes": [14, 90]}
    partition = partitioner.split(synthetic_small, "s3-n90", 0, options)
    assert [c.domain for c in partition.sources] == ["s3"]
    assert len(partition.target_labelled.indices) == 90
    assert len(partition.target_test.indices) == 120
    target_sets = [
        partition.target_labelled.indices,
        partition.target_unlabelled.indices,
        partition.target_test.indices,
    ]
    combined = np.concatenate(target_sets)
    assert sorted(combined) == list(range(600))
    smaller = partitioner.split(synthetic_small, "s3-n14", 0, options)
    assert np.array_equal(smaller.target_test.indices, partition.target_test.indices)  # same test set per seed
    assert set(smaller.target_labelled.indices) <= set(partition.target_labelled.indices)  # nested subsamples


def test_shift_target_names_are_checked(synthetic_small):
    from fdabench.data import get_dataset

    source = get_dataset("synthetic_regression")
    partitioner = get_partitioner("shift_and_subsample")
    assert partitioner.validate_target(source, "s8-n14", source.default_partition) is None
    assert "use '<source>-n<size>'" in partitioner.validate_target(source, "s9-n14", source.default_partition)
    assert len(source.target_names(source.default_partition)) == 81


def test_client_indices_are_integer_arrays():
    client = ClientIndices("a", "a", np.array([1, 2]))
    assert client.indices.dtype.kind == "i"
