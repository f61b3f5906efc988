"""A run that could never finish is refused before any job: `--cores 0`, and a file-size limit (ulimit -f) below a
result Snakemake would back up to .snakemake/backups/ before rerunning it."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fdabench.jobs.run_settings import cores_problem, file_size_problem
from workflows import TINY_PARAMS, workflow_environment


def test_no_core_is_refused_only_where_jobs_run_on_this_machine():
    assert "--cores 0 leaves no core for any job" in cores_problem(0, jobs_run_here=True)
    assert cores_problem(0, jobs_run_here=False) is None  # a cluster's jobs get their cores from the scheduler
    assert cores_problem(1, jobs_run_here=True) is None and cores_problem(None, jobs_run_here=True) is None


def _limited(limit: int, code: str) -> str:
    """`code`'s stdout in a process whose file-size limit is `limit` bytes."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=apply).stdout


def test_a_file_size_limit_is_refused_only_below_a_result_a_rerun_would_back_up(tmp_path):
    (tmp_path / "results" / "cells").mkdir(parents=True)
    (tmp_path / "results" / "cells" / "big.json").write_bytes(b"x" * 5000)
    (tmp_path / "results" / "small.md").write_bytes(b"x" * 10)
    results = str(tmp_path / "results")
    check = f"from fdabench.jobs.run_settings import file_size_problem; print(file_size_problem([{results!r}]))"
    below = _limited(4096, check)
    assert "the file-size limit (ulimit -f: 4096 bytes) is smaller than" in below and "big.json (5000 bytes)" in below
    assert _limited(8192, check).strip() == "None"  # above every result: nothing to refuse
    assert file_size_problem([tmp_path / "results"]) is None  # no limit here


def _snakemake(workdir: Path, repo: Path, *args: str, limit: int | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(repo / "Snakefile"), "-d", str(workdir), *args]

    def apply() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    environment = workflow_environment(workdir, forkserver=False)
    return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=300, preexec_fn=apply)


@pytest.mark.pipeline
def test_the_workflow_refuses_no_core_and_a_small_file_size_limit_before_any_job(tmp_path, repo_root):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({**TINY_PARAMS, "device": "cpu"}))
    result = _snakemake(tmp_path, repo_root, "--cores", "0")
    assert result.returncode != 0, result.stderr[-2000:]
    assert "--cores 0 leaves no core for any job" in result.stdout + result.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "results").exists()

    finished = tmp_path / "results" / "cells" / "tiny" / "finished.json"  # stands for a finished cell
    finished.parent.mkdir(parents=True)
    finished.write_bytes(b"{}" + b" " * 300_000)
    result = _snakemake(tmp_path, repo_root, "--cores", "1", limit=200_000)
    assert result.returncode != 0
    assert "the file-size limit (ulimit -f: 200000 bytes) is smaller than" in result.stdout + result.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / ".snakemake" / "backups").exists()
