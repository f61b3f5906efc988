"""End to end: snakemake on a tiny configuration, then a one-parameter change reruns only its cells."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.pipeline

TINY = {
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


def _snakemake(workdir: Path, repo: Path, *args: str) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(repo / "Snakefile"),
        "--directory",
        str(workdir),
        "--cores",
        "2",
        *args,
    ]
    env = {**os.environ, "FDABENCH_FORKSERVER": "1", "FDABENCH_FORKSERVER_IDLE": "15", "XDG_RUNTIME_DIR": str(workdir)}
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


def test_tiny_pipeline_then_one_parameter_change(tmp_path, repo_root):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(TINY))
    result = _snakemake(tmp_path, repo_root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    table = (tmp_path / "results/table1.csv").read_text().splitlines()
    assert table[0] == "experiment,dataset,target,method,metric,mean,std,n_seeds"
    assert {line.split(",")[3] for line in table[1:]} == {"source_only", "fedgp"}
    assert all(line.endswith(",2") for line in table[1:])
    assert "| fedgp |" in (tmp_path / "results/table1.md").read_text()
    figure = tmp_path / "results/figures/colored_digits_rounds.png"
    assert figure.stat().st_size > 10_000 and figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    cell = json.loads((tmp_path / "results/cells/tiny/colored_digits/fedgp/-90/seed1.json").read_text())
    assert cell["status"] == "complete" and len(cell["rounds"]) == 4
    manifest = json.loads((tmp_path / "data/partitions/tiny/colored_digits/-90/seed0.json").read_text())
    assert manifest["seed"] == 0 and manifest["content_hash"]

    nothing = _snakemake(tmp_path, repo_root, "--dry-run")
    assert "Nothing to be done" in nothing.stdout + nothing.stderr

    changed = dict(TINY, methods={"fedgp": {"beta": 0.25}})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(changed))
    plan = _snakemake(tmp_path, repo_root, "--dry-run", "--quiet", "rules")
    jobs = dict(
        line.split()[:2]
        for line in plan.stdout.splitlines()
        if line.split()[:1] and line.split()[-1].isdigit() and len(line.split()) == 2
    )
    assert jobs.get("train") == "2", plan.stdout  # the two fedgp cells, not the source_only ones
    assert jobs.get("table") == "1" and jobs.get("figure_rounds") == "1"
    assert "partition" not in jobs and "prepare" not in jobs


def test_typo_fails_before_any_job(tmp_path, repo_root):
    broken = json.loads(json.dumps(TINY))
    broken["suites"]["tiny"]["methods"] = ["source_only", "fedgpp"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(broken))
    result = _snakemake(tmp_path, repo_root)
    assert result.returncode != 0
    assert "unknown method 'fedgpp'" in result.stdout + result.stderr
    assert not (tmp_path / "results").exists() and not (tmp_path / "data").exists()
