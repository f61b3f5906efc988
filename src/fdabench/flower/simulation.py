"""Running a cell through Flower: write its site files, then run it on Flower's simulation engine (one machine,
this process plus Ray workers) or on its deployment engine (a SuperLink and one SuperNode per site, each reading
only its own file; `fdabench.flower.deploy`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from fdabench.cell.setup import load_cell
from fdabench.config import Params
from fdabench.config.lookup import cell_inputs, resolve_cell
from fdabench.core.io import write_json_atomic
from fdabench.core.readers import read_json
from fdabench.flower import DEFAULT_DROPOUT, DEFAULT_TIMEOUT_SECONDS, DEFAULT_WAIT_SECONDS
from fdabench.flower.apps import make_client_app, make_server_app
from fdabench.flower.faults import make_faulty_client_app
from fdabench.flower.site_files import export_sites, read_manifest

CELL_FILE = "cell.json"
#: what every Flower process of a run gets: no telemetry, no update check, no runtime package installation
QUIET = {
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
    "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
}


def export_cell(
    params: Params, experiment: str, method: str, target: str | None, seed: int | None, folder: str | os.PathLike
) -> dict[str, Any]:
    """The cell's configuration (`cell.json`) and one file per site (`sitedata.export_sites`) in `folder`."""
    target, seed = resolve_cell(params, experiment, method, target, seed)
    cell = params.cell(experiment, method, target, seed)
    if cell.config["train"].get("batching", "off") != "off":
        raise ValueError(
            f"{experiment}/{method}: batching: {cell.config['train']['batching']} computes a cell's clients together "
            "in one process; over Flower each site trains its own, one by one. Export a cell with batching: off"
        )
    prepared, partition = cell_inputs(params, experiment, target, seed)
    problem = load_cell(cell.config, prepared, partition, torch.device("cpu")).problem
    folder = Path(folder)
    manifest = export_sites(problem, folder)
    write_json_atomic(folder / CELL_FILE, cell.config)
    return manifest


def site_files(folder: str | os.PathLike) -> list[str]:
    """The site files of an exported cell, by partition id (sources in order, then the target)."""
    folder = Path(folder).resolve()
    return [str(folder / site["file"]) for site in read_manifest(folder)["sites"]]


def run_options(
    folder: str | os.PathLike,
    result: str | os.PathLike,
    dropout: str = DEFAULT_DROPOUT,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    wait_seconds: float = DEFAULT_WAIT_SECONDS,
    threads: int = 1,
) -> dict[str, Any]:
    """The apps' configuration for an exported cell (`fdabench.flower.apps`)."""
    folder = Path(folder).resolve()
    return {
        "cell-file": str(folder / CELL_FILE),
        "result-file": str(Path(result).resolve()),
        "sites": len(read_manifest(folder)["sites"]),
        "site-files": json.dumps(site_files(folder)),
        "dropout": dropout,
        "timeout": float(timeout),
        "wait-seconds": float(wait_seconds),
        "threads": int(threads),
    }


def simulate(
    folder: str | os.PathLike,
    result: str | os.PathLike,
    dropout: str = DEFAULT_DROPOUT,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    wait_seconds: float = DEFAULT_WAIT_SECONDS,
    threads: int = 1,
    faults: list | None = None,
    sites_at_once: int | None = None,
) -> dict[str, Any]:
    """Run the exported cell on Flower's simulation engine: one virtual SuperNode per site, with planned `faults`
    (`fdabench.flower.faults`) if any. Sites train in at most `sites_at_once` processes at a time (Ray's actors,
    one CPU each; None: one per CPU of this machine): each process pays torch's and fdabench's imports once, so
    fewer cost less CPU where sites are small. The history, as written to `result`."""
    from flwr.simulation import run_simulation  # imports Ray's bindings: only where a simulation runs

    options = run_options(folder, result, dropout, timeout, wait_seconds, threads)
    Path(options["result-file"]).unlink(missing_ok=True)
    for name, value in QUIET.items():
        os.environ.setdefault(name, value)
    run_simulation(
        server_app=make_server_app(options),
        client_app=make_faulty_client_app(faults, options) if faults else make_client_app(options),
        num_supernodes=options["sites"],
        backend_config={
            "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
            "init_args": {} if sites_at_once is None else {"num_cpus": sites_at_once},
        },
    )
    if not Path(options["result-file"]).exists():
        raise RuntimeError("the Flower simulation ended without a result; its log above says why")
    return read_json(options["result-file"], "the Flower server's result")
