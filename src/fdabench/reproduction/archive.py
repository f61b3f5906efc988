"""The reproduction archive: one compact record per finished cell, kept in the repository so that the published
comparisons can be rebuilt without the cell files (`fdabench compare --archive`) and the cell files rebuilt from it
(`fdabench archive export`).

File: one per suite, `docs/reproduction/<suite>/cells.jsonl.gz` by default (`archive_path`): gzip'd JSON lines, one
record a line, each line key-sorted compact JSON, the lines sorted by cell identity (`identity`), and a gzip header
without file name or time (`gzip.GzipFile(mtime=0)`), so the same records always give the same bytes and a commit
that adds cells changes the file by what they add. Written only by `fdabench archive add` (`add_cells`), never by
hand: `read_archive` refuses a file that is not in this canonical form.

Record (format "fdabench.archive/1"; keys):
  format; cell {suite, experiment, dataset, method, algorithm, target, seed} (its identity);
  config (the fully resolved configuration, as the cell file records it) and config_hash (sha256 of its canonical
  JSON); code {fingerprint, modules} (`fdabench.cell.fingerprint`: what the result depends on), and the cell's
  plugins where it records them; versions
  {fdabench, torch, python}; device, threads, cuda_visible_devices;
  metric, higher_is_better, final, finals (every metric's final), final_rounds; best_round {round, phase, value}
  (the best per-round value of `metric` in the phase the final comes from: never a warm-up);
  rounds: per-round columns, each a list over the logged rounds (null where a round lacks the key): round, phase,
  the cell's metric, what the selection rules read (`source_val_<metric>`, `target_val_<metric>`), a personalised
  method's `global_<metric>`, and an auto-weighted method's `betas`, where the cell logs them;
  train_cpu_seconds, train_seconds, wall_seconds; model {name, options}, model_size, sources, family,
  uses_unlabelled_target, partition_hash, bytes {uplink_total, downlink_total, per_round_mean};
  digest (`fdabench.cell.digest`: "sha256:..." of the rest of the record, checked on every read, so a record edited
  after `fdabench archive add` wrote it is refused by name). Records archived before digests existed carry none
  (unsealed): they are read, and `unsealed` counts them; `fdabench archive seal` adds their digests.
Per-round losses, other metrics, bytes and seconds are left out (every metric's final is kept): a cell rebuilt from
its record (`cell_from_record`) carries `archive` {format} to say so.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fdabench.cell.digest import DIGEST_KEY, EditedError, is_sealed, seal, verify
from fdabench.cell.result import CELL_KEYS, FORMAT
from fdabench.core.device_identity import changed_settings
from fdabench.core.io import atomic_path, canonical_json
from fdabench.core.readers import FileReadError, read_bytes, reading
from fdabench.reproduction.equivalence import shipped
from fdabench.reproduction.staleness import code_changes

ARCHIVE_FORMAT = "fdabench.archive/1"
ARCHIVE_ROOT = Path("docs") / "reproduction"
ARCHIVE_NAME = "cells.jsonl.gz"
#: what the record copies from the cell file as it is
COPIED = (
    "config",
    "code",
    "plugins",
    "versions",
    "device",
    "threads",
    "cuda_visible_devices",
    "metric",
    "higher_is_better",
    "final",
    "finals",
    "final_rounds",
    "train_cpu_seconds",
    "train_seconds",
    "wall_seconds",
    "model",
    "model_size",
    "sources",
    "family",
    "uses_unlabelled_target",
    "partition_hash",
    "bytes",
)
#: a record must have these (a cell written before code fingerprints and versions were recorded cannot be archived)
REQUIRED = ("config", "code", "versions", "metric", "higher_is_better", "final", "finals", "final_rounds")
#: the gzip compression level (fixed, so that equal records give equal bytes)
COMPRESSION = 9


def archive_path(suite: str, root: str | Path = ARCHIVE_ROOT) -> Path:
    """Where the archive of `suite` lives: `<root>/<suite>/cells.jsonl.gz`."""
    return Path(root) / suite / ARCHIVE_NAME


def identity(record: dict[str, Any]) -> tuple[str, str, str, str, int]:
    """(suite, experiment, method, target, seed): one record per cell; the archive's order."""
    cell = record["cell"]
    return (cell["suite"], cell["experiment"], cell["method"], str(cell["target"]), int(cell["seed"]))


