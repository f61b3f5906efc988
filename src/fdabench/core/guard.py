"""The running command's inputs, guarded against every write of its process: within `protecting_inputs`, a Python
audit hook (PEP 578) refuses each file operation that would write, replace, move, truncate or delete one of them or
anything inside an input folder, whoever makes it (fdabench's atomic writer, pandas, matplotlib, Flower's apps in
this process). The inputs travel in the environment, so an `fdabench` process the command starts guards them too."""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

#: the inputs of the running command, as JSON (a list of `_entry`)
PROTECTED_INPUTS_VARIABLE = "FDABENCH_PROTECTED_INPUTS"

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
# audit event -> the positions of the paths it changes (os.rename covers os.replace and shutil.move)
_CHANGED_PATHS = {
    "os.rename": (0, 1),
    "os.link": (1,),
    "os.symlink": (1,),
    "os.truncate": (0,),
    "os.remove": (0,),
    "os.rmdir": (0,),
    "shutil.rmtree": (0,),
}


class OutputPathError(ValueError):
    """An output path a command must not or cannot write: one of its inputs (or a link to one), inside an input
    folder, a folder replaced as a whole that holds an input, another output's path, or a directory."""


@contextmanager
def protecting_inputs(files: Iterable[str], folders: Iterable[str] = ()) -> Iterator[None]:
    """Within the block (and in the `fdabench` processes started in it) refuse every write over one of `files`
    (after `os.path.realpath`: links, `..`, relative spellings; or the same inode) and every write inside one of
    `folders`, with OutputPathError."""
    previous = os.environ.get(PROTECTED_INPUTS_VARIABLE)
    entries = _protected() + [_entry(path, False) for path in files] + [_entry(path, True) for path in folders]
    os.environ[PROTECTED_INPUTS_VARIABLE] = json.dumps(entries)
    _install_hook()
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(PROTECTED_INPUTS_VARIABLE, None)
        else:
            os.environ[PROTECTED_INPUTS_VARIABLE] = previous


@functools.cache
def _install_hook() -> None:
    """Add the audit hook, once per process: it cannot be removed, and it is idle outside `protecting_inputs`. (A
    function, not a flag rebound at run time: shipped module constants stay what their source says,
    `fdabench.cell.patches`.)"""
    sys.addaudithook(_refuse_writes_over_inputs)


def refuse_overwriting_inputs(path: str | os.PathLike, replaces_folder: bool = False) -> None:
    """Raise OutputPathError if writing `path` would overwrite an input of the running command; `replaces_folder`:
    `path` is a folder replaced (or deleted) as a whole, so no input may lie in it."""
    text = os.environ.get(PROTECTED_INPUTS_VARIABLE)
    if not text:
        return
    inputs = _index(text)
    real = os.path.realpath(path)
    inode = _inode(path)
    found = inputs.by_real.get(real) or (inputs.by_inode.get(tuple(inode)) if inode is not None else None)
    if found is None:  # inside an input folder: one of the path's ancestors is one
        ancestor = os.path.dirname(real)
        while found is None and ancestor != os.path.dirname(ancestor):
            found, ancestor = inputs.folders.get(ancestor), os.path.dirname(ancestor)
        found = found or inputs.folders.get(ancestor)
    if found is None and replaces_folder:  # a folder replaced as a whole that holds an input
        found = next((entry for entry in inputs.entries if _under(entry["real"], real)), None)
    if found is not None:
        raise OutputPathError(
            f"{_final(path)} would overwrite the input {found['given']}; choose another output path (nothing was "
            "written)"
        )


@dataclass(frozen=True)
class _Inputs:
    """The protected inputs, indexed for the check every write of the process makes: by real path, by inode, and the
    input folders by real path."""

    entries: tuple[dict[str, Any], ...]
    by_real: dict[str, dict[str, Any]]
    by_inode: dict[tuple[int, ...], dict[str, Any]]
    folders: dict[str, dict[str, Any]]


@functools.lru_cache(maxsize=8)
def _index(text: str) -> _Inputs:
    """The inputs of `PROTECTED_INPUTS_VARIABLE`'s value `text`, parsed once per value (the first entry of a path
    names it)."""
    entries = tuple(json.loads(text))
    by_real: dict[str, dict[str, Any]] = {}
    by_inode: dict[tuple[int, ...], dict[str, Any]] = {}
    folders: dict[str, dict[str, Any]] = {}
    for entry in entries:
        by_real.setdefault(entry["real"], entry)
        if entry["inode"] is not None:
            by_inode.setdefault(tuple(entry["inode"]), entry)
        if entry["folder"]:
            folders.setdefault(entry["real"].rstrip(os.sep) or os.sep, entry)
    return _Inputs(entries, by_real, by_inode, folders)


def _refuse_writes_over_inputs(event: str, args: tuple[Any, ...]) -> None:
    if event == "open":
        path, flags = args[0], args[2]
        if not (isinstance(flags, int) and flags & _WRITE_FLAGS):
            return
        paths: tuple[Any, ...] = (path,)
    elif event in _CHANGED_PATHS:
        paths = tuple(args[index] for index in _CHANGED_PATHS[event])
    else:
        return
    if PROTECTED_INPUTS_VARIABLE not in os.environ:
        return
    for path in paths:
        if isinstance(path, (str, bytes, os.PathLike)) and "__pycache__" not in os.fsdecode(path):
            refuse_overwriting_inputs(os.fsdecode(path), replaces_folder=event == "shutil.rmtree")


def _final(path: str | os.PathLike) -> str:
    """The path a writer's temporary file stands for (`.name.<random>.partial` beside it: `fdabench.core.io`)."""
    found = re.fullmatch(r"\.(.+)\.[^.]+\.partial", os.path.basename(path))
    return os.path.join(os.path.dirname(path), found.group(1)) if found else str(path)


def _entry(path: str, folder: bool) -> dict[str, Any]:
    return {"given": str(path), "real": os.path.realpath(path), "folder": folder, "inode": _inode(path)}


def _inode(path: str | os.PathLike) -> list[int] | None:
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return [info.st_dev, info.st_ino]


def _protected() -> list[dict[str, Any]]:
    text = os.environ.get(PROTECTED_INPUTS_VARIABLE)
    return json.loads(text) if text else []


def _under(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip(os.sep) + os.sep)
