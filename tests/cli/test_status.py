"""`fdabench status`: each cell is current, edited (changed since its job wrote it), stale (other configuration or
code), failed (a log with an error and no result) or missing; what is not current says why."""

import json
import os
from pathlib import Path

from fdabench.cell.digest import UNSEALED, seal
from fdabench.cell.fingerprint import cell_fingerprint
from fdabench.config import validate_params
from fdabench.jobs.heal import kept_path
from fdabench.jobs.status import cell_state, format_status, heal_workspace, rerun_marker, suite_status

PARAMS = validate_params(
    {
        "suite": "st",
        "suites": {
            "st": {
                "seeds": [0],
                "methods": ["source_only", "fedgp"],
                "experiments": {"digits": {"dataset": "colored_digits", "targets": ["-90", "+90"]}},
            }
        },
    }
)


def _write(root: Path, cell, sealed: bool = True, **changes):
    """The cell's file, sealed with its digest as the training job writes it (`sealed`: False, as written before
    cells carried one)."""
    result = {
        "format": "fdabench.cell/1",
        "status": "complete",
        "config": cell.config,
        "code": cell_fingerprint(cell.config).to_json(),
        "final": 0.5,
        **changes,
    }
    path = root / cell.path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(seal(result) if sealed else result, indent=1))


def _log(root: Path, cell) -> Path:
    return root / cell.log_path


def test_each_state_and_its_reason(tmp_path):
    cells = list(PARAMS.cells())
    assert len(cells) == 4
    current, other_config, other_code, failed = cells
    _write(tmp_path, current)
    _write(tmp_path, other_config, config={**other_config.config, "seed": 7})
    code = cell_fingerprint(other_code.config).to_json()
    code["fingerprint"] = "0" * 16
    code["modules"]["fdabench.tensor_math.aggregation"] = "f" * 16
    _write(tmp_path, other_code, code=code)
    log = _log(tmp_path, failed)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("round 1/3\nTraceback (most recent call last):\nRuntimeError: CUDA out of memory\n")

    states = {state.cell.path: state for state in suite_status(PARAMS, tmp_path)}
    assert states[current.path].state == "current" and states[current.path].reason == ""
    assert (
        states[other_config.path].state == "stale" and states[other_config.path].reason == "configuration changed: seed"
    )
    assert states[other_code.path].state == "stale"
    assert states[other_code.path].reason == "code changed: fdabench.tensor_math.aggregation"
    assert states[failed.path].state == "failed"
    assert states[failed.path].reason == f"RuntimeError: CUDA out of memory (log: {log})"

    text = format_status(PARAMS, list(states.values()))
    assert text.splitlines()[0] == "suite st: 4 cells: 1 current, 0 edited, 2 stale, 1 failed, 0 missing"
    assert current.path not in text and other_code.path in text


def test_missing_unreadable_and_unfinished_results(tmp_path):
    first, second, third, _ = PARAMS.cells()
    assert cell_state(first, tmp_path).state == "missing"
    _log(tmp_path, first).parent.mkdir(parents=True, exist_ok=True)
    _log(tmp_path, first).write_text("round 1/3\nround 2/3\n")  # a log without an error: still running, or killed
    assert cell_state(first, tmp_path).state == "missing"
    path = tmp_path / second.path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"status": "compl')
    state = cell_state(second, tmp_path)
    assert state.state == "stale" and state.reason.startswith("unreadable result")
    _write(tmp_path, third, status="running")
    assert cell_state(third, tmp_path).reason == "result status 'running', not complete"
    _write(tmp_path, third, format="fdabench.cell/2")  # a newer version's cell: rerun by this one
    assert cell_state(third, tmp_path).reason == "format 'fdabench.cell/2', not fdabench.cell/1; snakemake reruns it"


