"""One file per site: what a hospital would hold of a cell's federated problem, and nothing of the others'.

`export_sites` splits a cell's problem (its prepared data and partition, `fdabench.cell.setup.load_cell`) into
`<site>.pt` files: each source's samples and its held-out validation samples (`FederatedProblem.source_validation`,
where the partition holds some out), and the target's labelled, unlabelled and test splits and its validation
split (`FederatedProblem.target_validation`, where the cell keeps one). Validation samples stay at their own site:
only the scores of the global model on them reach the server. Each file keeps the inputs as stored (uint8 pixels
stay uint8), the labels, auxiliary labels and feature noise (a fixed noise tensor, or the state of the generator
that redraws it at every read), so a site rebuilds exactly the `ClientData` the in-process loop trains and scores
on. `sites.json` lists the sites with their role, position, sample count and validation samples (0: the site holds
no validation split), and the problem's shape. The files hold tensors only and are read with
`torch.load(weights_only=True)`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from fdabench.core.formats import describe, kind_of
from fdabench.core.io import atomic_path, write_json_atomic
from fdabench.core.readers import FileReadError, MissingFileError, read_json_object, reading
from fdabench.federation.problem import ClientData, FederatedProblem

MANIFEST = "sites.json"
TARGET = "target"
TARGET_SPLITS = ("labelled", "unlabelled", "test")
#: the prefix of a site's validation split in its file (a source's held-out samples, the target's kept ones)
VALIDATION = "validation"


@dataclass(frozen=True)
class ProblemShape:
    """What the server knows of a cell's problem without any data: enough to build the model and score it."""

    task: str
    num_outputs: int
    input_shape: tuple[int, ...]
    aux_classes: dict[str, int]


def _client_tensors(data: ClientData, prefix: str = "") -> dict[str, Any]:
    tensors: dict[str, Any] = {f"{prefix}x": data.x.cpu(), f"{prefix}y": data.y.cpu()}
    tensors[f"{prefix}noise_std"] = torch.tensor(float(data.noise_std))
    if data.noise is not None:
        tensors[f"{prefix}noise"] = data.noise.cpu()
    for name, values in data.aux.items():
        tensors[f"{prefix}aux.{name}"] = values.cpu()
    return tensors


def _client(name: str, tensors: dict[str, Any], generator: torch.Generator | None, prefix: str = "") -> ClientData:
    aux_prefix = f"{prefix}aux."
    noise_std = float(tensors[f"{prefix}noise_std"])
    noise = tensors.get(f"{prefix}noise")
    return ClientData(
        name,
        tensors[f"{prefix}x"],
        tensors[f"{prefix}y"],
        noise_std=noise_std,
        noise=noise,
        generator=generator if noise_std and noise is None else None,
        aux={key[len(aux_prefix) :]: value for key, value in tensors.items() if key.startswith(aux_prefix)},
    )


def shape_of(problem: FederatedProblem) -> dict[str, Any]:
    return {
        "task": problem.task,
        "num_outputs": problem.num_outputs,
        "input_shape": list(problem.input_shape),
        "aux_classes": dict(problem.aux_classes),
    }


