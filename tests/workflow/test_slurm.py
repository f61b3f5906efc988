"""The SLURM profile, dry run: training jobs ask for their experiment's runtime and memory (suite and
experiment `resources` over the defaults) and, with `device: cuda`, for a GPU; other jobs get the profile's
default resources."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from workflows import workflow_environment

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("snakemake_executor_plugin_slurm") is None,
    reason='the SLURM executor plugin is not installed (uv pip install -e ".[slurm]")',
)

PARAMS = {
    "suite": "cluster",
    "suites": {
        "cluster": {
            "seeds": [0],
            "methods": ["fedgp"],
            "train": {"model": "mlp", "model_options": {"hidden": [16]}, "rounds": 3, "warmup_rounds": 1},
            "resources": {"runtime": 90},
            "experiments": {
                "big": {
                    "dataset": "colored_digits",
                    "targets": ["-90"],
                    "resources": {"runtime": 1440, "mem_mb": 64000},
                },
                "small": {"dataset": "rotated_digits", "targets": ["0"]},
            },
            "tables": {"table1": {"experiments": ["big", "small"]}},
        }
    },
}


def _jobs(tmp_path: Path, repo: Path, device: str) -> dict[tuple[str, str], dict[str, str]]:
    """(rule, experiment or output) -> resources of every job of a dry run with the SLURM profile."""
    workdir = tmp_path / device
    workdir.mkdir()
    (workdir / "params.yaml").write_text(yaml.safe_dump({**PARAMS, "device": device}))
    command = [sys.executable, "-m", "snakemake", "--dry-run", "--snakefile", str(repo / "Snakefile")]
    command += ["--directory", str(workdir), "--workflow-profile", str(repo / "workflow/profiles/slurm")]
    plan = subprocess.run(command, capture_output=True, text=True, env=workflow_environment(workdir), timeout=300)
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    assert "profiles/slurm" in plan.stdout + plan.stderr
    jobs = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", plan.stdout):
        rule = re.match(r"(?:local)?rule (\w+):", block)
        resources = re.search(r"resources: (.+)", block)
        if rule and resources:
            experiment = re.search(r"experiment=([^,\s]+)", block)
            output = re.search(r"output: (\S+)", block)
            key = experiment.group(1) if experiment else (output.group(1).rstrip(",") if output else "")
            jobs[(rule.group(1), key)] = dict(item.split("=", 1) for item in resources.group(1).split(", "))
    return jobs


def test_cluster_resources_of_gpu_and_cpu_cells(tmp_path, repo_root):
    gpu = _jobs(tmp_path, repo_root, "cuda")
    big, small = gpu[("train", "big")], gpu[("train", "small")]
    assert (big["runtime"], big["mem_mb"], big["gpu"]) == ("1440", "64000", "1")  # the experiment's own
    assert (small["runtime"], small["mem_mb"], small["gpu"]) == ("90", "4096", "1")  # the suite's, the default
    table = gpu[("table", "results/cluster/table1.csv")]
    assert (table["runtime"], table["mem_mb"]) == ("30", "2000")  # the profile's default resources

    cpu = _jobs(tmp_path, repo_root, "cpu")
    assert cpu[("train", "big")]["gpu"] == "0" and cpu[("train", "big")]["runtime"] == "1440"
