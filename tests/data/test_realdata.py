"""Real data from a local mirror (FDABENCH_DATA_MIRROR; docs/datasets.md): sizes and statistics."""

import os

import numpy as np
import pytest

from fdabench.data import get_dataset, get_partitioner
from fdabench.data.raw import acquire

pytestmark = pytest.mark.realdata
MIRROR = os.environ.get("FDABENCH_DATA_MIRROR")
needs_mirror = pytest.mark.skipif(
    not MIRROR, reason="no dataset mirror: set FDABENCH_DATA_MIRROR (see docs/datasets.md)"
)


@pytest.fixture(scope="module")
def raw_root(tmp_path_factory):
    return tmp_path_factory.mktemp("raw")


@needs_mirror
def test_fashion_mnist_sizes_and_pixel_statistics(raw_root):
    acquire("FashionMNIST", raw_root, mirror=MIRROR)
    prepared = get_dataset("fashion_mnist").prepare({}, raw_root=str(raw_root))
    train, test = prepared.domains["train"], prepared.domains["test"]
    assert train.x.shape == (60000, 1, 28, 28) and test.x.shape == (10000, 1, 28, 28)
    pixels = train.x.astype(np.float64) / 255
    assert pixels.mean() == pytest.approx(0.2860, abs=5e-4) and pixels.std() == pytest.approx(0.3530, abs=5e-4)
    assert np.bincount(train.y).tolist() == [6000] * 10


@needs_mirror
def test_mnist_sizes_and_colored_mnist(raw_root):
    acquire("MNIST", raw_root, mirror=MIRROR)
    prepared = get_dataset("colored_mnist").prepare(
        {"label_noise": 0.25, "seed": 0, "samples_per_environment": None}, raw_root=str(raw_root)
    )
    sizes = [len(d.y) for d in prepared.domains.values()]
    assert sum(sizes) == 70000 and prepared.input_shape == (2, 14, 14)
    import torchvision.datasets as datasets

    train = datasets.MNIST(str(raw_root), train=True, download=False)
    assert len(train) == 60000 and (train.data.float() / 255).mean().item() == pytest.approx(0.1307, abs=5e-4)
    minus90 = prepared.domains["-90"]
    colour = (minus90.x.reshape(len(minus90.y), 2, -1).sum(2) > 0).argmax(1)
    assert (colour == minus90.y).mean() == pytest.approx(0.1, abs=0.01)


@needs_mirror
def test_fed_heart_centre_sizes(raw_root):
    acquire("heart_disease", raw_root, mirror=MIRROR)
    source = get_dataset("fed_heart")
    everything = source.prepare({"rows": "all", "auxiliary": []}, raw_root=str(raw_root))
    assert [len(d.y) for d in everything.domains.values()] == [303, 294, 123, 200]
    prepared = source.prepare(source.default_options, raw_root=str(raw_root))  # FLamby's Fed-Heart-Disease
    assert [len(d.y) for d in prepared.domains.values()] == [303, 261, 46, 130]
    assert prepared.input_shape == (13,) and not any(np.isnan(d.x).any() for d in prepared.domains.values())
    partitioner = get_partitioner(source.partitioner)
    tests, labelled = [], []
    for centre in source.domains:
        split = partitioner.split(prepared, centre, 0, source.default_partition)
        tests.append(len(split.target_test.indices))
        labelled.append(len(split.target_labelled.indices))
        again = partitioner.split(prepared, centre, 1, source.default_partition)
        assert np.array_equal(again.target_test.indices, split.target_test.indices)  # FLamby's split is fixed
    assert tests == [104, 89, 16, 45] and labelled == [40, 34, 30, 17]  # 20% of the training split; centre 2 all 30


@needs_mirror
def test_amazon_reviews_release_and_table5_split(raw_root):
    acquire("amazon_reviews", raw_root, mirror=MIRROR)  # checks the archive's sha256
    source = get_dataset("amazon_reviews")
    prepared = source.prepare(source.default_options, raw_root=str(raw_root))
    assert list(prepared.domains) == ["books", "dvd", "electronics", "kitchen"]
    assert all(np.bincount(d.y).tolist() == [1000, 1000] for d in prepared.domains.values())
    assert all(len(columns) == 5000 for columns in prepared.meta["target_feature_columns"].values())
    partition = get_partitioner(source.partitioner).split(prepared, "kitchen", 0, source.default_partition)
    assert [len(c.indices) for c in partition.sources] == [2000, 2000, 2000]
    assert (len(partition.target_labelled.indices), len(partition.target_test.indices)) == (400, 1600)
