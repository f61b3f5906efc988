"""Reading the finished cells a table, figure, comparison or archive is built from: each a complete cell
(`fdabench.cell.result.read_cell`) not edited since it was written (`fdabench.cell.digest`), and each cell once,
whatever path it is given by."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fdabench.cell.digest import EditedError, is_sealed, verify
from fdabench.cell.result import IncompleteCellError, read_cell


class EditedCellError(IncompleteCellError):
    """A cell file edited after its training job wrote it (its digest does not match its contents)."""


class DuplicateCellError(ValueError):
    """The same cell (by identity) given twice, at one path or two."""


def read_verified_cell(path: str | Path) -> dict[str, Any]:
    """The complete cell at `path`; `EditedCellError`, naming it, when its digest does not match its contents. A
    cell written before digests existed (unsealed) is returned as it is: `unsealed_paths` names such cells."""
    cell = read_cell(path)
    try:
        verify(cell, str(path))
    except EditedError as error:
        raise EditedCellError(f"{error}; rerun `snakemake` (it reruns the cell, keeping the file until then)") from None
    return cell


#: what tells one cell from another (`fdabench.reproduction.archive.identity`; the cell's path is made of them)
IDENTITY = ("suite", "experiment", "method", "target", "seed")


def cell_identity(cell: dict[str, Any]) -> tuple:
    """The cell's identity as its `cell` block (else its `config`) records it; a field it lacks is None."""
    fields = cell.get("cell") if isinstance(cell.get("cell"), dict) else cell.get("config")
    fields = fields if isinstance(fields, dict) else {}
    return tuple(None if fields.get(key) is None else str(fields[key]) for key in IDENTITY)


def cell_name(cell: dict[str, Any]) -> str:
    """suite/experiment/method/target/seed N: a cell by its identity."""
    suite, experiment, method, target, seed = cell_identity(cell)
    return f"{suite}/{experiment}/{method}/{target}/seed {seed}"


def read_cells(paths: Iterable[str | Path]) -> dict[str, dict[str, Any]]:
    """Path -> cell (`read_verified_cell`) for every path in the order given; `DuplicateCellError` naming both paths
    when two of them hold the same cell (a table counts cells, not paths)."""
    cells: dict[str, dict[str, Any]] = {}
    first_path: dict[tuple, str] = {}
    for path in paths:
        cell = read_verified_cell(path)
        key = cell_identity(cell)
        if key in first_path:
            same = "given twice" if first_path[key] == str(path) else f"and {first_path[key]} hold the same cell"
            raise DuplicateCellError(f"{path} {same} ({cell_name(cell)}): each cell is counted once; give it once")
        first_path[key] = str(path)
        cells[str(path)] = cell
    return cells


def unsealed_paths(cells: dict[str, dict[str, Any]]) -> list[str]:
    """The paths of `cells` (`read_cells`) written before cells carried a digest."""
    return [path for path, cell in cells.items() if not is_sealed(cell)]
