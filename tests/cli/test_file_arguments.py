"""The CLI harness: every argument a sub-command declares as an input (`fdabench.cli.file_arguments`) gets the same
bad files (missing, empty, binary, truncated, a directory, another kind of fdabench file) and the cases of the seed
corpus (file_argument_corpus.yaml); each must end with exit status 2 and one line on stderr that names the file, no
traceback, and every file under the test's folder as it was (nothing written, nothing replaced). Commands run
in-process (`fdabench.cli.main`)."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import traceback
from pathlib import Path

import numpy as np
import pytest
import yaml

from fdabench.cli import build_parser, main
from fdabench.cli.archive import current_fingerprint
from fdabench.cli.file_arguments import FOLDER_KINDS, INPUT_KINDS, file_inputs
from fdabench.data.base import DomainArrays, PreparedDataset
from fdabench.jobs.cell_plan import plan_text
from fdabench.reproduction.archive import cell_from_record, encode, read_archive
from fdabench.reproduction.equivalence import record_payload
from workflows import TINY_PARAMS

REPO = Path(__file__).resolve().parents[2]
CORPUS = yaml.safe_load((Path(__file__).with_name("file_argument_corpus.yaml")).read_text(encoding="utf-8"))
COMMANDS = {key: entry if isinstance(entry, dict) else {"command": entry} for key, entry in CORPUS["commands"].items()}
#: each kind's sample under the tree of valid files
SAMPLES = {
    "params": "params.yaml",
    "cell": "cell.json",
    "cell_plan": "cell_plan.json",
    "table": "table.json",
    "archive": "cells.jsonl.gz",
    "equivalences": "equivalences.json",
    "lock": "requirements.lock",
    "partition": "partition.json",
    "theory_init": "theory_init.json",
    "bench_gpu": "bench_gpu.json",
    "markdown": "page.md",
    "prepared": "prepared",
    "flower_export": "export",
}
#: the file inside a folder kind that a truncated copy cuts short
FOLDER_HEADERS = {"prepared": "header.json", "flower_export": "sites.json"}
#: the sample handed to an argument of each kind as "another kind of fdabench file"
OTHER_KIND = {kind: "cell" for kind in INPUT_KINDS} | {
    "cell": "params",
    "prepared": "flower_export",
    "flower_export": "prepared",
}
SIX_CASES = ("missing", "empty", "binary", "truncated", "directory", "another kind")
#: cases whose file reads, but whose content is refused by the validation of its kind: a params file cut short is
#: YAML still, and its problems are listed one a line under "invalid params:" (fdabench.config.schema), for the whole
#: merged document, so the file is not named
CONTENT_CHECKED = {"params": {"truncated"}}
BINARY = bytes(range(256)) * 8


def _declared() -> dict[str, str]:
    """{"<sub-command words> <argument>": kind} for every declared input of the CLI."""
    return {
        " ".join((*words, argument)): kind
        for words, inputs in file_inputs(build_parser()).items()
        for argument, kind in inputs.items()
    }


DECLARED = _declared()


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A folder of valid fdabench files, one of each input kind (SAMPLES), and the cell configuration they share."""
    root = tmp_path_factory.mktemp("cli_harness")
    valid = root / "valid"
    valid.mkdir()
    (valid / "params.yaml").write_text(yaml.safe_dump({**TINY_PARAMS, "device": "cpu"}), encoding="utf-8")
    records = read_archive(REPO / "docs" / "reproduction" / "paper_cpu" / "cells.jsonl.gz")[:2]
    cell = cell_from_record(records[0])
    (valid / "cell.json").write_text(json.dumps(cell, indent=1), encoding="utf-8")
    (valid / "cells.jsonl.gz").write_bytes(encode(records))
    current = {**cell, "code": current_fingerprint(cell["config"])}  # as if run with this checkout
    (valid / "current_cell.json").write_text(json.dumps(current, indent=1), encoding="utf-8")
    (valid / "cell_plan.json").write_text(plan_text(cell["config"], current["code"]), encoding="utf-8")
    (valid / "equivalences.json").write_text(json.dumps(record_payload([])), encoding="utf-8")
    (valid / "table.json").write_text(json.dumps({"table1": {"fedgp": {"mean": 0.5, "n_seeds": 2, "std": 0.1}}}))
    shutil.copy(REPO / "requirements.lock", valid / "requirements.lock")
    partition = {"format": "fdabench.partition/1", "clients": [], "content_hash": "0" * 64, "target": "a", "seed": 0}
    (valid / "partition.json").write_text(json.dumps(partition), encoding="utf-8")
    initial = {"format": "fdabench.theory_init/1", "d2": 0.1, "sigma2": 0.2, "delta_errors": {}, "target": "a"}
    (valid / "theory_init.json").write_text(json.dumps({**initial, "seed": 0}), encoding="utf-8")
    shutil.copy(REPO / "docs" / "benchmarks" / "gpu.json", valid / "bench_gpu.json")
    shutil.copy(REPO / "docs" / "benchmarks.md", valid / "page.md")
    x = np.zeros((12, 2), np.float32)
    domains = {name: DomainArrays(x.copy(), np.arange(12) % 2) for name in ("a", "b")}
    PreparedDataset("amazon_reviews", "classification", 2, (2,), domains).save(valid / "prepared")
    (valid / "export").mkdir()
    sites = {"sites": [{"file": "site0.pt", "role": "source", "name": "a", "samples": 12}]}
    (valid / "export" / "sites.json").write_text(json.dumps(sites), encoding="utf-8")
    return root, cell["config"]


