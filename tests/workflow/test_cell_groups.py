"""params.yaml `cells_per_job: targets`: one training job per (experiment, method, seed), training the experiment's
targets in one process (`fdabench train-group`), each still its own cell. The cells equal those of one job a cell;
kill -9 of a group job, then the same command, gives them again; adding a seed plans only the new cells; a group
is pinned to one GPU, round-robin."""

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from fdabench.config import validate_params
from fdabench.core import devices
from workflows import TINY_PARAMS, without_timings, workflow_environment

pytestmark = [
    pytest.mark.pipeline,
    pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds training processes in /proc (Linux)"),
]

TINY = TINY_PARAMS["suites"]["tiny"]
#: the tiny suite with two targets, trained long enough (40 rounds, checkpoints every 5) to be killed mid-group
PARAMS = {
    **TINY_PARAMS,
    "device": "cpu",
    "cells_per_job": "targets",
    "checkpoint_every": 5,
    "suites": {
        "tiny": {
            **TINY,
            "train": {**TINY["train"], "model_options": {"hidden": [64]}, "rounds": 40},
            "experiments": {"colored_digits": {"dataset": "colored_digits", "targets": ["-90", "+90"]}},
        }
    },
}
CELLS = "results/cells/tiny/colored_digits"


def _snakemake(
    workdir: Path, repo: Path, *args: str, params: dict | None = None, forkserver: bool = False
) -> subprocess.CompletedProcess:
    if params is not None:
        (workdir / "params.yaml").write_text(yaml.safe_dump(params))
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(repo / "Snakefile"), "-c", "2", *args]
    env = workflow_environment(workdir, forkserver=forkserver)
    return subprocess.run(command, cwd=workdir, capture_output=True, text=True, env=env, timeout=900)


def _cells(workdir: Path) -> dict[str, dict]:
    """Every cell without its timings."""
    return {
        str(path.relative_to(workdir)): without_timings(json.loads(path.read_text()))
        for path in sorted((workdir / CELLS).glob("*/*/seed*.json"))
    }


def _jobs(output: str) -> Counter:
    """Snakemake's job counts (its "Job stats" table)."""
    table = output.split("Job stats:", 1)[1].split("total", 1)[0]
    return Counter({name: int(count) for name, count in re.findall(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)})


def _group_process(workdir: Path) -> int | None:
    """The process id of a `fdabench train-group` job running in `workdir`."""
    for entry in Path("/proc").iterdir():
        try:
            if b"train-group" not in (entry / "cmdline").read_bytes().split(b"\0"):
                continue
            if Path(os.readlink(entry / "cwd")) == workdir.resolve():
                return int(entry.name)
        except OSError:
            continue
    return None


