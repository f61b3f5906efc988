"""A cell's plan file (`fdabench.core.paths.CELL_PLAN`): the resolved configuration and code fingerprint its
training job runs with, so that the job's command line names the cell by its files and never carries the
configuration itself.

The Snakefile works each plan out (from params.yaml and the source, or from the plan cache: `fdabench.jobs.plan_cache`)
and, in a run that executes jobs, writes it before Snakemake plans the cell; `fdabench train --plan` reads it. A plan
is rewritten only when its content changes, and the train rule's parameter `plan` is `plan_digest`, so a changed
configuration or code fingerprint reruns exactly the cells it changes, in a dry run too (which writes nothing).
Imports neither torch nor the library.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from fdabench.core.formats import CELL_PLAN, check_kind
from fdabench.core.io import canonical_json, write_text_atomic
from fdabench.core.readers import FileReadError, read_json_object, read_text


def plan_text(config: dict[str, Any], code: dict[str, Any]) -> str:
    """The plan file's content: `config` (as the job is to run it) and `code` (`{fingerprint, modules}`,
    `fdabench.cell.fingerprint.CodeFingerprint.to_json`), as canonical JSON."""
    return canonical_json({"format": CELL_PLAN, "config": config, "code": code}) + "\n"


def plan_digest(config: dict[str, Any], code: dict[str, Any]) -> str:
    """16 hex digits of the plan's sha256: equal plans, equal digests."""
    return hashlib.sha256(plan_text(config, code).encode()).hexdigest()[:16]


def write_plan(path: Path, config: dict[str, Any], code: dict[str, Any]) -> bool:
    """Write the plan to `path` unless it already holds it (an unchanged plan keeps its modification time, so
    Snakemake does not take it for a new input); whether it was written."""
    text = plan_text(config, code)
    try:
        if path.exists() and read_text(path, "a cell's plan") == text:
            return False
    except FileReadError:
        pass  # unreadable: written again
    write_text_atomic(path, text)
    return True


def read_plan(path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(configuration, code fingerprint) of a plan file; a file of another kind is refused by name
    (`fdabench.core.formats.WrongKindError`), a missing or unreadable one as `read_json_object` refuses it."""
    payload = read_json_object(path, "a cell's plan")
    check_kind(str(path), payload, "fdabench.cell_plan")
    if not (isinstance(payload.get("config"), dict) and isinstance(payload.get("code"), dict)):
        raise FileReadError(path, "lacks its configuration or code fingerprint; the next snakemake run writes it again")
    return payload["config"], payload["code"]
