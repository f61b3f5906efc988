"""Shared by the tests that run the workflow: a tiny suite and the environment a subprocess (snakemake, dvc)
needs, and the CLI's prepare -> partition -> train steps called in-process, as the rules call them."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

from fdabench.cli import main
from fdabench.config import Params, load_params
from fdabench.core.io import canonical_json

#: one experiment, two methods, two seeds, a few rounds: the smallest suite with a table
TINY_PARAMS = {
    "suite": "tiny",
    "methods": {"fedgp": {"beta": 0.5}},
    "suites": {
        "tiny": {
            "seeds": [0, 1],
            "methods": ["source_only", "fedgp"],
            "train": {"model": "mlp", "model_options": {"hidden": [16]}, "rounds": 3, "warmup_rounds": 1},
            "experiments": {"colored_digits": {"dataset": "colored_digits", "targets": ["-90"]}},
            "tables": {"table1": {"experiments": ["colored_digits"]}},
        }
    },
}


_RUNTIME_DIRS: set[Path] = set()


def params_refusal(raw: dict) -> str:
    """The message with which params validation refuses `raw` (it must refuse it)."""
    import pytest

    from fdabench.config import ParamsError, validate_params

    with pytest.raises(ParamsError) as caught:
        validate_params(raw)
    return str(caught.value)


def short_runtime_dir(workdir: Path) -> Path:
    """A private runtime folder for `workdir`'s fork server, short enough for a Unix socket path wherever pytest
    puts `workdir` (a pytest-xdist worker's temporary folders are a level deeper): /tmp/fdabench-rt-<hash>."""
    digest = hashlib.sha256(str(workdir.resolve()).encode()).hexdigest()[:16]
    directory = Path(tempfile.gettempdir()) / f"fdabench-rt-{digest}"
    directory.mkdir(mode=0o700, exist_ok=True)
    _RUNTIME_DIRS.add(directory)
    return directory


def remove_runtime_dirs() -> None:
    """Remove the runtime folders this process made (a fork server left idle in one ends on its own)."""
    while _RUNTIME_DIRS:
        shutil.rmtree(_RUNTIME_DIRS.pop(), ignore_errors=True)


def workflow_environment(workdir: Path, forkserver: bool = True, source: Path | None = None) -> dict[str, str]:
    """This interpreter's scripts (fdabench, snakemake, dvc) first on PATH; the fork server on (a short idle
    time, its socket in `workdir`'s short runtime folder) or off; with `source`, a copy of the source tree shadows
    the installed one."""
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    env["FDABENCH_FORKSERVER"] = "1" if forkserver else "0"
    env["FDABENCH_FORKSERVER_IDLE"] = "15"
    env["XDG_RUNTIME_DIR"] = str(short_runtime_dir(workdir))
    if source is not None:
        env["PYTHONPATH"] = str(source) + os.pathsep + env.get("PYTHONPATH", "")
    return env


class CliCells(NamedTuple):
    """ColoredDigits prepared under `root` with target -90 partitioned per seed, and params whose demo suite runs
    the given number of rounds."""

    root: Path
    prepared: Path
    params: Params


def prepare_cli_cells(root: Path, repo_root: Path, seeds: tuple[int, ...], rounds: int) -> CliCells:
    """Run `fdabench prepare` and one `fdabench partition` per seed (48 labelled target samples)."""
    prepared = root / "colored_digits"
    assert main(["prepare", "--dataset", "colored_digits", "--output", str(prepared)]) == 0
    for seed in seeds:
        args = ["partition", "--prepared", str(prepared), "--target=-90", "--seed", str(seed)]
        options = ["--options", '{"target_labelled": 48}', "--output", str(root / f"partition{seed}.json")]
        assert main([*args, *options]) == 0
    params = load_params(repo_root / "params.yaml", overrides={"suites": {"demo": {"train": {"rounds": rounds}}}})
    return CliCells(root, prepared, params)


def train_cli_cell(cells: CliCells, method: str, seed: int, name: str, device: str | None = None) -> dict:
    """Run `fdabench train` on the demo suite's (colored_digits, method, -90, seed) cell; its result JSON."""
    config = cells.params.cell("colored_digits", method, "-90", seed).config
    output = cells.root / name
    args = ["train", "--cell", canonical_json(config), "--prepared", str(cells.prepared)]
    args += ["--partition", str(cells.root / f"partition{seed}.json"), "--output", str(output)]
    assert main([*args, *(["--device", device] if device else [])]) == 0
    return json.loads(output.read_text())


#: a small sweep suite (tests/config/test_sweep_config.py, tests/report/test_sweep_settings.py)
SWEEP_PARAMS = {
    "suite": "s",
    "methods": {"fedgp_half": {"algorithm": "fedgp", "beta": 0.25}},
    "suites": {
        "s": {
            "seeds": [0, 1],
            "methods": ["source_only", "fedgp_half", "ditto"],
            "train": {"model": "mlp", "model_options": {"hidden": [8]}, "rounds": 3, "warmup_rounds": 1},
            "validation": {"target_holdout": 8},
            "sweep": {"draws": 4, "train": ["target_lr"]},
            "experiments": {
                "colored_digits": {
                    "dataset": "colored_digits",
                    "targets": ["-90", "+90"],
                    "partition": {"target_labelled": 48},
                }
            },
        }
    },
}


def snakemake_in(workdir: Path, repo: Path, *args: str, source: Path | None = None) -> subprocess.CompletedProcess:
    """Snakemake in `workdir`; with `source`, a copy of the fdabench source tree shadows the installed one."""
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(repo / "Snakefile"),
        "--directory",
        str(workdir),
        "--cores",
        "2",
        *args,
    ]
    env = workflow_environment(workdir, source=source)
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


def job_blocks(console: str, rule: str) -> list[str]:
    """The blocks Snakemake prints for the jobs of `rule` ("rule train:" or "localrule train:" up to the next job),
    in the order printed."""
    blocks = re.split(r"\n(?=\[[^\]]+\]\n|(?:local)?rule \w+:)", console)
    return [block for block in blocks if re.match(rf"(local)?rule {rule}:", block)]


def planned_jobs(plan: subprocess.CompletedProcess) -> dict[str, str]:
    """Rule -> job count from `snakemake --dry-run --quiet rules`."""
    return dict(
        line.split()[:2]
        for line in plan.stdout.splitlines()
        if line.split()[:1] and line.split()[-1].isdigit() and len(line.split()) == 2
    )


#: what differs between two runs of the same cell: its timings (its digest hashes them too)
TIMINGS = {"wall_seconds", "train_seconds", "train_cpu_seconds", "seconds", "digest"}


def without_timings(value):
    """A cell's contents (or any part of them) without its timings (`TIMINGS`)."""
    if isinstance(value, dict):
        return {key: without_timings(item) for key, item in value.items() if key not in TIMINGS}
    if isinstance(value, list):
        return [without_timings(item) for item in value]
    return value
