"""SIGINT and SIGTERM in any command end it with one line and exit status 130 or 143, no traceback, and no partial
output; a file-size limit (ulimit -f) is one line too, with nothing written. Each test runs a real process and
signals it at a known moment: mid-write (the writer's temporary file holds part of the output), or mid-training
through the fork server."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fdabench.speed.aggregation import _startup_cell, train_command
from workflows import short_runtime_dir

# `fdabench ARGS` whose writes stop after 16 characters and wait there, saying so on stdout
MID_WRITE = """
import pathlib, sys, time
from fdabench.cli import main
write_text = pathlib.Path.write_text
def stalls(self, text, *args, **kwargs):
    write_text(self, text[:16], *args, **kwargs)
    print("writing", self, flush=True)
    time.sleep(60)
pathlib.Path.write_text = stalls
sys.exit(main(sys.argv[1:]))
"""


def _signalled_mid_write(arguments: list[str], number: int) -> subprocess.CompletedProcess:
    process = subprocess.Popen(
        [sys.executable, "-c", MID_WRITE, *arguments], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout.readline().startswith("writing")
    process.send_signal(number)
    stdout, stderr = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _cell(tmp_path: Path) -> Path:
    path = tmp_path / "cells" / "cell.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"format": "fdabench.cell/1", "status": "complete", "final": 0.5}))
    return path


@pytest.mark.parametrize(
    "number, status, name", [(signal.SIGINT, 130, "SIGINT"), (signal.SIGTERM, 143, "SIGTERM")], ids=["INT", "TERM"]
)
def test_a_signal_mid_write_is_one_line_and_leaves_no_partial_file(tmp_path, number, status, name):
    output = tmp_path / "out" / "schema.json"
    result = _signalled_mid_write(["schema", "--output", str(output)], number)
    assert result.returncode == status
    assert result.stderr.splitlines() == [f"fdabench: interrupted by {name}; outputs not finished were not written"], (
        result.stderr
    )
    assert not output.exists() and list(output.parent.iterdir()) == []  # nor the writer's temporary file


def test_sigint_during_table_is_one_line_and_writes_nothing(tmp_path, monkeypatch):
    """The reported case: a KeyboardInterrupt traceback from `fdabench table`."""
    table = json.dumps(
        ["table", str(_cell(tmp_path)), "--csv", str(tmp_path / "t.csv"), "--md", str(tmp_path / "t.md")]
    )
    reading = (
        "import sys, time, json\n"
        "import fdabench.report.tables as tables\n"
        "from fdabench.cli import main\n"
        "def stalls(*args, **kwargs):\n"
        "    print('reading', flush=True)\n"
        "    time.sleep(60)\n"
        "tables.cells_frame = stalls\n"
        f"sys.exit(main(json.loads({table!r})))\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", reading], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout.readline() == "reading\n"
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    assert stderr.splitlines() == ["fdabench: interrupted by SIGINT; outputs not finished were not written"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["cells"]


def test_sigterm_to_a_training_job_through_the_fork_server_is_one_line_and_writes_no_cell(tmp_path):
    """The client forwards the signal to its forked child, whose `main` reports it; the client exits with the
    child's status."""
    config, prepared, partition = _startup_cell(str(tmp_path), rounds=50_000)
    output = tmp_path / "results" / "cell.json"
    environment = {
        **os.environ,
        "FDABENCH_FORKSERVER": "1",
        "XDG_RUNTIME_DIR": str(short_runtime_dir(tmp_path)),
        "FDABENCH_FORKSERVER_IDLE": "5",
        "OMP_NUM_THREADS": "1",
    }
    process = subprocess.Popen(
        train_command(config, prepared, partition, str(output)), stderr=subprocess.PIPE, text=True, env=environment
    )
    first = process.stderr.readline()  # a line every 10 rounds: training is under way in the server's child
    assert ": round 10/50001" in first, first
    process.send_signal(signal.SIGTERM)
    rest = process.stderr.read()
    process.wait(timeout=60)
    lines = [line for line in rest.splitlines() if ": round " not in line]
    assert process.returncode == 143
    assert lines == ["fdabench: interrupted by SIGTERM; outputs not finished were not written"], rest
    assert not output.parent.exists() or list(output.parent.iterdir()) == []


def test_a_file_size_limit_is_one_line_and_leaves_no_partial_file(tmp_path):
    """ulimit -f smaller than the output: SIGXFSZ would kill the process mid-write; fdabench ignores it, so the
    write fails with EFBIG and the writer reports it."""
    output = tmp_path / "schema.json"

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))

    result = subprocess.run(
        ["fdabench", "schema", "--output", str(output)], capture_output=True, text=True, preexec_fn=limited
    )
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("fdabench: ")
    assert f"could not write {output}: File too large;" in result.stderr
    assert list(tmp_path.iterdir()) == []
