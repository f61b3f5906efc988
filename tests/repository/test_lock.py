"""The locked environment (docs/testing.md#the-locked-environment): requirements.lock pins what pyproject.toml asks
for, the README and CI install from it, and the versions a cell records (fdabench, torch, Python:
`fdabench.cell.run`) agree with it, both those of this environment and those of every archived cell."""

from __future__ import annotations

import importlib.metadata
import platform
import re
import tomllib
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from fdabench.cell.lock import locked_pins, version_disagreements
from fdabench.reproduction.archive import read_archive

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements.lock"
UPDATE = "uv pip compile pyproject.toml --extra dev --universal --python-version 3.11 -o requirements.lock"
#: the packages whose versions move the numbers: the installed ones must be the locked ones
NUMERICAL = ("torch", "torchvision", "numpy", "scipy", "scikit-learn", "pot", "pandas")


def _lock() -> tuple[dict[str, tuple[str, Marker | None]], Version]:
    """({package: (pinned version, environment marker or None)}, the lowest Python the lock was compiled for)."""
    text = LOCK.read_text(encoding="utf-8")
    pins = {}
    for line in text.splitlines():
        found = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)\s*(?:;\s*(.+))?$", line)
        if found:
            name, version, marker = found.groups()
            pins[canonicalize_name(name)] = (version, Marker(marker) if marker else None)
    python = re.search(r"--python-version (\d+\.\d+)", text)
    assert python, f"requirements.lock's header names no --python-version; regenerate it: {UPDATE}"
    return pins, Version(python.group(1))


def _pin(name: str) -> str:
    pins, _ = _lock()
    assert canonicalize_name(name) in pins, f"{name} is not in requirements.lock"
    return pins[canonicalize_name(name)][0]


def _project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_the_lock_was_made_by_the_documented_command():
    assert UPDATE in LOCK.read_text(encoding="utf-8").splitlines()[1], (
        "regenerate it with the command of docs/testing.md"
    )
    assert UPDATE in (REPO / "docs" / "testing.md").read_text(encoding="utf-8")


def test_the_lock_pins_every_requirement_of_pyproject_within_its_bounds():
    """A dependency added to pyproject.toml without regenerating the lock fails here."""
    pins, _ = _lock()
    project = _project()
    requirements = [
        *project["dependencies"],
        *(r for extra in project["optional-dependencies"].values() for r in extra),
    ]
    missing, outside = [], []
    for text in requirements:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        if name == "fdabench":  # the project's own extras (fdabench[flower])
            continue
        if name not in pins:
            missing.append(requirement.name)
        elif not requirement.specifier.contains(pins[name][0], prereleases=True):
            outside.append(f"{requirement} (locked {pins[name][0]})")
    assert not missing and not outside, f"missing {missing}, outside bounds {outside}; regenerate: {UPDATE}"


def test_the_readme_and_ci_install_from_the_lock():
    install = next(
        line for line in (REPO / "README.md").read_text(encoding="utf-8").splitlines() if "# install" in line
    )
    command = install.split("#")[0].strip()
    assert "-r requirements.lock" in command and '-e ".[dev]"' in command
    assert command in (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert command in (REPO / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8")


def test_this_environment_is_the_locked_one_for_the_packages_that_move_the_numbers():
    """torch and the numerical libraries installed here are the lock's pins (a local build tag such as +cu132
    aside); the versions a cell records now (`fdabench.cell.run`) agree with the lock."""
    import torch

    import fdabench

    differing = [
        f"{name} {importlib.metadata.version(name)} (locked {_pin(name)})"
        for name in NUMERICAL
        if Version(importlib.metadata.version(name)).public != Version(_pin(name)).public
    ]
    assert not differing, f"install from the lock (the README's install command): {differing}"
    recorded = {"fdabench": fdabench.__version__, "torch": torch.__version__, "python": platform.python_version()}
    assert _disagreements(recorded) == []


def _disagreements(versions: dict[str, str]) -> list[str]:
    """Where a cell's recorded versions disagree with the lock (`fdabench.cell.lock`, the rule `fdabench archive
    add` applies)."""
    pins, python = locked_pins(LOCK.read_text(encoding="utf-8"))
    return version_disagreements(versions, pins, python, _project()["version"])


def test_a_cell_of_other_versions_disagrees_with_the_lock():
    locked = {"fdabench": _project()["version"], "torch": _pin("torch") + "+cu132", "python": "3.11.7"}
    assert _disagreements(locked) == []
    assert _disagreements({**locked, "torch": "2.4.0+cpu"}) == [f"torch 2.4.0+cpu (locked {_pin('torch')})"]
    assert len(_disagreements({**locked, "python": "3.10.4", "fdabench": "0.0.1"})) == 2


@pytest.mark.parametrize(
    "archive", sorted((REPO / "docs" / "reproduction").glob("*/cells.jsonl.gz")), ids=lambda path: path.parent.name
)
def test_every_archived_cell_ran_the_locked_versions(archive):
    """The archive holds what the locked environment produced: a lock update that moves torch needs the archived
    cells run again (or the lock kept)."""
    found = {
        "/".join(str(record["cell"][key]) for key in ("experiment", "method", "target", "seed")): problems
        for record in read_archive(archive)
        if (problems := _disagreements(record["versions"]))
    }
    assert not found, dict(list(found.items())[:5])
