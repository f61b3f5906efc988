"""Nothing accepted silently: input that fdabench used to accept while it meant something other than what was
written is refused with a message naming it (and the nearest valid names), or healed. One test per class: YAML
that loses what was written, names that do not exist, settings that contradict each other, files of the wrong
kind, outputs that would overwrite inputs, plugins that change shipped code, late checks, equivalent paths, state
that can never heal. (The pipeline's side, a table target with a deleted cell, is in
tests/workflow/test_missing_results.py.)"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import time
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import yaml

from fdabench.cell import plugin_fingerprint, plugin_scope
from fdabench.cell.fingerprint import code_fingerprint
from fdabench.cell.result import cell_result
from fdabench.cli import main
from fdabench.config import ParamsError, load_params, validate_params
from fdabench.core import formats, paths, plugins
from fdabench.jobs.heal import heal_cell
from fdabench.jobs.status import cell_state
from fdabench.jobs.validation import validated_params

REPO = Path(__file__).resolve().parents[2]
SHIPPED = yaml.safe_load((REPO / "params.yaml").read_text())


def _refused(edit) -> str:
    raw = copy.deepcopy(SHIPPED)
    edit(raw)
    with pytest.raises(ParamsError) as caught:
        validated_params(raw)  # as every command validates (an experiment's `published:` key included)
    return str(caught.value)


def _demo(raw):
    return raw["suites"]["demo"]


def _colored(raw):
    return _demo(raw)["experiments"]["colored_digits"]


def _cli(arguments: list[str]) -> str:
    """A command that must fail with one line on stderr and exit status 2; that line."""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        code = main(arguments)
    text = stderr.getvalue()
    assert code == 2 and "Traceback" not in text and len(text.strip().splitlines()) == 1, (code, text)
    return text.strip()


# -- YAML that loads but loses what was written -----------------------------------------------------------------


def test_a_repeated_key_is_refused_with_both_line_numbers(tmp_path):
    text = (REPO / "params.yaml").read_text()
    (tmp_path / "params.yaml").write_text(text + "suite: smoke\n")  # plain YAML would keep the last value
    with pytest.raises(ParamsError, match=r"line \d+ repeats key 'suite' of the mapping that gives it at line 7"):
        load_params(tmp_path / "params.yaml")
    nested = "suite: s\nsuites:\n  s:\n    train:\n      rounds: 5\n      rounds: 50\n"
    (tmp_path / "nested.yaml").write_text(nested)
    assert "line 6 repeats key 'rounds' of the mapping that gives it at line 5" in _cli(
        ["validate", "--params", str(tmp_path / "nested.yaml")]
    )
    merged = "base: &base {a: 1, b: 2}\nover:\n  <<: *base\n  a: 3\n"  # a merge key is overridden on purpose
    from fdabench.core.strict_yaml import load_yaml_text

    assert load_yaml_text(merged, "m.yaml")["over"] == {"a": 3, "b": 2}


def test_nested_aliases_are_refused_at_once(tmp_path):
    levels = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"l{k}: &l{k} [{', '.join([f'*l{k - 1}'] * 10)}]" for k in range(1, 9)]  # 10^9 values expanded
    (tmp_path / "params.yaml").write_text("\n".join(levels) + "\n")
    started = time.perf_counter()
    message = _cli(["validate", "--params", str(tmp_path / "params.yaml")])
    assert time.perf_counter() - started < 10 and "aliases expand the document beyond 100000 values" in message


# -- names that do not exist -------------------------------------------------------------------------------------


def test_an_override_for_a_target_no_experiment_has_is_refused():
    def per_target(raw):
        raw["methods"]["fedgp_b0.2"] = {"algorithm": "fedgp", "beta": 0.2, "by_target": {"-9": {"beta": 0.3}}}
        _colored(raw)["methods"] = ["source_only", "fedgp_b0.2"]

    message = _refused(per_target)
    assert "methods.fedgp_b0.2.by_target.-9: no experiment that runs 'fedgp_b0.2' has target '-9'" in message
    assert "did you mean '-90'" in message
    message = _refused(lambda raw: _colored(raw).update(partition={"target_labelled_overrides": {"+8": 10}}))
    assert "partition.target_labelled_overrides.+8: '+8' is not a target of this experiment" in message
    assert "did you mean '+80'" in message


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda r: _demo(r)["tables"]["table1"].update(experiments=["colored_digit"]), "did you mean 'colored_digits'"),
        (lambda r: _demo(r)["methods"].append("fedgpp"), "did you mean 'fedgp'"),
        (lambda r: _colored(r).update(methods=["source_onyl"]), "did you mean 'source_only'"),
        (lambda r: r.update(suite="dmeo"), "did you mean 'demo'"),
        (lambda r: _colored(r).update(dataset="colored_digit"), "did you mean 'colored_digits'"),
        (lambda r: _colored(r).update(targets=["+9O"]), "did you mean '+90'"),
        (lambda r: _demo(r).setdefault("train", {}).update(rouds=5), "did you mean 'rounds'"),
        (lambda r: _colored(r).update(method_options={"fedgpp": {"beta": 0.1}}), "did you mean 'fedgp'"),
        (lambda r: _colored(r).update(published="colored_mnist_bta"), "did you mean 'colored_mnist_beta'"),
    ],
    ids=[
        "table experiment",
        "suite method",
        "experiment method",
        "suite",
        "dataset",
        "target",
        "key",
        "option",
        "published",
    ],  # fmt: skip
)
def test_an_unknown_name_gets_the_nearest_valid_names(edit, expected):
    assert expected in _refused(edit)


# -- settings that contradict each other ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda r: _colored(r).update(train={"rounds": 4, "final_rounds": 6}),
            r"colored_digits\.train\.final_rounds: 6 is more than the run's 4 rounds .*set final_rounds at most 4",
        ),
        (
            lambda r: _colored(r).update(train={"optimizer": "adam", "momentum": 0.9}),
            r"colored_digits\.train\.momentum: 0\.9 is SGD's momentum, and optimizer is adam",
        ),
        (
            lambda r: _colored(r).update(train={"target_batch_size": 64}),
            r"colored_digits\.train\.target_batch_size: 64 is more than target '\+90''s 48 labelled samples",
        ),
    ],
    ids=["final_rounds > rounds", "momentum with adam", "target batch > labelled"],
)
def test_settings_that_contradict_each_other_are_refused(edit, expected):
    assert __import__("re").search(expected, _refused(edit))


def test_the_default_final_rounds_is_not_a_contradiction():
    raw = copy.deepcopy(SHIPPED)
    _colored(raw)["train"] = {"rounds": 3}  # the default final_rounds (5) averages every round of a short run
    assert validate_params(raw).train_settings("colored_digits")["final_rounds"] == 5


# -- files of the wrong kind -------------------------------------------------------------------------------------


def _files(tmp: Path) -> dict[str, Path]:
    """A cell, a partition, a table's metrics and a theory-check record, as fdabench writes them."""
    written = {
        "cell.json": {"format": formats.CELL, "status": "complete", "final": 0.5, "cell": {}, "config": {}},
        "partition.json": {"format": formats.PARTITION, "dataset": "d", "target": "a", "seed": 0, "clients": []},
        "old_partition.json": {"dataset": "d", "target": "a", "seed": 0, "clients": [], "content_hash": "x"},
        "table.json": {"digits": {"fedgp": {"+90": {"mean": 0.5, "std": 0.1, "n_seeds": 2}}}},
        "initial.json": {"format": formats.THEORY_INIT, "target": "s0-n14", "seed": 0, "d2": 1.0, "sigma2": 1.0},
    }
    for name, payload in written.items():
        (tmp / name).write_text(json.dumps(payload))
    return {name: tmp / name for name in written}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            lambda f, t: ["table", f["partition.json"]],
            r"partition\.json is a partition, not a cell result; pass a cell",
        ),
        (lambda f, t: ["table", f["table.json"]], r"table\.json is a table's metrics, not a cell result"),
        (
            lambda f, t: ["compare", f["old_partition.json"], "--csv", t / "a.csv", "--md", t / "a.md"],
            r"old_partition\.json is a partition, not a cell result",
        ),
        (lambda f, t: ["figure", "rounds", f["initial.json"], "--output", t / "f.png"], r"theory check's initial"),
        (
            lambda f, t: ["metrics", f["cell.json"], "--output", t / "m.json"],
            r"cell\.json is a cell result, not a table",
        ),
        (
            lambda f, t: [
                "theory",
                "report",
                "--initial",
                f["cell.json"],
                "--cells",
                f["cell.json"],
                "--roles",
                "{}",
                "--csv",
                t / "a.csv",
                "--md",
                t / "a.md",
                "--png",
                t / "a.png",
            ],  # fmt: skip
            r"cell\.json is a cell result, not a theory check's initial quantities",
        ),
    ],
    ids=["table: partition", "table: table", "compare: old partition", "figure: theory", "metrics: cell", "theory"],
)
def test_a_command_given_another_kind_of_file_refuses_it_by_name(tmp_path, arguments, expected):
    files = _files(tmp_path)
    message = _cli([str(argument) for argument in arguments(files, tmp_path)])
    assert __import__("re").search(expected, message), message


