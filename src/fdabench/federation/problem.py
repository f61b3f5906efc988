"""A federated problem in memory: every client's tensors on the compute device, batches drawn by index."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from fdabench.data.base import PreparedDataset
from fdabench.data.partition import ClientIndices, Partition


@dataclass
class ClientData:
    name: str
    x: Tensor
    y: Tensor

    def __len__(self) -> int:
        return int(self.y.shape[0])


@dataclass
class FederatedProblem:
    task: str  # "classification" | "regression"
    num_outputs: int
    input_shape: tuple[int, ...]
    sources: list[ClientData]
    target_labelled: ClientData
    target_unlabelled: ClientData
    target_test: ClientData

    def target_all(self) -> ClientData:
        """The target's labelled and unlabelled training samples together, all with labels (the oracle)."""
        return ClientData(
            "target_all",
            torch.cat([self.target_labelled.x, self.target_unlabelled.x]),
            torch.cat([self.target_labelled.y, self.target_unlabelled.y]),
        )


def build_problem(prepared: PreparedDataset, partition: Partition, device: torch.device | str) -> FederatedProblem:
    """Gather each client's samples from the prepared domains and move them to `device` once."""
    if partition.dataset != prepared.name:
        raise ValueError(f"partition is for {partition.dataset!r}, prepared data is {prepared.name!r}")
    if partition.transforms:
        raise ValueError(f"unsupported partition transforms: {sorted(partition.transforms)}")
    label_dtype = torch.long if prepared.task == "classification" else torch.float32

    def gather(client: ClientIndices) -> ClientData:
        arrays = prepared.domains[client.domain]
        x = torch.from_numpy(np.ascontiguousarray(arrays.x[client.indices])).to(device=device, dtype=torch.float32)
        y = torch.from_numpy(np.ascontiguousarray(arrays.y[client.indices])).to(device=device, dtype=label_dtype)
        return ClientData(client.name, x, y)

    return FederatedProblem(
        task=prepared.task,
        num_outputs=prepared.num_outputs,
        input_shape=tuple(prepared.input_shape),
        sources=[gather(client) for client in partition.sources],
        target_labelled=gather(partition.target_labelled),
        target_unlabelled=gather(partition.target_unlabelled),
        target_test=gather(partition.target_test),
    )
