"""Finding one cell of a suite: its target and seed (with the suite's defaults) and the input files it reads, with
errors that name the allowed values or the command that builds what is missing."""

from __future__ import annotations

from pathlib import Path

from fdabench.config import Params
from fdabench.core import paths


class MissingCellInputs(FileNotFoundError):
    """The cell's prepared data or partition has not been built yet."""


def resolve_cell(params: Params, experiment: str, method: str, target: str | None, seed: int | None) -> tuple[str, int]:
    """The cell's target and seed (default: the experiment's first); a clear error, with the allowed values, for an
    experiment, method, target or seed the suite does not have."""
    choices = {
        "experiment": (experiment, params.experiment_names()),
        "method": (method, params.methods(experiment) if experiment in params.experiment_names() else []),
    }
    for what, (value, allowed) in choices.items():
        if value not in allowed:
            raise ValueError(f"suite {params.suite_name} has no {what} {value!r}; allowed: {', '.join(allowed)}")
    target = target if target is not None else params.targets(experiment)[0]
    seed = seed if seed is not None else params.seeds(experiment)[0]
    for what, value, allowed in (
        ("target", target, params.targets(experiment)),
        ("seed", seed, params.seeds(experiment)),
    ):
        if value not in allowed:
            raise ValueError(
                f"experiment {experiment} has no {what} {value!r}; allowed: {', '.join(map(str, allowed))}"
            )
    return target, seed


def cell_inputs(params: Params, experiment: str, target: str, seed: int) -> tuple[str, str]:
    """The prepared data and partition a cell reads; a clear error naming the command that builds them."""
    prepared = params.prepared_path(experiment)
    partition = paths.fill(
        paths.PARTITION, data=params.data_root, suite=params.suite_name, experiment=experiment, target=target, seed=seed
    )
    missing = [path for path in (prepared, partition) if not Path(path).exists()]
    if missing:
        raise MissingCellInputs(
            f"{', '.join(missing)} not built yet; build them with: snakemake --cores 2 {' '.join(missing)} "
            f"--config suite={params.suite_name}"
        )
    return prepared, partition
