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
def digits_problem(colored_digits):
    """digits_problem(target): a CPU FDA problem on ColoredDigits with `target` held out (48 labelled)."""
    from fdabench.data import get_partitioner
    from fdabench.federation.problem import build_problem

    def build(target: str):
        partition = get_partitioner("leave_one_domain_out").split(
            colored_digits, target, 0, {"holdout_fraction": 0.2, "target_labelled": 48}
        )
        return build_problem(colored_digits, partition, "cpu")

    return build


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO
