"""`fdabench train-group`: several cells as one group, each still its own cell: its own result file, equal to the
one `fdabench train` writes for it alone; after a kill -9 of the group, the same command gives identical cells; bad
input is refused before any cell trains."""

import copy
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from fdabench.cell.compare import cell_differences
from fdabench.cell.plugin_scope import cell_code
from fdabench.core import paths
from fdabench.federation.checkpoint import checkpoint_path
from fdabench.jobs.cell_plan import write_plan
from workflows import workflow_environment

CELLS = [("source_only", 0, "off"), ("fedgp", 1, "off"), ("source_only", 1, "stacked"), ("fedgp", 0, "stacked")]


def _plans(root: Path, params, rounds: int) -> list[tuple[str, str, str]]:
    """(plan, partition, output) of each of CELLS with `rounds` rounds, written under `root`."""
    entries = []
    for method, seed, batching in CELLS:
        config = copy.deepcopy(params.cell("colored_digits", method, "-90", seed).config)
        config["train"].update({"rounds": rounds, "batching": batching})
        name = f"{method}-{seed}-{batching}"
        plan = root / "plans" / f"{name}.json"
        plan.parent.mkdir(parents=True, exist_ok=True)
        write_plan(plan, config, cell_code(config).to_json())
        partition = paths.fill(
            paths.PARTITION, data="data", suite="tiny", experiment="colored_digits", target="-90", seed=seed
        )
        entries.append((str(plan), partition, str(root / "out" / f"{name}.json")))
    return entries


def _group_command(root: Path, params, entries, *extra: str) -> list[str]:
    prepared = params.prepared_path("colored_digits")
    return [
        "fdabench",
        "train-group",
        "--plan",
        *[e[0] for e in entries],
        "--prepared",
        prepared,
        "--partition",
        *[e[1] for e in entries],
        "--output",
        *[e[2] for e in entries],
        *extra,
    ]


def _cells(entries) -> list[dict]:
    return [json.loads(Path(e[2]).read_text()) for e in entries]


def test_a_group_writes_each_cell_as_alone_and_survives_kill_9(tiny_inputs, tmp_path):
    root, params = tiny_inputs
    env = workflow_environment(root)
    entries = _plans(tmp_path, params, rounds=12)
    run = lambda command: subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)

    # each cell alone, as `fdabench train` runs it
    alone = []
    for plan, partition, output in entries:
        single = output.replace("/out/", "/alone/")
        result = run(
            ["fdabench", "train", "--plan", plan, "--prepared", params.prepared_path("colored_digits"),
             "--partition", partition, "--output", single]
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
        alone.append(json.loads(Path(single).read_text()))

    # the group, killed (SIGKILL) once a cell has saved a checkpoint, then the same command again
    command = _group_command(root, params, entries, "--checkpoint-every", "1")
    process = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not any(checkpoint_path(e[2]).exists() for e in entries) and process.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint within 300 s"
        time.sleep(0.01)
    killed = process.poll() is None
    if killed:
        os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert killed, "the group ended before it could be killed: give it more rounds"
    assert not all(Path(e[2]).exists() for e in entries)  # killed part-way
    result = run(command)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "4 of 4 cells trained as one group" in result.stdout
    assert not any(checkpoint_path(e[2]).exists() for e in entries)
    for mine, theirs in zip(_cells(entries), alone, strict=True):
        assert cell_differences(theirs, mine) == []


def test_bad_input_is_refused_before_any_cell_trains(tiny_inputs, tmp_path):
    root, params = tiny_inputs
    env = workflow_environment(root)
    entries = _plans(tmp_path, params, rounds=2)
    run = lambda command: subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    missing = [*entries[:-1], (str(tmp_path / "no-plan.json"), entries[-1][1], entries[-1][2])]
    result = run(_group_command(root, params, missing))
    assert result.returncode == 2 and "no-plan.json" in result.stderr
    assert not any(Path(e[2]).exists() for e in entries)
    short = _group_command(root, params, entries)[:-1]  # one output fewer than plans
    result = run(short)
    assert result.returncode == 2 and "one --output per --plan" in result.stderr
    assert not any(Path(e[2]).exists() for e in entries)


def test_two_cells_cannot_share_an_output(tiny_inputs, tmp_path):
    """Refused by the check every command's files go through (`fdabench.cli.files`), before any cell trains."""
    root, params = tiny_inputs
    entries = _plans(tmp_path, params, rounds=2)[:2]
    entries[1] = (entries[1][0], entries[1][1], entries[0][2])
    result = subprocess.run(
        _group_command(root, params, entries), cwd=root, env=workflow_environment(root), capture_output=True, text=True
    )
    assert result.returncode == 2 and "are the same file" in result.stderr
    assert not Path(entries[0][2]).exists()
