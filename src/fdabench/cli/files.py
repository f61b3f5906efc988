"""The files a command reads and writes, declared on its arguments: each path argument's argparse `type` is one of
the roles below, and a command whose outputs follow from other arguments (`sweep --suite`) names them with
`set_defaults(derived_files=...)`. `main` checks the declared outputs before the command runs (none over an input,
no two the same, none where a directory or a file blocks it) and runs the command inside
`fdabench.core.guard.protecting_inputs`, which refuses every write over an input, declared output or not."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from fdabench.core.guard import OutputPathError, protecting_inputs, refuse_overwriting_inputs


class PathRole:
    """An argparse `type` marking a path argument as something the command reads or writes."""

    def __init__(self, name: str, reads: bool, writes: bool, replaced_whole: bool = False):
        self.__name__ = name  # argparse names it in "invalid <name> value"
        self.reads, self.writes, self.replaced_whole = reads, writes, replaced_whole

    def __call__(self, text: str) -> str:
        if not text:
            raise argparse.ArgumentTypeError("an empty path")
        return text

    def __repr__(self) -> str:
        return self.__name__


INPUT = PathRole("input file", reads=True, writes=False)
INPUT_FOLDER = PathRole("input folder", reads=True, writes=False)
OUTPUT = PathRole("output file", reads=False, writes=True)
#: a folder the command replaces as a whole: no input may lie inside it
OUTPUT_FOLDER = PathRole("output folder", reads=False, writes=True, replaced_whole=True)
#: a folder the command writes files under (each file refused if it is an input)
OUTPUT_ROOT = PathRole("output root", reads=False, writes=True)
#: a file the command reads and rewrites in place (a page whose generated block it fills)
UPDATED = PathRole("file updated in place", reads=True, writes=True)

PATH_ROLES = (INPUT, INPUT_FOLDER, OUTPUT, OUTPUT_FOLDER, OUTPUT_ROOT, UPDATED)

DerivedFiles = Callable[[argparse.Namespace], list[tuple[PathRole, str]]]


def declared_files(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[tuple[PathRole, str]]:
    """(role, path) of every path the parsed command declares: its arguments typed with a role, through the
    sub-commands it chose, then those its `derived_files` default names."""
    found: list[tuple[PathRole, str]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(args, action.dest, None)
            if chosen in action.choices:
                found += declared_files(action.choices[chosen], args)
        elif isinstance(action.type, PathRole):
            found += [(action.type, path) for path in _flat(getattr(args, action.dest, None))]
    derived: DerivedFiles | None = getattr(args, "derived_files", None)
    if derived is not None and parser._subparsers is None:  # the chosen leaf adds them once
        found += derived(args)
    return found


def _flat(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [path for item in value for path in _flat(item)]
    return [str(value)]


@contextmanager
def guarded(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Iterator[None]:
    """Check the command's declared outputs against its inputs before it runs; run it with its inputs protected."""
    files = declared_files(parser, args)
    inputs = [path for role, path in files if role in (INPUT, INPUT_FOLDER)]
    folders = [path for role, path in files if role is INPUT_FOLDER or (role is INPUT and os.path.isdir(path))]
    with protecting_inputs([path for path in inputs if path not in folders], folders):
        check_outputs([(role, path) for role, path in files if role.writes])
        yield


def check_outputs(outputs: list[tuple[PathRole, str]]) -> None:
    """Refuse, before anything runs, an output over an input (`fdabench.core.guard.refuse_overwriting_inputs`), two
    outputs that are the same file, and an output file that cannot be written: a directory where it goes, or a file
    where its folder goes."""
    written: dict[str, str] = {}
    for role, path in outputs:
        refuse_overwriting_inputs(path, replaces_folder=role.replaced_whole)
        real = os.path.realpath(path)
        if real in written:
            raise OutputPathError(f"{written[real]} and {path} are the same file; give each output its own path")
        written[real] = path
        if role in (OUTPUT, UPDATED):
            _check_writable(Path(path))


def _check_writable(output: Path) -> None:
    if output.is_dir():
        raise OutputPathError(
            f"cannot write {output}: it is a directory; pass a file path (or move the directory). Nothing was run."
        )
    folder = output.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    problem = None
    if not folder.is_dir():
        problem = f"{folder} is not a directory"
    elif not os.access(folder, os.W_OK | os.X_OK):
        problem = f"{folder} is not writable"
    if problem:
        raise OutputPathError(
            f"cannot write {output} ({problem}); make {folder} writable or choose another folder. Nothing was run."
        )
