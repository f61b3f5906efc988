"""Settings of a workflow run that make it impossible, refused by the Snakefile's `onstart` before any job:
`--cores 0` (Snakemake then waits for a free core forever), and a file-size limit (`ulimit -f`) below an output
the run may rerun (Snakemake first copies each `update()` output it reruns to .snakemake/backups/, and a copy cut
short by the limit fails with a traceback and is later restored over the file it was a copy of)."""

from __future__ import annotations

import resource
from collections.abc import Iterable
from pathlib import Path

#: where the workflow's update() outputs live (cells, tables, figures, the theory check's files)
UPDATED_OUTPUTS = ("results",)


def cores_problem(cores: int | None, jobs_run_here: bool) -> str | None:
    """One line if `--cores` leaves no core for the jobs that run on this machine."""
    if cores == 0 and jobs_run_here:
        return (
            "--cores 0 leaves no core for any job, and Snakemake would wait for one forever; pass --cores N (N >= 1) "
            "or --cores all. Nothing was run."
        )
    return None


def file_size_problem(folders: Iterable[str | Path] = UPDATED_OUTPUTS) -> str | None:
    """One line if the file-size limit of this process (inherited by its jobs) is smaller than a file under
    `folders`, which a rerun would copy to .snakemake/backups/."""
    limit, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if limit == resource.RLIM_INFINITY:
        return None
    files = (path for folder in folders for path in Path(folder).rglob("*") if path.is_file() and not path.is_symlink())
    larger = next((path for path in files if path.stat().st_size > limit), None)
    if larger is None:
        return None
    return (
        f"the file-size limit (ulimit -f: {limit} bytes) is smaller than {larger} ({larger.stat().st_size} bytes), "
        "which Snakemake copies to .snakemake/backups/ before a rerun; raise the limit (ulimit -f unlimited) and "
        "rerun. Nothing was run."
    )
