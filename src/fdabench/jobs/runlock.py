"""One workflow run per directory, with a lock that cannot go stale.

Snakemake's own directory lock is a file that a `kill -9` leaves behind, after which every run is refused
until `snakemake --unlock`. fdabench's profile turns it off (`nolock`) and the Snakefile takes this lock
instead when a run starts: an exclusive `flock` on `.snakemake/fdabench-run.lock`, which the kernel
releases the moment its holder exits, however it exits. A second run in the same directory is refused with
the first one's process id; a dry run never takes the lock.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

LOCK_FILE = Path(".snakemake") / "fdabench-run.lock"

_held: IO[str] | None = None  # kept open for the life of the process: closing it releases the lock


class RunLockedError(RuntimeError):
    """Another workflow run holds this directory."""


def hold_run_lock(directory: str | os.PathLike = ".") -> None:
    """Take the directory's run lock for the rest of this process, or raise RunLockedError naming the
    process that holds it. Taking it again in the process that holds it is a no-op."""
    global _held
    if _held is not None:
        return
    path = Path(directory) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (held open on purpose)
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise RunLockedError(
            f"another snakemake run (process {holder}) is running in {Path(directory).resolve()}; wait for it "
            "to finish or stop it, then rerun (its lock goes away with it, also when it is killed)"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    _held = handle
