"""Amazon reviews on a generated archive in the release's layout, the labelled_target partitioner, the
non-IID MNIST split (feature_noise with target_share: iid), and per-target feature columns."""

import io
import tarfile

import numpy as np
import pytest

from fdabench.data import DomainArrays, PreparedDataset, get_dataset, get_partitioner
from fdabench.data.amazon import DOMAINS, read_reviews
from fdabench.federation.problem import build_problem


def _review(text: str) -> str:
    return f"<review>\n<rating>\n5.0\n</rating>\n<review_text>\n{text}\n</review_text>\n</review>\n"


@pytest.fixture
def amazon_raw(tmp_path):
    """Each domain's reviews share the words 'good'/'bad' and carry a domain-only word; 'targetonly' appears
    only in books, 'common' in every domain."""
    archive = tmp_path / "amazon_reviews" / "sorted_data_acl.tar.xz"
    archive.parent.mkdir()
    with tarfile.open(archive, "w:xz") as tar:
        for domain in DOMAINS:
            special = "targetonly targetonly" if domain == "books" else f"{domain}word"
            for name, word in (("negative.review", "bad"), ("positive.review", "good")):
                body = "".join(_review(f"common {word} {word} {special} review {i}") for i in range(10)).encode(
                    "latin-1"
                )
                info = tarfile.TarInfo(f"amazon_reviews_mds/{domain}/{name}")
                info.size = len(body)
                tar.addfile(info, io.BytesIO(body))
    return tmp_path


def test_read_reviews_labels_by_file(amazon_raw):
    reviews = read_reviews(amazon_raw / "amazon_reviews" / "sorted_data_acl.tar.xz")
    texts, labels = reviews["books"]
    assert len(texts) == 20 and list(labels) == [0] * 10 + [1] * 10
    assert texts[0].startswith("common bad bad")


def test_vocabulary_is_fitted_on_the_sources_text_only(amazon_raw):
    source = get_dataset("amazon_reviews")
    prepared = source.prepare({"vocabulary": 12, "features": "counts"}, raw_root=str(amazon_raw))
    columns = prepared.meta["target_feature_columns"]
    union = prepared.input_shape[0]
    assert all(len(cols) == 12 and max(cols) < union for cols in columns.values())
    # books' private word is in the union (the other targets' sources contain books) but never in books' own vocabulary
    partition = get_partitioner("labelled_target").split(prepared, "books", 0, {"target_labelled": 4})
    problem = build_problem(prepared, partition, "cpu")
    assert problem.input_shape == (12,) and problem.sources[0].x.shape[1] == 12
    books_columns = set(columns["books"])
    dvd_columns = set(columns["dvd"])
    assert books_columns != dvd_columns
    books_x = prepared.domains["books"].x
    targetonly_columns = [
        c for c in range(union) if (books_x[:, c] == 2).all() and (prepared.domains["dvd"].x[:, c] == 0).all()
    ]
    assert targetonly_columns and not set(targetonly_columns) & books_columns
    assert set(targetonly_columns) <= dvd_columns  # books is a source of dvd


def test_labelled_target_partition(amazon_raw):
    prepared = PreparedDataset(
        "toy",
        "classification",
        2,
        (3,),
        {
            name: DomainArrays(np.zeros((n, 3), np.float32), np.arange(n) % 2)
            for name, n in (("a", 10), ("b", 12), ("c", 7))
        },
    )
    partitioner = get_partitioner("labelled_target")
    first = partitioner.split(prepared, "b", 3, {"target_labelled": 4})
    assert [(c.name, len(c.indices)) for c in first.sources] == [("a", 10), ("c", 7)]
    labelled, test = set(first.target_labelled.indices), set(first.target_test.indices)
    assert len(labelled) == 4 and not labelled & test and labelled | test == set(range(12))
    assert len(first.target_unlabelled.indices) == 0
    again = partitioner.split(prepared, "b", 3, {"target_labelled": 4})
    other = partitioner.split(prepared, "b", 4, {"target_labelled": 4})
    assert np.array_equal(again.target_labelled.indices, first.target_labelled.indices)
    assert not np.array_equal(other.target_labelled.indices, first.target_labelled.indices)
    with pytest.raises(ValueError, match="not a domain"):
        partitioner.split(prepared, "z", 0, {"target_labelled": 4})


def test_noniid_mnist_split_target_holds_every_class():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10), 90)
    prepared = PreparedDataset(
        "toy",
        "classification",
        10,
        (2,),
        {
            "train": DomainArrays(rng.normal(size=(900, 2)).astype(np.float32), labels),
            "test": DomainArrays(np.zeros((50, 2), np.float32), np.arange(50) % 10),
        },
    )
    options = {**get_partitioner("feature_noise").default_options, **get_dataset("mnist").default_partition}
    partition = get_partitioner("feature_noise").split(prepared, "noise0.4", 0, options)
    assert len(partition.sources) == 8
    for client in partition.sources:
        assert len(np.unique(labels[client.indices])) == 3
    target = np.concatenate([partition.target_labelled.indices, partition.target_unlabelled.indices])
    assert len(target) == 100 and len(np.unique(labels[target])) == 10 and len(partition.target_labelled.indices) == 100
    everyone = np.concatenate([target, *[c.indices for c in partition.sources]])
    assert len(everyone) == len(np.unique(everyone)) == 900
    assert partition.transforms["target_noise"]["std"] == 0.4 and len(partition.target_test.indices) == 50