def config_hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(config).encode("utf-8")).hexdigest()


def round_keys(metric: str) -> tuple[str, ...]:
    """The per-round keys a record keeps, besides round and phase."""
    return (metric, f"source_val_{metric}", f"target_val_{metric}", f"global_{metric}", "betas")


def best_round(cell: dict[str, Any]) -> dict[str, Any] | None:
    """{round, phase, value} of the best per-round value of the cell's metric in the phase of its last logged round
    (the phase the final comes from; the first such round on a tie); None when no round logs the metric."""
    metric, higher = cell["metric"], cell.get("higher_is_better", True)
    logged = [record for record in cell.get("rounds", []) if record.get(metric) is not None]
    if not logged:
        return None
    phase = logged[-1].get("phase")
    candidates = [record for record in logged if record.get("phase") == phase]
    best = candidates[0]
    for record in candidates[1:]:
        if (record[metric] > best[metric]) if higher else (record[metric] < best[metric]):
            best = record
    return {"round": best.get("round"), "phase": phase, "value": best[metric]}


def record_from_cell(cell: dict[str, Any], source: str = "the cell") -> dict[str, Any]:
    """The archive record of a complete cell (`fdabench.cell.result.read_cell`); `source` names it in errors."""
    missing = [key for key in REQUIRED if key not in cell]
    if missing:
        raise ValueError(
            f"{source}: no {', '.join(missing)} recorded (written by an older fdabench); rerun its training job to "
            "archive it"
        )
    rounds = cell.get("rounds", [])
    keys = [key for key in round_keys(cell["metric"]) if any(key in record for record in rounds)]
    record = {
        "format": ARCHIVE_FORMAT,
        "cell": {key: cell["cell"][key] for key in CELL_KEYS},
        **{key: cell[key] for key in COPIED if key in cell},
        "config_hash": config_hash(cell["config"]),
        "best_round": best_round(cell),
        "rounds": {key: [record.get(key) for record in rounds] for key in ("round", "phase", *keys)},
    }
    return seal(record)


def cell_from_record(record: dict[str, Any]) -> dict[str, Any]:
    """A complete cell file (format "fdabench.cell/1") rebuilt from its record: what `fdabench.cell.result.read_cell`
    accepts and the tables, figures and `fdabench status` read, with `archive` {format} added; the per-round keys
    the record left out are absent."""
    columns = record["rounds"]
    count = len(columns.get("round", []))
    rounds = [
        {key: values[index] for key, values in columns.items() if values[index] is not None} for index in range(count)
    ]
    cell = {"format": FORMAT, "status": "complete", "cell": dict(record["cell"])}
    for key in COPIED:
        if key in record:
            cell[key] = record[key]
    cell["rounds"] = rounds
    cell["archive"] = {"format": record["format"]}
    return cell


def record_name(record: dict[str, Any]) -> str:
    """suite/experiment/method/target/seed N: the record's cell."""
    suite, experiment, method, target, seed = identity(record)
    return f"{suite}/{experiment}/{method}/{target}/seed {seed}"


def unsealed(records: Iterable[dict[str, Any]]) -> int:
    """How many of `records` carry no digest (archived before digests existed)."""
    return sum(not is_sealed(record) for record in records)


def seal_records(records: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """`records` (read, so those with a digest were verified), each unsealed one given its digest; how many were."""
    records = list(records)
    return [record if is_sealed(record) else seal(record) for record in records], unsealed(records)


def _line(record: dict[str, Any]) -> str:
    return canonical_json(record)


def _contents(record: dict[str, Any]) -> str:
    """The record's line without its digest: equal for a record and the same record sealed."""
    return canonical_json({key: value for key, value in record.items() if key != DIGEST_KEY})


def encode(records: Iterable[dict[str, Any]]) -> bytes:
    """The archive file's bytes: the records sorted by identity, one canonical JSON line each, gzip'd without name or
    time in the header."""
    ordered = sorted(records, key=identity)
    seen = [identity(record) for record in ordered]
    if len(set(seen)) != len(seen):
        raise ValueError("two records of the same cell")
    text = "".join(_line(record) + "\n" for record in ordered)
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=COMPRESSION) as handle:
        handle.write(text.encode("utf-8"))
    return buffer.getvalue()


