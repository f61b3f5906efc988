"""Code equivalences: evidence that a module's new code gives the same cells, bit for bit, as the code a cell's
fingerprint recorded, so that a refactor (a split, a rename, a guard on a read) keeps the reproduction archive's
evidence current instead of marking 1,700 cells as from an older commit.

An equivalence says: module M at hash `before` (`fdabench.cell.fingerprint`; None for a module the old code did not
reach) and at hash `after` gave identical cells. It is written only by `fdabench archive vouch` (`vouch`), from pairs
of the same cells run with the old code and with today's: every pair must agree in everything but timing, and the new
cell must carry today's fingerprint. It holds transitively along `before -> after` (a later refactor of the same
module extends the chain) and only in that direction. `code_changes` (`fdabench.reproduction.staleness`) consults it for
archived cells; a workspace's cells are still judged by their digest and rerun.

An equivalence is as good as its evidence: it lists the cells' suites, datasets, methods, device and threads, and a
module no pair of cells ran is never vouched for. The record ships with the package (`RECORD`), so that cells a user
archived with an older fdabench stay current where this evidence covers the change.

File: {"format": "fdabench.code_equivalences/1", "equivalences": [{module, before, after, evidence {cells, suites,
datasets, methods, device, threads, torch, vouched}}]}, sorted by (module, before, after).
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fdabench.cell.compare import cell_differences
from fdabench.core import formats
from fdabench.core.readers import FileReadError, read_json_object
from fdabench.reproduction.staleness import PLUGIN_PREFIX

FORMAT = formats.CODE_EQUIVALENCES
RECORD = Path(__file__).with_name("code_equivalences.json")
#: what must be equal for two runs to count as the same computation (a result on another device or thread count, or
#: with another torch, may differ in its last bits for reasons unrelated to the code)
SAME_RUN = ("device", "threads", "versions")


class VouchError(ValueError):
    """The cells given do not show the code equivalent (a result differs, a cell is unpaired, ran other code...)."""


@dataclass(frozen=True)
class Equivalences:
    """The edges module -> before -> {after}: `holds(module, before, after)` when a chain of vouched equivalences
    leads from `before` to `after`."""

    edges: Mapping[str, Mapping[str | None, frozenset[str]]] = field(default_factory=dict)

    def holds(self, module: str, before: str | None, after: str) -> bool:
        if before == after:
            return True
        successors = self.edges.get(module, {})
        seen, pending = {before}, [before]
        while pending:
            for following in successors.get(pending.pop(), ()):
                if following == after:
                    return True
                if following not in seen:
                    seen.add(following)
                    pending.append(following)
        return False


NONE = Equivalences()


def equivalences_of(entries: Iterable[dict[str, Any]]) -> Equivalences:
    edges: dict[str, dict[str | None, set[str]]] = {}
    for entry in entries:
        edges.setdefault(entry["module"], {}).setdefault(entry["before"], set()).add(entry["after"])
    return Equivalences(
        {module: {before: frozenset(after) for before, after in found.items()} for module, found in edges.items()}
    )


def parse_record(payload: Any, source: str) -> list[dict[str, Any]]:
    """The entries of a record file's JSON `payload` (read from `source`), checked for shape."""
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{source}: not a code-equivalence record (format {FORMAT})")
    entries = payload.get("equivalences")
    if not isinstance(entries, list):
        raise ValueError(f"{source}: `equivalences` is not a list")
    for index, entry in enumerate(entries):
        ok = (
            isinstance(entry, dict)
            and isinstance(entry.get("module"), str)
            and (entry.get("before") is None or isinstance(entry.get("before"), str))
            and isinstance(entry.get("after"), str)
            and isinstance(entry.get("evidence"), dict)
        )
        if not ok:
            raise ValueError(f"{source}: entry {index} is not {{module, before, after, evidence}}")
    return entries


