"""The workflow notices what is missing or spelled otherwise: a deleted cell is rebuilt, with the table made from it,
when the table is the target; a directory where a cell file belongs is moved aside and the cell runs; another
spelling of the same data root reruns nothing; a params file with a repeated key stops the run before anything."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from workflows import TINY_PARAMS, workflow_environment

pytestmark = pytest.mark.pipeline

CELL = "results/cells/tiny/colored_digits/fedgp/-90/seed0.json"


def _snakemake(workdir: Path, repo: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(repo / "Snakefile"), "--cores", "2", *args]
    env = workflow_environment(workdir)
    return subprocess.run(command, cwd=workdir, capture_output=True, text=True, env=env, timeout=600)


def _numbers(path: Path) -> list[dict]:
    return [{k: v for k, v in record.items() if k != "seconds"} for record in json.loads(path.read_text())["rounds"]]


@pytest.fixture(scope="module")
def finished(tmp_path_factory, repo_root) -> Path:
    workdir = tmp_path_factory.mktemp("finished")
    (workdir / "params.yaml").write_text(yaml.safe_dump({**TINY_PARAMS, "device": "cpu"}))
    result = _snakemake(workdir, repo_root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return workdir


@pytest.fixture
def workspace(finished, tmp_path) -> Path:
    copy = tmp_path / "work"
    shutil.copytree(finished, copy, symlinks=True, ignore=shutil.ignore_patterns("*.sock"))
    return copy


def test_a_table_target_rebuilds_a_deleted_cell_and_the_table(workspace, repo_root):
    cell, table = workspace / CELL, workspace / "results/tiny/table1.csv"
    before, table_before = _numbers(cell), table.stat().st_mtime_ns
    cell.unlink()
    result = _snakemake(workspace, repo_root, "results/table1.csv")  # the README's main job
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Nothing to be done" not in result.stdout + result.stderr
    assert _numbers(cell) == before and table.stat().st_mtime_ns > table_before  # the same numbers, a new table
    nothing = _snakemake(workspace, repo_root, "--dry-run", "results/table1.csv")
    assert "Nothing to be done" in nothing.stdout + nothing.stderr, nothing.stdout[-2000:]


def test_a_directory_where_a_cell_belongs_is_moved_aside_once(workspace, repo_root):
    cell = workspace / CELL
    cell.unlink()
    (cell / "notes").mkdir(parents=True)
    result = _snakemake(workspace, repo_root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stderr.count("was a directory, where the cell file belongs; moved aside") == 1, result.stderr[-3000:]
    assert cell.is_file() and json.loads(cell.read_text())["status"] == "complete"
    assert [p.name.split("-")[0] for p in cell.parent.iterdir() if p.is_dir()] == [".seed0.json.directory"]
    again = _snakemake(workspace, repo_root)
    assert again.returncode == 0 and "was a directory" not in again.stderr


def test_another_spelling_of_the_data_root_reruns_nothing(workspace, repo_root):
    for root in ("./data/", str(workspace / "data"), "data/../data"):
        (workspace / "params.yaml").write_text(yaml.safe_dump({**TINY_PARAMS, "device": "cpu", "data": {"root": root}}))
        nothing = _snakemake(workspace, repo_root, "--dry-run")
        assert "Nothing to be done" in nothing.stdout + nothing.stderr, (root, nothing.stdout[-2000:])


def test_a_repeated_key_stops_the_workflow_before_anything(workspace, repo_root):
    text = (workspace / "params.yaml").read_text()
    (workspace / "params.yaml").write_text(text + "suite: tiny\n")
    before = sorted(os.listdir(workspace / "results"))
    result = _snakemake(workspace, repo_root, "--dry-run")
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "repeats key 'suite' of the mapping that gives it at line" in output, output
    assert sorted(os.listdir(workspace / "results")) == before
