"""Setting up one cell: from its resolved configuration (`fdabench.config.Params.cell`) to the rules every site
runs (training settings and method), the compute device, and the federated problem in memory. Training, the
cell benchmark, Flower's export, Flower's server and Flower's sites all set a cell up here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from fdabench.core import devices
from fdabench.core.io import read_json
from fdabench.data import Partition, PreparedDataset
from fdabench.federation.problem import FederatedProblem, build_problem
from fdabench.federation.settings import TrainSettings
from fdabench.methods import Method, get_method


class CellInputError(ValueError):
    """The inputs given for a cell do not belong to it (e.g. another target's partition)."""


def cell_device(name: str) -> torch.device:
    """The torch device of params.yaml `device` `name` here (the decision is `fdabench.core.devices.decide`); cuda
    fails clearly where CUDA is absent. A torch device name (e.g. cuda:1) is taken as it is."""
    if name not in devices.DEVICES:
        return torch.device(name)
    try:
        return torch.device(devices.decide(name))
    except devices.DeviceUnavailable:
        raise CellInputError("device: cuda was requested but CUDA is not available") from None


@dataclass(frozen=True)
class CellRules:
    """What a cell's round loop runs, wherever it runs: the training settings and the method."""

    settings: TrainSettings
    method: Method


def cell_rules(config: dict[str, Any]) -> CellRules:
    """The cell's training settings (its `train` block) and its method (algorithm and hyper-parameters)."""
    return CellRules(TrainSettings.from_dict(config["train"]), get_method(config["algorithm"], config["hparams"]))


def load_problem(
    config: dict[str, Any], prepared: str, partition: str, device: torch.device
) -> tuple[FederatedProblem, str]:
    """The cell's federated problem on `device` (its `validation` settings keep target samples for validation) and
    its partition's content hash; refuses a partition of another cell or one made from other prepared data."""
    payload = read_json(partition)
    split = Partition.from_json(payload)
    if (split.target, split.seed) != (config["target"], config["seed"]):
        raise CellInputError(f"partition {partition} is for target {split.target} seed {split.seed}, not this cell")
    data = PreparedDataset.load(prepared)
    if payload.get("prepared_hash") not in (None, data.content_hash):
        raise CellInputError(
            f"partition {partition} was made from other prepared data than {prepared} (prepared hash "
            f"{payload['prepared_hash']} vs {data.content_hash}); rerun its partition job (snakemake reruns it when "
            "the prepared data changes)"
        )
    return build_problem(data, split, device, config.get("validation")), payload["content_hash"]


@dataclass(frozen=True)
class CellSetup:
    """One cell ready to train: its configuration, device, federated problem, settings and method."""

    config: dict[str, Any]
    device: torch.device
    problem: FederatedProblem
    partition_hash: str
    settings: TrainSettings
    method: Method


def load_cell(
    config: dict[str, Any], prepared: str, partition: str, device: str | torch.device | None = None
) -> CellSetup:
    """Set a cell up: its device (`device` overrides the configuration's; `cell_device`), its problem from the
    prepared data and partition (`load_problem`), and its rules (`cell_rules`)."""
    where = device if isinstance(device, torch.device) else cell_device(device or config.get("device", "auto"))
    problem, partition_hash = load_problem(config, prepared, partition, where)
    rules = cell_rules(config)
    return CellSetup(config, where, problem, partition_hash, rules.settings, rules.method)