def decode(data: bytes, source: str = "the archive") -> list[dict[str, Any]]:
    """The records of an archive file's bytes, checked: each a record of this format, in canonical form, unedited
    (its digest, where it has one, matches it: `fdabench.cell.digest`), sorted by identity, one per cell (anything
    else was not written by `fdabench archive add`)."""
    if not data:
        raise FileReadError(source, "is empty (an archive of no records still has a gzip header); restore it from git")
    with reading(source, "a reproduction archive (gzip'd JSON lines)"):
        text = gzip.decompress(data).decode("utf-8")
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise FileReadError(source, f"line {number}: not JSON ({error})") from None
        if not isinstance(record, dict) or record.get("format") != ARCHIVE_FORMAT:
            found = record.get("format") if isinstance(record, dict) else None
            raise FileReadError(
                source, f"line {number}: format {found!r}, not {ARCHIVE_FORMAT} (written by another fdabench?)"
            )
        if _line(record) != line:
            raise FileReadError(
                source,
                f"line {number}: not in canonical form (edited by hand?); rebuild it with `fdabench archive add`",
            )
        try:
            verify(record, f"{source}, line {number} ({record_name(record)})")
        except EditedError as error:
            raise EditedError(f"{error}; restore the file (git checkout) or archive the cell again") from None
        records.append(record)
    order = [identity(record) for record in records]
    if order != sorted(order) or len(set(order)) != len(order):
        raise FileReadError(source, "records out of order or repeated (edited by hand?)")
    if text and not text.endswith("\n"):
        raise FileReadError(source, "truncated (no newline after its last record)")
    return records


def read_archive(path: str | Path) -> list[dict[str, Any]]:
    """The records of the archive at `path` (none when it does not exist)."""
    path = Path(path)
    if not path.exists():
        return []
    return decode(read_bytes(path, "a reproduction archive"), str(path))


def write_archive(path: str | Path, records: Iterable[dict[str, Any]]) -> None:
    """Write the archive atomically (`encode`)."""
    data = encode(records)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def add_records(
    existing: list[dict[str, Any]], new: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """`existing` with `new` added, a new record replacing an older one of the same cell; counts of added,
    replaced and unchanged records. Refuses a mix of suites: one archive, one suite."""
    suites = {record["cell"]["suite"] for record in [*existing, *new]}
    if len(suites) > 1:
        raise ValueError(f"cells of several suites ({', '.join(sorted(suites))}): one archive holds one suite")
    by_identity = {identity(record): record for record in existing}
    counts = {"added": 0, "replaced": 0, "unchanged": 0}
    seen: set = set()
    for record in new:
        key = identity(record)
        if key in seen:
            raise ValueError(f"the cell {'/'.join(map(str, key))} is given twice")
        seen.add(key)
        if key not in by_identity:
            counts["added"] += 1
        elif _contents(by_identity[key]) == _contents(record):
            counts["unchanged"] += 1
        else:
            counts["replaced"] += 1
        by_identity[key] = record
    return sorted(by_identity.values(), key=identity), counts


def record_state(record: dict[str, Any], config: dict[str, Any] | None, code: dict[str, Any] | None) -> tuple[str, str]:
    """("current" | "older commit" | "config changed" | "not in the suite", why) of a record against what the source
    and params.yaml give now for its cell: `config` (None: the suite no longer has the cell) and its code fingerprint
    `code` ({fingerprint, modules}; None: it cannot be computed, e.g. the method is no longer registered), compared
    module by module (`fdabench.reproduction.staleness.code_changes`)."""
    if config is None:
        return "not in the suite", "params.yaml no longer lists this cell"
    changed = None if code is None else code_changes(record["code"], code, shipped().holds)
    if changed != []:
        ran = record["code"].get("fingerprint", "?")[:12]
        now = (code or {}).get("fingerprint", "none")[:12]
        what = f": {', '.join(changed)} changed" if changed else ""
        return "older commit", f"ran with code {ran}, the source gives {now} now{what}"
    changed = changed_settings(record["config"], record.get("device"), config)
    if changed:
        return "config changed", "configuration changed: " + ", ".join(changed)
    return "current", ""
