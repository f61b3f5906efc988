"""Feature-noise and label-shift partitions and the problem-building transforms, on fake prepared data
shaped like Fashion-MNIST (the real data is exercised by the realdata tests)."""

import numpy as np
import pytest
import torch

from fdabench.data import PreparedDataset, get_partitioner
from fdabench.data.base import DomainArrays
from fdabench.federation.problem import build_problem

NOISE = {"clients": 10, "split": "iid", "target_labelled": 100, "target_test": "test_domain", "noise_mode": "fixed"}


@pytest.fixture(scope="module")
def fake_fmnist():
    rng = np.random.default_rng(0)
    train = DomainArrays(rng.integers(0, 256, size=(6000, 1, 8, 8), dtype=np.uint8), np.repeat(np.arange(10), 600))
    test = DomainArrays(rng.integers(0, 256, size=(1000, 1, 8, 8), dtype=np.uint8), np.repeat(np.arange(10), 100))
    return PreparedDataset("fashion_mnist", "classification", 10, (1, 8, 8), {"train": train, "test": test})


def _all_indices(partition, domain):
    return np.concatenate([c.indices for _, c in partition.splits() if c.domain == domain])


def test_iid_feature_noise_partition(fake_fmnist):
    partition = get_partitioner("feature_noise").split(fake_fmnist, "noise0.4", 0, NOISE)
    assert [len(c.indices) for c in partition.sources] == [600] * 9  # 6000 per client at full size
    assert len(partition.target_labelled.indices) == 100 and len(partition.target_unlabelled.indices) == 500
    used = _all_indices(partition, "train")
    assert len(used) == len(np.unique(used)) == 6000  # disjoint and complete
    assert partition.target_test.domain == "test" and len(partition.target_test.indices) == 1000
    assert partition.transforms == {"target_noise": {"std": 0.4, "mode": "fixed"}}
    again = get_partitioner("feature_noise").split(fake_fmnist, "noise0.4", 0, NOISE)
    assert all(np.array_equal(a.indices, b.indices) for (_, a), (_, b) in zip(partition.splits(), again.splits()))
    sized = get_partitioner("feature_noise").split(fake_fmnist, "noise0.4-n200", 0, NOISE)
    assert len(sized.target_labelled.indices) == 200


def test_label4_split_gives_four_classes_per_client(fake_fmnist):
    options = {**NOISE, "split": "label4", "target_labelled": 0.1, "target_test": "rest"}
    partition = get_partitioner("feature_noise").split(fake_fmnist, "noise0", 1, options)
    labels = fake_fmnist.domains["train"].y
    for client in partition.sources:
        assert len(np.unique(labels[client.indices])) == 4
    target = np.concatenate([partition.target_labelled.indices, partition.target_test.indices])
    assert len(np.unique(labels[target])) == 4
    assert len(partition.target_labelled.indices) == round(0.1 * len(target))
    used = _all_indices(partition, "train")
    assert len(used) == len(np.unique(used)) == 6000


def test_label_shift_partition(fake_fmnist):
    options = {"clients": 10, "minority_classes": [8, 6, 9], "target_labelled": 0.15, "deal": "per_class"}
    labels = fake_fmnist.domains["train"].y
    none_shared = get_partitioner("label_shift").split(fake_fmnist, "eta0", 0, options)
    source_labels = np.concatenate([labels[c.indices] for c in none_shared.sources])
    target_labels = labels[np.concatenate([none_shared.target_labelled.indices, none_shared.target_test.indices])]
    assert not np.isin(source_labels, [8, 6, 9]).any() and np.isin(target_labels, [8, 6, 9]).all()
    half = get_partitioner("label_shift").split(fake_fmnist, "eta0.45", 0, options)
    source_labels = np.concatenate([labels[c.indices] for c in half.sources])
    assert np.isin(source_labels, [8, 6, 9]).mean() == pytest.approx(
        0.45 * 1800 / (0.45 * 1800 + 0.55 * 4200), abs=1e-3
    )
    target = np.concatenate([half.target_labelled.indices, half.target_test.indices])
    assert len(half.target_labelled.indices) == int(0.15 * len(target))
    assert len(np.unique(np.concatenate([_all_indices(half, "train")]))) == 6000


def test_fixed_noise_is_reproducible_and_only_on_the_target(fake_fmnist):
    partition = get_partitioner("feature_noise").split(fake_fmnist, "noise0.4", 0, NOISE)
    problem = build_problem(fake_fmnist, partition, "cpu")
    again = build_problem(fake_fmnist, partition, "cpu")
    clean = problem.sources[0].inputs()
    assert clean.min() >= 0 and clean.max() <= 1  # pixels read as value / 255, no noise on sources
    noisy = problem.target_test.inputs()
    assert torch.equal(noisy, again.target_test.inputs())
    assert torch.equal(noisy, problem.target_test.inputs())  # fixed: the same noise at every read
    residual = noisy - problem.target_test.x.float() / 255
    assert residual.std().item() == pytest.approx(0.4, rel=0.05)
    assert noisy.min() < 0  # no clamping


