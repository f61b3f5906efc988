"""`device` in a cell's identity (fdabench.core.device_identity): a new setting reruns a cell only where the cell did
not run on what the setting asks for, in `fdabench status`, in the heal, in the archive and in Snakemake's plan."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from fdabench.cell.fingerprint import cell_fingerprint
from fdabench.config import validate_params
from fdabench.core.device_identity import changed_settings, planned_config, ran_as
from fdabench.core.io import canonical_json
from fdabench.jobs.status import suite_status
from fdabench.reproduction.archive import record_state

PARAMS = {
    "suite": "dev",
    "suites": {
        "dev": {
            "seeds": [0],
            "methods": ["source_only"],
            "experiments": {"digits": {"dataset": "colored_digits", "targets": ["-90", "+90"]}},
        }
    },
}


def _params(device: str):
    return validate_params({**copy.deepcopy(PARAMS), "device": device})


@pytest.mark.parametrize(
    ("setting", "ran_on", "same"),
    [
        ("auto", "cuda:0", True),
        ("auto", "cpu", True),
        ("cuda", "cuda:0", True),
        ("cuda", "cuda:3", True),
        ("cuda", "cpu", False),
        ("cpu", "cpu", True),
        ("cpu", "cuda:0", False),
        ("cuda", None, False),  # a cell that recorded no device
    ],
)
def test_a_setting_takes_the_cells_that_ran_on_what_it_asks_for(setting, ran_on, same):
    assert ran_as(setting, ran_on) is same


def test_only_the_device_is_excused_and_only_where_the_cell_ran_as_asked():
    recorded = {"device": "auto", "seed": 0}
    assert changed_settings(recorded, "cuda:0", {"device": "cuda", "seed": 0}) == []
    assert changed_settings(recorded, "cpu", {"device": "cuda", "seed": 0}) == ["device"]
    assert changed_settings(recorded, "cuda:0", {"device": "cuda", "seed": 1}) == ["seed"]
    assert changed_settings({"device": "cuda", "seed": 0}, "cuda:0", {"device": "auto", "seed": 0}) == []


def _finished(root: Path, params, ran_on: str) -> None:
    for cell in params.cells():
        path = root / cell.path
        path.parent.mkdir(parents=True, exist_ok=True)
        result = {"format": "fdabench.cell/1", "status": "complete", "config": cell.config, "device": ran_on}
        result["code"] = cell_fingerprint(cell.config).to_json()
        path.write_text(json.dumps(result))


def test_auto_cells_that_ran_on_a_gpu_stay_current_under_cuda_and_those_on_the_cpu_do_not(tmp_path):
    _finished(tmp_path / "gpu", _params("auto"), "cuda:0")
    _finished(tmp_path / "cpu", _params("auto"), "cpu")
    assert {state.state for state in suite_status(_params("cuda"), tmp_path / "gpu")} == {"current"}
    assert [(state.state, state.reason) for state in suite_status(_params("cuda"), tmp_path / "cpu")] == [
        ("stale", "configuration changed: device")
    ] * 2
    assert {state.state for state in suite_status(_params("cpu"), tmp_path / "cpu")} == {"current"}
    assert {state.state for state in suite_status(_params("cpu"), tmp_path / "gpu")} == {"stale"}


def test_the_archive_judges_a_record_by_the_same_rule():
    config = next(_params("auto").cells()).config
    code = {"fingerprint": "f", "modules": {"fdabench.cell.run": "r"}}
    record = {"config": config, "device": "cuda:0", "code": code}
    cuda = next(_params("cuda").cells()).config
    assert record_state(record, cuda, code) == ("current", "")
    assert record_state({**record, "device": "cpu"}, cuda, code) == ("config changed", "configuration changed: device")


def test_snakemakes_parameter_is_the_same_for_every_setting():
    """The train rule's configuration parameter (what Snakemake reruns a job for) does not move with the setting, and
    for `auto`, the default and the archives' setting, it is the configuration itself (no finished cell reruns)."""
    planned = {
        device: canonical_json(planned_config(next(_params(device).cells()).config))
        for device in ("auto", "cuda", "cpu")
    }
    assert len(set(planned.values())) == 1
    assert planned["auto"] == canonical_json(next(_params("auto").cells()).config)
