"""One file per site: what a hospital would hold of a cell's federated problem, and nothing of the others'.

`export_sites` splits a cell's problem (its prepared data and partition, `fdabench.cell.setup.load_cell`) into
`<site>.pt` files: each source's samples, and the target's labelled, unlabelled and test splits. Each file keeps
the inputs as stored (uint8 pixels stay uint8), the labels, auxiliary labels and feature noise (a fixed noise
tensor, or the state of the generator that redraws it at every read), so a site rebuilds exactly the
`ClientData` the in-process loop trains on. `sites.json` lists the sites with their role, position and sample
count, and the problem's shape. The files hold tensors only and are read with `torch.load(weights_only=True)`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from fdabench.core.io import atomic_path, read_json, write_json_atomic
from fdabench.federation.problem import ClientData, FederatedProblem

MANIFEST = "sites.json"
TARGET = "target"
TARGET_SPLITS = ("labelled", "unlabelled", "test")


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
    for index, source in enumerate(problem.sources):
        file = f"{source.name}.pt"
        identity = {"name": source.name, "role": "source", "index": index, "shape": shape}
        with atomic_path(folder / file) as path:
            torch.save({**identity, **_client_tensors(source)}, path)
        sites.append({"name": source.name, "role": "source", "index": index, "file": file, "samples": len(source)})
    target: dict[str, Any] = {"name": TARGET, "role": TARGET, "index": len(problem.sources), "shape": shape}
    generator = None
    for split in TARGET_SPLITS:
        data = getattr(problem, f"target_{split}")
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
        }
    )
    manifest = {**shape, "sites": sites}
    write_json_atomic(folder / MANIFEST, manifest)
    return manifest


def read_manifest(folder: str | os.PathLike) -> dict[str, Any]:
    path = Path(folder) / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; write the site files with `fdabench flower export`")
    return read_json(path)


def problem_shape(manifest: dict[str, Any]) -> ProblemShape:
    return ProblemShape(
        manifest["task"], int(manifest["num_outputs"]), tuple(manifest["input_shape"]), dict(manifest["aux_classes"])
    )


@dataclass
class SiteData:
    """One site's samples: a source's `data`, or the target's three splits (sharing one noise generator); its
    name, role, position and the problem's shape."""

    name: str
    role: str
    index: int
    shape: dict[str, Any]
    data: ClientData | None = None
    labelled: ClientData | None = None
    unlabelled: ClientData | None = None
    test: ClientData | None = None
    noise_generator: torch.Generator | None = None

    @property
    def samples(self) -> int:
        """The samples it trains on as a source, or its labelled samples as the target."""
        return len(self.data if self.role == "source" else self.labelled)


def load_site(path: str | os.PathLike) -> SiteData:
    """A site's file, as the ClientData the loop trains on (on the CPU)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"site file {path} does not exist; write it with `fdabench flower export`")
    tensors = torch.load(path, weights_only=True)
    name, role, index, shape = (tensors.pop(key) for key in ("name", "role", "index", "shape"))
    if role == "source":
        return SiteData(name, role, index, shape, data=_client(name, tensors, None))
    generator = None
    if "noise_generator" in tensors:
        generator = torch.Generator()
        generator.set_state(tensors.pop("noise_generator"))
    site = SiteData(name, role, index, shape, noise_generator=generator)
    for split in TARGET_SPLITS:
        setattr(site, split, _client(f"target_{split}", tensors, generator, f"{split}."))
    return site
