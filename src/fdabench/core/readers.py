"""Every file fdabench reads is read here or inside `reading(path, what)`, so that any failure to read it (missing,
a folder, no permission, empty, truncated, binary, corrupt, of the wrong shape) is one error type, `FileReadError`,
whose one-line message names the file and says what is wrong with it; the command line prints it with exit status 2.
`tests/core/test_readers.py` checks, over the source, that no file is read anywhere else."""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: how much of a library's own message a FileReadError quotes (some quote a whole line of the file)
_MAX_DETAIL = 200


class FileReadError(ValueError):
    """A file could not be read as what it should be: `path` and `problem` (what is wrong with it), one line."""

    def __init__(self, path: str | os.PathLike, problem: str) -> None:
        self.path = str(path)
        self.problem = " ".join(problem.split())
        super().__init__(f"{self.path}: {self.problem}")


class MissingFileError(FileReadError, FileNotFoundError):
    """A FileReadError for a path where there is no file (still a FileNotFoundError for the callers that plan around
    a missing file, such as a cell not yet computed)."""


@contextmanager
def reading(path: str | os.PathLike, what: str) -> Iterator[None]:
    """Read `path` (`what`: the kind of file, as a message names it, e.g. "a cell result") inside this block: any
    failure becomes a FileReadError that names the file and what is wrong."""
    try:
        yield
    except FileReadError:
        raise
    except BaseException as error:
        problem = _problem(error, what)
        if problem is None:
            raise
        if isinstance(error, FileNotFoundError) and not Path(path).exists():
            raise MissingFileError(path, problem) from error
        raise FileReadError(path, problem) from error


def _problem(error: BaseException, what: str) -> str | None:
    """What `error`, raised while reading `what`, says is wrong with the file; None for an error that is not about
    the file (an interrupt, running out of memory)."""
    detail = " ".join(str(error).split())[:_MAX_DETAIL]
    if isinstance(error, (KeyboardInterrupt, SystemExit, MemoryError, GeneratorExit)):
        return None
    if isinstance(error, FileNotFoundError):
        return f"no such file; pass {what}"
    if isinstance(error, IsADirectoryError):
        return f"is a directory, not {what}; pass the file"
    if isinstance(error, NotADirectoryError):
        return f"a part of the path is a file, not a folder; pass {what}"
    if isinstance(error, PermissionError):
        return f"no permission to read it ({what}); fix its permissions"
    if isinstance(error, UnicodeDecodeError):
        return f"not text (a binary file? byte {error.start} is not UTF-8); pass {what}"
    if isinstance(error, json.JSONDecodeError):
        if not error.doc.strip():
            return f"is empty; pass {what}, or delete it and make it again"
        return f"not valid JSON ({error.msg} at line {error.lineno} column {error.colno}); pass {what}, or delete it"
    if type(error).__name__ == "EmptyDataError":  # pandas: no header row, no rows
        return f"is empty; pass {what}"
    if isinstance(error, EOFError):
        return f"is truncated (it ends before its data does); delete it and fetch or make {what} again"
    if isinstance(error, (gzip.BadGzipFile, zlib.error)):
        return f"is not a valid gzip file ({detail}); delete it and fetch or make {what} again"
    if isinstance(error, OSError):
        return f"could not be read as {what} ({error.strerror or detail})"
    if isinstance(error, KeyError):
        return f"is not {what} (it has no entry {detail}); pass {what}"
    if isinstance(error, (IndexError, TypeError, AttributeError)):
        return f"is not {what} (not the shape of one: {detail}); pass {what}"
    return f"could not be read as {what} ({type(error).__name__}: {detail})"


def read_bytes(path: str | os.PathLike, what: str) -> bytes:
    with reading(path, what):
        return Path(path).read_bytes()


def read_text(path: str | os.PathLike, what: str) -> str:
    """A UTF-8 text file's text."""
    with reading(path, what):
        return Path(path).read_text(encoding="utf-8")


def read_json(path: str | os.PathLike, what: str = "a JSON file") -> Any:
    """A JSON file's data (an empty, truncated or binary file is a FileReadError saying so)."""
    with reading(path, what), open(path, encoding="utf-8") as handle:
        return json.load(handle)


def read_json_object(path: str | os.PathLike, what: str) -> dict[str, Any]:
    """A JSON file whose data must be an object (a mapping)."""
    payload = read_json(path, what)
    if not isinstance(payload, dict):
        raise FileReadError(path, f"holds a JSON {type(payload).__name__}, not {what} (a JSON object)")
    return payload


def read_gzip(path: str | os.PathLike, what: str) -> bytes:
    """A gzip file's decompressed bytes (a truncated or corrupt file is a FileReadError saying so)."""
    with reading(path, what):
        return gzip.decompress(Path(path).read_bytes())
