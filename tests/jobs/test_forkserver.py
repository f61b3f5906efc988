"""The fork server: a job run through it equals the same job in a fresh process; it stays off where a
scheduler runs jobs; its key changes with the code and with any installed package."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from fdabench.jobs import forkserver
from fdabench.speed.aggregation import _startup_cell, train_command
from workflows import short_runtime_dir


def _comparable(path):
    result = json.loads(Path(path).read_text())
    rounds = [{k: v for k, v in r.items() if k != "seconds"} for r in result["rounds"]]
    return result["final"], result["finals"], rounds, result["config"]


def test_a_job_through_the_fork_server_equals_a_fresh_process(tmp_path):
    config, prepared, partition = _startup_cell(str(tmp_path), rounds=2)
    runtime = short_runtime_dir(tmp_path)
    outputs = {}
    for server in ("0", "1", "1"):  # the second "1" finds the server warm
        output = tmp_path / f"cell{len(outputs)}.json"
        environment = {
            **os.environ,
            "FDABENCH_FORKSERVER": server,
            "XDG_RUNTIME_DIR": str(runtime),
            "FDABENCH_FORKSERVER_IDLE": "20",
        }
        completed = subprocess.run(
            train_command(config, prepared, partition, str(output)),
            capture_output=True,
            text=True,
            env=environment,
        )
        assert completed.returncode == 0, completed.stderr
        assert "running in-process" not in completed.stderr  # the server was used, not the fallback
        outputs[len(outputs)] = _comparable(output)
    assert outputs[0] == outputs[1] == outputs[2]
    assert any(name.endswith(".sock") for name in os.listdir(runtime / f"fdabench-{os.getuid()}"))

    # the workflow's other jobs too: a table and a figure through the server are byte for byte a fresh process's
    cell = str(tmp_path / "cell0.json")
    written = {}
    for server in ("0", "1"):
        out = tmp_path / f"report{server}"
        out.mkdir()
        commands = [
            [
                "fdabench",
                "table",
                cell,
                "--csv",
                str(out / "t.csv"),
                "--md",
                str(out / "t.md"),
                "--json",
                str(out / "t.json"),
            ],
            ["fdabench", "figure", "rounds", cell, "--output", str(out / "rounds.png"), "--title", "t"],
        ]
        for command in commands:
            environment = {**os.environ, "FDABENCH_FORKSERVER": server, "XDG_RUNTIME_DIR": str(runtime)}
            completed = subprocess.run(command, capture_output=True, text=True, env=environment)
            assert completed.returncode == 0, completed.stderr
            assert "running in-process" not in completed.stderr
        written[server] = {path.name: path.read_bytes() for path in sorted(out.iterdir())}
    assert sorted(written["0"]) == ["rounds.png", "t.csv", "t.json", "t.md"]
    assert written["0"] == written["1"]


def test_the_server_takes_every_job_the_workflow_runs(repo_root):
    """`SERVED` is every `fdabench` command a rule runs, no more: a new rule's job goes through the server, and a
    person's command (status, validate) never starts one."""
    rules = "".join(path.read_text() for path in sorted((repo_root / "workflow/rules").glob("*.smk")))
    assert set(re.findall(r'"fdabench ([a-z-]+)', rules)) == forkserver.SERVED


def test_the_command_line_hands_each_served_command_to_the_server(monkeypatch, tmp_path, capsys):
    from fdabench.cli import main

    handed = []
    monkeypatch.setattr(forkserver, "enabled", lambda: True)
    monkeypatch.setattr(forkserver, "run", lambda argv: handed.append(list(argv)) or 0)
    for command in sorted(forkserver.SERVED):
        assert main([command, "--any", "argument"]) == 0
    assert main(["--debug", "table", str(tmp_path / "cell.json")]) == 0  # an option before the command too
    assert handed == [*([command, "--any", "argument"] for command in sorted(forkserver.SERVED)), handed[-1]]
    assert handed[-1][-2:] == ["table", str(tmp_path / "cell.json")]
    monkeypatch.chdir(tmp_path)
    main(["status"])  # a person's command runs here, whatever it finds
    capsys.readouterr()
    assert len(handed) == len(forkserver.SERVED) + 1


def test_a_failing_job_reports_its_exit_status_through_the_server(tmp_path):
    runtime = short_runtime_dir(tmp_path)
    environment = {
        **os.environ,
        "FDABENCH_FORKSERVER": "1",
        "XDG_RUNTIME_DIR": str(runtime),
        "FDABENCH_FORKSERVER_IDLE": "20",
    }
    cell = {"experiment": "e", "method": "m", "target": "t", "seed": 0}
    completed = subprocess.run(
        [
            "fdabench",
            "train",
            "--cell",
            json.dumps(cell),
            "--prepared",
            str(tmp_path / "missing"),
            "--partition",
            str(tmp_path / "missing.json"),
            "--output",
            str(tmp_path / "out.json"),
        ],
        capture_output=True,
        text=True,
        env=environment,
    )
    assert completed.returncode != 0 and "--cell lacks dataset" in completed.stderr
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("variable", forkserver.SCHEDULER_VARIABLES)
def test_off_where_a_scheduler_runs_the_jobs(monkeypatch, variable):
    for name in forkserver.SCHEDULER_VARIABLES + (forkserver.ENABLE_VARIABLE, forkserver.IN_CHILD_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    assert forkserver.enabled()
    monkeypatch.setenv(variable, "1234")
    assert not forkserver.enabled()


def test_off_when_asked_and_inside_a_job(monkeypatch):
    for name in forkserver.SCHEDULER_VARIABLES + (forkserver.IN_CHILD_VARIABLE,):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(forkserver.ENABLE_VARIABLE, "0")
    assert not forkserver.enabled()
    monkeypatch.setenv(forkserver.ENABLE_VARIABLE, "1")
    monkeypatch.setenv(forkserver.IN_CHILD_VARIABLE, "1")
    assert not forkserver.enabled()


def test_the_key_covers_every_installed_distribution(monkeypatch):
    installed = forkserver.installed_distributions()
    assert any(name.startswith("torch-") for name in installed) and any(
        name.lower().startswith("pot-") for name in installed
    )
    key = forkserver.server_key()
    assert forkserver.server_key() == key
    monkeypatch.setattr(forkserver, "installed_distributions", lambda: [*installed, "numpy-99.0.dist-info"])
    assert forkserver.server_key() != key


def test_a_socket_path_too_long_falls_back_in_process_at_once(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / ("x" * 120)))
    (tmp_path / ("x" * 120)).mkdir()
    with pytest.raises(OSError, match="too long for a Unix socket"):
        forkserver._connect()
