"""The unreadable inputs issue 55 names, each refused in one line that names the file and says what is wrong with it
(exit status 2, nothing written); the CLI harness (test_file_arguments.py) checks the same form for every argument,
these check what the message says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fdabench.cli import main
from workflows import TINY_PARAMS

REPO = Path(__file__).resolve().parents[2]
BINARY = bytes(range(256)) * 4
CELL = {"format": "fdabench.cell/1", "status": "complete", "metric": "accuracy", "final": 0.5, "rounds": []}


def _refusal(argv: list[str], capsys) -> str:
    """The one line `fdabench ARGV` refuses with (exit status 2)."""
    capsys.readouterr()
    assert main(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.fixture
def params(tmp_path) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({**TINY_PARAMS, "device": "cpu"}), encoding="utf-8")
    return path


def test_a_binary_params_file_is_named_as_not_text(tmp_path, capsys):
    path = tmp_path / "params.yaml"
    path.write_bytes(BINARY)
    line = _refusal(["validate", "--params", str(path)], capsys)
    assert line.startswith(f"fdabench: {path}: not text (a binary file? byte 128 is not UTF-8)")


@pytest.mark.parametrize(
    ("text", "problem"),
    [("", "is empty; a params file is a YAML mapping"), ("- suite: tiny\n- seeds: [0]\n", "holds a YAML list")],
    ids=["empty", "list"],
)
def test_an_empty_or_list_with_file_is_named(tmp_path, params, capsys, text, problem):
    """Was a TypeError at config/params.py (`{**raw, "suite": suite}` over None or a list)."""
    layer = tmp_path / "mine.yaml"
    layer.write_text(text, encoding="utf-8")
    archive = str(REPO / "docs" / "reproduction" / "paper_cpu" / "cells.jsonl.gz")
    export = ["archive", "export", "--archive", archive, "--dry-run", "--root", str(tmp_path / "out")]
    for command in (["validate", "--suite", "tiny"], ["status", "--suite", "tiny"], export):
        line = _refusal([*command, "--params", str(params), "--with", str(layer)], capsys)
        assert line.startswith(f"fdabench: {layer}: {problem}"), line
    assert not (tmp_path / "out").exists()


def test_a_cell_result_given_as_params_is_named_as_one(tmp_path, capsys):
    path = tmp_path / "cell.json"
    path.write_text(json.dumps(CELL), encoding="utf-8")
    line = _refusal(["validate", "--params", str(path)], capsys)
    assert line == f"fdabench: {path}: is a cell result, not a params file; pass a params file (params.yaml)"


def test_bench_gpu_from_a_binary_file_is_named(tmp_path, capsys):
    source = tmp_path / "bench_gpu.json"
    source.write_bytes(BINARY)
    line = _refusal(["bench", "gpu", "--from", str(source), "--output-dir", str(tmp_path / "out")], capsys)
    assert line.startswith(f"fdabench: {source}: not text") and not (tmp_path / "out").exists()


def test_bench_gpu_from_a_cell_result_names_the_file(tmp_path, capsys):
    source = tmp_path / "cell.json"
    source.write_text(json.dumps(CELL), encoding="utf-8")
    line = _refusal(["bench", "gpu", "--from", str(source), "--output-dir", str(tmp_path / "out")], capsys)
    assert line.startswith(f"fdabench: {source}: not a fdabench.bench_gpu/1 result")


def test_bench_gpu_docs_without_its_block_is_refused_before_anything_is_written(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text("# a page without the block\n", encoding="utf-8")
    source = REPO / "docs" / "benchmarks" / "gpu.json"
    argv = ["bench", "gpu", "--from", str(source), "--docs", str(page), "--output-dir", str(tmp_path / "out")]
    assert _refusal(argv, capsys).startswith(f"fdabench: {page}: the page has no gpu-bench block")
    assert not (tmp_path / "out").exists() and page.read_text() == "# a page without the block\n"


@pytest.mark.parametrize("given", ["folder", "file"])
def test_flower_simulate_given_a_cell_result_names_it(tmp_path, capsys, given):
    """Was `KeyError: 'sites'`: a cell result where the export's manifest goes (as `--result DIR/sites.json` left it),
    or a cell result file given as the exported folder."""
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "sites.json").write_text(json.dumps(CELL), encoding="utf-8")
    target = folder if given == "folder" else folder / "sites.json"
    line = _refusal(["flower", "simulate", str(target), "--result", str(tmp_path / "result.json")], capsys)
    expected = (
        f"{folder / 'sites.json'}: is a cell result, not the manifest of a Flower export"
        if given == "folder"
        else f"{target}: is a file, not the folder of site files"
    )
    assert line.startswith(f"fdabench: {expected}"), line
    assert not (tmp_path / "result.json").exists()


def test_an_empty_archive_file_is_not_an_empty_archive(tmp_path, capsys):
    """An archive of no records still has a gzip header; a file of no bytes is a damaged one (archive add used to
    start it again, replacing it)."""
    archive = tmp_path / "cells.jsonl.gz"
    archive.write_bytes(b"")
    line = _refusal(["compare", "--archive", str(archive), "--csv", str(tmp_path / "c.csv")], capsys)
    assert line.startswith(f"fdabench: {archive}: is empty") and archive.read_bytes() == b""


def test_a_lock_that_pins_no_torch_is_refused(tmp_path, capsys):
    lock = tmp_path / "requirements.lock"
    lock.write_text((REPO / "requirements.lock").read_text()[:200], encoding="utf-8")
    from fdabench.cli.archive import _check_versions
    from fdabench.core.readers import FileReadError

    with pytest.raises(FileReadError, match=r"requirements\.lock: pins no torch"):
        _check_versions([], lock, named=True)
