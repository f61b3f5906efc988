"""`fdabench train-group`: several cells as one group, each still its own cell: its own result file, equal to the
one `fdabench train` writes for it alone; after a kill -9 of the group, the same command gives identical cells; bad
input is refused before any cell trains."""

import copy
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from fdabench.cell.compare import cell_differences
from fdabench.cell.plugin_scope import cell_code
from fdabench.core import paths
from fdabench.federation.checkpoint import checkpoint_path
from fdabench.jobs.cell_plan import read_plan, write_plan
from fdabench.jobs.heal import kept_path
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
    finished = sum(Path(e[2]).exists() for e in entries)
    # each finished cell has a copy beside it until the whole group has finished (Snakemake removes a killed job's
    # outputs): the rerun puts it back rather than training it again
    assert all(kept_path(e[2]).exists() for e in entries if Path(e[2]).exists())
    result = run(command)
    assert result.returncode == 0, result.stderr[-2000:]
    # the cells that finished before the kill are kept, the others trained
    assert f"{4 - finished} of {4 - finished} cells trained as one group, {finished} kept" in result.stdout
    assert not any(checkpoint_path(e[2]).exists() or kept_path(e[2]).exists() for e in entries)
    for mine, theirs in zip(_cells(entries), alone, strict=True):
        assert cell_differences(theirs, mine) == []


def test_a_rerun_trains_only_the_cells_not_finished_with_their_plan(tiny_inputs, tmp_path):
    """A group job reruns because one of its cells changed: the others' results are kept, byte for byte."""
    root, params = tiny_inputs
    env = workflow_environment(root)
    entries = _plans(tmp_path, params, rounds=2)
    run = lambda command: subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    command = _group_command(root, params, entries)
    assert run(command).returncode == 0
    before = [Path(e[2]).read_bytes() for e in entries]
    result = run(command)
    assert result.returncode == 0 and "0 of 0 cells trained as one group, 4 kept" in result.stdout, result.stdout
    assert [Path(e[2]).read_bytes() for e in entries] == before

    # one cell's plan changes (one round more): that cell alone trains again
    config, code = read_plan(entries[1][0])
    config["train"]["rounds"] = 3
    write_plan(Path(entries[1][0]), config, code)
    result = run(command)
    assert result.returncode == 0 and "1 of 1 cells trained as one group, 3 kept" in result.stdout, result.stdout
    after = [Path(e[2]).read_bytes() for e in entries]
    assert after[0] == before[0] and after[2:] == before[2:] and after[1] != before[1]
    assert json.loads(after[1])["config"]["train"]["rounds"] == 3


def test_a_failing_cell_fails_alone_and_the_finished_ones_are_kept(tiny_inputs, tmp_path):
    """A cell that fails at run time (here: handed another seed's partition) fails alone, named, in its own log;
    the finished cells keep their results beside their outputs (Snakemake removes a failed job's new outputs), and
    the next run puts them back instead of training them again."""
    root, params = tiny_inputs
    env = workflow_environment(root)
    entries = _plans(tmp_path, params, rounds=2)
    logs = [str(tmp_path / "logs" / f"{index}.log") for index in range(len(entries))]
    run = lambda command: subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    wrong = [*entries[:3], (entries[3][0], entries[2][1], entries[3][2])]  # seed 0's cell, seed 1's partition
    result = run(_group_command(root, params, wrong, "--log", *logs))
    assert result.returncode == 1, result.stderr[-2000:]
    assert f"{entries[3][2]}: partition" in result.stderr and "not this cell" in result.stderr
    assert "not this cell" in Path(logs[3]).read_text() and "not this cell" not in Path(logs[0]).read_text()
    assert "final" in Path(logs[0]).read_text() and re.search(r": round (\d+)/\1 ", Path(logs[0]).read_text())
    assert "source_only/-90/seed0" in Path(logs[0]).read_text() and "fedgp" not in Path(logs[0]).read_text()
    kept = [Path(e[2]).with_name(f".{Path(e[2]).name}.kept") for e in entries]
    assert [path.exists() for path in kept] == [True, True, True, False]
    results = [Path(e[2]).read_bytes() for e in entries[:3]]
    for entry in entries[:3]:
        Path(entry[2]).unlink()  # as Snakemake cleans a failed job's outputs

    result = run(_group_command(root, params, entries, "--log", *logs))
    assert result.returncode == 0 and "1 of 1 cells trained as one group, 3 kept" in result.stdout, result.stdout
    assert [Path(e[2]).read_bytes() for e in entries[:3]] == results
    assert not any(path.exists() for path in kept)
    assert "put back the result an unfinished group run kept" in Path(logs[0]).read_text()


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