def test_redrawn_noise_changes_every_read(fake_fmnist):
    partition = get_partitioner("feature_noise").split(fake_fmnist, "noise0.4", 0, {**NOISE, "noise_mode": "redraw"})
    problem = build_problem(fake_fmnist, partition, "cpu")
    first, second = problem.target_labelled.inputs(), problem.target_labelled.inputs()
    assert not torch.equal(first, second)
    assert (first - second).std().item() == pytest.approx(0.4 * 2**0.5, rel=0.1)


def test_standardize_ignores_the_target_test_split_and_unlabelled_inputs():
    rng = np.random.default_rng(0)
    domains = {
        name: DomainArrays(rng.normal(size=(50, 3)).astype(np.float32), rng.integers(0, 2, 50)) for name in ("a", "b")
    }
    domains["a"].x[0, 1] = np.nan
    prepared = PreparedDataset("fed_heart", "classification", 2, (3,), domains)
    options = {"holdout_fraction": 0.2, "target_labelled": 0.5, "standardize": True}
    partition = get_partitioner("leave_one_domain_out").split(prepared, "b", 0, options)
    problem = build_problem(prepared, partition, "cpu")
    assert torch.isfinite(problem.sources[0].inputs()).all()
    test_rows = np.concatenate([partition.target_test.indices, partition.target_unlabelled.indices])
    shifted = PreparedDataset(
        "fed_heart",
        "classification",
        2,
        (3,),
        {"a": domains["a"], "b": DomainArrays(domains["b"].x.copy(), domains["b"].y)},
    )
    shifted.domains["b"].x[test_rows] += 100.0  # only the target's test and unlabelled samples change
    changed = build_problem(shifted, partition, "cpu")
    assert torch.allclose(changed.sources[0].inputs(), problem.sources[0].inputs())
    assert torch.allclose(changed.target_labelled.inputs(), problem.target_labelled.inputs())


def test_per_domain_standardize_scales_each_domain_by_its_own_training_split_as_flamby():
    """FLamby's Fed-Heart-Disease: (x − mean) / (std + 1e-9) with each centre's training-split mean and unbiased
    std, the target's test split scaled by the target's training statistics (labelled and unlabelled rows)."""
    rng = np.random.default_rng(1)
    domains = {
        name: DomainArrays((rng.normal(size=(40, 3)) * scale + shift).astype(np.float32), rng.integers(0, 2, 40))
        for name, scale, shift in (("a", 1.0, 0.0), ("b", 5.0, 10.0), ("c", 0.1, -3.0))
    }
    prepared = PreparedDataset("fed_heart", "classification", 2, (3,), domains)
    options = {"holdout_fraction": 0.25, "target_labelled": 0.3, "standardize": "per_domain"}
    partition = get_partitioner("leave_one_domain_out").split(prepared, "b", 0, options)
    assert partition.transforms == {"standardize": {"scope": "per_domain"}}
    problem = build_problem(prepared, partition, "cpu")

    def flamby(train_rows: np.ndarray, rows: np.ndarray) -> np.ndarray:
        train = train_rows.astype(np.float64)
        return (rows - train.mean(axis=0)) / (train.std(axis=0, ddof=1) + 1e-9)

    for source, data in zip(partition.sources, problem.sources):
        own = domains[source.domain].x[source.indices]
        np.testing.assert_allclose(data.inputs().numpy(), flamby(own, own), rtol=1e-5, atol=1e-5)
    target_train = domains["b"].x[
        np.concatenate([partition.target_labelled.indices, partition.target_unlabelled.indices])
    ]
    for part, data in (
        (partition.target_labelled, problem.target_labelled),
        (partition.target_test, problem.target_test),
    ):
        expected = flamby(target_train, domains["b"].x[part.indices])
        np.testing.assert_allclose(data.inputs().numpy(), expected, rtol=1e-5, atol=1e-5)
    # pooled standardisation (true) scales every client by one statistic: the narrow domain c stays narrow there
    pooled_partition = get_partitioner("leave_one_domain_out").split(prepared, "b", 0, {**options, "standardize": True})
    pooled = build_problem(prepared, pooled_partition, "cpu")
    narrow = [c.domain for c in partition.sources].index("c")
    assert float(problem.sources[narrow].inputs().std()) > 0.9 > 0.5 > float(pooled.sources[narrow].inputs().std())
