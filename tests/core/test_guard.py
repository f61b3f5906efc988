"""Within a command, every write of its process over one of its inputs is refused (`fdabench.core.guard`), whoever
makes it; and folders written as a whole appear complete or not at all (`fdabench.core.staging`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from fdabench.core.guard import PROTECTED_INPUTS_VARIABLE, OutputPathError, protecting_inputs
from fdabench.core.io import write_json_atomic, write_text_atomic
from fdabench.core.staging import atomic_folder


@pytest.fixture
def inputs(tmp_path):
    """An input file and an input folder holding a file, protected for the test."""
    cell = tmp_path / "cell.json"
    cell.write_text("{}")
    folder = tmp_path / "prepared"
    folder.mkdir()
    (folder / "header.json").write_text("{}")
    with protecting_inputs([str(cell)], [str(folder)]):
        yield cell, folder


def _unchanged(cell, folder) -> bool:
    return cell.read_text() == "{}" and sorted(p.name for p in folder.iterdir()) == ["header.json"]


def test_the_writer_refuses_an_input_a_link_to_it_a_hard_link_and_a_file_in_an_input_folder(inputs, tmp_path):
    cell, folder = inputs
    (tmp_path / "soft.json").symlink_to(cell)
    os.link(cell, tmp_path / "hard.json")
    (tmp_path / "folder-link").symlink_to(folder)
    for path in (cell, tmp_path / "soft.json", tmp_path / "hard.json", tmp_path / "folder-link" / "x.json"):
        with pytest.raises(OutputPathError, match=f"^{re.escape(str(path))} would overwrite the input "):
            write_json_atomic(path, {"overwritten": True})
    with pytest.raises(OutputPathError, match="would overwrite the input"):
        write_json_atomic(folder / "new.json", {})  # its temporary file is refused already
    assert _unchanged(cell, folder) and not list(tmp_path.glob(".*.partial"))
    write_json_atomic(tmp_path / "other.json", {"a": 1})  # anything else is written


def test_every_kind_of_write_is_refused_whoever_makes_it(inputs, tmp_path):
    """Not only fdabench's writer: a library writing, moving, deleting or replacing a folder that holds an input."""
    cell, folder = inputs
    attempts = [
        lambda: pd.DataFrame({"a": [1]}).to_csv(cell),
        lambda: open(cell, "a").close(),
        lambda: cell.unlink(),
        lambda: os.replace(tmp_path / "other", cell),
        lambda: os.rename(cell, tmp_path / "moved.json"),
        lambda: shutil.rmtree(folder),
        lambda: shutil.copy(tmp_path / "other", folder / "header.json"),
        lambda: os.truncate(cell, 0),
    ]
    (tmp_path / "other").write_text("other")
    for attempt in attempts:
        with pytest.raises(OutputPathError, match="would overwrite the input"):
            attempt()
    assert _unchanged(cell, folder)


def test_a_folder_replaced_as_a_whole_may_not_hold_an_input(inputs, tmp_path):
    cell, folder = inputs
    with pytest.raises(OutputPathError, match="would overwrite the input"), atomic_folder(folder) as staging:
        (staging / "header.json").write_text("new")
    assert _unchanged(cell, folder) and not list(tmp_path.glob(".*.partial"))


def test_the_protection_ends_with_its_block_and_reaches_the_fdabench_processes_started_in_it(tmp_path):
    cell = tmp_path / "cell.json"
    cell.write_text("{}")
    schema = [sys.executable, "-m", "fdabench", "schema", "--output", str(cell)]
    with protecting_inputs([str(cell)]):
        refused = subprocess.run(schema, capture_output=True, text=True)
    assert refused.returncode == 2 and f"{cell} would overwrite the input {cell}" in refused.stderr
    assert cell.read_text() == "{}"
    assert PROTECTED_INPUTS_VARIABLE not in os.environ
    write_text_atomic(cell, "written")  # outside the block: written
    assert cell.read_text() == "written"


def test_a_failing_folder_writer_leaves_the_previous_folder_and_no_staging(tmp_path):
    folder = tmp_path / "plots"
    with atomic_folder(folder) as staging:
        (staging / "a.csv").write_text("first")
    with pytest.raises(RuntimeError), atomic_folder(folder) as staging:
        (staging / "a.csv").write_text("sec")
        raise RuntimeError("interrupted mid-folder")
    assert [p.name for p in tmp_path.iterdir()] == ["plots"] and (folder / "a.csv").read_text() == "first"
    with atomic_folder(folder) as staging:
        (staging / "b.csv").write_text("second")
    assert [p.name for p in folder.iterdir()] == ["b.csv"]  # replaced as a whole
