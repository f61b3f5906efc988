"""Image datasets: DomainBed's image folders (VLCS, PACS, OfficeHome, TerraIncognita, DomainNet) and
hospital domains from a manifest CSV (MIDRC states, CheXpert conditions, MIMIC race groups).

Images are decoded once at `prepare`, resized to `image_size` x `image_size` (DomainBed's test-time
transform) and stored as uint8 (n, 3, s, s); no augmentation. Memory: n x 3 x s² bytes per domain
(PACS at 224: 1.5 GB; DomainNet needs a smaller image_size or ~90 GB).
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from fdabench.core.io import atomic_path
from fdabench.core.readers import reading
from fdabench.core.staging import atomic_folder
from fdabench.data.base import DATASETS, DatasetSource, DomainArrays, PreparedDataset
from fdabench.data.raw import IMAGE_SUFFIXES, raw_dir

# DomainBed, ResNet-18 (fdabench.reproduction.papers.fedgp_records): source lr 5e-5, target lr = source lr / 5,
# 50 rounds, 5 seeds.
_RESNET_TRAIN = {
    "model": "resnet18",
    "model_options": {"weights": "imagenet"},
    "rounds": 50,
    "warmup_rounds": 2,
    "local_epochs": 1,
    "optimizer": "adam",
    "source_lr": 5e-5,
    "target_lr": 1e-5,
    "source_batch_size": 32,
    "target_batch_size": 16,
}
_IMAGE_OPTIONS = {
    "image_size": {
        "type": "integer",
        "minimum": 8,
        "description": "images are resized to image_size x image_size",
        "default": 224,
    },
    "max_per_domain": {
        "type": ["integer", "null"],
        "minimum": 1,
        "description": "keep a seeded random subset per domain (CPU budgets)",
        "default": None,
    },
    "seed": {"type": "integer", "minimum": 0, "default": 0},
}


def _decode(job: tuple[str, int, int]) -> np.ndarray:
    from PIL import Image

    path, size, channels = job
    with reading(path, "an image (PNG, JPEG, ...)"), Image.open(path) as image:
        image = image.convert("RGB" if channels == 3 else "L").resize((size, size), Image.BILINEAR)
        array = np.asarray(image, dtype=np.uint8)
    return array.transpose(2, 0, 1) if channels == 3 else array[None]


def decode_images(paths: list[Path], size: int, channels: int = 3) -> np.ndarray:
    """(n, channels, size, size) uint8, decoding in parallel processes for large sets."""
    out = np.empty((len(paths), channels, size, size), dtype=np.uint8)
    jobs = [(str(p), size, channels) for p in paths]
    if len(jobs) < 256 or (os.cpu_count() or 1) == 1:
        for index, job in enumerate(jobs):
            out[index] = _decode(job)
    else:
        with ProcessPoolExecutor() as pool:
            for index, array in enumerate(pool.map(_decode, jobs, chunksize=64)):
                out[index] = array
    return out


class ImageFolderDomains(DatasetSource):
    """<raw>/<domain folder>/<class>/<image>; classes are the sorted class folder names (shared by domains)."""

    task = "classification"
    partitioner = "leave_one_domain_out"
    raw_name: ClassVar[str]
    folders: ClassVar[dict[str, str]]  # domain name -> folder name
    options_schema = _IMAGE_OPTIONS
    default_train = _RESNET_TRAIN

    @property
    def raw_datasets(self) -> tuple[str, ...]:  # type: ignore[override]
        return (self.raw_name,)

    def prepare(self, options: dict[str, Any], raw_root: str | None = None) -> PreparedDataset:
        base = raw_dir(raw_root, self.raw_name)
        classes = sorted({p.name for folder in self.folders.values() for p in (base / folder).iterdir() if p.is_dir()})
        rng = np.random.default_rng(options["seed"])
        domains = {}
        for domain, folder in self.folders.items():
            paths, labels = [], []
            for label, name in enumerate(classes):
                class_dir = base / folder / name
                if class_dir.is_dir():
                    found = sorted(p for p in class_dir.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
                    paths += found
                    labels += [label] * len(found)
            if options["max_per_domain"] and len(paths) > options["max_per_domain"]:
                keep = np.sort(rng.choice(len(paths), options["max_per_domain"], replace=False))
                paths, labels = [paths[i] for i in keep], [labels[i] for i in keep]
            domains[domain] = DomainArrays(
                decode_images(paths, options["image_size"]), np.asarray(labels, dtype=np.int64)
            )
        size = options["image_size"]
        return PreparedDataset(
            self.name, self.task, len(classes), (3, size, size), domains, meta={"options": options, "classes": classes}
        )


def _image_folder(
    name: str, raw: str, folders: dict[str, str], target_labelled: float, **train
) -> type[ImageFolderDomains]:
    attributes = {
        "name": name,
        "raw_name": raw,
        "domains": tuple(folders),
        "folders": folders,
        "default_partition": {"holdout_fraction": 0.2, "target_labelled": target_labelled},
        "default_train": {**_RESNET_TRAIN, **train},
        "__doc__": f"DomainBed's {raw} image folders, leave one domain out (target labels {target_labelled:.0%} of its "
        f"'in' split).",
    }
    cls = type(name.title().replace("_", ""), (ImageFolderDomains,), attributes)
    return DATASETS.register(cls)


# Target labelled fractions (fdabench.reproduction.papers.fedgp_records): VLCS 5%, TerraIncognita 5%,
# PACS / OfficeHome / DomainNet 15%.
_image_folder("vlcs", "VLCS", {d: d for d in ("Caltech101", "LabelMe", "SUN09", "VOC2007")}, 0.05)
_image_folder("pacs", "PACS", {d: d for d in ("art_painting", "cartoon", "photo", "sketch")}, 0.15)
_image_folder(
    "office_home",
    "office_home",
    {"Art": "Art", "Clipart": "Clipart", "Product": "Product", "Real_World": "Real World"},
    0.15,
)
_image_folder("terra_incognita", "terra_incognita", {f"L{n}": f"location_{n}" for n in (100, 38, 43, 46)}, 0.05)
_image_folder(
    "domain_net",
    "domain_net",
    {d: d for d in ("clipart", "infograph", "painting", "quickdraw", "real", "sketch")},
    0.15,
    rounds=20,
)


# -- hospital domains from a manifest ----------------------------------------------------------------------


class ManifestError(ValueError):
    pass


def read_manifest(
    manifest: str | Path,
    image_root: str | Path,
    domain_column: str,
    label_column: str,
    auxiliary: list[str],
    domains: list[str] | None,
    num_classes: int | None = None,
    auxiliary_values: dict[str, list[str]] | None = None,
    id_column: str = "path",
):
    """Load and check a manifest CSV: columns `path` (relative to image_root), the domain and label columns
    and the auxiliary columns; labels are integers in 0..num_classes-1 (non-negative when num_classes is
    None); auxiliary columns with declared `auxiliary_values` hold only those values (or are empty); ids
    (`id_column`, default the image path) are unique; every path stays inside image_root and exists.
    Raises ManifestError naming every problem (the first rows of each kind), before any image is read."""
    import pandas as pd

    manifest, image_root = Path(manifest), Path(image_root)
    if not manifest.is_file():
        raise ManifestError(f"manifest {manifest} does not exist")
    if not image_root.is_dir():
        raise ManifestError(f"image_root {image_root} is not a directory")
    with reading(manifest, "a manifest (CSV with a header row)"):
        table = pd.read_csv(manifest, dtype={"path": str, id_column: str, **{name: str for name in auxiliary}})
    required = list(dict.fromkeys(["path", id_column, domain_column, label_column, *auxiliary]))
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise ManifestError(
            f"{manifest}: missing column(s) {', '.join(missing)}; it has {', '.join(map(str, table.columns))}"
        )
    problems = []
    labels = pd.to_numeric(table[label_column], errors="coerce")
    bad_labels = table.index[labels.isna() | (labels < 0) | (labels != labels.round())].tolist()
    if bad_labels:
        problems.append(f"label column {label_column!r} must hold non-negative integers; rows {bad_labels[:5]}")
    elif num_classes is not None and (labels >= num_classes).any():
        rows = table.index[labels >= num_classes].tolist()
        problems.append(
            f"unknown label values {sorted(set(labels[rows].astype(int)))} in column {label_column!r} "
            f"(num_classes = {num_classes}: 0..{num_classes - 1}); rows {rows[:5]}"
        )
    for name, allowed in (auxiliary_values or {}).items():
        if name not in auxiliary:
            continue
        values = table[name].dropna().astype(str)
        unknown = values[~values.isin([str(v) for v in allowed])]
        if len(unknown):
            problems.append(
                f"unknown values {sorted(unknown.unique())[:5]} in auxiliary column {name!r} (allowed: {allowed}); "
                f"rows {unknown.index.tolist()[:5]}"
            )
    duplicated = table.index[table[id_column].duplicated(keep=False)].tolist()
    if duplicated:
        problems.append(
            f"duplicate ids in column {id_column!r}: {sorted(set(table[id_column][duplicated].astype(str)))[:5]}; "
            f"rows {duplicated[:5]}"
        )
    root = image_root.resolve()
    outside, absent = [], []
    for row, relative in zip(table.index, table["path"]):
        candidate = Path(str(relative))
        resolved = (root / candidate).resolve()
        if candidate.is_absolute() or not resolved.is_relative_to(root):
            outside.append(row)
        elif not resolved.is_file():
            absent.append(row)
    if outside:
        problems.append(f"paths must be relative and stay inside image_root {root}; rows {outside[:5]}")
    if absent:
        problems.append(
            f"{len(absent)} image file(s) do not exist under {root}, e.g. rows {absent[:5]}: "
            f"{[table['path'][r] for r in absent[:3]]}"
        )
    present = sorted(table[domain_column].astype(str).unique())
    if domains is not None:
        unknown = [d for d in domains if d not in present]
        if unknown:
            problems.append(f"domain(s) {unknown} have no rows in column {domain_column!r}; present: {present}")
    if problems:
        raise ManifestError(f"{manifest}:\n  - " + "\n  - ".join(problems))
    return table.assign(**{label_column: labels.astype(np.int64)})


class ManifestDomains(DatasetSource):
    """Hospital domains from a manifest CSV (columns: path, domain, label, auxiliary...). The images stay
    where they are (credentialed datasets are not redistributed); set `manifest` and `image_root`."""

    task = "classification"
    partitioner = "leave_one_domain_out"
    default_domains: ClassVar[tuple[str, ...]]
    domain_column: ClassVar[str] = "domain"
    default_auxiliary: ClassVar[tuple[str, ...]] = ()
    #: the values each auxiliary column may hold, in code order (the authors' encodings; docs/datasets.md walk-through)
    default_auxiliary_values: ClassVar[dict[str, list[str]]] = {
        "sex": ["Male", "Female"],
        "age_decade": [str(decade) for decade in range(10)],
        "race": ["White", "Black", "Other"],
    }

    @classmethod
    def manifest_options_schema(cls) -> dict[str, Any]:
        """The options of a manifest dataset; defaults from the class (its domains, columns and encodings)."""
        return {
            "manifest": {"type": ["string", "null"], "description": "the manifest CSV", "default": None},
            "image_root": {
                "type": ["string", "null"],
                "description": "image paths in the manifest are relative to this directory",
                "default": None,
            },
            "domains": {
                "type": "array",
                "items": {"type": "string", "pattern": r"^[A-Za-z0-9_+-][A-Za-z0-9_.+-]*$"},
                "minItems": 2,
                "uniqueItems": True,
                "default": list(cls.default_domains),
            },
            "domain_column": {"type": "string", "default": cls.domain_column},
            "label_column": {"type": "string", "default": "label"},
            "auxiliary": {
                "type": "array",
                "items": {"type": "string"},
                "uniqueItems": True,
                "description": "columns used as auxiliary labels",
                "default": list(cls.default_auxiliary),
            },
            "auxiliary_values": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "description": "allowed values per auxiliary column, in code order (columns not listed: their sorted "
                "values)",
                "default": {k: list(v) for k, v in cls.default_auxiliary_values.items()},
            },
            "num_classes": {
                "type": "integer",
                "minimum": 2,
                "description": "labels are 0..num_classes-1",
                "default": 2,
            },
            "id_column": {
                "type": "string",
                "description": "the column whose values must be unique (default: the image path)",
                "default": "path",
            },
            "image_size": {"type": "integer", "minimum": 8, "default": 224},
            "channels": {"enum": [1, 3], "default": 3},
        }

    def __init_subclass__(cls, **kwargs: Any):
        if "name" in vars(cls):  # a concrete manifest dataset: its option defaults follow its class attributes
            cls.options_schema = cls.manifest_options_schema()
        super().__init_subclass__(**kwargs)

    # The weakly-supervised paper's code (enyijiang/MIDRC): Adam, source lr 1e-4, target lr 2e-5 (its text says
    # 1e-3 / 2e-4; the code that produced the tables is the protocol). Rounds and batches per dataset: the
    # `hospital` suite in params.yaml.
    default_train = {**_RESNET_TRAIN, "source_lr": 1e-4, "target_lr": 2e-5}

    @property
    def domains(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.default_domains

    def input_files(self, options: dict[str, Any]) -> list[str]:
        return [options["manifest"]] if options.get("manifest") else []

    def target_names(
        self, partition_options: dict[str, Any], dataset_options: dict[str, Any] | None = None
    ) -> list[str]:
        return list((dataset_options or {}).get("domains") or self.default_domains)

    def prepare(self, options: dict[str, Any], raw_root: str | None = None) -> PreparedDataset:
        if not options.get("manifest") or not options.get("image_root"):
            raise ManifestError(
                f"{self.name} needs datasets.{self.name}.manifest and .image_root in params.yaml (a CSV with columns "
                f"path, {options['domain_column']}, {options['label_column']}, "
                f"{', '.join(options['auxiliary']) or 'no auxiliary columns'})"
            )
        declared = options.get("auxiliary_values", {})
        table = read_manifest(
            options["manifest"],
            options["image_root"],
            options["domain_column"],
            options["label_column"],
            options["auxiliary"],
            options["domains"],
            options.get("num_classes"),
            declared,
            options.get("id_column", "path"),
        )
        root = Path(options["image_root"]).resolve()
        aux_codes = {
            name: list(declared[name]) if name in declared else sorted(table[name].dropna().astype(str).unique())
            for name in options["auxiliary"]
        }
        domains = {}
        for domain in options["domains"]:
            rows = table[table[options["domain_column"]].astype(str) == domain]
            x = decode_images([root / p for p in rows["path"]], options["image_size"], options["channels"])
            aux = {
                name: np.array([aux_codes[name].index(str(v)) if v == v else -1 for v in rows[name]], dtype=np.int64)
                for name in options["auxiliary"]
            }
            domains[domain] = DomainArrays(x, rows[options["label_column"]].to_numpy(np.int64), aux)
        classes = options.get("num_classes") or int(table[options["label_column"]].max()) + 1
        size = options["image_size"]
        meta = {
            "options": options,
            "auxiliary_classes": {k: len(v) for k, v in aux_codes.items()},
            "auxiliary_values": aux_codes,
        }
        return PreparedDataset(
            self.name, self.task, max(classes, 2), (options["channels"], size, size), domains, meta=meta
        )


@DATASETS.register
class MIDRC(ManifestDomains):
    """MIDRC chest X-rays by US state (weakly-supervised paper: IL is the target)."""

    name = "midrc"
    default_domains = ("IL", "NC", "CA", "IN", "TX")
    domain_column = "state"
    default_auxiliary = ("sex", "age_decade", "race")


@DATASETS.register
class CheXpert(ManifestDomains):
    """CheXpert chest X-rays, domains by condition group."""

    name = "chexpert"
    default_domains = ("condition_a", "condition_b", "condition_c")
    domain_column = "condition"
    default_auxiliary = ("sex", "age_decade")


@DATASETS.register
class MIMIC(ManifestDomains):
    """MIMIC-CXR chest X-rays, domains by race group."""

    name = "mimic"
    default_domains = ("white", "black", "asian", "hispanic")
    domain_column = "race"
    default_auxiliary = ("sex", "age_decade")


def write_stand_in(dataset: str, directory: str | Path, per_domain: int = 60, seed: int = 0) -> Path:
    """A generated stand-in for a manifest dataset: `per_domain` small PNGs per default domain under
    `directory/images/<domain>/` and `directory/manifest.csv` in the dataset's manifest format (columns
    path, the domain column, label, and every default auxiliary column with values from its declared list).
    Labels follow a brightness cue, so a dry run can learn something. images/ is replaced as a whole, then the
    manifest, each atomically. Returns the manifest path."""
    import pandas as pd
    from PIL import Image

    source = DATASETS.get(dataset)()
    if not isinstance(source, ManifestDomains):
        raise ValueError(f"{dataset} is not a manifest dataset; choose one of midrc, chexpert, mimic")
    options = source.default_options
    rng = np.random.default_rng(seed)
    root = Path(directory)
    rows = []
    with atomic_folder(root / "images") as images:
        for domain_index, domain in enumerate(options["domains"]):
            (images / domain).mkdir(parents=True, exist_ok=True)
            for k in range(per_domain):
                label = int(rng.integers(options["num_classes"]))
                level = 60 + 100 * label + 10 * domain_index
                pixels = np.clip(rng.normal(level, 30, size=(16, 16)), 0, 255).astype(np.uint8)
                relative = f"{domain}/{k:04d}.png"
                Image.fromarray(pixels).save(images / relative)  # 2-D uint8: grey scale
                row = {"path": relative, options["domain_column"]: domain, options["label_column"]: label}
                for name in options["auxiliary"]:
                    allowed = options["auxiliary_values"][name]
                    row[name] = allowed[int(rng.integers(len(allowed)))]
                rows.append(row)
    manifest = root / "manifest.csv"
    with atomic_path(manifest) as partial:
        pd.DataFrame(rows).to_csv(partial, index=False)
    return manifest
