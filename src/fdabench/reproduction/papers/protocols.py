"""The published protocol of every published table, as data, and how a cell is compared with it.

Where the paper's text and the authors' public code differ, the code that produced the tables is the protocol. Each
record (`fdabench.reproduction.papers.fedgp_records`, `fdabench.reproduction.papers.weak_records`) holds the data
protocol, the partition, the training settings and, per published row (method key, see
`fdabench.reproduction.papers.published.method_key`), the algorithm and its hyper-parameters, and the train or partition
settings that row ran differently; every setting names its source (`fdabench.reproduction.papers.record.Source`: code,
paper or inferred). Records are written out in full and do not read fdabench's registries, so a cell that departs from
one is flagged whatever the registry defaults are (`changes_from_published`). `notes` lists the differences that no
setting of fdabench expresses.
"""

from __future__ import annotations

import copy
from typing import Any

from fdabench.reproduction.papers import fedgp_records, weak_records
from fdabench.reproduction.papers.published import method_key
from fdabench.reproduction.papers.record import Protocol, Row, Source

PROTOCOLS: dict[str, Protocol] = {**fedgp_records.PROTOCOLS, **weak_records.PROTOCOLS}

# The evaluation batch and whether sources train as a vectorised cohort change how a run is computed, not what.
NOT_COMPARED = ("train.eval_batch_size", "train.cohort")
# Settings that do nothing under another setting's value: (setting, the setting that makes it inert, its value).
INERT = (
    ("hparams.estimation_batch_size", "hparams.estimation", "local_steps"),
    ("dataset_options.seed", "dataset_options.max_per_domain", None),
)


def _flatten(values: dict[str, Any], prefix: str) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def published_settings(protocol: Protocol, row: Row) -> dict[str, Any]:
    """The complete published settings of one row: the table's, with the row's own on top."""
    return {
        "dataset": protocol.dataset,
        "dataset_options": copy.deepcopy(protocol.dataset_options),
        "partitioner": protocol.partitioner,
        "partition": {**copy.deepcopy(protocol.partition), **copy.deepcopy(row.partition)},
        "train": {**copy.deepcopy(protocol.train), **copy.deepcopy(row.train)},
        "algorithm": row.algorithm,
        "hparams": copy.deepcopy(row.hparams),
    }


def row_settings(row: Row) -> list[str]:
    """The flattened settings a row itself sets: its algorithm, hyper-parameters and train/partition overrides."""
    own = {"algorithm": row.algorithm, "hparams": row.hparams, "train": row.train, "partition": row.partition}
    return list(_flatten({key: value for key, value in own.items() if value or key in ("algorithm", "hparams")}, ""))


def settings_provenance(protocol: Protocol, row: Row) -> dict[str, Source | None]:
    """Every flattened setting of a row's published settings with its source (None where the record gives none):
    the table's provenance, then the row's source for what the row sets, then the row's own provenance."""
    provenance: dict[str, Source] = dict(protocol.provenance)
    provenance.update(dict.fromkeys(row_settings(row), row.source))
    provenance.update(row.provenance)
    return {key: provenance.get(key) for key in _flatten(published_settings(protocol, row), "")}


def missing_provenance(protocol: Protocol, row: Row) -> list[str]:
    """Settings of the row that no source covers (a record must give every setting one)."""
    return [key for key, source in settings_provenance(protocol, row).items() if source is None]


def stale_provenance(protocol: Protocol) -> list[str]:
    """Provenance keys that name no setting of any row (a typo, or a setting since removed)."""
    settings = {key for row in protocol.rows.values() for key in _flatten(published_settings(protocol, row), "")}
    named = set(protocol.provenance) | {key for row in protocol.rows.values() for key in row.provenance}
    return sorted(named - settings)


def inferred_settings(protocol: Protocol, row: Row) -> list[str]:
    """'key = value (reason)' for every setting of the row that rests on fdabench's choice, not on the code or
    the paper."""
    values = _flatten(published_settings(protocol, row), "")
    return [
        f"{key} = {values[key]} ({source.where})"
        for key, source in settings_provenance(protocol, row).items()
        if source is not None and source.kind == "inferred"
    ]


def compare_settings(ours: dict[str, Any], published: dict[str, Any]) -> list[str]:
    """'key = ours (published value)' for every setting that differs ('unset' where one side lacks it)."""
    flat_ours, flat_published = _flatten(ours, ""), _flatten(published, "")

    def shown(flat: dict[str, Any], key: str) -> str:
        value = flat.get(key)
        return "unset" if value is None else str(value)

    inert = {key for key, switch, value in INERT if flat_ours.get(switch) == value == flat_published.get(switch)}
    return [
        f"{key} = {shown(flat_ours, key)} (published {shown(flat_published, key)})"
        for key in sorted(set(flat_ours) | set(flat_published))
        if key not in NOT_COMPARED and key not in inert and shown(flat_ours, key) != shown(flat_published, key)
    ]


def published_row(config: dict[str, Any]) -> tuple[Protocol, Row] | None:
    """The protocol and row a cell's configuration is compared with, or None."""
    protocol = PROTOCOLS.get(config.get("published") or "")
    if protocol is None:
        return None
    row = protocol.rows.get(method_key(config))
    return None if row is None else (protocol, row)


def changes_from_published(config: dict[str, Any], model_options: dict[str, Any] | None = None) -> list[str]:
    """Where a cell departs from the published protocol of its row, as 'hparams.mode = projection (published
    cosine_scaled)': its dataset and options, partition, training settings, algorithm and hyper-parameters
    against the row's record. `model_options` are the cell's model options with the model's defaults filled
    in (the cell file records them); records spell theirs out in full (a test checks it)."""
    if PROTOCOLS.get(config.get("published") or "") is None:
        return []
    found = published_row(config)
    if found is None:
        return [f"no published protocol for row {method_key(config)!r}"]
    published = published_settings(*found)
    ours = {key: copy.deepcopy(config.get(key)) for key in published}
    if model_options is not None and isinstance(ours.get("train"), dict):
        ours["train"]["model_options"] = copy.deepcopy(model_options)
    return compare_settings(ours, published)


def inferred_for(config: dict[str, Any]) -> list[str]:
    """The inferred settings of the published row a cell is compared with (empty when it has none)."""
    found = published_row(config)
    return [] if found is None else inferred_settings(*found)
