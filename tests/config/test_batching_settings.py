"""The `batching` train setting in params.yaml: unset means off (so it leaves every existing cell's configuration as it
was), and the combinations a stacked cell cannot honour are refused before any job."""

import copy

import yaml

from fdabench.config import validate_params
from workflows import params_refusal


def _demo(**train):
    with open("params.yaml") as handle:
        raw = yaml.safe_load(handle)
    raw = copy.deepcopy(raw)
    raw["suites"]["demo"]["train"].update(train)
    return raw


def test_unset_batching_is_absent_from_a_cells_configuration(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    params = validate_params(_demo()).for_suite("demo")
    assert "batching" not in params.cell("rotated_digits", "fedgp", "0", 0).config["train"]
    stacked = validate_params(_demo(batching="stacked")).for_suite("demo")
    assert stacked.cell("rotated_digits", "fedgp", "0", 0).config["train"]["batching"] == "stacked"


def test_a_stacked_cell_refuses_what_it_cannot_honour(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    assert "cohort: on would be ignored" in params_refusal(_demo(batching="stacked", cohort="on"))
    raw = {**_demo(batching="stacked"), "device": "cpu", "threads_per_cell": 2}
    assert "computes on one CPU thread" in params_refusal(raw)
    assert "'vmap' is not allowed; allowed values: off, stacked" in params_refusal(_demo(batching="vmap"))
