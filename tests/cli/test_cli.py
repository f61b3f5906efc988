"""The CLI as the rules call it: prepare -> partition -> train -> table, determinism, clear errors."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from fdabench.cli import main
from fdabench.core.io import canonical_json
from workflows import prepare_cli_cells, short_runtime_dir, train_cli_cell


@pytest.fixture(scope="module")
def prepared_inputs(tmp_path_factory, repo_root):
    return prepare_cli_cells(tmp_path_factory.mktemp("cli"), repo_root, seeds=(0, 1), rounds=6)


def test_cell_file_contract(prepared_inputs):
    cell = train_cli_cell(prepared_inputs, "fedgp", 0, "fedgp.json")
    assert cell["format"] == "fdabench.cell/1" and cell["status"] == "complete"
    assert cell["cell"] == {
        "suite": "demo",
        "experiment": "colored_digits",
        "dataset": "colored_digits",
        "method": "fedgp",
        "algorithm": "fedgp",
        "target": "-90",
        "seed": 0,
    }
    assert cell["config"]["hparams"] == {
        "beta": 0.5,
        "mode": "projection",
        "scale_alignment": "steps_and_lr",
        "filter": True,
    }
    assert len(cell["rounds"]) == 6 + 2  # FDA rounds + warm-up
    assert cell["final"] == pytest.approx(sum(r["accuracy"] for r in cell["rounds"][-5:]) / 5)
    assert cell["bytes"]["uplink_total"] == sum(r["bytes_uplink"] for r in cell["rounds"]) > 0
    assert cell["wall_seconds"] > 0 and cell["device"] == "cpu" and cell["partition_hash"]
    assert cell["plugins"] == []  # the plugin distributions loaded (none here): part of its code fingerprint too


def test_rerun_same_seed_reproduces_numbers_exactly(prepared_inputs):
    first = train_cli_cell(prepared_inputs, "fedda", 1, "a.json")
    again = train_cli_cell(prepared_inputs, "fedda", 1, "b.json")
    other = train_cli_cell(prepared_inputs, "fedda", 0, "c.json")
    numbers = lambda cell: [(r["accuracy"], r["loss"]) for r in cell["rounds"]]
    assert numbers(first) == numbers(again)
    assert numbers(first) != numbers(other)


def test_fork_server_gives_identical_numbers(prepared_inputs, monkeypatch, tmp_path):
    monkeypatch.setenv("FDABENCH_FORKSERVER", "1")
    monkeypatch.setenv("FDABENCH_FORKSERVER_IDLE", "20")
    runtime = short_runtime_dir(tmp_path)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))  # a private server for this test
    served = train_cli_cell(prepared_inputs, "source_only", 0, "served.json")
    monkeypatch.setenv("FDABENCH_FORKSERVER", "0")
    local = train_cli_cell(prepared_inputs, "source_only", 0, "local.json")
    assert [r["loss"] for r in served["rounds"]] == [r["loss"] for r in local["rounds"]]
    assert any(path.suffix == ".sock" for path in (runtime / next(p.name for p in runtime.iterdir())).iterdir())


def test_killed_client_ends_its_fork_server_child(prepared_inputs, monkeypatch, tmp_path):
    """A job killed with SIGKILL cannot forward the signal: its child in the fork server must end anyway."""
    root, prepared, params = prepared_inputs
    config = params.cell("colored_digits", "source_only", "-90", 0).config
    config = {**config, "train": {**config["train"], "rounds": 100_000}}  # far longer than the test waits
    runtime = str(short_runtime_dir(tmp_path))
    env = {**os.environ, "FDABENCH_FORKSERVER": "1", "FDABENCH_FORKSERVER_IDLE": "20", "XDG_RUNTIME_DIR": runtime}
    log = tmp_path / "train.log"
    with open(log, "w") as handle:
        client = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fdabench",
                "train",
                "--cell",
                canonical_json(config),
                "--prepared",
                str(prepared),
                "--partition",
                str(root / "partition0.json"),
                "--output",
                str(tmp_path / "never.json"),
            ],
            env=env,
            stdout=handle,
            stderr=handle,
        )
        try:
            deadline = time.monotonic() + 120
            while "round" not in log.read_text() and time.monotonic() < deadline:  # the child is training
                time.sleep(0.2)
            children = [
                int(pid)
                for pid in os.listdir("/proc")
                if pid.isdigit() and _writes_to(int(pid), log) and int(pid) not in (client.pid, os.getpid())
            ]
            assert children, log.read_text()
        finally:  # a failed wait must not leave a 100,000-round client behind
            client.send_signal(signal.SIGKILL)
            client.wait()
        deadline = time.monotonic() + 10
        while (
            any(os.path.exists(f"/proc/{pid}") and _state(pid) != "Z" for pid in children)
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
    assert not any(os.path.exists(f"/proc/{pid}") and _state(pid) != "Z" for pid in children)
    assert not (tmp_path / "never.json").exists()


def _writes_to(pid: int, path) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(path) for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_table_command(prepared_inputs, tmp_path):
    root = prepared_inputs[0]
    paths = [str(root / name) for name in ("a.json", "c.json", "fedgp.json")]
    code = main(
        [
            "table",
            *paths,
            "--csv",
            str(tmp_path / "t.csv"),
            "--md",
            str(tmp_path / "t.md"),
            "--json",
            str(tmp_path / "t.json"),
        ]
    )
    assert code == 0
    assert (tmp_path / "t.csv").read_text().splitlines()[
        0
    ] == "experiment,dataset,target,method,metric,mean,std,n_seeds"
    assert "| fedda |" in (tmp_path / "t.md").read_text()


def test_invalid_params_exit_code_and_message(tmp_path, capsys):
    path = tmp_path / "params.yaml"
    path.write_text("suite: demo\nsuites: {demo: {experiments: {x: {dataset: colored_digits, methods: [fedgpp]}}}}\n")
    assert main(["validate", "--params", str(path)]) == 2
    assert "unknown method 'fedgpp'" in capsys.readouterr().err


def test_incomplete_cell_is_refused(tmp_path, capsys):
    bad = tmp_path / "cell.json"
    bad.write_text('{"format": "fdabench.cell/1", "status": "running"}')
    assert main(["table", str(bad), "--csv", str(tmp_path / "t.csv")]) == 2
    assert capsys.readouterr().err == (
        f"fdabench: {bad} has status 'running', not complete; rerun `snakemake` (it reruns such cells with this "
        "version, keeping the files until then)\n"
    )
    assert not (tmp_path / "t.csv").exists()


@pytest.mark.parametrize("command", ["validate", "schema", "cells", "prepare", "partition", "train", "table", "figure"])
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert "usage: fdabench" in capsys.readouterr().out


def test_cells_record_whether_the_unlabelled_target_data_was_used(prepared_inputs):
    kd3a = train_cli_cell(prepared_inputs, "kd3a", 0, "kd3a.json")
    assert kd3a["uses_unlabelled_target"] is True and kd3a["cell"]["method"] == "kd3a"
    assert train_cli_cell(prepared_inputs, "ditto", 0, "ditto.json")["uses_unlabelled_target"] is False
    root = prepared_inputs[0]
    assert main(["table", str(root / "kd3a.json"), str(root / "ditto.json")]) == 0


def test_every_option_of_every_command_has_help():
    import argparse

    from fdabench.cli import build_parser

    def undocumented(parser, name):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for command, subparser in action.choices.items():
                    yield from undocumented(subparser, f"{name} {command}")
            elif not action.help and action.dest != "help":
                yield f"{name} {'/'.join(action.option_strings) or action.dest}"

    assert list(undocumented(build_parser(), "fdabench")) == []


def test_a_closed_pipe_ends_quietly(repo_root):
    # `fdabench status | head`: the reader is gone before the command writes
    command = [sys.executable, "-m", "fdabench", "status", "--all"]
    process = subprocess.Popen(command, cwd=repo_root, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=300) == 0 and stderr == "", stderr


def test_a_plan_file_runs_the_cell_it_holds(prepared_inputs, capsys):
    """`fdabench train --plan`, as the train rule calls it: the configuration and code fingerprint come from the
    plan file, and the cell is the one `--cell` and `--code` give for them."""
    from fdabench.cell.plugin_scope import cell_code
    from fdabench.jobs.cell_plan import write_plan

    cells = prepared_inputs
    config = cells.params.cell("colored_digits", "fedgp", "-90", 1).config
    config = {**config, "hparams": {**config["hparams"], "beta": 0.25}}
    code = cell_code(config).to_json()
    plan = cells.root / "plan.json"
    write_plan(plan, config, code)
    inputs = ["--prepared", str(cells.prepared), "--partition", str(cells.root / "partition1.json")]
    assert main(["train", "--plan", str(plan), *inputs, "--output", str(cells.root / "planned.json")]) == 0
    given = ["--cell", canonical_json(config), "--code", canonical_json(code)]
    assert main(["train", *given, *inputs, "--output", str(cells.root / "given.json")]) == 0
    planned, direct = (json.loads((cells.root / name).read_text()) for name in ("planned.json", "given.json"))
    assert planned["config"]["hparams"]["beta"] == 0.25 and planned["code"] == code
    assert (planned["config"], planned["final"]) == (direct["config"], direct["final"])
    assert [r["loss"] for r in planned["rounds"]] == [r["loss"] for r in direct["rounds"]]
    capsys.readouterr()
    refused = ["train", "--plan", str(plan), "--code", canonical_json(code), *inputs, "--output", "o.json"]
    assert main(refused) == 2
    assert "--code goes with --cell" in capsys.readouterr().err
