"""Every sub-command declares the files it reads and writes (`fdabench.cli.files`), and `main` refuses, before the
command runs, any declared output that is one of its inputs, a link to one, or inside an input folder."""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

import pytest

from fdabench.cli import build_parser, main
from fdabench.cli.common import json_argument
from fdabench.cli.files import INPUT, INPUT_FOLDER, OUTPUT, OUTPUT_FOLDER, OUTPUT_ROOT, UPDATED, PathRole

# help text that says an argument names a file or folder: such an argument must declare its role
PATH_WORDS = re.compile(
    r"\b(file|files|folder|folders|directory|page|path|write|rewrite|where|JSON|README|lock|logs|summary)\b", re.I
)
# arguments whose paths a command's `derived_files` declares (their meaning depends on another argument)
DERIVED = {("flower", "cell")}
# a suite's name, whose help mentions the README block it is quoted in; a tracking URI, which may name a server (its
# default, MLflow's own, is a SQLite store in the current folder); a cell's job name or its result path, which `status`
# only reads (it writes nothing, and reads the result as every reader of cell files does, `fdabench.cell.reading`)
NOT_FILES = {("compare", "suite"), ("export", "tracking_uri"), ("status", "cell")}
INTERNAL = {("forkserver",)}  # the fork server's socket is not a command's file


def _leaves(parser: argparse.ArgumentParser, name: tuple[str, ...] = ()):
    subs = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not subs:
        yield name, parser
    for action in subs:
        for choice, sub in action.choices.items():
            yield from _leaves(sub, (*name, choice))


COMMANDS = [(name, parser) for name, parser in _leaves(build_parser()) if name not in INTERNAL]


