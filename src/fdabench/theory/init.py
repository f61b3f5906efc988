"""The theory check's job at a cell's initial parameters (`fdabench theory init`): the cell set up as its training
job sets it up (`fdabench.cell.setup.load_cell`), then the quantities of `fdabench.theory.quantities`."""

from __future__ import annotations

from typing import Any

import torch

from fdabench.cell.setup import load_cell
from fdabench.theory.quantities import initial_quantities


def run_theory_init(
    config: dict[str, Any], prepared: str, partition: str, beta: float, draws: int, threads: int = 1
) -> dict[str, Any]:
    """d², σ², τ²d² and the rules' Delta errors at the initial parameters of a theory-check cell."""
    torch.set_num_threads(threads)
    cell = load_cell(config, prepared, partition)
    quantities = initial_quantities(cell.problem, cell.settings, config["seed"], beta, draws)
    return {"target": config["target"], "seed": config["seed"], "experiment": config["experiment"], **quantities}
