"""The locked environment a cell must have run in to enter the reproduction archive: `requirements.lock` pins torch,
its header names the lowest Python it was compiled for, and the project's version is this package's. A cell records
the versions that move its numbers (`versions` {fdabench, torch, python}, `fdabench.cell.run`); one that ran
elsewhere (another torch, such as a GPU machine's own image) is a valid run but not the archive's evidence."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # packaging is imported where it is used: `fdabench`'s start-up reads only LOCK
    from packaging.version import Version

LOCK = Path("requirements.lock")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", re.MULTILINE)
_PYTHON = re.compile(r"--python-version (\d+(?:\.\d+)*)")


def locked_pins(text: str) -> tuple[dict[str, str], Version | None]:
    """({canonical package name: pinned version}, the lowest Python the lock was compiled for, or None where its
    header names none) of a `uv pip compile` lock's text."""
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    pins = {canonicalize_name(name): version for name, version in _PIN.findall(text)}
    python = _PYTHON.search(text)
    return pins, (Version(python.group(1)) if python else None)


def version_disagreements(
    versions: dict[str, str], pins: dict[str, str], python: Version | None, project_version: str
) -> list[str]:
    """Where a cell's recorded `versions` disagree with the lock: torch not the locked torch (a local build tag such
    as +cu132 aside: the same release for CPU and CUDA), Python older than the lock's, fdabench not this project's
    version. Empty where they agree."""
    from packaging.version import Version

    found = []
    torch, locked_torch = versions.get("torch"), pins.get("torch")
    if locked_torch is not None and (torch is None or Version(torch).public != Version(locked_torch).public):
        found.append(f"torch {torch} (locked {locked_torch})")
    if python is not None and Version(versions.get("python") or "0") < python:
        found.append(f"python {versions.get('python')} (the lock is for {python} and later)")
    if versions.get("fdabench") != project_version:
        found.append(f"fdabench {versions.get('fdabench')} (this project is {project_version})")
    return found
