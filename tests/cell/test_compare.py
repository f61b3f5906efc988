"""Comparing the cells of two runs: equal up to timings, code fingerprints and digests, any other change found."""

import copy
import json

from fdabench.cell.compare import cell_differences, comparable, compare_cell_folders
from fdabench.cell.digest import seal


def _cell():
    return {
        "format": "fdabench.cell/1",
        "cell": {"method": "fedgp", "target": "+90", "seed": 0},
        "final": 0.94,
        "rounds": [{"round": 0, "accuracy": 0.5, "seconds": 0.1}, {"round": 1, "accuracy": 0.9, "seconds": 0.2}],
        "wall_seconds": 6.7,
        "train_seconds": 5.6,
        "train_cpu_seconds": 1.3,
        "code": {"fingerprint": "be62e61cdb426249", "modules": {"fdabench.runner": "558be9b1dce12013"}},
        "versions": {"torch": "2.15.0"},
    }


def test_timings_and_code_fingerprints_are_no_difference():
    before, after = _cell(), _cell()
    after.update(wall_seconds=1.0, train_seconds=0.5, train_cpu_seconds=0.4, code={"fingerprint": "x", "modules": {}})
    after["rounds"][1]["seconds"] = 9.0
    assert cell_differences(before, after) == []
    # nor the digests of two equal runs, which hash their timings
    before, after = seal(before), seal(after)
    assert before["digest"] != after["digest"] and cell_differences(before, after) == []
    assert "seconds" not in comparable(before)["rounds"][0] and "code" not in comparable(before)
    assert before["rounds"][0]["seconds"] == 0.1  # the cell itself is left as it was


def test_any_other_change_is_named():
    before = _cell()
    for change, expected in (
        (lambda c: c["rounds"][1].update(accuracy=0.91), ".rounds[1].accuracy"),
        (lambda c: c.update(final=0.95), ".final"),
        (lambda c: c["versions"].update(torch="2.16.0"), ".versions.torch"),
        (lambda c: c["rounds"].pop(), ".rounds"),
        (lambda c: c.pop("cell"), ".cell: only before"),
    ):
        after = copy.deepcopy(before)
        change(after)
        differences = cell_differences(before, after)
        assert len(differences) == 1 and differences[0].startswith(expected), differences


def test_folders_compare_cell_by_cell(tmp_path):
    for side in ("before", "after"):
        for name in ("a/+90/seed0.json", "a/+90/seed1.json"):
            (tmp_path / side / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / side / name).write_text(json.dumps(_cell()))
    assert compare_cell_folders(tmp_path / "before", tmp_path / "after") == {}
    changed = _cell()
    changed["final"] = 0.5
    (tmp_path / "after/a/+90/seed1.json").write_text(json.dumps(changed))
    (tmp_path / "before/a/+90/seed2.json").write_text(json.dumps(_cell()))
    found = compare_cell_folders(tmp_path / "before", tmp_path / "after")
    assert set(found) == {"a/+90/seed1.json", "a/+90/seed2.json"}
    assert found["a/+90/seed2.json"] == ["only in before"]
    assert set(compare_cell_folders(tmp_path / "before", tmp_path / "after", missing_ok=True)) == {"a/+90/seed1.json"}