def test_healing_marks_exactly_the_cells_that_must_rerun_and_removes_dangling_links(tmp_path):
    current, truncated, other_config, missing = PARAMS.cells()
    _write(tmp_path, current)
    _write(tmp_path, truncated)
    (tmp_path / truncated.path).write_text('{"format": "fdabench.cell/1", "sta')
    _write(tmp_path, other_config, config={**other_config.config, "seed": 7})
    kept = (tmp_path / truncated.path).read_bytes()
    (tmp_path / "results/st").mkdir(parents=True)
    (tmp_path / "results/st/table1.csv").write_text("x\n")
    (tmp_path / "results/table1.csv").symlink_to("st/table1.csv")
    (tmp_path / "results/table1.md").symlink_to("st/table1.md")  # its file is gone

    changes = heal_workspace(PARAMS, ["results/table1.csv", "results/table1.md"], tmp_path)
    marked = [cell for cell in PARAMS.cells() if (tmp_path / rerun_marker(cell)).is_file()]
    # a missing cell gets one too, so the tables and figures made from it (up to date in Snakemake's eyes) rerun
    assert marked == [truncated, other_config, missing] and len(changes) == 3
    assert (tmp_path / truncated.path).read_bytes() == kept  # the file itself is untouched until a rerun replaces it
    assert (tmp_path / "results/table1.csv").is_symlink() and not (tmp_path / "results/table1.md").is_symlink()
    first = (tmp_path / rerun_marker(truncated)).read_text()
    heal_workspace(PARAMS, [], tmp_path)
    assert (tmp_path / rerun_marker(truncated)).read_text() != first  # every plan gives a stale cell a new input
    assert (tmp_path / rerun_marker(missing)).exists() and not (tmp_path / rerun_marker(current)).exists()


def test_a_marker_no_job_consumed_is_removed_when_the_cell_is_current_again(tmp_path):
    cell = next(PARAMS.cells())
    _write(tmp_path, cell, config={**cell.config, "seed": 7})  # stale: params changed, e.g. in a dry run
    heal_workspace(PARAMS, [], tmp_path)
    marker = tmp_path / rerun_marker(cell)
    assert marker.is_file()
    _write(tmp_path, cell)  # params changed back (the cell file is current) before any job ran
    os.utime(marker, ((tmp_path / cell.path).stat().st_mtime + 10,) * 2)  # newer than the cell: no job read it
    heal_workspace(PARAMS, [], tmp_path)
    assert not marker.exists()
    heal_workspace(PARAMS, [], tmp_path)
    _write(tmp_path, cell, config={**cell.config, "seed": 7})
    heal_workspace(PARAMS, [], tmp_path)
    _write(tmp_path, cell)  # a job consumed the marker and wrote the cell after it: the marker stays
    os.utime(tmp_path / cell.path, (marker.stat().st_mtime + 10,) * 2)
    heal_workspace(PARAMS, [], tmp_path)
    assert marker.is_file()


def test_a_cell_whose_number_was_edited_by_hand_is_named_edited_and_reruns(tmp_path):
    edited, current, _, _ = PARAMS.cells()
    _write(tmp_path, edited)
    _write(tmp_path, current)
    path = tmp_path / edited.path
    text = path.read_text()
    assert '"final": 0.5' in text
    path.write_text(text.replace('"final": 0.5', '"final": 0.95'))  # valid JSON, a better number
    kept = path.read_bytes()

    states = suite_status(PARAMS, tmp_path)
    assert [(state.state, state.reason) for state in states[:2]] == [
        ("edited", "edited after its training job wrote it: its digest does not match its contents"),
        ("current", ""),
    ]
    report = format_status(PARAMS, states)
    assert report.splitlines()[0] == "suite st: 4 cells: 1 current, 1 edited, 0 stale, 0 failed, 2 missing"
    assert f"  edited   {edited.path}  edited after its training job wrote it" in report
    # the plan reruns it (a new rerun marker, an input of its training job), keeping the file until then
    changes = heal_workspace(PARAMS, [], tmp_path)
    assert f"{edited.path}: reruns (edited after its training job wrote it" in changes[0]
    assert (tmp_path / rerun_marker(edited)).is_file() and not (tmp_path / rerun_marker(current)).exists()
    assert path.read_bytes() == kept


