"""Shared by the tests that run the workflow in a subprocess (snakemake, dvc): a tiny suite and the
environment such a subprocess needs."""

import os
import sys
from pathlib import Path

#: one experiment, two methods, two seeds, a few rounds: the smallest suite with a table
TINY_PARAMS = {
    "suite": "tiny",
    "methods": {"fedgp": {"beta": 0.5}},
    "suites": {
        "tiny": {
            "seeds": [0, 1],
            "methods": ["source_only", "fedgp"],
            "train": {"model": "mlp", "model_options": {"hidden": [16]}, "rounds": 3, "warmup_rounds": 1},
            "experiments": {"colored_digits": {"dataset": "colored_digits", "targets": ["-90"]}},
            "tables": {"table1": {"experiments": ["colored_digits"]}},
        }
    },
}


def workflow_environment(workdir: Path, forkserver: bool = True, source: Path | None = None) -> dict[str, str]:
    """This interpreter's scripts (fdabench, snakemake, dvc) first on PATH; the fork server on (a short idle
    time, its socket under `workdir`) or off; with `source`, a copy of the source tree shadows the installed one."""
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    env["FDABENCH_FORKSERVER"] = "1" if forkserver else "0"
    env["FDABENCH_FORKSERVER_IDLE"] = "15"
    env["XDG_RUNTIME_DIR"] = str(workdir)
    if source is not None:
        env["PYTHONPATH"] = str(source) + os.pathsep + env.get("PYTHONPATH", "")
    return env