def test_train_refuses_another_kind_of_file_before_anything_else(tmp_path, monkeypatch):
    files = _files(tmp_path)
    config = load_params(REPO / "params.yaml").cell("colored_digits", "fedgp", "+90", 0).config
    (tmp_path / "prepared").mkdir()
    (tmp_path / "prepared/header.json").write_text(
        json.dumps({"name": "d", "task": "t", "domains": [], "input_shape": []})
    )
    train = ["train", "--cell", json.dumps(config), "--output", str(tmp_path / "out.json")]
    prepared = ["--prepared", str(tmp_path / "prepared")]
    message = _cli([*train, *prepared, "--partition", str(files["cell.json"])])
    assert "cell.json is a cell result, not a partition; pass a partition (fdabench partition" in message
    message = _cli([*train, "--prepared", str(files["partition.json"]), "--partition", str(files["partition.json"])])
    assert "--prepared" in message and "is a partition, not a prepared data directory" in message
    result = json.loads(files["cell.json"].read_text())
    message = _cli(["train", "--cell", json.dumps(result), *prepared, "--partition", "p", "--output", "o"])
    assert "--cell is a file's contents (format 'fdabench.cell/1'), not a resolved cell configuration" in message


# -- outputs that would overwrite inputs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        lambda c, t: ["compare", c, "--csv", c, "--md", t / "a.md"],
        lambda c, t: ["table", c, "--md", t / "x" / ".." / c.name],  # another spelling of the same file
        lambda c, t: ["table", c, "--csv", t / "a.csv", "--md", t / "a.csv"],  # two outputs, one file
        lambda c, t: ["figure", "final", c, "--output", t / "link.json"],  # a link to the cell
        lambda c, t: ["cells-table", c, "--html", c],
        lambda c, t: ["plots", c, "--rounds", t, "--betas", t / "betas"],  # a folder replaced as a whole
        lambda c, t: ["export", "tensorboard", c, "--logdir", t],
        lambda c, t: ["metrics", t / "table.json", "--output", t / "table.json"],
    ],
    ids=[
        "compare --csv",
        "table --md (spelled otherwise)",
        "two outputs",
        "figure (a link)",
        "cells-table",
        "plots",
        "export tensorboard",
        "metrics",
    ],  # fmt: skip
)
def test_no_output_may_overwrite_an_input(tmp_path, monkeypatch, arguments):
    cell = _files(tmp_path)["cell.json"]
    (tmp_path / "x").mkdir()
    (tmp_path / "link.json").symlink_to(cell)
    monkeypatch.chdir(tmp_path)
    before = {path: path.read_bytes() for path in tmp_path.glob("*.json")}
    message = _cli([str(argument) for argument in arguments(cell, tmp_path)])
    assert (
        "would overwrite the input" in message or "are the same file" in message or "sweep" in arguments(cell, tmp_path)
    )
    assert {path: path.read_bytes() for path in tmp_path.glob("*.json")} == before