def export_sites(problem: FederatedProblem, folder: str | os.PathLike) -> dict[str, Any]:
    """Write one file per site and the manifest; return the manifest."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shape = shape_of(problem)
    sites = []
    if problem.source_validation and len(problem.source_validation) != len(problem.sources):
        raise ValueError(
            f"{len(problem.source_validation)} source validation splits for {len(problem.sources)} sources"
        )
    for index, source in enumerate(problem.sources):
        file = f"{source.name}.pt"
        identity = {"name": source.name, "role": "source", "index": index, "shape": shape}
        validation = problem.source_validation[index] if problem.source_validation else None
        held = {} if validation is None else _client_tensors(validation, f"{VALIDATION}.")
        with atomic_path(folder / file) as path:
            torch.save({**identity, **_client_tensors(source), **held}, path)
        sites.append(
            {
                "name": source.name,
                "role": "source",
                "index": index,
                "file": file,
                "samples": len(source),
                VALIDATION: _validation_samples(validation),
            }
        )
    target: dict[str, Any] = {"name": TARGET, "role": TARGET, "index": len(problem.sources), "shape": shape}
    generator = None
    splits = {split: getattr(problem, f"target_{split}") for split in TARGET_SPLITS}
    if problem.target_validation is not None:
        splits[VALIDATION] = problem.target_validation
    for split, data in splits.items():
        target.update(_client_tensors(data, f"{split}."))
        generator = generator or data.generator
    if generator is not None:  # the target's splits share one noise generator (redrawn at every read)
        target["noise_generator"] = generator.get_state()
    with atomic_path(folder / f"{TARGET}.pt") as path:
        torch.save(target, path)
    sites.append(
        {
            "name": TARGET,
            "role": TARGET,
            "index": len(problem.sources),
            "file": f"{TARGET}.pt",
            "samples": len(problem.target_labelled),
            VALIDATION: _validation_samples(problem.target_validation),
        }
    )
    manifest = {**shape, "sites": sites}
    write_json_atomic(folder / MANIFEST, manifest)
    return manifest


def _validation_samples(data: ClientData | None) -> int:
    return 0 if data is None else len(data)


def read_manifest(folder: str | os.PathLike) -> dict[str, Any]:
    """The manifest of the site files `export_sites` wrote to `folder` (refused, naming the file, where not one)."""
    if Path(folder).is_file():
        raise FileReadError(folder, "is a file, not the folder of site files `fdabench flower export` writes")
    path = Path(folder) / MANIFEST
    if not path.exists():
        raise MissingFileError(path, "does not exist; write the site files with `fdabench flower export`")
    manifest = read_json_object(path, "the manifest of a Flower export")
    if not isinstance(manifest.get("sites"), list):
        raise FileReadError(
            path,
            f"is {describe(kind_of(manifest))}, not the manifest of a Flower export (it has no list of `sites`); "
            "write the site files again with `fdabench flower export`",
        )
    return manifest


def problem_shape(manifest: dict[str, Any]) -> ProblemShape:
    return ProblemShape(
        manifest["task"], int(manifest["num_outputs"]), tuple(manifest["input_shape"]), dict(manifest["aux_classes"])
    )


@dataclass
class SiteData:
    """One site's samples: a source's `data`, or the target's three splits (sharing one noise generator), and the
    site's `validation` split where it holds one; its name, role, position and the problem's shape."""

    name: str
    role: str
    index: int
    shape: dict[str, Any]
    data: ClientData | None = None
    labelled: ClientData | None = None
    unlabelled: ClientData | None = None
    test: ClientData | None = None
    validation: ClientData | None = None
    noise_generator: torch.Generator | None = None

    @property
    def samples(self) -> int:
        """The samples it trains on as a source, or its labelled samples as the target."""
        return len(self.data if self.role == "source" else self.labelled)

    @property
    def validation_samples(self) -> int:
        """The samples of its validation split (0: it holds none)."""
        return _validation_samples(self.validation)


def load_site(path: str | os.PathLike) -> SiteData:
    """A site's file, as the ClientData the loop trains on (on the CPU)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"site file {path} does not exist; write it with `fdabench flower export`")
    with reading(path, "a site file (fdabench flower export writes it)"):
        tensors = torch.load(path, weights_only=True)
        name, role, index, shape = (tensors.pop(key) for key in ("name", "role", "index", "shape"))
    prefix = f"{VALIDATION}."
    held = {key: tensors.pop(key) for key in list(tensors) if key.startswith(prefix)}
    if role == "source":
        site = SiteData(name, role, index, shape, data=_client(name, tensors, None))
        if held:
            site.validation = _client(f"{name}_{VALIDATION}", held, None, prefix)
        return site
    generator = None
    if "noise_generator" in tensors:
        generator = torch.Generator()
        generator.set_state(tensors.pop("noise_generator"))
    site = SiteData(name, role, index, shape, noise_generator=generator)
    for split in TARGET_SPLITS:
        setattr(site, split, _client(f"target_{split}", tensors, generator, f"{split}."))
    if held:  # a subset of the labelled samples: it shares their noise generator
        site.validation = _client(f"target_{VALIDATION}", held, generator, prefix)
    return site
