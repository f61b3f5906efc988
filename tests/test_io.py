"""Atomic outputs: a failing writer leaves nothing that looks finished."""

import os
import re
import subprocess
import sys

import pytest

from fdabench.core.io import (
    PROTECTED_INPUTS_VARIABLE,
    OutputPathError,
    atomic_folder,
    atomic_path,
    content_hash,
    open_log,
    protecting_inputs,
    write_json_atomic,
    write_text_atomic,
)


def test_failed_write_leaves_no_file(tmp_path):
    target = tmp_path / "out" / "cell.json"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text('{"status": "compl')
        raise RuntimeError("killed mid-write")
    assert not target.exists()
    assert list(target.parent.iterdir()) == []


def test_successful_write_replaces_atomically_with_normal_permissions(tmp_path):
    target = tmp_path / "cell.json"
    write_json_atomic(target, {"a": 1})
    write_json_atomic(target, {"a": 2})
    assert target.read_text().strip().endswith("}")
    assert '"a": 2' in target.read_text()
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask
    assert [p.name for p in tmp_path.iterdir()] == ["cell.json"]


def test_content_hash_is_order_independent_for_keys():
    import numpy as np

    assert content_hash({"a": 1, "b": [1, 2]}) == content_hash({"b": [1, 2], "a": 1})
    assert content_hash({"x": np.arange(3)}) != content_hash({"x": np.arange(4)})


def test_active_views_link_into_the_suite_folder():
    from fdabench.core import paths

    assert paths.active_view("results/demo/table1.csv", "demo") == ("results/table1.csv", "demo/table1.csv")
    assert paths.active_view("results/demo/figures/a_rounds.png", "demo") == (
        "results/figures/a_rounds.png",
        "../demo/figures/a_rounds.png",
    )
    with pytest.raises(ValueError, match="results/smoke/table1.csv is not a result of suite demo"):
        paths.active_view("results/smoke/table1.csv", "demo")


# -- the one writer refuses the running command's inputs ---------------------------------------------------------


@pytest.fixture
def inputs(tmp_path):
    """An input file, an input folder holding a file, and the block protecting them."""
    cell = tmp_path / "cell.json"
    cell.write_text("{}")
    folder = tmp_path / "prepared"
    folder.mkdir()
    (folder / "header.json").write_text("{}")
    with protecting_inputs([str(cell)], [str(folder)]):
        yield cell, folder


def test_the_writer_refuses_an_input_a_link_to_it_a_hard_link_and_a_file_in_an_input_folder(inputs, tmp_path):
    cell, folder = inputs
    (tmp_path / "soft.json").symlink_to(cell)
    os.link(cell, tmp_path / "hard.json")
    (tmp_path / "folder-link").symlink_to(folder)
    for path in (cell, tmp_path / "soft.json", tmp_path / "hard.json", folder / "new.json", tmp_path / "folder-link/x"):
        with pytest.raises(OutputPathError, match=f"^{re.escape(str(path))} would overwrite the input "):
            write_json_atomic(path, {"overwritten": True})
    assert cell.read_text() == "{}" and sorted(p.name for p in folder.iterdir()) == ["header.json"]
    write_json_atomic(tmp_path / "other.json", {"a": 1})  # anything else is written


def test_a_folder_replaced_as_a_whole_may_not_hold_an_input_but_a_log_beside_it_may_be_written(inputs, tmp_path):
    cell, _ = inputs
    with pytest.raises(OutputPathError, match="would overwrite the input"), atomic_folder(tmp_path):
        pytest.fail("the block ran")
    with pytest.raises(OutputPathError, match="would overwrite the input"):
        open_log(cell)
    with open_log(tmp_path / "logs" / "a.log") as log:
        log.write("ok\n")
    assert cell.read_text() == "{}"


def test_the_protection_ends_with_its_block_and_reaches_the_processes_started_in_it(tmp_path):
    cell = tmp_path / "cell.json"
    cell.write_text("{}")
    child = [
        sys.executable,
        "-c",
        f"from fdabench.core.io import write_text_atomic; write_text_atomic({str(cell)!r}, 'x')",
    ]
    with protecting_inputs([str(cell)]):
        refused = subprocess.run(child, capture_output=True, text=True)
    assert refused.returncode != 0 and "would overwrite the input" in refused.stderr and cell.read_text() == "{}"
    assert PROTECTED_INPUTS_VARIABLE not in os.environ
    write_text_atomic(cell, "written")
    assert cell.read_text() == "written"


def test_a_failing_folder_writer_leaves_the_previous_folder_and_no_staging(tmp_path):
    folder = tmp_path / "plots"
    with atomic_folder(folder) as staging:
        (staging / "a.csv").write_text("first")
    with pytest.raises(RuntimeError), atomic_folder(folder) as staging:
        (staging / "a.csv").write_text("sec")
        raise RuntimeError("interrupted mid-folder")
    assert [p.name for p in tmp_path.iterdir()] == ["plots"] and (folder / "a.csv").read_text() == "first"


def test_a_write_over_the_file_size_limit_is_one_line_and_leaves_nothing(tmp_path):
    """ulimit -f: with SIGXFSZ ignored (as `fdabench` does), the write fails with EFBIG, reported by the writer."""
    script = (
        "import resource, signal; from fdabench.core.io import write_text_atomic\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        f"write_text_atomic({str(tmp_path / 'big.txt')!r}, 'x' * 10000)"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert (
        "could not write" in result.stderr
        and "the file-size limit (ulimit -f) is smaller than the file" in result.stderr
    )
    assert list(tmp_path.iterdir()) == []
