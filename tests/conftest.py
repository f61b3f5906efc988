"""Shared fixtures: tiny prepared datasets built by the real sources, and small problems."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
import yaml

from fdabench.config import load_params
from fdabench.core import paths
from workflows import TINY_PARAMS, remove_runtime_dirs, workflow_environment

REPO = Path(__file__).resolve().parents[1]

# Tests run commands in-process or through their own fork server instance; keep them independent of
# any server a developer's pipeline run left behind.
os.environ.setdefault("FDABENCH_FORKSERVER", "0")

if os.environ.get("PYTEST_XDIST_WORKER"):  # pytest -n: each worker's in-process training keeps to its share of cores
    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))


#: the files that take longest, longest first (seconds of a worker under `pytest -n 2 --dist loadfile` on the 2-core
#: machine); they start first, so that no worker is left with one of them while the other has nothing to do. The
#: order changes no result, only how soon the last file ends.
SLOWEST_FIRST = (
    "tests/workflow/test_cell_groups.py",  # 312 s
    "tests/workflow/test_self_healing.py",  # 178
    "tests/workflow/test_interrupt.py",  # 172
    "tests/workflow/test_pipeline.py",  # 165
    "tests/flower/test_flower.py",  # about 150 (with test_flower_faults.py, 417 s before they parted)
    "tests/workflow/test_missing_results.py",  # 148
    "tests/flower/test_flower_faults.py",  # about 130
    "tests/flower/test_flower_client_state.py",  # 124
    "tests/workflow/test_dvc.py",  # 105
    "tests/speed/test_gpu_cell_batch.py",  # 100
    "tests/workflow/test_report.py",  # 69
    "tests/jobs/test_gpus.py",  # 69
)


def pytest_configure(config):
    # pytest-xdist hands out the files with the most tests first (--loadscope-reorder, its default); the slowest files
    # here have one to four tests each: keep the collection's order, which pytest_collection_modifyitems sets
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    """The `SLOWEST_FIRST` files first, in that order; the rest as collected."""
    rank = {name: index for index, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(item.path).relative_to(REPO).as_posix(), len(rank)))


@pytest.fixture(scope="session", autouse=True)
def _runtime_dirs_removed():
    """The fork servers' runtime folders under /tmp that the tests made go when the session ends."""
    yield
    remove_runtime_dirs()


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


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch CPU thread for a test module, as every training cell runs (threads_per_cell: 1; `batching: stacked`
    computes on one: `federation.lockstep.batching_scope`; tiny models only lose from a second thread), the previous
    count restored after it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def tiny_inputs(tmp_path_factory, repo_root):
    """The tiny suite's prepared data and partitions, built by the workflow in a fresh directory (its root, params)."""
    root = tmp_path_factory.mktemp("bench_cell")
    shutil.copy(repo_root / "Snakefile", root / "Snakefile")
    shutil.copytree(repo_root / "workflow", root / "workflow")
    (root / "params.yaml").write_text(yaml.safe_dump({**TINY_PARAMS, "device": "cpu"}))
    params = load_params(root / "params.yaml")
    partitions = [
        paths.fill(paths.PARTITION, data="data", suite="tiny", experiment="colored_digits", target="-90", seed=seed)
        for seed in (0, 1)
    ]
    result = subprocess.run(
        ["snakemake", "--cores", "1", *partitions],
        cwd=root,
        env=workflow_environment(root),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return root, params
