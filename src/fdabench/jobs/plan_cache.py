"""What the Snakefile works out from params.yaml, kept for the next parse: a dry run plans without importing the
library (or torch) and without validating params.yaml and resolving every cell again.

Every answer the workflow asks of params.yaml (the suite's experiments and tables, each cell's resolved
configuration and code fingerprint, ...) is a function of the configuration Snakemake read, the code of fdabench
and its plugins, the installed distributions and the FDABENCH_* environment variables; `plan_key` hashes them all
(the code as the fork server's key does: `fdabench.jobs.forkserver.server_key`). A run that executes jobs stores
every answer it worked out in `.snakemake/fdabench-plan/<key>.json`; a later parse with the same key (a dry run,
`--lint`, the next run) reads them instead. A missing answer is worked out (importing the library, after params.yaml
is validated) and kept in memory; only a run that executes jobs writes the file, so a dry run writes nothing.
Answers travel as JSON, stored or not: a stored plan answers exactly as a fresh one (tuples come back as lists,
mappings keep their order).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import fdabench
from fdabench.core.io import canonical_json, write_text_atomic
from fdabench.core.readers import FileReadError, read_json
from fdabench.jobs.forkserver import server_key

#: where plans are kept, relative to the working directory
DIRECTORY = Path(".snakemake/fdabench-plan")
#: plans kept at once (one per recent key: e.g. per suite switched between); the oldest go first
KEPT = 8
ENVIRONMENT_PREFIX = "FDABENCH_"


def plan_key(config: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> str:
    """A hash of everything the planned answers depend on: `config` (in its order: the order of experiments,
    methods and tables is part of the plan), the interpreter, fdabench's and plugins' files and every installed
    distribution (`server_key`), where fdabench is imported from, and the FDABENCH_* environment variables."""
    environment = {name: value for name, value in sorted(environ.items()) if name.startswith(ENVIRONMENT_PREFIX)}
    parts = [json.dumps(config, default=str), server_key(None), str(Path(fdabench.__file__).parent), sys.version]
    parts.append(json.dumps(environment))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


class PlanCache:
    """The answers of one key: `get(name, args, compute)` returns the stored answer or computes and keeps it."""

    def __init__(self, key: str, directory: Path = DIRECTORY):
        self.path = directory / f"{key}.json"
        self.answers: dict[str, Any] = {}
        self.stored = False  # whether the answers came from a file
        self.changed = False  # whether an answer was computed since
        with contextlib.suppress(FileReadError):  # a missing or damaged cache is computed again
            payload = read_json(self.path, "a plan cache")
            if isinstance(payload, dict) and payload.get("key") == key and isinstance(payload.get("answers"), dict):
                self.answers, self.stored = payload["answers"], True
        self.key = key

    def get(self, name: str, args: tuple | list, compute: Callable[[], Any]) -> Any:
        """The answer of `name` for `args`: stored, or `compute()` (an iterator is listed) kept as JSON gives it back.
        A copy: callers may change it."""
        entry = f"{name}{canonical_json(list(args))}"
        if entry not in self.answers:
            value = compute()
            if isinstance(value, Iterator):
                value = list(value)
            self.answers[entry] = json.loads(json.dumps(value))  # a TypeError for an answer that is not JSON
            self.changed = True
        return copy.deepcopy(self.answers[entry])

    def save(self) -> None:
        """Write the answers if any was computed (a run that executes jobs calls this; a dry run never does), and
        remove all but the `KEPT` most recent plans."""
        if not self.changed:
            return
        write_text_atomic(self.path, json.dumps({"key": self.key, "answers": self.answers}, separators=(",", ":")))
        self.changed = False
        plans = sorted(self.path.parent.glob("*.json"), key=lambda path: path.stat().st_mtime, reverse=True)
        for old in plans[KEPT:]:
            with contextlib.suppress(OSError):
                old.unlink()


class PlannedParams:
    """The answers of `fdabench.config.Params` through a PlanCache: `planned.tables()` is `load().tables()`,
    stored or worked out. For methods whose answer is JSON (a list, mapping, string, number); attributes through
    `value`. `load` validates params.yaml and is called only for an answer that is not stored."""

    def __init__(self, cache: PlanCache, load: Callable[[], Any]):
        self._cache = cache
        self._load = load

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args: self._cache.get(name, args, lambda: getattr(self._load(), name)(*args))

    def value(self, name: str) -> Any:
        """An attribute of Params (e.g. `suite_name`)."""
        return self._cache.get(f"attribute:{name}", (), lambda: getattr(self._load(), name))
