"""Folders written as a whole (fdabench.core.staging.atomic_folder): the new folder replaces the old one only when
complete, and a failure at any point, the final move included, leaves the earlier folder as it was."""

import os

import pytest

from fdabench.core import staging
from fdabench.core.staging import atomic_folder


def _earlier(tmp_path):
    folder = tmp_path / "plots"
    folder.mkdir()
    (folder / "old.csv").write_text("old\n")
    return folder


def test_a_complete_folder_replaces_the_earlier_one_and_leaves_nothing_beside_it(tmp_path):
    folder = _earlier(tmp_path)
    with atomic_folder(folder) as staged:
        (staged / "new.csv").write_text("new\n")
    assert sorted(path.name for path in folder.iterdir()) == ["new.csv"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["plots"]


def test_a_failing_final_move_leaves_the_earlier_folder(tmp_path, monkeypatch):
    folder = _earlier(tmp_path)
    replace = os.replace

    def failing(source, destination):
        if str(source).endswith(".partial"):  # the staged folder's move into place
            raise OSError(28, "No space left on device")
        replace(source, destination)

    monkeypatch.setattr(staging.os, "replace", failing)
    with pytest.raises(OSError, match="could not write"), atomic_folder(folder) as staged:
        (staged / "new.csv").write_text("new\n")
    assert (folder / "old.csv").read_text() == "old\n" and not (folder / "new.csv").exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["plots"]
