"""Folders written as a whole: staged beside their place and moved in when complete (files: `fdabench.core.io`)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fdabench.core.io import UMASK, write_failure


@contextmanager
def atomic_folder(path: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty staging folder next to `path`; replace the folder `path` with it as a whole only if the block
    succeeds: an interrupted or failing writer leaves the previous folder (or none), never a mixture."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".partial", dir=final.parent))
    try:
        yield staging
        staging.chmod(0o777 & ~UMASK)  # mkdtemp creates 0700; finished folders get the usual permissions
        if final.is_dir() and not final.is_symlink():
            shutil.rmtree(final)
        elif final.exists() or final.is_symlink():
            final.unlink()
        os.replace(staging, final)
    except OSError as error:
        raise write_failure(final, error, "folder") from error
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
