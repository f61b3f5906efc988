"""Many cells per GPU, many GPUs: each cell pinned to one GPU, round-robin in the suite's cell order; the train
rule asks for one unit of that GPU's resource and runs with CUDA_VISIBLE_DEVICES set to it. The dry run shows the
assignment; a real run on the CPU exercises the pinning and the per-GPU packing (no GPU needed)."""

import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from fdabench.cell.result import read_cell
from fdabench.config import ParamsError, validate_params
from fdabench.core import devices
from workflows import TINY_PARAMS, workflow_environment

TWO_GPUS = {**TINY_PARAMS, "device": "cuda", "gpus": [0, 1]}


def test_cells_are_spread_over_the_gpus_round_robin():
    assert devices.assign(["a", "b", "c", "d", "e"], [3, 1]) == {"a": 3, "b": 1, "c": 3, "d": 1, "e": 3}
    assert devices.resource_name(1) == "gpu_1"
    with pytest.raises(ValueError, match="gpus is empty"):
        devices.assign(["a"], [])
    with pytest.raises(ValueError, match="distinct device indices"):
        devices.assign(["a"], [0, 0])


def test_pinning_sets_the_visible_gpu_and_refuses_what_it_cannot_do():
    environ = {"CUDA_VISIBLE_DEVICES": "0,1,2"}
    assert devices.pin("2", environ) == 2 and environ["CUDA_VISIBLE_DEVICES"] == "2"
    environ = {}
    assert devices.pin(devices.UNPINNED, environ) is None and environ == {}
    with pytest.raises(ValueError, match="a device index"):
        devices.pin("cuda:1", {})
    with pytest.raises(ValueError, match=r"cluster scheduler \(SLURM_JOB_ID is set\)"):
        devices.pin("1", {"SLURM_JOB_ID": "42"})


def test_params_gpus_are_validated_and_assigned_in_cell_order():
    params = validate_params(TWO_GPUS)
    assignment = params.cell_gpus()
    order = [(c.experiment, c.method, c.target, c.seed) for c in params.cells()]
    assert list(assignment) == order and [assignment[key] for key in order] == [0, 1, 0, 1]
    assert validate_params(TINY_PARAMS).cell_gpus() == {}  # without gpus nothing is pinned
    for bad, message in [
        ({"gpus": [0, 0]}, "gpus"),
        ({"gpus": [-1]}, "gpus"),
        ({"gpus": []}, "gpus"),
        ({"gpus": [0], "device": "cpu"}, "gpus: cells run on the CPU"),
    ]:
        with pytest.raises(ParamsError, match=message):
            validate_params({**TWO_GPUS, **bad})


def _plan(workdir: Path, repo: Path, params: dict, *options: str) -> dict[str, dict[str, str]]:
    """cell output -> {the resources of its train job, and "pin": its --pin-gpu}, from a dry run."""
    workdir.mkdir()
    shutil.copy(repo / "Snakefile", workdir / "Snakefile")
    shutil.copytree(repo / "workflow", workdir / "workflow")
    (workdir / "params.yaml").write_text(yaml.safe_dump(params))
    command = [sys.executable, "-m", "snakemake", "--dry-run", "--printshellcmds", "--cores", "8", *options]
    plan = subprocess.run(command, cwd=workdir, capture_output=True, text=True, env=workflow_environment(workdir))
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    jobs = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", plan.stdout):
        if not block.startswith("rule train:"):
            continue
        output = re.search(r"output: (\S+)", block).group(1).rstrip(",")
        resources = dict(item.split("=", 1) for item in re.search(r"resources: (.+)", block).group(1).split(", "))
        jobs[output] = {**resources, "pin": re.search(r"--pin-gpu (\S+)", block).group(1)}
    return jobs


def test_dry_run_shows_each_cell_on_its_gpu(tmp_path, repo_root):
    jobs = _plan(tmp_path / "two", repo_root, TWO_GPUS, "--resources", "gpu=4", "gpu_0=2", "gpu_1=2")
    params = validate_params(TWO_GPUS)
    expected = {
        cell.path: params.cell_gpus()[(cell.experiment, cell.method, cell.target, cell.seed)] for cell in params.cells()
    }
    assert {output: int(job["pin"]) for output, job in jobs.items()} == expected
    for job in jobs.values():  # one unit of its own GPU's resource, none of the other's
        assert (job["gpu"], job[f"gpu_{job['pin']}"], job[f"gpu_{1 - int(job['pin'])}"]) == ("1", "1", "0")
    assert Counter(job["pin"] for job in jobs.values()) == {"0": 2, "1": 2}

    unpinned = _plan(tmp_path / "one", repo_root, {**TINY_PARAMS, "device": "cuda"})
    assert {job["pin"] for job in unpinned.values()} == {devices.UNPINNED}
    assert not any(name.startswith("gpu_") for job in unpinned.values() for name in job)


def test_pinned_cells_run_packed_on_their_gpus(tmp_path, repo_root):
    """On a machine without a GPU (device auto runs on the CPU) the pinning and the per-GPU limits still apply:
    every cell finishes and records the GPU it was pinned to."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    shutil.copy(repo_root / "Snakefile", workdir / "Snakefile")
    shutil.copytree(repo_root / "workflow", workdir / "workflow")
    params = {**TINY_PARAMS, "device": "auto", "gpus": [0, 1]}
    (workdir / "params.yaml").write_text(yaml.safe_dump(params))
    resolved = validate_params(params)
    cells = [cell.path for cell in resolved.cells()]
    command = [sys.executable, "-m", "snakemake", *cells, "--cores", "2", "--resources", "gpu_0=1", "gpu_1=1"]
    run = subprocess.run(
        command, cwd=workdir, capture_output=True, text=True, env=workflow_environment(workdir), timeout=600
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for cell in resolved.cells():
        record = read_cell(workdir / cell.path)
        pinned = resolved.cell_gpus()[(cell.experiment, cell.method, cell.target, cell.seed)]
        assert record["cuda_visible_devices"] == str(pinned)