def record_payload(entries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    ordered = sorted(entries, key=lambda entry: (entry["module"], entry["before"] or "", entry["after"]))
    return {"format": FORMAT, "equivalences": ordered}


def merged(existing: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`existing` with `new` added. An edge already recorded keeps the wider evidence (more cells; the newer where
    they are as many): vouching a narrower rerun for an edge that a wide run showed must not shrink its evidence."""
    key = lambda entry: (entry["module"], entry["before"], entry["after"])
    found = {key(entry): entry for entry in existing}
    for entry in new:
        kept = found.get(key(entry))
        if kept is None or entry["evidence"]["cells"] >= kept["evidence"]["cells"]:
            found[key(entry)] = entry
    return list(found.values())


def vouch(
    pairs: Iterable[tuple[str, dict[str, Any], dict[str, Any]]],
    current_code: Any,
    today: datetime.date | None = None,
) -> list[dict[str, Any]]:
    """The equivalences (entries) that `pairs` of (name, old run, new run) of the same cells show: for every module
    whose hash differs between the two runs' fingerprints, with the cells that ran it as evidence. Both runs are
    compared by `fdabench.cell.compare.cell_differences` (two archive records, or two cell files);
    `current_code(config)` is today's fingerprint of a configuration ({fingerprint, modules}), which every new run
    must carry. `VouchError` lists every
    pair that shows nothing (results differ, another device, threads or versions, the new run from other code, a
    plugin changed); nothing is vouched then."""
    problems: list[str] = []
    evidence: dict[tuple[str, str | None, str], list[dict[str, Any]]] = {}
    count = 0
    for name, old, new in pairs:
        count += 1
        today_code = current_code(new["config"])
        if today_code is None or new.get("code") != today_code:
            problems.append(f"{name}: the new run's code fingerprint is not today's (rerun it with this checkout)")
            continue
        if old.get("config") != new.get("config"):
            problems.append(f"{name}: the two runs have different configurations")
            continue
        unequal = [key for key in SAME_RUN if old.get(key) != new.get(key)]
        if unequal:
            problems.append(f"{name}: the two runs differ in {', '.join(unequal)} (compare runs on one machine)")
            continue
        diff = cell_differences(old, new)
        if diff:
            more = f" and {len(diff) - 3} more" if len(diff) > 3 else ""
            problems.append(f"{name}: results differ at {', '.join(diff[:3])}{more}")
            continue
        before_modules, after_modules = old["code"]["modules"], new["code"]["modules"]
        for module, digest in after_modules.items():
            if before_modules.get(module) == digest:
                continue
            if module.startswith(PLUGIN_PREFIX):
                problems.append(f"{name}: plugin {module[len(PLUGIN_PREFIX) :]} differs (a plugin is not vouched for)")
                break
            evidence.setdefault((module, before_modules.get(module), digest), []).append(new)
    if count == 0:
        raise VouchError("no pair of cells given: run the same cells with the old code and with today's")
    if problems:
        raise VouchError(f"{len(problems)} of {count} pairs show no equivalence: " + "; ".join(problems))
    vouched = (today or datetime.date.today()).isoformat()
    return [
        {"module": module, "before": before, "after": after, "evidence": _evidence(cells, vouched)}
        for (module, before, after), cells in sorted(evidence.items(), key=lambda item: str(item[0]))
    ]


def _evidence(cells: list[dict[str, Any]], vouched: str) -> dict[str, Any]:
    first = cells[0]
    return {
        "cells": len(cells),
        "suites": sorted({cell["cell"]["suite"] for cell in cells}),
        "datasets": sorted({cell["cell"]["dataset"] for cell in cells}),
        "methods": sorted({cell["cell"]["method"] for cell in cells}),
        "device": first.get("device"),
        "threads": first.get("threads"),
        "torch": (first.get("versions") or {}).get("torch"),
        "vouched": vouched,
    }


def read_record(path: str | Path = RECORD) -> list[dict[str, Any]]:
    """The entries of the record at `path` ([] where there is none yet); `FileReadError` naming a file that is not
    a code-equivalence record."""
    if not Path(path).exists():
        return []
    payload = read_json_object(path, "a code-equivalence record (JSON)")
    try:
        return parse_record(payload, str(path))
    except ValueError as error:
        raise FileReadError(path, str(error).removeprefix(f"{path}: ")) from None


@functools.cache
def shipped() -> Equivalences:
    """The equivalences this fdabench ships (`RECORD`), read once per process."""
    return equivalences_of(read_record(RECORD))