def _bad_input(case: str, kind: str, where: Path, valid: Path) -> Path:
    """Make the bad input `case` for an argument of `kind` at `where` (or beside it); return its path."""
    sample = valid / SAMPLES[kind]
    folder = kind in FOLDER_KINDS
    where.parent.mkdir(parents=True, exist_ok=True)
    if case == "missing":
        return where
    if case == "empty":
        where.mkdir() if folder else where.write_bytes(b"")
    elif case == "binary":
        where.write_bytes(BINARY)
    elif case == "truncated":
        if folder:
            shutil.copytree(sample, where)
            header = where / FOLDER_HEADERS[kind]
            header.write_bytes(header.read_bytes()[: header.stat().st_size // 2])
        else:
            where.write_bytes(sample.read_bytes()[: sample.stat().st_size // 2])
    elif case == "directory":
        where.mkdir()
        (where / "inside.txt").write_text("a folder where a file goes\n")
    elif case == "another kind":
        other = valid / SAMPLES[OTHER_KIND[kind]]
        shutil.copytree(other, where) if other.is_dir() else shutil.copy(other, where)
    return where


def _corpus_input(case: dict, where: Path, valid: Path) -> Path:
    if "text" in case:
        where.write_text(case["text"], encoding="utf-8")
    elif "copy" in case:
        shutil.copy(valid / SAMPLES[case["copy"]], where)
    else:
        where.mkdir()
        for name, kind in case["folder"].items():
            shutil.copy(valid / SAMPLES[kind], where / name)
    return where


def _snapshot(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "folder"
        for path in sorted(root.rglob("*"))
    }


def _run(argv: list[str], capsys) -> tuple[int | str, str]:
    """(exit status, or "traceback"; stderr) of `fdabench ARGV` run in-process, as the interpreter would end it."""
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as end:
        code = end.code
        if isinstance(code, str):  # the interpreter prints it and exits with status 1
            print(code, file=sys.stderr)
            code = 1
    except Exception:
        traceback.print_exc()
        code = "traceback"
    return (0 if code is None else code), capsys.readouterr().err


def _problems(
    argument: str, case: str, path: Path, works: bool, tree_root: Path, cell_config, capsys, content: bool = False
) -> list[str]:
    out = tree_root / "out"
    out.mkdir(exist_ok=True)
    template = COMMANDS[argument]["command"]
    replace = {"{FILE}": str(path), "{TREE}": str(tree_root / "valid"), "{OUT}": str(out)}
    argv = []
    for word in template:
        word = str(word).replace("{CELL_CONFIG}", json.dumps(cell_config))
        for placeholder, value in replace.items():
            word = word.replace(placeholder, value)
        argv.append(word)
    before = _snapshot(tree_root)
    code, stderr = _run(argv, capsys)
    if works:
        return [] if code == 0 else [f"{case}: exit {code}, expected to work: {stderr.strip()[-300:]}"]
    problems = []
    lines = stderr.strip().splitlines()
    if code != 2:
        problems.append(f"exit {code}, not 2")
    if not content and len(lines) != 1:
        problems.append(f"{len(lines)} lines on stderr")
    if not content and str(path) not in stderr:
        problems.append("the file is not named")
    if content and lines[:1] != ["fdabench: invalid params:"]:
        problems.append("not refused by the params validation")
    if "Traceback" in stderr:
        problems.append("a traceback")
    if _snapshot(tree_root) != before:
        problems.append("files changed")
    return [f"{case}: {'; '.join(problems)}: {stderr.strip()[-400:]!r}"] if problems else []


def test_every_declared_input_has_a_command_line_in_the_corpus():
    """A new file argument cannot escape the harness: it needs its line in the corpus (and the corpus none extra)."""
    assert sorted(DECLARED) == sorted(COMMANDS)
    assert {case["argument"] for case in CORPUS["cases"]} <= set(DECLARED)


def test_the_harness_sees_a_command_that_fails_the_cases(tree, capsys, monkeypatch):
    """The checks can fail: `fdabench --debug` shows a traceback instead of the one line, and the harness says so."""
    root, cell_config = tree
    monkeypatch.chdir(root / "valid")
    bad = _bad_input("binary", "cell", root / "case" / "binary", root / "valid")
    monkeypatch.setitem(COMMANDS, "debug table", {"command": ["--debug", "table", "{FILE}", "--csv", "{OUT}/t.csv"]})
    try:
        found = _problems("debug table", "binary", bad, False, root, cell_config, capsys)
    finally:
        bad.unlink()
    assert found and "a traceback" in found[0] and "exit traceback" in found[0]


@pytest.mark.parametrize("argument", sorted(COMMANDS))
def test_bad_files_are_refused_in_one_line_naming_them(argument, tree, capsys, monkeypatch):
    root, cell_config = tree
    kind = DECLARED[argument]
    works = set(COMMANDS[argument].get("works", []))
    monkeypatch.chdir(root / "valid")
    failures = []
    cases = [(case, None) for case in SIX_CASES if not (case == "directory" and kind in FOLDER_KINDS)]
    cases += [(case["name"], case) for case in CORPUS["cases"] if case["argument"] == argument]
    for name, corpus_case in cases:
        folder = root / "case"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        where = folder / f"{name.replace(' ', '_')}{Path(SAMPLES[kind]).suffix}"
        valid = root / "valid"
        path = _bad_input(name, kind, where, valid) if corpus_case is None else _corpus_input(corpus_case, where, valid)
        content = name in CONTENT_CHECKED.get(kind, ())
        failures += _problems(argument, name, path, name in works, root, cell_config, capsys, content)
        shutil.rmtree(root / "out", ignore_errors=True)
    assert failures == [], f"fdabench {argument}:\n" + "\n".join(failures)