def test_sweep_refuses_a_cell_among_its_outputs_with_the_shared_check(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    output = Path(paths.sweep_outputs("s", ["last"])[0])
    output.parent.mkdir(parents=True)
    output.write_text(json.dumps({"format": formats.CELL}))
    message = _cli(["sweep", str(output), "--suite", "s", "--rules", "last"])
    assert f"{output} would overwrite the input {output}" in message


def test_train_output_that_is_a_partition_or_a_directory_is_refused_before_training(tmp_path, monkeypatch):
    import fdabench.cell.run

    monkeypatch.setattr(fdabench.cell.run, "run_cell", lambda *a, **k: pytest.fail("trained"))
    config = load_params(REPO / "params.yaml").cell("colored_digits", "fedgp", "+90", 0).config
    files = _files(tmp_path)
    (tmp_path / "prepared").mkdir()
    (tmp_path / "prepared/header.json").write_text(
        json.dumps({"name": "d", "task": "t", "domains": [], "input_shape": []})
    )
    train = ["train", "--cell", json.dumps(config), "--prepared", str(tmp_path / "prepared")]
    partition = str(files["partition.json"])
    assert "would overwrite the input" in _cli([*train, "--partition", partition, "--output", partition])
    (tmp_path / "existing").mkdir()
    message = _cli([*train, "--partition", partition, "--output", str(tmp_path / "existing")])
    assert "existing: it is a directory; pass a file path" in message and "Nothing was run" in message


# -- plugins that change shipped code ----------------------------------------------------------------------------


def test_a_loaded_plugin_is_recorded_and_stales_only_the_cells_it_changes(tmp_path, monkeypatch):
    config = load_params(REPO / "params.yaml").cell("colored_digits", "fedgp", "+90", 0).config
    shipped = plugin_fingerprint.cell_code(config)
    module = tmp_path / "patcher.py"  # a plugin's module: plugin_fingerprint.cell_code takes it into every cell

    def installed(text: str) -> plugin_fingerprint.CodeFingerprint:
        module.write_text(text)
        monkeypatch.setattr(plugin_fingerprint, "plugin_distributions", lambda: {"patcher": ("1.0", [module])})
        plugin_fingerprint._distributions.cache_clear()
        plugin_fingerprint.fingerprint._module_hash.cache_clear()
        return plugin_fingerprint.cell_code(config)

    try:
        first = installed("SCALE = 1.0\n")
        assert first.digest != shipped.digest and set(first.modules) - set(shipped.modules) == {"plugin:patcher"}
        assert installed('"""A docstring."""\nSCALE = 1.0\n').digest == first.digest  # a comment reruns nothing
        assert installed("SCALE = 2.0\n").digest != first.digest  # a change to the plugin reruns every cell
        assert plugin_fingerprint.loaded_distributions() == [
            {"name": "patcher", "version": "1.0", "hash": plugin_fingerprint._distributions()[0][2]}
        ]
        # the same module installed through an entry point (the patch of plugin_fingerprint above undone: it would
        # count as a change to shipped code): a cell run without it stays current, as it neither serves the cell nor
        # changed what it runs (fdabench.cell.plugin_scope; tests/cell/test_plugin_scope.py: one that does stales them)
        monkeypatch.undo()
        monkeypatch.syspath_prepend(str(tmp_path))
        point = EntryPoint("patcher", "patcher:SCALE", "fdabench.methods")
        monkeypatch.setattr(plugins, "entry_points", lambda group: [point] if group == point.group else [])
        plugin_scope._distribution_files.cache_clear()
        plugin_scope._patches.cache_clear()
        assert plugin_scope._distribution_files() == {"patcher": frozenset([module.resolve()])}
        root = tmp_path / "work"
        cell = next(load_params(REPO / "params.yaml").cells())
        result = root / cell.path
        result.parent.mkdir(parents=True)
        recorded = {"format": formats.CELL, "status": "complete", "config": cell.config, "plugins": []}
        recorded["code"] = code_fingerprint(plugin_fingerprint.fingerprint.cell_roots(cell.config)).to_json()
        result.write_text(json.dumps(recorded))
        assert cell_state(cell, root).state == "current"
    finally:
        monkeypatch.undo()
        plugin_fingerprint._distributions.cache_clear()
        plugin_scope._distribution_files.cache_clear()
        plugin_scope._patches.cache_clear()
    history = {"rounds": [{"round": 0, "accuracy": 1.0, "bytes_uplink": 1, "bytes_downlink": 1}], "metric": "accuracy",
               "model_size": 1}  # fmt: skip
    ran_with = [{"name": "patcher", "version": "1.0", "hash": "abc"}]
    assert cell_result(config, history, 1, {"plugins": ran_with})["plugins"] == ran_with


# -- equivalent paths, state that can never heal -----------------------------------------------------------------


def test_equivalent_spellings_of_the_data_root_are_the_same_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spellings = ["data", "./data/", str(tmp_path / "data"), "data//x/../"]
    found = {
        load_params(REPO / "params.yaml", {"data": {"root": root}}).prepared_path("colored_digits")
        for root in spellings
    }
    assert len(found) == 1 and next(iter(found)).startswith("data/prepared/")
    assert load_params(REPO / "params.yaml", {"data": {"root": "/elsewhere/d/"}}).data_root == "/elsewhere/d"


def test_a_directory_where_a_cell_file_belongs_is_reported_and_moved_aside(tmp_path):
    cell = next(load_params(REPO / "params.yaml").cells())
    result = tmp_path / cell.path
    (result / "inside").mkdir(parents=True)
    assert "a directory is where the cell file belongs" in cell_state(cell, tmp_path).reason
    marker = tmp_path / "marker"
    line = heal_cell(result, marker, cell.config, lambda: {}, cell.path)
    assert line.startswith(f"{cell.path}: was a directory") and "moved aside to" in line
    aside = [path for path in result.parent.iterdir() if path.name.startswith(f".{result.name}.directory-")]
    assert not result.exists() and len(aside) == 1 and (aside[0] / "inside").is_dir()  # nothing deleted
    assert marker.is_file() and heal_cell(result, marker, cell.config, lambda: {}, cell.path) is None  # once
    assert cell_state(cell, tmp_path).state == "missing" and not os.path.exists(result)
