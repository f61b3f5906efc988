"""A finished workspace survives failed reruns and heals itself: Snakemake keeps every finished cell, table
and link when a rerun fails, and the same `snakemake` command reruns a cell it cannot read."""

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

#: the tiny suite with a data root that needs quoting in every shell command
SPACED_PARAMS = {**TINY_PARAMS, "device": "cpu", "data": {"root": "my data"}}
CELLS = "results/cells/tiny/colored_digits"


def _snakemake(workdir: Path, repo: Path, *args: str, source: Path | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(repo / "Snakefile"), "--cores", "2", *args]
    env = workflow_environment(workdir, source=source)
    return subprocess.run(command, cwd=workdir, capture_output=True, text=True, env=env, timeout=600)


def _results(workdir: Path) -> dict[str, bytes | str]:
    """Every result file's bytes and every link's target (logs aside)."""
    found: dict[str, bytes | str] = {}
    for path in sorted((workdir / "results").rglob("*")):
        name = str(path.relative_to(workdir))
        if name.startswith("results/logs"):
            continue
        if path.is_symlink():
            found[name] = os.readlink(path)
        elif path.is_file():
            found[name] = path.read_bytes()
    return found


def _broken_source(root: Path, repo: Path, module: str, appended: str) -> Path:
    shutil.copytree(repo / "src", root, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    path = root / "fdabench" / module
    path.write_text(path.read_text(encoding="utf-8") + appended, encoding="utf-8")
    return root


def _numbers(cell: dict) -> list[dict]:
    """A cell's per-round records without their timings."""
    return [{key: value for key, value in record.items() if key != "seconds"} for record in cell["rounds"]]


@pytest.fixture(scope="module")
def finished(tmp_path_factory, repo_root) -> Path:
    """The tiny suite run to completion in a folder whose name, like its data root, has a space."""
    workdir = tmp_path_factory.mktemp("finished") / "work dir"
    workdir.mkdir()
    (workdir / "params.yaml").write_text(yaml.safe_dump(SPACED_PARAMS))
    result = _snakemake(workdir, repo_root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (workdir / "my data/partitions/tiny/colored_digits/-90/seed0.json").is_file()
    return workdir


@pytest.fixture
def workspace(finished, tmp_path) -> Path:
    copy = tmp_path / "work dir"
    shutil.copytree(finished, copy, symlinks=True, ignore=shutil.ignore_patterns("*.sock"))
    return copy


def test_a_failed_rerun_keeps_every_finished_cell_table_and_link(workspace, repo_root, tmp_path):
    before = _results(workspace)
    assert sum(name.startswith(CELLS) for name in before) == 4 and "results/table1.csv" in before

    # a failing table job keeps the previous table and its link; later runs are not blocked
    failing_table = (
        "\n\ndef _fails(*args, **kwargs):\n    raise RuntimeError('injected failure')\n\n\ntidy_table = _fails\n"
    )
    broken_report = _broken_source(tmp_path / "broken_report", repo_root, "report/tables.py", failing_table)
    result = _snakemake(workspace, repo_root, "--forcerun", "table", "--until", "table", source=broken_report)
    assert (
        result.returncode != 0 and "injected failure" in (workspace / "results/logs/tables/tiny/table1.log").read_text()
    )
    assert _results(workspace) == before
    nothing = _snakemake(workspace, repo_root, "--dry-run")
    assert "Nothing to be done" in nothing.stdout + nothing.stderr, nothing.stderr[-2000:]

    # a code change to FedGP reruns its two cells; the new code fails in its first round
    failing = (
        "\n\ndef _fails(self, inputs):\n    raise RuntimeError('injected failure')\n\n\nFedGP.aggregate = _fails\n"
    )
    broken = _broken_source(tmp_path / "broken", repo_root, "methods/fda.py", failing)
    plan = _snakemake(workspace, repo_root, "--dry-run", "--quiet", "rules", source=broken)
    assert plan.stdout.split("train", 1)[1].split()[0] == "2", plan.stdout
    result = _snakemake(workspace, repo_root, source=broken)
    assert result.returncode != 0
    assert "fedgp/-90/seed0.json: reruns (code changed" in result.stderr, result.stderr[-2000:]
    assert "injected failure" in (workspace / "results/logs/cells/tiny/colored_digits/fedgp/-90/seed0.log").read_text()
    assert _results(workspace) == before  # every cell, table, figure and link, byte for byte

    # the restored cells still rerun (Snakemake recorded the failed job as if it had written them; the failed run
    # gave them new rerun markers), as a dry run, which opens no cell file, shows
    plan = _snakemake(workspace, repo_root, "--dry-run", "--quiet", "rules", source=broken)
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert plan.stdout.split("train", 1)[1].split()[0] == "2", plan.stdout


def test_the_same_command_repairs_a_corrupted_workspace(workspace, repo_root):
    before = _results(workspace)
    truncated = workspace / f"{CELLS}/fedgp/-90/seed0.json"
    truncated.write_bytes(truncated.read_bytes()[:500])
    other_format = workspace / f"{CELLS}/source_only/-90/seed1.json"
    cell = json.loads(other_format.read_text())
    other_format.write_text(json.dumps({**cell, "format": "fdabench.cell/2"}))
    edited = workspace / f"{CELLS}/fedgp/-90/seed1.json"
    cell = json.loads(edited.read_text())
    edited.write_text(json.dumps({**cell, "final": cell["final"] + 0.25}, indent=1))  # valid JSON, a better number
    (workspace / "results/tiny/table1.csv").unlink()  # results/table1.csv now links to nothing
    status = subprocess.run(
        [sys.executable, "-m", "fdabench", "status"],
        cwd=workspace,
        capture_output=True,
        text=True,
        env=workflow_environment(workspace),
    )
    assert f"  edited   {edited.relative_to(workspace)}  edited after its training job wrote it" in status.stdout, (
        status
    )

    # a dry run opens no cell file: it plans the table, not the two cells only their files say are stale
    plan = _snakemake(workspace, repo_root, "--dry-run", "--quiet", "rules")
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert "table " in plan.stdout and "train" not in plan.stdout, plan.stdout
    result = _snakemake(workspace, repo_root)
    assert result.returncode == 0, result.stderr[-3000:]
    for name in (
        "fedgp/-90/seed0.json: reruns (unreadable result",
        "source_only/-90/seed1.json: reruns (format",
        "fedgp/-90/seed1.json: reruns (edited after its training job wrote it",
    ):
        assert name in result.stderr, result.stderr[-3000:]

    after = _results(workspace)
    assert set(after) == set(before)
    for name in (truncated, other_format, edited):
        key = str(name.relative_to(workspace))
        old, new = json.loads(before[key]), json.loads(after[key])
        assert new["format"] == "fdabench.cell/1" and _numbers(new) == _numbers(old)  # retrained, same numbers
    assert after["results/tiny/table1.csv"] == before["results/tiny/table1.csv"]
    assert after["results/table1.csv"] == "tiny/table1.csv"
    nothing = _snakemake(workspace, repo_root, "--dry-run")
    assert "Nothing to be done" in nothing.stdout + nothing.stderr, nothing.stdout[-2000:] + nothing.stderr[-2000:]


def _files(workdir: Path) -> dict[str, tuple[int, bytes | str]]:
    """Every file (and link) under results/ and fdabench's folders of .snakemake/: its mtime and bytes (a link: its
    target)."""
    found = {}
    for folder in ("results", ".snakemake/fdabench-rerun", ".snakemake/fdabench-plan"):
        for path in sorted((workdir / folder).rglob("*")):
            if path.is_symlink():
                found[str(path.relative_to(workdir))] = (path.lstat().st_mtime_ns, os.readlink(path))
            elif path.is_file():
                found[str(path.relative_to(workdir))] = (path.stat().st_mtime_ns, path.read_bytes())
    return found


#: runs snakemake with its arguments and writes the files it opened and whether torch was imported to AUDIT
AUDITED_SNAKEMAKE = """
import atexit, json, os, sys
opened = []
sys.addaudithook(lambda event, args: event == "open" and isinstance(args[0], str) and opened.append(args[0]))
def report():
    with open(os.environ["AUDIT"], "w") as handle:
        json.dump({"opened": opened, "imported": sorted(sys.modules)}, handle)
atexit.register(report)
sys.argv = ["snakemake", *sys.argv[1:]]
from snakemake.cli import main
main()
"""


def _audited(workdir: Path, repo: Path, *args: str, source: Path | None = None) -> tuple[str, dict]:
    """snakemake with `args` (its output), and what it opened and imported."""
    command = [sys.executable, "-c", AUDITED_SNAKEMAKE, "--snakefile", str(repo / "Snakefile"), "--cores", "2", *args]
    env = {**workflow_environment(workdir, source=source), "AUDIT": str(workdir.parent / "audit.json")}
    result = subprocess.run(command, cwd=workdir, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return result.stdout + result.stderr, json.loads((workdir.parent / "audit.json").read_text())


def test_planning_reads_no_cell_writes_nothing_and_imports_no_torch(workspace, repo_root, tmp_path):
    before = _files(workspace)
    assert any(name.startswith(".snakemake/fdabench-plan/") for name in before)  # the finished run kept its plan
    for args in (["--dry-run"], ["--lint"], ["--dry-run", "--forceall"]):
        output, audit = _audited(workspace, repo_root, *args)
        assert _files(workspace) == before, args  # no file written, touched or removed
        assert not [path for path in audit["opened"] if "results/cells" in path], args
        assert "torch" not in audit["imported"] and "fdabench.config" not in audit["imported"], args
    assert "Nothing to be done" in _audited(workspace, repo_root, "--dry-run")[0]

    # a stale cell and a corrupt one: the dry run still writes nothing, and the run reruns both
    truncated = workspace / f"{CELLS}/source_only/-90/seed0.json"
    truncated.write_bytes(truncated.read_bytes()[:300])
    changed = "\n\nBETA_CHANGED_BY_TEST = 1\n"  # a change to what FedGP's module does
    broken = _broken_source(tmp_path / "changed", repo_root, "methods/fda.py", changed)
    before = _files(workspace)
    output, audit = _audited(workspace, repo_root, "--dry-run", "--quiet", "rules", source=broken)
    assert _files(workspace) == before and not [path for path in audit["opened"] if "results/cells" in path]
    assert output.split("train", 1)[1].split()[0] == "2", output  # FedGP's cells (their code fingerprint changed)
    result = _snakemake(workspace, repo_root, source=broken)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "source_only/-90/seed0.json: reruns (unreadable result" in result.stderr, result.stderr[-3000:]
    for name in (f"{CELLS}/fedgp/-90/seed0.json", f"{CELLS}/fedgp/-90/seed1.json"):
        old, new = json.loads(before[name][1]), json.loads((workspace / name).read_text())
        assert new["code"]["fingerprint"] != old["code"]["fingerprint"] and _numbers(new) == _numbers(old)
    assert json.loads(truncated.read_text())["format"] == "fdabench.cell/1"
    assert "Nothing to be done" in _audited(workspace, repo_root, "--dry-run", source=broken)[0]