def _valued(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [action for action in parser._actions if action.nargs != 0 and not isinstance(action, argparse._HelpAction)]


@pytest.mark.parametrize("name, parser", COMMANDS, ids=[" ".join(name) for name, _ in COMMANDS])
def test_every_argument_that_names_a_file_declares_whether_it_is_read_or_written(name, parser):
    undeclared = [
        action.dest
        for action in _valued(parser)
        if PATH_WORDS.search(str(action.help or "")) and not isinstance(action.type, PathRole)
        if action.type is not json_argument  # JSON text, not a file
        if (name[0], action.dest) not in DERIVED | NOT_FILES
    ]
    assert not undeclared, f"fdabench {' '.join(name)}: {undeclared} name files but declare no role"


def test_every_declared_path_argument_says_so_in_its_help_so_that_an_undeclared_one_would_be_caught():
    silent = [
        f"{' '.join(name)} {action.dest}"
        for name, parser in COMMANDS
        for action in _valued(parser)
        if isinstance(action.type, PathRole) and action.help != argparse.SUPPRESS
        if not PATH_WORDS.search(str(action.help))
    ]
    assert not silent


def test_every_command_that_writes_a_file_declares_it():
    # the commands whose handlers call the writer (fdabench.core.io) with a path from their arguments
    writers = {
        "schema", "prepare", "stand-in", "acquire", "partition", "train", "table", "figure", "metrics", "cells-table",
        "plots", "compare", "bench", "flower", "sweep", "archive add", "archive export", "archive vouch", "theory init",
        "theory report", "export dvclive", "export tensorboard",
    }  # fmt: skip
    declaring = {
        " ".join(name)
        for name, parser in COMMANDS
        if any(isinstance(action.type, PathRole) and action.type.writes for action in parser._actions)
        or parser.get_default("derived_files") is not None
    }
    assert writers <= declaring, writers - declaring


# -- every (input, output) pair of every command, refused before the command runs ----------------------------------


def _value(action: argparse.Action, files: dict[PathRole, str]) -> str:
    if isinstance(action.type, PathRole):  # each output its own path
        return files[action.type] + (f"-{action.dest}" if action.type.writes else "")
    if action.choices:
        return str(next(iter(action.choices)))
    if action.type in (int, float):
        return "1"
    if action.type is json_argument:
        return "{}"
    return "x"


def _command_line(name: tuple[str, ...], parser: argparse.ArgumentParser, files: dict[PathRole, str], given: dict):
    """A command line of `name` that parses: every positional and required option filled, plus `given`."""
    argv = list(name)
    # a required group of alternatives (train's --plan or --cell): its first member, unless `given` names one
    chosen = {
        group._group_actions[0].dest
        for group in parser._mutually_exclusive_groups
        if group.required and not any(action.dest in given for action in group._group_actions)
    }
    for action in _valued(parser):
        if action.dest in given:
            value = given[action.dest]
        elif action.option_strings and not action.required and action.dest not in chosen:
            continue
        else:
            value = _value(action, files)
        if action.nargs == "*" and not action.option_strings and action.dest not in given:
            continue
        argv += [action.option_strings[0], value] if action.option_strings else [value]
    return argv


def _pairs():
    for name, parser in COMMANDS:
        actions = _valued(parser)
        inputs = [action for action in actions if action.type in (INPUT, INPUT_FOLDER, UPDATED)]
        outputs = [action for action in actions if action.type in (OUTPUT, OUTPUT_FOLDER, OUTPUT_ROOT, UPDATED)]
        for read in inputs:
            for written in outputs:
                if read is not written:
                    yield pytest.param(name, parser, read, written, id=f"{' '.join(name)} {read.dest}>{written.dest}")


@pytest.mark.parametrize("name, parser, read, written", list(_pairs()))
def test_an_output_over_an_input_is_refused_before_the_command_runs(name, parser, read, written, tmp_path, capsys):
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "kept.json").write_text('{"kept": true}')
    (tmp_path / "input.json").write_text('{"format": "fdabench.cell/1"}')
    files = {
        INPUT: str(tmp_path / "other.json"),
        INPUT_FOLDER: str(tmp_path / "other-folder"),
        UPDATED: str(tmp_path / "updated.md"),
        OUTPUT: str(tmp_path / "out" / "a.json"),
        OUTPUT_FOLDER: str(tmp_path / "out" / "folder"),
        OUTPUT_ROOT: str(tmp_path / "out"),
    }
    if read.type is INPUT_FOLDER:  # a file inside the folder it reads, or the folder itself replaced
        given = {read.dest: str(tmp_path / "folder"), written.dest: str(tmp_path / "folder" / "kept.json")}
    else:
        os.symlink(tmp_path / "input.json", tmp_path / "link.json")  # a link to the input is the input
        given = {read.dest: str(tmp_path / "input.json"), written.dest: str(tmp_path / "link.json")}
    before = {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    code = main(_command_line(name, parser, files, given))
    message = capsys.readouterr().err.strip()
    # a file updated in place is written too: another output over it is two outputs in one file
    clash = "are the same file" if read.type is UPDATED else "would overwrite the input .*; choose another output path"
    assert code == 2 and re.fullmatch(f"fdabench: .*{clash}.*", message)
    assert {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()} == before
    assert not (tmp_path / "out").exists()


def test_flower_simulate_refuses_a_result_inside_the_folder_it_reads(tmp_path, capsys):
    """The case that overwrote its input: `flower simulate DIR --result DIR/sites.json` exited 0."""
    folder = tmp_path / "exported"
    folder.mkdir()
    manifest = folder / "sites.json"
    manifest.write_text(json.dumps({"format": "fdabench.flower_sites/1", "sites": []}))
    for action in ("simulate", "deploy", "app"):
        extra = ["--output", str(tmp_path / "app")] if action == "app" else []
        assert main(["flower", action, str(folder), "--result", str(manifest), *extra]) == 2
        assert f"{manifest} would overwrite the input {folder}" in capsys.readouterr().err
    assert manifest.read_text() == json.dumps({"format": "fdabench.flower_sites/1", "sites": []})


def test_an_output_folder_replaced_as_a_whole_may_not_hold_an_input(tmp_path, capsys):
    cell = tmp_path / "results" / "cell.json"
    cell.parent.mkdir()
    cell.write_text("{}")
    assert main(["plots", str(cell), "--rounds", str(tmp_path / "results"), "--betas", str(tmp_path / "b")]) == 2
    assert f"{tmp_path / 'results'} would overwrite the input {cell}" in capsys.readouterr().err
    assert cell.read_text() == "{}"


def test_an_output_root_may_hold_inputs_but_not_be_one(tmp_path, capsys, monkeypatch):
    """`archive export --root .` writes under the folder that holds params.yaml: allowed; a root that is the params
    file is not."""
    from fdabench.cli import files

    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text("suite: s\n")
    parser = build_parser()
    args = parser.parse_args(["archive", "export", "--root", ".", "--params", "params.yaml"])
    with files.guarded(parser, args):
        pass
    assert main(["archive", "export", "--root", "params.yaml", "--params", "params.yaml"]) == 2
    assert "params.yaml would overwrite the input params.yaml" in capsys.readouterr().err


def test_two_outputs_that_are_one_file_are_refused(tmp_path, capsys):
    cell = tmp_path / "cell.json"
    cell.write_text("{}")
    out = tmp_path / "a.csv"
    assert main(["table", str(cell), "--csv", str(out), "--md", str(tmp_path / "x" / ".." / "a.csv")]) == 2
    assert "are the same file; give each output its own path" in capsys.readouterr().err
    assert not out.exists()


#: reading arguments whose files are no fdabench kind (raw data as downloaded) or that no person passes (a worker's)
NO_KIND = {("prepare", "raw_root"), ("acquire", "mirror"), ("bench", "worker")}


def test_the_files_an_argument_reads_and_their_kind_are_declared_together():
    """An argument declared as read for the bad-file harness (`fdabench.cli.file_arguments.reads`, with its kind) has
    a role that reads (`fdabench.cli.files`), and a role that reads names its kind: the two declarations cannot drift
    apart (the flower folder is a derived path, declared by its command)."""
    from fdabench.cli.file_arguments import input_kind

    unroled, unkinded = [], []
    for words, parser in COMMANDS:
        for action in parser._actions:
            key = (" ".join(words), action.dest)
            reads = isinstance(action.type, PathRole) and action.type.reads
            if input_kind(action) and not reads and (words[0], action.dest) not in DERIVED:
                unroled.append(key)
            if reads and not input_kind(action) and (words[0], action.dest) not in NO_KIND:
                unkinded.append(key)
    assert not unroled and not unkinded, (unroled, unkinded)
