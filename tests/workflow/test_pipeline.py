"""End to end: snakemake on a tiny configuration, then a one-parameter change reruns only its cells."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from workflows import TINY_PARAMS, job_blocks, planned_jobs, snakemake_in

pytestmark = pytest.mark.pipeline


def _source_copy(root: Path, repo: Path, module: str, edit) -> Path:
    """A copy of src/ with `edit(text) -> text` applied to src/fdabench/<module>."""
    shutil.copytree(repo / "src", root, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    path = root / "fdabench" / module
    path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
    return root


def test_tiny_pipeline_then_one_parameter_change(tmp_path, repo_root):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(TINY_PARAMS))
    result = snakemake_in(tmp_path, repo_root)
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

    assert (tmp_path / "results/table1.csv").is_symlink()  # a link to the active suite's table
    assert os.readlink(tmp_path / "results/table1.csv") == "tiny/table1.csv"
    assert os.readlink(figure) == "../tiny/figures/colored_digits_rounds.png"
    nothing = snakemake_in(tmp_path, repo_root, "--dry-run")
    assert "Nothing to be done" in nothing.stdout + nothing.stderr

    # another suite with a table of the same name: its own files; switching back serves the first again
    own = (tmp_path / "results/tiny/table1.csv").read_bytes()
    other = json.loads(json.dumps(TINY_PARAMS))
    other["suite"] = "other"
    other["suites"]["other"] = {
        **TINY_PARAMS["suites"]["tiny"],
        "seeds": [0],
        "methods": ["source_only"],
        "train": {**TINY_PARAMS["suites"]["tiny"]["train"], "rounds": 2},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(other))
    result = snakemake_in(tmp_path, repo_root, "tables")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert {line.split(",")[3] for line in (tmp_path / "results/table1.csv").read_text().splitlines()[1:]} == {
        "source_only"
    }
    assert (tmp_path / "results/tiny/table1.csv").read_bytes() == own
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(TINY_PARAMS))
    plan = planned_jobs(snakemake_in(tmp_path, repo_root, "--dry-run", "--quiet", "rules"))
    assert set(plan) - {"total"} == {"view", "all"}, plan  # nothing is recomputed: the links are re-pointed
    assert snakemake_in(tmp_path, repo_root).returncode == 0
    assert (tmp_path / "results/table1.csv").read_bytes() == own

    changed = dict(TINY_PARAMS, methods={"fedgp": {"beta": 0.25}})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(changed))
    plan = snakemake_in(tmp_path, repo_root, "--dry-run", "--quiet", "rules")
    jobs = planned_jobs(plan)
    assert jobs.get("train") == "2", plan.stdout  # the two fedgp cells, not the source_only ones
    assert jobs.get("table") == "1" and jobs.get("figure_rounds") == "1"
    assert "partition" not in jobs and "prepare" not in jobs
    # the console names the changed cells and the digests of their plans, never their configurations
    shown = snakemake_in(tmp_path, repo_root, "--dry-run", "--printshellcmds")
    blocks = job_blocks(shown.stdout, "train")
    assert sorted(re.search(r"method=(\w+)", block)[1] for block in blocks) == ["fedgp", "fedgp"]
    for block in blocks:
        assert "{" not in block, block
        assert re.search(r"reason: Params have changed since last execution: .*'[0-9a-f]{16}'.*'[0-9a-f]{16}'", block)

    # how often cells save checkpoints is not part of their identity: changing it reruns nothing
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({**TINY_PARAMS, "checkpoint_every": 3}))
    nothing = snakemake_in(tmp_path, repo_root, "--dry-run")
    assert "Nothing to be done" in nothing.stdout + nothing.stderr, nothing.stdout[-2000:]

    # device: the cells ran on the CPU under auto, so `device: cpu` is the same cells (fdabench.core.device_identity)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({**TINY_PARAMS, "device": "cpu"}))
    nothing = snakemake_in(tmp_path, repo_root, "--dry-run")
    assert "Nothing to be done" in nothing.stdout + nothing.stderr, nothing.stdout[-2000:]
    status = subprocess.run([sys.executable, "-m", "fdabench", "status", "--check"], cwd=tmp_path, capture_output=True)
    assert status.returncode == 0, status.stdout + status.stderr

    # code: a comment reruns nothing; a change to FedGP's module reruns its cells and only those
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(TINY_PARAMS))
    comment = _source_copy(tmp_path / "comment", repo_root, "methods/fda.py", lambda t: t + "\n# a comment\n")
    nothing = snakemake_in(tmp_path, repo_root, "--dry-run", source=comment)
    assert "Nothing to be done" in nothing.stdout + nothing.stderr, nothing.stdout[-2000:]
    edited = _source_copy(tmp_path / "edited", repo_root, "methods/fda.py", lambda t: t + "\nEXTRA = 1\n")
    plan = snakemake_in(tmp_path, repo_root, "--dry-run", "--quiet", "rules", source=edited)
    jobs = planned_jobs(plan)
    assert jobs.get("train") == "2", plan.stdout  # the fedgp cells: source_only does not import methods/fda.py
    assert "partition" not in jobs and "prepare" not in jobs
    status = subprocess.run(
        [sys.executable, "-m", "fdabench", "status", "--check"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(edited)},
    )
    assert status.returncode == 1, status.stdout + status.stderr
    assert "4 cells: 2 current, 0 edited, 2 stale, 0 failed, 0 missing" in status.stdout
    assert status.stdout.count("code changed: fdabench.methods.fda") == 2
    current = subprocess.run(
        [sys.executable, "-m", "fdabench", "status", "--check"], cwd=tmp_path, capture_output=True, text=True
    )
    assert current.returncode == 0 and "4 cells: 4 current" in current.stdout, current.stdout + current.stderr


def test_typo_fails_before_any_job(tmp_path, repo_root):
    broken = json.loads(json.dumps(TINY_PARAMS))
    broken["suites"]["tiny"]["methods"] = ["source_only", "fedgpp"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(broken))
    result = snakemake_in(tmp_path, repo_root)
    assert result.returncode != 0
    assert "unknown method 'fedgpp'" in result.stdout + result.stderr
    assert not (tmp_path / "results").exists() and not (tmp_path / "data").exists()
