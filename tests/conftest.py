"""Shared fixtures: tiny prepared datasets built by the real sources, and small problems."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Tests run commands in-process or through their own fork server instance; keep them independent of
# any server a developer's pipeline run left behind.
os.environ.setdefault("FDABENCH_FORKSERVER", "0")


@pytest.fixture(scope="session")
def colored_digits():
    from fdabench.data import get_dataset

    source = get_dataset("colored_digits")
    return source.prepare(source.default_options)


@pytest.fixture(scope="session")
def rotated_digits():
    from fdabench.data import get_dataset

    source = get_dataset("rotated_digits")
    return source.prepare(source.default_options)


@pytest.fixture(scope="session")
def synthetic_small():
    from fdabench.data import get_dataset

    source = get_dataset("synthetic_regression")
    return source.prepare({**source.default_options, "samples_per_domain": 600})


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO
