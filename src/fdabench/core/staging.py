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
        _swap_in(staging, final)
    except OSError as error:
        raise write_failure(final, error, "folder") from error
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _swap_in(staging: Path, final: Path) -> None:
    """Put `staging` at `final`: what stood there is moved aside first and removed only once the new folder is in
    place, and moved back if that fails, so the earlier folder (or file) is never lost."""
    if not (final.exists() or final.is_symlink()):
        os.replace(staging, final)
        return
    aside = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".previous", dir=final.parent)) / final.name
    os.replace(final, aside)
    try:
        os.replace(staging, final)
    except OSError:
        os.replace(aside, final)
        aside.parent.rmdir()
        raise
    shutil.rmtree(aside.parent, ignore_errors=True)  # what stood there, inside its own temporary folder
