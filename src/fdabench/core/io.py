"""File I/O at the edges: atomic writes and JSON (no torch import: data jobs stay light)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fdabench.core.readers import (
    read_json,  # noqa: F401 (read here by the modules that write JSON too)
    reading,
)

UMASK = os.umask(0)
os.umask(UMASK)


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to `path`; move it into place only if the block succeeds.

    A killed or failing writer leaves no file at `path`, so a partial output is never
    mistaken for a finished one.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".partial", dir=final.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    os.chmod(tmp, 0o666 & ~UMASK)  # mkstemp creates 0600; finished files get the usual permissions
    try:
        yield tmp
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, final)
    except OSError as error:
        raise write_failure(final, error, "file") from error
    finally:
        if tmp.exists():
            tmp.unlink()


def write_failure(final: Path, error: OSError, kind: str) -> OSError:
    """The one-line error of a write of the `kind` ("file", "folder") at `final` that failed with `error`."""
    return OSError(
        error.errno,
        f"could not write {final}: {error.strerror or error}; free space or fix permissions and rerun (an "
        f"earlier {kind} there, if any, is untouched)",
    )


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json_atomic(path: str | os.PathLike, payload: Any) -> None:
    write_text_atomic(path, json.dumps(payload, indent=1, sort_keys=False, default=_json_default) + "\n")


def canonical_json(payload: Any) -> str:
    """Key-sorted compact JSON: equal payloads give equal strings (used for hashes and params)."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=_json_default)


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with reading(path, "a file to hash"), open(path, "rb") as handle:
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
