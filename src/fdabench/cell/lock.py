"""The locked environment a cell must have run in to enter the reproduction archive: `requirements.lock` pins torch,
its header names the lowest Python it was compiled for, and the project's version is this package's. A cell records
the versions that move its numbers (`versions` {fdabench, torch, python}, `fdabench.cell.run`); one that ran
elsewhere (another torch, such as a GPU machine's own image) is a valid run but not the archive's evidence."""

from __future__ import annotations

import re
from pathlib import Path

LOCK = Path("requirements.lock")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", re.MULTILINE)
_PYTHON = re.compile(r"--python-version (\d+(?:\.\d+)*)")


def canonical_name(name: str) -> str:
    """A package name as PEP 503 compares it (`Torch_Vision` and `torch-vision` are one)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_pins(text: str) -> tuple[dict[str, str], tuple[int, ...] | None]:
    """({canonical package name: pinned version}, the lowest Python the lock was compiled for, or None where its
    header names none) of a `uv pip compile` lock's text."""
    pins = {canonical_name(name): version for name, version in _PIN.findall(text)}
    python = _PYTHON.search(text)
    return pins, (_release(python.group(1)) if python else None)


def _release(version: str) -> tuple[int, ...]:
    """The numeric release of a version string: (2, 15, 0) for '2.15.0+cu132' or '2.15.0'."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+", 1)[0].split("rc", 1)[0])[:3])


def public_version(version: str) -> str:
    """A version without its local build tag: '2.15.0' for '2.15.0+cu132' (the same wheel for CPU and CUDA)."""
    return version.split("+", 1)[0]


def version_disagreements(
    versions: dict[str, str], pins: dict[str, str], python: tuple[int, ...] | None, project_version: str
) -> list[str]:
    """Where a cell's recorded `versions` disagree with the lock: torch not the locked torch (a local build tag
    aside), Python older than the lock's, fdabench not this project's version. Empty where they agree."""
    found = []
    torch, locked_torch = versions.get("torch"), pins.get("torch")
    if locked_torch is not None and (torch is None or public_version(torch) != public_version(locked_torch)):
        found.append(f"torch {torch} (locked {locked_torch})")
    if python is not None and _release(versions.get("python") or "0") < python:
        found.append(f"python {versions.get('python')} (the lock is for {'.'.join(map(str, python))} and later)")
    if versions.get("fdabench") != project_version:
        found.append(f"fdabench {versions.get('fdabench')} (this project is {project_version})")
    return found
