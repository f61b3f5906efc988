"""What reads finished cells (tables, figures, comparisons, archive add: `fdabench.cell.reading`) refuses a cell
edited after its training job wrote it, by name, and counts cells, not paths: the same cell given twice, at one path
or two, is refused. Nothing is written when a cell is refused."""

import json
import shutil
from pathlib import Path

import pytest

from fdabench.cell.digest import seal
from fdabench.cell.reading import DuplicateCellError, EditedCellError, read_cells
from fdabench.cli import main


def _cell(method: str, target: str, seed: int, final: float) -> dict:
    identity = {"suite": "s", "experiment": "exp", "dataset": "d", "method": method, "algorithm": method}
    identity |= {"target": target, "seed": seed}
    return {
        "format": "fdabench.cell/1",
        "status": "complete",
        "cell": identity,
        "config": {**identity, "train": {"rounds": 2}},
        "metric": "accuracy",
        "higher_is_better": True,
        "final": final,
        "finals": {"accuracy": final},
        "final_rounds": 1,
        "rounds": [{"round": 0, "phase": "fda", "accuracy": final}],
        "code": {"fingerprint": "f" * 64, "modules": {}},
        "versions": {"fdabench": "0.1.0"},
    }


@pytest.fixture
def cells(tmp_path) -> list[Path]:
    """Four sealed cells (two methods, two seeds), as the training job writes them."""
    paths = []
    for method in ("fedgp", "source_only"):
        for seed in (0, 1):
            path = tmp_path / "cells" / method / f"seed{seed}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(seal(_cell(method, "a", seed, 0.5 + seed / 10)), indent=1))
            paths.append(path)
    return paths


def _edit_final(path: Path, final: float) -> None:
    cell = json.loads(path.read_text())
    cell["final"] = final
    path.write_text(json.dumps(cell, indent=1))  # valid JSON, its digest left as it was


def _fails(args: list, capsys) -> str:
    assert main([str(arg) for arg in args]) == 2
    return capsys.readouterr().err


def test_an_edited_cell_is_refused_by_name_and_nothing_is_written(cells, tmp_path, capsys):
    table = tmp_path / "table.csv"
    assert main(["table", *map(str, cells), "--csv", str(table)]) == 0  # unedited, they tabulate
    table.unlink()
    _edit_final(cells[1], 0.99)
    with pytest.raises(EditedCellError, match=f"^{cells[1]}: edited after it was written"):
        read_cells(cells)
    said = _fails(["table", *cells, "--csv", table], capsys)
    assert f"{cells[1]} was edited after its training job wrote it" in said and not table.exists()
    archive = tmp_path / "archive.jsonl.gz"
    said = _fails(["archive", "add", *cells, "--archive", archive, "--any-versions"], capsys)
    assert f"{cells[1]}: edited after it was written" in said and "nothing was added" in said
    assert not archive.exists()
    said = _fails(["compare", *cells, "--csv", tmp_path / "c.csv", "--md", tmp_path / "c.md"], capsys)
    assert f"{cells[1]}: edited after it was written" in said and not (tmp_path / "c.csv").exists()
    said = _fails(["figure", "final", *cells, "--output", tmp_path / "f.png"], capsys)
    assert f"{cells[1]}: edited after it was written" in said and not (tmp_path / "f.png").exists()


def test_the_same_cell_at_two_paths_is_refused_by_a_table(cells, tmp_path, capsys):
    copy = tmp_path / "elsewhere" / "seed0.json"
    copy.parent.mkdir()
    shutil.copy(cells[0], copy)
    with pytest.raises(DuplicateCellError):
        read_cells([*cells, copy])
    table = tmp_path / "table.csv"
    said = _fails(["table", *cells, copy, "--csv", table], capsys)
    assert f"{copy} and {cells[0]} hold the same cell (s/exp/fedgp/a/seed 0)" in said and not table.exists()
    said = _fails(["table", *cells, cells[0], "--csv", table], capsys)
    assert f"{cells[0]} given twice (s/exp/fedgp/a/seed 0)" in said and not table.exists()
    said = _fails(["compare", *cells, copy, "--csv", tmp_path / "c.csv", "--md", tmp_path / "c.md"], capsys)
    assert "hold the same cell" in said
    # the same numbers under another seed are another cell
    other = json.loads(copy.read_text())
    other["cell"]["seed"] = other["config"]["seed"] = 2
    copy.write_text(json.dumps(seal(other)))
    assert main(["table", *map(str, cells), str(copy), "--csv", str(table)]) == 0


def test_a_cell_written_before_digests_is_read_as_it_is(cells, tmp_path):
    old = json.loads(cells[0].read_text())
    del old["digest"]
    cells[0].write_text(json.dumps({**old, "final": 0.7}))  # an edit to it cannot be told from its writing
    assert read_cells(cells)[str(cells[0])]["final"] == 0.7