def test_a_cell_written_before_digests_is_current_and_counted_as_unsealed(tmp_path):
    old, _, _, _ = PARAMS.cells()
    _write(tmp_path, old, sealed=False)
    state = cell_state(old, tmp_path)
    assert (state.state, state.reason) == ("current", UNSEALED)
    assert f"  1 current cells are {UNSEALED}" in format_status(PARAMS, [state])
    heal_workspace(PARAMS, [], tmp_path)
    assert not (tmp_path / rerun_marker(old)).exists()  # not rerun for the digest it lacks


def test_one_cell_in_full_by_its_job_name_or_its_path(tmp_path, monkeypatch, capsys):
    """`fdabench status CELL`: the state, files, resolved configuration and code fingerprint of one cell, which the
    console of a run names but never prints."""
    from fdabench.cell.plugin_scope import cell_code
    from fdabench.cli import main

    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text(json.dumps(PARAMS.raw))
    stale = PARAMS.cell("digits", "fedgp", "+90", 0)
    _write(tmp_path, stale, config={**stale.config, "hparams": {**stale.config["hparams"], "beta": 0.25}})
    assert main(["status", "st/digits/fedgp/+90/seed0"]) == 0
    shown = capsys.readouterr().out
    lines = shown.splitlines()
    assert lines[0] == "st/digits/fedgp/+90/seed0: stale  configuration changed: hparams"
    assert lines[1:4] == [
        "  result: results/cells/st/digits/fedgp/+90/seed0.json",
        "  plan:   .snakemake/fdabench-cells/st/digits/fedgp/+90/seed0.json",
        "  log:    results/logs/cells/st/digits/fedgp/+90/seed0.log",
    ]
    configuration = shown[shown.index("configuration:\n") + len("configuration:\n") : shown.index("code fingerprint:")]
    assert json.loads(configuration) == stale.config  # as params.yaml gives it now, not as the stale file says
    code = cell_code(stale.config).to_json()
    assert f"code fingerprint: {code['fingerprint']}" in lines
    assert f"  fdabench.methods.fda {code['modules']['fdabench.methods.fda']}" in lines

    assert main(["status", "--check", "results/cells/st/digits/source_only/-90/seed0.json"]) == 1  # missing
    assert capsys.readouterr().out.startswith("st/digits/source_only/-90/seed0: missing\n")
    for name, message in [
        ("digits/fedgp/+90/seed3", "suite st has no such cell"),
        ("digits/fedgp/+90", "names no cell"),
        ("other/digits/fedgp/+90/seed0", "suite: 'other' is not defined"),
    ]:
        assert main(["status", name]) == 2
        assert message in capsys.readouterr().err, name


def test_a_group_jobs_failure_and_its_kept_cells(tmp_path):
    """With `cells_per_job: targets` a job trains a cell's targets together: a cell without a result and without an
    error of its own reads the group job's log, where only a group-wide error or its own counts (another target's
    error is that target's); a cell that finished in a group that failed is kept beside its output."""
    source_minus, source_plus, _, _ = PARAMS.cells()  # source_only, targets -90 and +90, seed 0: one group
    group = "results/logs/groups/st/digits/source_only/seed0.log"
    assert source_minus.group_log_path == source_plus.group_log_path == group
    group_log = tmp_path / source_minus.group_log_path
    group_log.parent.mkdir(parents=True, exist_ok=True)
    group_log.write_text(f"fdabench: {source_plus.path}: partition p.json is for target -90 seed 0, not this cell\n")
    assert cell_state(source_minus, tmp_path).state == "missing"  # another target's error
    state = cell_state(source_plus, tmp_path)
    assert state.state == "failed" and state.reason.startswith(f"fdabench: {source_plus.path}: partition")
    assert state.reason.endswith(f"(log: {group_log})")

    group_log.write_text("fdabench: data/prepared/colored_digits/x: no such folder; run the prepare job first\n")
    assert cell_state(source_minus, tmp_path).state == "failed"  # a group-wide error is every cell's

    kept = kept_path(tmp_path / source_minus.path)
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text("{}")
    assert cell_state(source_minus, tmp_path).reason == (
        "finished in a group job that did not; put back when its group reruns"
    )
