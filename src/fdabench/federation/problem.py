"""A federated problem in memory: every client's tensors on the compute device, batches drawn by index."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from fdabench.core.streams import stream
from fdabench.data.base import PreparedDataset
from fdabench.data.partition import ClientIndices, Partition


@dataclass
class ClientData:
    """One client's samples on the compute device. `x` holds the stored inputs (float32, or uint8 pixels
    read as value / 255); `inputs(index)` gives model inputs with the client's feature noise, if any:
    fixed per sample (`noise`, drawn once) or redrawn at every read (`noise=None`, from `generator`)."""

    name: str
    x: Tensor
    y: Tensor
    noise_std: float = 0.0
    noise: Tensor | None = None
    generator: torch.Generator | None = None
    aux: dict[str, Tensor] = field(default_factory=dict)  # auxiliary labels (never model inputs)

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def inputs(self, index: Tensor | slice | None = None) -> Tensor:
        x = self.x if index is None else self.x[index]
        if x.dtype == torch.uint8:
            x = x.float().div_(255.0)
        if self.noise_std:
            if self.noise is not None:
                x = x + (self.noise if index is None else self.noise[index])
            else:
                x = x + self.noise_std * torch.randn(x.shape, generator=self.generator).to(x.device)
        return x

    def labels(self, index: Tensor | slice | None = None) -> Tensor:
        return self.y if index is None else self.y[index]


def subset(name: str, data: ClientData, positions: Tensor) -> ClientData:
    """The samples of `data` at `positions`, with their fixed noise and auxiliary labels (a redrawing generator is
    shared)."""
    positions = positions.to(data.y.device)
    noise = None if data.noise is None else data.noise[positions]
    aux = {key: values[positions] for key, values in data.aux.items()}
    return ClientData(name, data.x[positions], data.y[positions], data.noise_std, noise, data.generator, aux)


def concatenate(name: str, parts: list[ClientData]) -> ClientData:
    """Samples of several clients as one (noise settings must agree)."""
    first = parts[0]
    if any(part.noise_std != first.noise_std or (part.noise is None) != (first.noise is None) for part in parts):
        raise ValueError("cannot concatenate clients with different feature noise")
    noise = torch.cat([part.noise for part in parts]) if first.noise is not None else None
    aux = {key: torch.cat([p.aux[key] for p in parts]) for key in first.aux}
    return ClientData(
        name,
        torch.cat([p.x for p in parts]),
        torch.cat([p.y for p in parts]),
        first.noise_std,
        noise,
        first.generator,
        aux,
    )


@dataclass
class FederatedProblem:
    task: str  # "classification" | "regression"
    num_outputs: int
    input_shape: tuple[int, ...]
    sources: list[ClientData]
    target_labelled: ClientData
    target_unlabelled: ClientData
    target_test: ClientData
    aux_classes: dict[str, int] = field(default_factory=dict)  # auxiliary label -> number of classes
    #: each source's held-out samples that no client trains on (DomainBed's 'out' splits), in source order; empty
    #: where the partition holds none out
    source_validation: list[ClientData] = field(default_factory=list)
    #: the target's labelled samples kept for validation (never trained on: `target_labelled` is the rest), or None
    target_validation: ClientData | None = None

    def noise_generators(self) -> list[torch.Generator]:
        """The generators that redraw feature noise at every read (one shared by the target's splits), each once:
        part of a run's random state, so a checkpoint saves them with the clients' streams."""
        clients = [*self.sources, self.target_labelled, self.target_unlabelled, self.target_test]
        clients += [*self.source_validation, *([self.target_validation] if self.target_validation else [])]
        unique = {id(c.generator): c.generator for c in clients if c.generator is not None}
        return list(unique.values())

    def target_all(self) -> ClientData:
        """The target's labelled and unlabelled training samples together, all with labels (the oracle)."""
        return concatenate("target_all", [self.target_labelled, self.target_unlabelled])


TRANSFORMS = ("target_noise", "standardize")
#: the stream that splits the target's labelled samples into training and validation (`target_validation_positions`)
TARGET_VALIDATION_STREAM = 0x7461_7267_7661_6C  # "targval"


def target_validation_positions(count: int, seed: int, validation: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(training positions, validation positions) of the target's `count` labelled samples under the cell's
    `validation` settings: a seeded permutation of the samples; with `target_folds` k > 1 fold `target_fold` of its
    k near-equal parts validates (k-fold), else its first `target_holdout` samples do (hold-out). Both sorted."""
    folds = int(validation.get("target_folds", 1))
    order = np.random.default_rng(np.random.SeedSequence([seed, TARGET_VALIDATION_STREAM])).permutation(count)
    if folds > 1:
        if count < folds:
            raise ValueError(f"{count} labelled target samples cannot be split into {folds} validation folds")
        held = np.array_split(order, folds)[int(validation.get("target_fold", 0))]
    else:
        size = int(validation.get("target_holdout", 0))
        if not 0 < size < count:
            raise ValueError(
                f"target_holdout = {size} of {count} labelled target samples; keep at least one to train on and one "
                "to validate"
            )
        held = order[:size]
    kept = np.setdiff1d(np.arange(count), held)
    return kept, np.sort(held)


def _rows(x: np.ndarray) -> np.ndarray:
    """(n, features) view of n samples; n may be 0 (e.g. a target whose training samples are all labelled)."""
    return x.reshape(x.shape[0], int(np.prod(x.shape[1:])))


def standardizer(training: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(median, mean, std) per feature from training inputs only: missing values (NaN) are imputed with the
    median, then inputs are scaled to zero mean and unit variance (constant features keep scale 1)."""
    pooled = np.concatenate([_rows(x) for x in training]).astype(np.float64)
    median = np.nanmedian(pooled, axis=0)
    median = np.where(np.isnan(median), 0.0, median)
    imputed = np.where(np.isnan(pooled), median, pooled)
    mean, std = imputed.mean(axis=0), imputed.std(axis=0)
    return median, mean, np.where(std > 0, std, 1.0)


def per_domain_standardizer(training: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(median, mean, std + 1e-9) per feature of one domain's training inputs, as FLamby's Fed-Heart-Disease
    normalises each centre with its own training split (torch's unbiased std, plus 1e-9)."""
    rows = _rows(training).astype(np.float64)
    median = np.nanmedian(rows, axis=0)
    median = np.where(np.isnan(median), 0.0, median)
    imputed = np.where(np.isnan(rows), median, rows)
    return median, imputed.mean(axis=0), imputed.std(axis=0, ddof=1) + 1e-9


def build_problem(
    prepared: PreparedDataset,
    partition: Partition,
    device: torch.device | str,
    validation: dict[str, Any] | None = None,
) -> FederatedProblem:
    """Gather each client's samples from the prepared domains and move them to `device` once.

    Partition transforms: `standardize` imputes missing inputs with the median and scales them to zero mean
    and unit variance, statistics from the sources and the target's labelled samples (never the target's
    unlabelled inputs, which only methods marked † may read, nor its test split); with {"scope": "per_domain"}
    each domain is scaled by its own training inputs (a source's training split; the target's labelled and
    unlabelled inputs, never its test split), as FLamby normalises each centre. `target_noise`
    {"std": s, "mode": "fixed" | "redraw"} adds Gaussian noise of standard deviation s (no clamping) to the
    target's inputs — labelled, unlabelled and test — drawn once per sample from the partition seed
    ("fixed", reproducible) or afresh at every read ("redraw", as the published code; still seeded).
    Datasets whose features are fitted per target (Amazon's vocabulary, on the sources' text) list each
    target's columns in `meta["target_feature_columns"]`; only those are kept.

    Validation: the partition's held-out samples of each source domain validate that source
    (`source_validation`); a cell's `validation` settings with `target_holdout` or `target_folds` keep some of
    the target's labelled samples for validation (`target_validation_positions`), which no client trains on.
    """
    if partition.dataset != prepared.name:
        raise ValueError(f"partition is for {partition.dataset!r}, prepared data is {prepared.name!r}")
    unknown = set(partition.transforms) - set(TRANSFORMS)
    if unknown:
        raise ValueError(f"unsupported partition transforms {sorted(unknown)}; allowed: {', '.join(TRANSFORMS)}")
    label_dtype = torch.long if prepared.task == "classification" else torch.float32
    noise = partition.transforms.get("target_noise", {"std": 0.0, "mode": "fixed"})
    input_shape = tuple(prepared.input_shape)
    columns = prepared.meta.get("target_feature_columns", {}).get(partition.target)
    if columns is not None:
        columns = np.asarray(columns, dtype=np.int64)
        input_shape = (len(columns),)

    def stored_inputs(client: ClientIndices) -> np.ndarray:
        x_array = np.ascontiguousarray(prepared.domains[client.domain].x[client.indices])
        return x_array if columns is None else np.ascontiguousarray(x_array[:, columns])

    scaling = None
    domain_scaling: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    if partition.transforms.get("standardize", {}).get("scope") == "per_domain":
        target_training = [partition.target_labelled, partition.target_unlabelled]
        domain_scaling[partition.target] = per_domain_standardizer(
            np.concatenate([stored_inputs(c) for c in target_training])
        )
        domain_scaling.update({c.domain: per_domain_standardizer(stored_inputs(c)) for c in partition.sources})
    elif "standardize" in partition.transforms:
        scaling = standardizer([stored_inputs(c) for c in [partition.target_labelled, *partition.sources]])
    noise_generator = torch.Generator().manual_seed(stream(partition.seed, "target_noise"))

    def gather(client: ClientIndices, noisy: bool = False) -> ClientData:
        arrays = prepared.domains[client.domain]
        x_array = stored_inputs(client)
        client_scaling = domain_scaling.get(client.domain, scaling)
        if client_scaling is not None:
            median, mean, std = client_scaling
            flat = _rows(x_array).astype(np.float64)
            x_array = ((np.where(np.isnan(flat), median, flat) - mean) / std).astype(np.float32).reshape(x_array.shape)
        x = torch.from_numpy(x_array).to(device=device)
        if x.dtype != torch.uint8:
            x = x.to(torch.float32)
            bad = int((~torch.isfinite(x)).sum())
            if bad:
                raise ValueError(
                    f"{prepared.name}: client {client.name} (domain {client.domain}) has {bad} non-finite input values "
                    "(NaN or infinite); clean the raw data, or set the partition option standardize: true where the "
                    "partitioner offers it (it imputes missing values)"
                )
        y = torch.from_numpy(np.ascontiguousarray(arrays.y[client.indices])).to(device=device, dtype=label_dtype)
        aux = {
            name: torch.from_numpy(np.ascontiguousarray(values[client.indices])).to(device=device, dtype=torch.long)
            for name, values in arrays.aux.items()
        }
        data = ClientData(client.name, x, y, aux=aux)
        if noisy and noise["std"] > 0:
            data.noise_std = float(noise["std"])
            if noise["mode"] == "fixed":
                data.noise = (noise["std"] * torch.randn(x.shape, generator=noise_generator)).to(device)
            else:
                data.generator = noise_generator
        return data

    target_labelled = gather(partition.target_labelled, noisy=True)
    target_validation = None
    if validation and (validation.get("target_holdout") or validation.get("target_folds", 1) > 1):
        kept, held = target_validation_positions(len(target_labelled), partition.seed, validation)
        labelled = target_labelled
        target_labelled = subset(labelled.name, labelled, torch.from_numpy(kept))
        target_validation = subset(f"{labelled.name}_validation", labelled, torch.from_numpy(held))
    holdouts = {client.domain: client for client in partition.holdout}
    source_holdouts = [holdouts.get(client.domain) for client in partition.sources]
    return FederatedProblem(
        task=prepared.task,
        num_outputs=prepared.num_outputs,
        input_shape=input_shape,
        sources=[gather(client) for client in partition.sources],
        target_labelled=target_labelled,
        target_unlabelled=gather(partition.target_unlabelled, noisy=True),
        target_test=gather(partition.target_test, noisy=True),
        aux_classes=dict(prepared.meta.get("auxiliary_classes", {})),
        source_validation=[gather(h) for h in source_holdouts] if all(source_holdouts) else [],
        target_validation=target_validation,
    )
