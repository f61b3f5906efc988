"""kill -9 at several moments, then the same command again: the run completes and every cell and table is
identical to an uninterrupted run's. No `--unlock` or `--rerun-incomplete` is needed: the workflow profile
(profiles/default) applies by itself."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from workflows import TINY_PARAMS, without_timings, workflow_environment

pytestmark = [
    pytest.mark.pipeline,
    pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds training processes in /proc (Linux)"),
]

# the tiny suite, trained long enough (61 rounds, checkpoints every 5) to be killed mid-cell
TINY = TINY_PARAMS["suites"]["tiny"]
PARAMS = {
    **TINY_PARAMS,
    "checkpoint_every": 5,
    "suites": {
        "tiny": {**TINY, "train": {**TINY["train"], "model_options": {"hidden": [64]}, "rounds": 60}},
    },
}
CELLS = "results/cells/tiny/colored_digits"


def _command(repo: Path, workdir: Path) -> list[str]:
    # no --rerun-incomplete, no --keep-going: what a user types
    return [sys.executable, "-m", "snakemake", "--snakefile", str(repo / "Snakefile"), "-d", str(workdir), "-c", "2"]


def _start(repo: Path, workdir: Path) -> subprocess.Popen:
    """Snakemake in the background, its output in workdir/snakemake.out (a pipe nobody reads could fill)."""
    with open(workdir / "snakemake.out", "w") as output:
        return subprocess.Popen(
            _command(repo, workdir),
            cwd=repo,
            env=workflow_environment(workdir, forkserver=False),
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def _output(workdir: Path) -> str:
    return (workdir / "snakemake.out").read_text()[-3000:]


def _finish(repo: Path, workdir: Path, forkserver: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(
        _command(repo, workdir),
        cwd=repo,
        env=workflow_environment(workdir, forkserver=forkserver),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _wait_for(condition, process: subprocess.Popen, timeout: float = 300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        if process.poll() is not None:
            pytest.fail("snakemake ended before the moment to kill it")
        time.sleep(0.01)
    pytest.fail("the moment to kill never came")


def _checkpoints(workdir: Path) -> list[Path]:
    return sorted((workdir / CELLS).glob("*/*/.seed*.json.checkpoint.pt"))


def _cells(workdir: Path) -> list[Path]:
    return sorted((workdir / CELLS).glob("*/*/seed*.json"))


def _training_process(workdir: Path, cell_result: str) -> int | None:
    """The process id of the `fdabench train` job writing `cell_result` (a path relative to `workdir`) in `workdir`:
    other runs of the same tiny suite, in other tests' folders, name the same relative path."""
    for entry in Path("/proc").iterdir():
        try:
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
            if b"train" not in arguments or cell_result.encode() not in arguments:
                continue
            if Path(os.readlink(entry / "cwd")) == workdir.resolve():
                return int(entry.name)
        except OSError:  # gone, or not ours to read
            continue
    return None


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it may have ended on its own
        os.kill(pid, signal.SIGKILL)


def _results(workdir: Path) -> dict[str, object]:
    """Every cell without its timings, and the table's files."""
    results: dict[str, object] = {
        str(path.relative_to(workdir)): without_timings(json.loads(path.read_text())) for path in _cells(workdir)
    }
    for ext in ("csv", "md", "json"):
        results[f"table1.{ext}"] = (workdir / f"results/tiny/table1.{ext}").read_bytes()
    return results


def test_kill_9_at_several_moments_then_the_same_command_completes_identically(tmp_path, repo_root):
    reference, interrupted = tmp_path / "reference", tmp_path / "interrupted"
    for workdir in (reference, interrupted):
        workdir.mkdir()
        (workdir / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    done = _finish(repo_root, reference, forkserver=True)  # the reference's jobs through the fork server, the rest not
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "profiles/default" in done.stdout + done.stderr  # the workflow profile applied by itself
    assert len(_cells(reference)) == 4 and not _checkpoints(reference)  # checkpoints removed when done

    # 1. snakemake killed while the data is being prepared and partitioned
    run = _start(repo_root, interrupted)
    _wait_for(lambda: (interrupted / ".snakemake/fdabench-run.lock").exists(), run)
    _kill(run.pid)
    run.wait()

    # 2. a training job killed after its first checkpoint: the run goes on with the other cells and fails
    run = _start(repo_root, interrupted)
    checkpoint = _wait_for(lambda: _checkpoints(interrupted), run)[0]
    victim_result = str(
        (checkpoint.parent / checkpoint.name[1:].removesuffix(".checkpoint.pt")).relative_to(interrupted)
    )
    victim = _wait_for(lambda: _training_process(interrupted, victim_result), run)
    _kill(victim)
    run.wait(timeout=600)
    assert run.returncode != 0, _output(interrupted)
    assert checkpoint.exists() and not (interrupted / victim_result).exists()  # never read as finished
    assert len(_cells(interrupted)) == 3  # keep-going (the profile): the other cells went on
    status = subprocess.run(
        [sys.executable, "-m", "fdabench", "status"], cwd=interrupted, capture_output=True, text=True, timeout=300
    )
    assert f"{victim_result}  interrupted; it resumes from its checkpoint" in status.stdout, status.stdout

    # 3. snakemake killed while that cell resumes from its checkpoint (the orphaned job may finish on its own)
    log = interrupted / victim_result.replace("results/cells/", "results/logs/cells/").replace(".json", ".log")
    run = _start(repo_root, interrupted)
    _wait_for(lambda: log.exists() and "resuming from checkpoint" in log.read_text(), run)
    _kill(run.pid)
    run.wait()

    # 4. snakemake killed once every cell is there (the table and figure jobs)
    run = _start(repo_root, interrupted)
    _wait_for(lambda: len(_cells(interrupted)) == 4, run)
    _kill(run.pid)
    run.wait()

    done = _finish(repo_root, interrupted)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _results(interrupted) == _results(reference)
    assert not _checkpoints(interrupted) and not list(interrupted.glob("results/**/*.partial"))
