"""scripts/gpu_cell_batch.sh end to end on the tiny suite: it builds the partitions its cells need, writes each
cell's workflow command, and the generated run.sh returns every finished cell in one tarball whose cells equal the
workflow's own run of them; a batch of finished cells, or a cell the workflow does not know, is refused."""

import json
import shutil
import subprocess
import tarfile

import yaml

from fdabench.cell.compare import cell_differences
from fdabench.core import paths
from workflows import TINY_PARAMS, workflow_environment

SCRIPT = "scripts/gpu_cell_batch.sh"


def _checkout(repo_root, root):
    root.mkdir()
    shutil.copy(repo_root / "Snakefile", root / "Snakefile")
    shutil.copytree(repo_root / "workflow", root / "workflow")
    (root / "scripts").mkdir()
    shutil.copy(repo_root / SCRIPT, root / SCRIPT)
    (root / "params.yaml").write_text(yaml.safe_dump({**TINY_PARAMS, "device": "cpu"}))


def _run(command, root, **extra):
    env = {**workflow_environment(root, forkserver=False), **extra}
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)


def test_a_batch_returns_every_cell_in_one_file_equal_to_the_workflows_run(repo_root, tmp_path):
    root = tmp_path / "checkout"
    _checkout(repo_root, root)
    cells = [
        paths.fill(paths.CELL, suite="tiny", experiment="colored_digits", method=method, target="-90", seed=1)
        for method in ("source_only", "fedgp")
    ]
    partition = paths.fill(
        paths.PARTITION, data="data", suite="tiny", experiment="colored_digits", target="-90", seed=1
    )

    made = _run(["bash", SCRIPT, "tiny", "2", *cells], root)
    assert made.returncode == 0, made.stderr[-3000:]
    assert "2 cells" in made.stdout and "carry" in made.stdout
    assert (root / partition).is_file()  # built here, by the workflow
    commands = (root / ".gpu_batch" / "commands.txt").read_text().splitlines()
    assert len(commands) == 2
    for cell, command in zip(sorted(cells), sorted(commands, key=lambda c: c.split("--output ")[1]), strict=True):
        assert command.startswith("python3 -m fdabench train") and f'--output "$OUT/work/{cell}"' in command
        assert "--checkpoint-every 0" in command and f"--partition {partition}" in command

    out = tmp_path / "out"
    out.mkdir()
    ran = _run(["bash", ".gpu_batch/run.sh"], root, OUT=str(out), BATCH_SECONDS="500")
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "2 of 2 cells" in ran.stdout
    assert [path.name for path in out.iterdir()] == ["cells.tgz"]  # one file, the work folder gone
    with tarfile.open(out / "cells.tgz") as archive:
        names = archive.getnames()
        assert set(cells) <= set(names) and any(name.startswith("logs/") for name in names)
        archive.extractall(root, filter="data")
    batched = {cell: json.loads((root / cell).read_text()) for cell in cells}

    again = _run(["bash", SCRIPT, "tiny", "2", *cells], root)  # every cell finished: nothing to run
    assert again.returncode == 1 and "no cell to run" in again.stderr

    workflow = _run(["snakemake", "--cores", "1", "--forcerun", *cells], root)
    assert workflow.returncode == 0, workflow.stderr[-3000:]
    for cell in cells:
        assert cell_differences(batched[cell], json.loads((root / cell).read_text())) == []


def test_a_cell_the_workflow_does_not_know_stops_the_batch_with_its_reason(repo_root, tmp_path):
    root = tmp_path / "checkout"
    _checkout(repo_root, root)
    unknown = paths.fill(paths.CELL, suite="tiny", experiment="colored_digits", method="nope", target="-90", seed=0)
    made = _run(["bash", SCRIPT, "tiny", "2", unknown], root)
    assert made.returncode == 1 and "dry run failed" in made.stderr
    assert not (root / ".gpu_batch" / "run.sh").exists()
