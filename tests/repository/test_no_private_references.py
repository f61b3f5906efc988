"""Every reference in the repository points inside it: no tracked file cites the engineers' private design notes
or a folder beside the checkout (users see neither). Exceptions: this file, which names them, and the CI script,
which uses the CI machines' dataset mirror beside the checkout when there is one (never required)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = ("DESIGN" + ".md", "../" + "shared")


def test_no_tracked_file_cites_a_file_outside_the_repository():
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    )
    this = str(Path(__file__).resolve().relative_to(REPO))
    found = []
    for name in tracked:
        path = REPO / name
        if not name or name in (this, ".ci/run") or not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        found += [f"{name}: {word}" for word in FORBIDDEN if word in text]
    assert not found, found