@pytest.fixture(scope="module")
def one_job_a_cell(tmp_path_factory, repo_root) -> dict[str, dict]:
    workdir = tmp_path_factory.mktemp("one_job_a_cell")
    # through the fork server: the cells the killed groups give again (without it) must equal these
    done = _snakemake(workdir, repo_root, params={**PARAMS, "cells_per_job": "cell"}, forkserver=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _jobs(done.stdout + done.stderr)["train"] == 8
    return _cells(workdir)


def test_kill_9_of_a_group_job_then_the_same_command_gives_the_cells_of_one_job_a_cell(
    tmp_path, repo_root, one_job_a_cell
):
    workdir = tmp_path / "groups"
    workdir.mkdir()
    (workdir / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    with open(workdir / "snakemake.out", "w") as output:
        command = [sys.executable, "-m", "snakemake", "--snakefile", str(repo_root / "Snakefile"), "-c", "2"]
        run = subprocess.Popen(
            command, cwd=workdir, env=workflow_environment(workdir, forkserver=False), stdout=output, stderr=output
        )
    deadline = time.monotonic() + 300
    while not list((workdir / CELLS).glob("*/*/.seed*.json.checkpoint.pt")):
        assert run.poll() is None and time.monotonic() < deadline, (workdir / "snakemake.out").read_text()[-3000:]
        time.sleep(0.01)
    victim = _group_process(workdir)
    assert victim is not None
    with contextlib.suppress(ProcessLookupError):
        os.kill(victim, signal.SIGKILL)
    run.wait(timeout=900)
    assert run.returncode != 0  # the killed group fails; keep-going (the profile) ran the other groups
    assert 0 < len(_cells(workdir)) < 8

    done = _snakemake(workdir, repo_root)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _cells(workdir) == one_job_a_cell
    assert not list(workdir.glob(f"{CELLS}/*/*/.seed*")), "a checkpoint or kept copy was left behind"
    for name in one_job_a_cell:  # each cell's own log names it alone
        log = (workdir / name.replace("results/cells/", "results/logs/cells/")).with_suffix(".log").read_text()
        method, target, seed = name.split("/")[-3:]
        assert f"{method}/{target}/{seed.removesuffix('.json')}: final" in log, log
        assert len(set(re.findall(r"colored_digits/(\S+?)/(\S+?)/seed\d", log))) == 1, log


def test_adding_a_seed_plans_only_the_new_cells(tmp_path, repo_root):
    workdir = tmp_path / "seeds"
    workdir.mkdir()
    short = {**PARAMS, "suites": {"tiny": {**PARAMS["suites"]["tiny"], "train": {**TINY["train"], "rounds": 3}}}}
    done = _snakemake(workdir, repo_root, params=short, forkserver=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _jobs(done.stdout + done.stderr)["train_colored_digits"] == 4  # 2 methods x 2 seeds, 2 targets each
    before = {path: path.read_bytes() for path in (workdir / CELLS).glob("*/*/seed*.json")}
    assert len(before) == 8

    more = {**short, "suites": {"tiny": {**short["suites"]["tiny"], "seeds": [0, 1, 2]}}}
    plan = _snakemake(workdir, repo_root, "--dry-run", params=more)
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    assert _jobs(plan.stdout)["train_colored_digits"] == 2, plan.stdout  # the new seed's groups, one a method
    planned = re.findall(r"output: (.+)", plan.stdout)
    trained = {
        path.removesuffix(" (update)") for line in planned for path in line.split(", ") if path.startswith(CELLS)
    }
    assert trained and all(path.endswith("/seed2.json") for path in trained), trained

    done = _snakemake(workdir, repo_root, forkserver=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert {path: path.read_bytes() for path in before} == before  # untouched, byte for byte
    assert len(list((workdir / CELLS).glob("*/*/seed*.json"))) == 12


def test_a_group_is_pinned_to_one_gpu_round_robin(tmp_path, repo_root):
    """Dry run: each group job runs with CUDA_VISIBLE_DEVICES of its GPU and asks for one unit of that GPU's
    resource, the groups spread over the GPUs in the suite's order."""
    params = {**PARAMS, "device": "cuda", "gpus": [0, 1]}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    shutil.copy(repo_root / "Snakefile", tmp_path / "Snakefile")
    shutil.copytree(repo_root / "workflow", tmp_path / "workflow")
    command = [sys.executable, "-m", "snakemake", "--dry-run", "--printshellcmds", "--cores", "8"]
    plan = subprocess.run(
        [*command, "--resources", "gpu=4", "gpu_0=2", "gpu_1=2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=workflow_environment(tmp_path),
    )
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    expected = validate_params(params).group_gpus()
    assert list(expected.values()) == [0, 1, 0, 1]
    found = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", plan.stdout):
        if not block.startswith("rule train_colored_digits:"):
            continue
        wildcards = dict(item.split("=", 1) for item in re.search(r"wildcards: (.+)", block).group(1).split(", "))
        resources = dict(item.split("=", 1) for item in re.search(r"resources: (.+)", block).group(1).split(", "))
        pin = re.search(r"--pin-gpu (\S+)", block).group(1)
        assert (resources["gpu"], resources[f"gpu_{pin}"], resources[f"gpu_{1 - int(pin)}"]) == ("1", "1", "0")
        found[("colored_digits", wildcards["method"], int(wildcards["seed"]))] = int(pin)
    assert found == expected
    assert devices.resource_name(0) in plan.stdout
