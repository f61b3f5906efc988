"""Amazon reviews: Blitzer et al. (2007) multi-domain sentiment, the `sorted_data_acl` release.

Four domains (books, dvd, electronics, kitchen), each 1,000 positive and 1,000 negative reviews; the label
is the file a review comes from (positive = 1). The raw file is the archive `sorted_data_acl.tar.xz`
(pseudo-XML `.review` files under `amazon_reviews_mds/<domain>/`), read directly from the archive; its
sha256 is checked at acquisition (`fdabench.data.raw`).

Features: bag of words over the `vocabulary` (default 5,000) most frequent unigrams and bigrams of the
review text (`<review_text>`; lower-cased, tokens of two or more word characters, scikit-learn's
CountVectorizer), **fitted on the source domains' training text only**. With one domain the target in
turn and the other three its sources (each source trains on all of its 2,000 reviews), the vocabulary of
target t is fitted on the other three domains' reviews; the target's text never enters it. `prepare`
stores every review's counts over the union of the four targets' vocabularies and, in
`meta["target_feature_columns"][t]`, the columns of target t's vocabulary; the problem builder keeps only
those (`fdabench.federation.problem`). `features` maps the counts per review: `binary` (default: 1 where
the n-gram occurs), `counts`, or `log_counts` (log(1 + count)); none fits a statistic.
"""

from __future__ import annotations

import re
import tarfile
from typing import Any

import numpy as np

from fdabench.core.readers import reading
from fdabench.data.base import DATASETS, DatasetSource, DomainArrays, PreparedDataset
from fdabench.data.raw import raw_dir

RAW_NAME = "amazon_reviews"
ARCHIVE = "sorted_data_acl.tar.xz"
DOMAINS = ("books", "dvd", "electronics", "kitchen")
LABEL_FILES = (("negative.review", 0), ("positive.review", 1))
_REVIEW_TEXT = re.compile(r"<review_text>\s*(.*?)\s*</review_text>", re.S)


def read_reviews(archive_path) -> dict[str, tuple[list[str], np.ndarray]]:
    """{domain: (review texts, labels)} from the archive, negatives first, in file order."""
    wanted = {f"amazon_reviews_mds/{domain}/{name}" for domain in DOMAINS for name, _ in LABEL_FILES}
    found: dict[str, list[str]] = {}
    with reading(archive_path, "the Amazon reviews archive (.tar.xz)"), tarfile.open(archive_path, "r:xz") as archive:
        for member in archive.getmembers():
            if member.name in wanted:
                text = archive.extractfile(member).read().decode("latin-1")  # not valid UTF-8 throughout
                found[member.name] = _REVIEW_TEXT.findall(text)
    missing = sorted(wanted - set(found))
    if missing:
        raise ValueError(f"{archive_path}: the archive lacks {', '.join(missing)}")
    reviews: dict[str, tuple[list[str], np.ndarray]] = {}
    for domain in DOMAINS:
        texts, labels = [], []
        for name, label in LABEL_FILES:
            documents = found[f"amazon_reviews_mds/{domain}/{name}"]
            if not documents:
                raise ValueError(f"{archive_path}: no <review_text> in {domain}/{name}")
            texts += documents
            labels += [label] * len(documents)
        reviews[domain] = (texts, np.asarray(labels, dtype=np.int64))
    return reviews


def source_vocabularies(texts: dict[str, list[str]], size: int) -> dict[str, list[str]]:
    """Per target domain, the `size` most frequent uni- and bigrams of the other domains' texts (sorted)."""
    from sklearn.feature_extraction.text import CountVectorizer

    vocabularies = {}
    for target in texts:
        vectorizer = CountVectorizer(ngram_range=(1, 2), max_features=size)
        vectorizer.fit([text for domain, documents in texts.items() if domain != target for text in documents])
        vocabularies[target] = sorted(vectorizer.vocabulary_)
    return vocabularies


def feature_map(counts: np.ndarray, features: str) -> np.ndarray:
    """Per-review map of the n-gram counts (see the module docstring); float32."""
    if features == "binary":
        return (counts > 0).astype(np.float32)
    if features == "counts":
        return counts.astype(np.float32)
    if features == "log_counts":
        return np.log1p(counts).astype(np.float32)
    raise ValueError(f"unknown features {features!r}; allowed: binary, counts, log_counts")


@DATASETS.register
class AmazonReviews(DatasetSource):
    """Amazon reviews (Blitzer et al. 2007): books, dvd, electronics, kitchen; bag of uni- and bigrams."""

    name = "amazon_reviews"
    task = "classification"
    domains = DOMAINS
    partitioner = "labelled_target"
    raw_datasets = (RAW_NAME,)
    options_schema = {
        "vocabulary": {
            "type": "integer",
            "minimum": 10,
            "description": "most frequent uni- and bigrams of the sources' text",
            "default": 5000,
        },
        "features": {
            "enum": ["binary", "counts", "log_counts"],
            "description": "per-review map of the n-gram counts",
            "default": "binary",
        },
    }
    # The weakly-supervised paper's Table 5: three sources with 2,000 reviews each; the target labels 400 and
    # is tested on its other 1,600. The authors' (later deleted) Amazon network was an MLP on 5,000 features
    # with hidden layers 1,000, 500 and 100; optimiser and learning rates follow their public code (Adam,
    # source 1e-4, target 2e-5, fresh at every call; docs/reproduction.md). 8 rounds after the FedGP
    # protocol's 2 FedAvg warm-up rounds (FedAvg: 10 rounds; the weakly-supervised family, which has no
    # warm-up: 8, its first 5 averaging) keep a cell under a minute of CPU. Without the warm-up FedGP stays
    # near chance here (measured: 50-58% on kitchen and electronics), as its projection filters the sources
    # against a target direction from 400 reviews and a random start.
    default_train = {
        "model": "mlp",
        "model_options": {"hidden": [1000, 500, 100]},
        "rounds": 8,
        "warmup_rounds": 2,
        "local_epochs": 1,
        "optimizer": "adam",
        "source_lr": 1e-4,
        "target_lr": 2e-5,
        "source_batch_size": 32,
        "target_batch_size": 32,
    }
    default_partition = {"target_labelled": 400}

    def prepare(self, options: dict[str, Any], raw_root: str | None = None) -> PreparedDataset:
        from sklearn.feature_extraction.text import CountVectorizer

        reviews = read_reviews(raw_dir(raw_root, RAW_NAME) / ARCHIVE)
        vocabularies = source_vocabularies(
            {domain: texts for domain, (texts, _) in reviews.items()}, options["vocabulary"]
        )
        union = sorted(set().union(*vocabularies.values()))
        column = {ngram: index for index, ngram in enumerate(union)}
        counter = CountVectorizer(ngram_range=(1, 2), vocabulary=union)
        domains = {
            domain: DomainArrays(feature_map(counter.transform(texts).toarray(), options["features"]), labels)
            for domain, (texts, labels) in reviews.items()
        }
        meta = {
            "options": options,
            "target_feature_columns": {
                target: [column[ngram] for ngram in vocabulary] for target, vocabulary in vocabularies.items()
            },
            "union_vocabulary": len(union),
        }
        return PreparedDataset(self.name, self.task, 2, (len(union),), domains, meta=meta)
