"""The shape of a published protocol record, and where each of its settings comes from.

Every setting a record holds carries a `Source`:
- `code`: read in the authors' code (repository, file:line, commit);
- `paper`: read in the paper's text (table, appendix or section);
- `inferred`: chosen by fdabench because nothing public fixes it, with the reason.

A row compared on settings that are all `code` or `paper` is "on the published settings"; a row whose record
holds an `inferred` setting rests on fdabench's choice and is reported as such
(`fdabench.reproduction.papers.protocols`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KINDS = ("code", "paper", "inferred")
FEDGP_CODE = "jackyzyb/AutoFedGP"
FEDGP_HEAD = "7b10ca9"  # the repository's HEAD, read for every `code` citation that names no other commit
FED_HEART_COMMIT = "9b74449"  # main_flamby_heart*.py: added here, deleted in d66a42f
WEAK_CODE = "enyijiang/MIDRC"


@dataclass(frozen=True)
class Source:
    """Where one recorded setting comes from: `kind` (code, paper, inferred) and `where` (file:line for code,
    table/appendix for the paper, the reason for an inference); `repository` and `commit` for code."""

    kind: str
    where: str
    repository: str = ""
    commit: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"provenance kind {self.kind!r}: one of {', '.join(KINDS)}")
        if not self.where.strip():
            raise ValueError(f"a {self.kind} provenance needs its citation or reason")
        if self.kind == "code" and not (self.repository and self.commit):
            raise ValueError(f"code provenance {self.where!r} needs the repository and the commit")

    def __str__(self) -> str:
        if self.kind == "code":
            return f"code: {self.repository} {self.where} @{self.commit}"
        return f"{self.kind}: {self.where}"


def code(where: str, commit: str = FEDGP_HEAD, repository: str = FEDGP_CODE) -> Source:
    """A setting read in the authors' code, cited as 'file:line'."""
    return Source("code", where, repository, commit)


def paper(where: str) -> Source:
    """A setting read in the paper's text, cited as its table, appendix or section."""
    return Source("paper", where)


def inferred(reason: str) -> Source:
    """A setting fdabench chose because nothing public fixes it; `reason` says why this value."""
    return Source("inferred", reason)


def same(source: Source, *keys: str) -> dict[str, Source]:
    """One source for several settings (flattened keys such as 'train.source_lr')."""
    return dict.fromkeys(keys, source)


@dataclass(frozen=True)
class Row:
    """One published row: the algorithm that produced it, its hyper-parameters, the train or partition settings
    it ran differently from its table, and where each of those comes from (`source`, unless `provenance` names
    the setting's own: flattened keys 'algorithm', 'hparams.beta', 'train.warmup_rounds', ...)."""

    algorithm: str
    hparams: dict[str, Any]
    source: Source
    train: dict[str, Any] = field(default_factory=dict)
    partition: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Source] = field(default_factory=dict)


@dataclass(frozen=True)
class Protocol:
    """One published table's protocol: the data, partition and training settings every row shares, each with
    its source in `provenance` (flattened keys: 'dataset', 'dataset_options.label_noise', 'partition.clients',
    'train.source_lr', ...), the rows, and `notes`: differences no setting of fdabench expresses."""

    citation: str
    dataset: str
    dataset_options: dict[str, Any]
    partitioner: str
    partition: dict[str, Any]
    train: dict[str, Any]
    rows: dict[str, Row]
    provenance: dict[str, Source]
    notes: tuple[str, ...] = ()
