"""File I/O at the edges: the one writer every output goes through (atomic, and never over one of the running
command's inputs) and JSON (no torch import: data jobs stay light)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

_UMASK = os.umask(0)
os.umask(_UMASK)

#: the inputs of the running command (`protecting_inputs`), as JSON in the environment so that the processes it
#: starts (Flower's apps, packed GPU workers) refuse to write over them too
PROTECTED_INPUTS_VARIABLE = "FDABENCH_PROTECTED_INPUTS"


class OutputPathError(ValueError):
    """An output path a command must not or cannot write: one of its inputs (or a link to one), inside an input
    folder, a folder replaced as a whole that holds an input, another output's path, or a directory."""


@contextmanager
def protecting_inputs(files: Iterable[str], folders: Iterable[str] = ()) -> Iterator[None]:
    """Within the block (and in the processes started in it) every write through this module refuses a path that
    resolves (`os.path.realpath`: links, `..`, relative spellings; or the same inode) to one of `files`, or lies in
    one of `folders`."""
    previous = os.environ.get(PROTECTED_INPUTS_VARIABLE)
    entries = _protected() + [_entry(path, False) for path in files] + [_entry(path, True) for path in folders]
    os.environ[PROTECTED_INPUTS_VARIABLE] = json.dumps(entries)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(PROTECTED_INPUTS_VARIABLE, None)
        else:
            os.environ[PROTECTED_INPUTS_VARIABLE] = previous


def _entry(path: str, folder: bool) -> dict[str, Any]:
    try:
        info = os.stat(path)
        inode = [info.st_dev, info.st_ino]
    except OSError:
        inode = None
    return {"given": str(path), "real": os.path.realpath(path), "folder": folder, "inode": inode}


def _protected() -> list[dict[str, Any]]:
    text = os.environ.get(PROTECTED_INPUTS_VARIABLE)
    return json.loads(text) if text else []


def refuse_overwriting_inputs(path: str | os.PathLike, replaces_folder: bool = False) -> None:
    """Raise OutputPathError if writing `path` would overwrite an input of the running command
    (`protecting_inputs`); `replaces_folder`: `path` is a folder replaced as a whole, so no input may lie in it."""
    real = os.path.realpath(path)
    try:
        info = os.stat(path)
        inode = [info.st_dev, info.st_ino]
    except OSError:
        inode = None
    for entry in _protected():
        inside = entry["folder"] and _under(real, entry["real"])
        holds = replaces_folder and _under(entry["real"], real)
        if real == entry["real"] or inside or holds or (inode is not None and inode == entry["inode"]):
            raise OutputPathError(
                f"{path} would overwrite the input {entry['given']}; choose another output path (nothing was written)"
            )


def _under(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip(os.sep) + os.sep)


#: the failures of a write itself (what the block of `atomic_path` may raise otherwise, e.g. a missing input, passes)
_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EPERM, errno.EROFS, errno.EIO}


def _write_failed(final: Path, error: OSError) -> OSError:
    """The one-line OSError for a failed write of `final`: a full disk, permissions, the file-size limit."""
    if error.errno not in _WRITE_ERRNOS:
        return error
    if error.errno == errno.EFBIG:
        advice = "the file-size limit (ulimit -f) is smaller than the file; raise it and rerun"
    else:
        advice = "free space or fix permissions and rerun"
    return OSError(
        error.errno,
        f"could not write {final}: {error.strerror or error}; {advice} (an earlier file there, if any, is untouched)",
    )


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to `path`; move it into place only if the block succeeds.

    A killed or failing writer leaves no file at `path`, so a partial output is never
    mistaken for a finished one. A `path` that is one of the command's inputs is refused first
    (`refuse_overwriting_inputs`).
    """
    final = Path(path)
    refuse_overwriting_inputs(final)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".partial", dir=final.parent)
    except OSError as error:
        raise _write_failed(final, error) from error
    os.close(fd)
    tmp = Path(tmp_name)
    os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp creates 0600; finished files get the usual permissions
    try:
        yield tmp
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, final)
    except OSError as error:
        failure = _write_failed(final, error)
        if failure is error:
            raise
        raise failure from error
    finally:
        if tmp.exists():
            tmp.unlink()


@contextmanager
def atomic_folder(path: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty staging folder next to `path`; replace the folder `path` with it as a whole only if the block
    succeeds (an interrupted writer leaves the previous folder, or none, never a mixture). A folder that is or holds
    one of the command's inputs is refused first."""
    final = Path(path)
    refuse_overwriting_inputs(final, replaces_folder=True)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".partial", dir=final.parent))
    except OSError as error:
        raise _write_failed(final, error) from error
    try:
        yield staging
        staging.chmod(0o777 & ~_UMASK)
        if final.is_dir() and not final.is_symlink():
            shutil.rmtree(final)
        elif final.exists() or final.is_symlink():
            final.unlink()
        os.replace(staging, final)
    except OSError as error:
        failure = _write_failed(final, error)
        if failure is error:
            raise
        raise failure from error
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def open_log(path: str | os.PathLike) -> IO[str]:
    """A log file opened for writing as it grows (a process's output; not atomic: a log is read while written),
    refused like every output if it is one of the command's inputs."""
    refuse_overwriting_inputs(path)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return open(path, "w", encoding="utf-8")


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json_atomic(path: str | os.PathLike, payload: Any) -> None:
    write_text_atomic(path, json.dumps(payload, indent=1, sort_keys=False, default=_json_default) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def canonical_json(payload: Any) -> str:
    """Key-sorted compact JSON: equal payloads give equal strings (used for hashes and params)."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=_json_default)


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def content_hash(payload: Any) -> str:
    """sha256 of the canonical JSON of `payload` (tensors hashed by their bytes)."""
    digest = hashlib.sha256()
    _update_hash(digest, payload)
    return digest.hexdigest()


def _update_hash(digest: hashlib._Hash, payload: Any) -> None:
    if hasattr(payload, "dtype") and hasattr(payload, "shape"):  # numpy arrays and torch tensors
        array = payload.detach().cpu().numpy() if hasattr(payload, "detach") else payload
        digest.update(f"array:{array.dtype}:{tuple(array.shape)}:".encode())
        digest.update(array.tobytes())
    elif isinstance(payload, dict):
        digest.update(b"{")
        for key in sorted(payload):
            digest.update(canonical_json(key).encode())
            _update_hash(digest, payload[key])
        digest.update(b"}")
    elif isinstance(payload, (list, tuple)):
        digest.update(b"[")
        for item in payload:
            _update_hash(digest, item)
        digest.update(b"]")
    else:
        digest.update(canonical_json(payload).encode())


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):  # numpy arrays and scalars, torch tensors
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
