"""Suites that extend another (fdabench.config.extends): only what differs is written, the rest is the
parent's; the suite has its own folders; `fdabench validate/cells/status --with FILE --suite NAME`."""

import copy

import pytest
import yaml

from fdabench import cli
from fdabench.config import ParamsError, load_params, validate_params
from fdabench.config.extends import expand_suites

NARROWED = {
    "extends": "demo",
    "seeds": [0, 1],
    "methods": ["source_only", "fedgp"],
    "train": {"rounds": 8},
    "experiments": {"colored_digits": {"targets": ["-90"]}},
}


@pytest.fixture(scope="module")
def raw(repo_root):
    return yaml.safe_load((repo_root / "params.yaml").read_text())


def _with_suite(raw, suite, name="mine"):
    changed = copy.deepcopy(raw)
    changed["suites"][name] = suite
    return {**changed, "suite": name}


def test_extending_suite_keeps_the_parents_settings_and_narrows_its_experiments(raw):
    params = validate_params(_with_suite(raw, NARROWED))
    assert params.experiment_names() == ["colored_digits"]
    cells = list(params.cells())
    assert len(cells) == 2 * 2  # one target, two methods, two seeds
    assert {str(cell.path).split("/")[2] for cell in cells} == {"mine"}  # results/cells/mine/...
    config = cells[0].config
    assert config["train"]["rounds"] == 8 and config["train"]["model_options"] == {"hidden": [128]}  # demo's model
    assert params.experiment("colored_digits")["partition"] == {"holdout_fraction": 0.2, "target_labelled": 48}
    assert list(params.tables()) == ["table1"] and params.tables()["table1"]["experiments"] == ["colored_digits"]


def test_cells_of_an_unchanged_experiment_equal_the_parents(raw):
    """Extending without changing anything but the experiment list: the same cells, in another folder."""
    parent = validate_params(raw)
    child = validate_params(_with_suite(raw, {"extends": "demo", "experiments": {"colored_digits": {}}}))
    strip = lambda config: {key: value for key, value in config.items() if key != "suite"}
    child_cells = list(child.cells())
    assert len(child_cells) == len(list(parent.cells(["colored_digits"]))) > 0
    for cell in child_cells:
        config = cell.config
        parent_cell = parent.cell("colored_digits", config["method"], config["target"], config["seed"])
        assert strip(config) == strip(parent_cell.config) and cell.path != parent_cell.path


def test_child_tables_merge_over_the_parents_and_lists_replace(raw):
    suite = {**NARROWED, "tables": {"table1": {"title": "mine"}}, "seeds": [3]}
    params = validate_params(_with_suite(raw, suite))
    assert params.tables()["table1"] == {"title": "mine", "experiments": ["colored_digits"]}
    assert {cell.config["seed"] for cell in params.cells()} == {3}


def test_a_suite_extending_an_extending_suite(raw):
    changed = _with_suite(raw, NARROWED)
    changed["suites"]["mine2"] = {"extends": "mine", "methods": ["fedda"]}
    params = validate_params({**changed, "suite": "mine2"})
    assert {cell.config["method"] for cell in params.cells()} == {"fedda"}
    assert {cell.config["target"] for cell in params.cells()} == {"-90"}


def test_unknown_parent_and_cycles_are_errors(raw):
    with pytest.raises(ParamsError, match=r"suites\.mine\.extends: unknown suite 'dem'; allowed values: "):
        validate_params(_with_suite(raw, {**NARROWED, "extends": "dem"}))
    cyclic = _with_suite(raw, {**NARROWED, "extends": "other"})
    cyclic["suites"]["other"] = {"extends": "mine"}
    with pytest.raises(ParamsError, match=r"cycle \(mine -> other -> mine\)"):
        validate_params(cyclic)


def test_mistakes_in_what_differs_are_reported_at_their_key(raw):
    with pytest.raises(ParamsError, match=r"suites\.mine\.methods\[1\]: unknown method 'fedgpp'"):
        validate_params(_with_suite(raw, {**NARROWED, "methods": ["fedgp", "fedgpp"]}))
    with pytest.raises(ParamsError, match=r"colored_digits\.targets\[0\]"):
        validate_params(_with_suite(raw, {**NARROWED, "experiments": {"colored_digits": {"targets": ["-91"]}}}))


def test_params_without_extends_are_left_as_they_are(raw):
    assert expand_suites(raw) is raw


def test_status_of_a_suite_in_a_file_of_its_own(tmp_path, repo_root, capsys, monkeypatch):
    suite_file = tmp_path / "mine.yaml"
    suite_file.write_text(yaml.safe_dump({"suites": {"mine": NARROWED}}))
    monkeypatch.chdir(tmp_path)
    params = ["--params", str(repo_root / "params.yaml"), "--with", str(suite_file), "--suite", "mine"]
    assert cli.main(["status", *params, "--check"]) == 1
    shown = capsys.readouterr().out
    assert "suite mine: 4 cells: 0 current, 0 edited, 0 stale, 0 failed, 4 missing" in shown
    assert "results/cells/mine/colored_digits/fedgp/-90/seed1.json" in shown
    assert load_params(repo_root / "params.yaml", layers=[suite_file]).suite_name == "demo"
