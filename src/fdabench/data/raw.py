"""Raw datasets: bring them into data/raw/<name>/ from a local mirror (or, only when asked, a download),
verify their content, and tell exactly what is missing when neither is possible.

The layout of data/raw/<name>/ is the mirror's (torchvision's `<Name>/raw/` where one exists; DomainBed's
`<dataset>/<domain>/<class>/<image>` for image folders), so a mirror directory and data/raw are
interchangeable for `prepare`. Each acquired dataset gets `ACQUIRED.json` (sources and sha256 of every
file): it marks a complete acquisition (the directory is staged and renamed into place) and lets
`fdabench acquire --verify` re-check the content later.

Checksums: gzip files are verified by the sha256 of their decompressed content (mirrors may re-compress);
MNIST's equal the official md5s of the decompressed files. Image folders carry no published checksum:
fdabench checks their domain folders and records the content manifest at acquisition.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fdabench.core.io import atomic_path
from fdabench.core.readers import FileReadError, read_json_object, reading
from fdabench.core.registry import Registry

MIRROR_ENVIRONMENT_VARIABLE = "FDABENCH_DATA_MIRROR"  # the default local mirror of raw datasets
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp"}
MANIFEST = "ACQUIRED.json"


class RawDataMissing(FileNotFoundError):
    """Raw files are neither in data/raw, nor in the mirror, nor may they be downloaded."""


@dataclass(frozen=True)
class RawFile:
    path: str  # relative to the dataset's directory
    sha256: str | None  # of the content (decompressed for .gz); None: verified by the dataset's `check`


@dataclass(frozen=True)
class RawDataset:
    name: str  # directory name in the mirror and under data/raw
    description: str
    how_to_get: str
    files: tuple[RawFile, ...] = ()  # fixed files with known content checksums
    domains: tuple[str, ...] = ()  # image-folder datasets: the domain folders that must exist
    download: Callable[[Path], None] | None = field(default=None, compare=False)  # fills the given directory
    check: Callable[[Path], None] | None = field(default=None, compare=False)  # extra verification (raises)
    finalize: Callable[[Path], None] | None = field(default=None, compare=False)  # e.g. decompress, after verification

    @property
    def is_image_folder(self) -> bool:
        return bool(self.domains)


RAW_DATASETS: Registry[RawDataset] = Registry("raw dataset")


def register(raw: RawDataset) -> RawDataset:
    RAW_DATASETS.register(raw)
    return raw


def content_sha256(path: Path) -> str:
    """sha256 of the file's content; for .gz files, of the decompressed content."""
    digest = hashlib.sha256()
    compressed = path.suffix == ".gz"
    what = "a gzip'd raw file" if compressed else "a raw file"
    with reading(path, what), gzip.open(path, "rb") if compressed else open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _missing_message(raw: RawDataset, mirror: Path | None, missing: list[str]) -> str:
    where = f"the mirror {mirror}" if mirror else "no mirror (set data.mirror in params.yaml or $FDABENCH_DATA_MIRROR)"
    listed = "\n".join(f"  - {raw.name}/{item}" for item in missing[:20])
    more = f"\n  ... and {len(missing) - 20} more" if len(missing) > 20 else ""
    return (
        f"raw dataset {raw.name} ({raw.description}) is not available: {where} lacks\n{listed}{more}\n"
        f"How to get it: {raw.how_to_get}\n"
        f"Then point data.mirror at the directory that contains {raw.name}/, or run "
        f"`fdabench acquire --raw {raw.name} --download` on a machine with network access."
    )


def _image_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def _missing_in(raw: RawDataset, base: Path) -> list[str]:
    """What a copy of `raw` at `base` lacks (empty when complete)."""
    missing = [f.path for f in raw.files if not (base / f.path).is_file()]
    for domain in raw.domains:
        if not (base / domain).is_dir() or not _image_files(base / domain):
            missing.append(f"{domain}/<class>/<images>")
    return missing


def _everything(raw: RawDataset) -> list[str]:
    return [f.path for f in raw.files] + [f"{domain}/<class>/<images>" for domain in raw.domains]


def _verify(raw: RawDataset, base: Path) -> dict[str, str]:
    """sha256 of every file; raises ValueError naming files whose content differs from the expected."""
    digests = {}
    bad = []
    for expected in raw.files:
        digest = content_sha256(base / expected.path)
        digests[expected.path] = digest
        if expected.sha256 is not None and digest != expected.sha256:
            bad.append(f"{expected.path}: sha256 {digest}, expected {expected.sha256}")
    if bad:
        raise ValueError(f"raw dataset {raw.name} has corrupt or unexpected files:\n  " + "\n  ".join(bad))
    if raw.is_image_folder:
        for path in _image_files(base):
            digests[str(path.relative_to(base))] = content_sha256(path)
    return digests


def _copy_tree(source: Path, destination: Path) -> None:
    """Copy a directory, hard-linking files where the filesystem allows (mirrors are read-only inputs)."""

    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, destination, copy_function=link_or_copy)


def acquire(
    name: str, destination_root: str | os.PathLike, mirror: str | os.PathLike | None = None, download: bool = False
) -> Path:
    """Bring raw dataset `name` into destination_root/<name>, verified. Returns that directory."""
    raw = RAW_DATASETS.get(name)
    destination_root = Path(destination_root)
    final = destination_root / raw.name
    if (final / MANIFEST).exists():
        return final
    mirror_path = Path(mirror) if mirror else None
    destination_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{raw.name}.", suffix=".partial", dir=destination_root))
    try:
        missing = _missing_in(raw, mirror_path / raw.name) if mirror_path is not None else _everything(raw)
        if not missing:
            shutil.rmtree(staging)
            _copy_tree(mirror_path / raw.name, staging)
            source = f"mirror:{mirror_path.resolve()}"
        elif download and raw.download is not None:
            raw.download(staging)
            source = "download"
            missing = _missing_in(raw, staging)
            if missing:
                raise RawDataMissing(_missing_message(raw, None, missing))
        else:
            raise RawDataMissing(_missing_message(raw, mirror_path, missing))
        try:
            digests = _verify(raw, staging)
        except FileReadError as error:
            if not source.startswith("mirror:"):
                raise
            # named where it came from: the staging copy is gone by the time the message is read
            raise FileReadError(mirror_path / raw.name / Path(error.path).relative_to(staging), error.problem) from None
        if raw.check is not None:
            raw.check(staging)
        if raw.finalize is not None:
            raw.finalize(staging)
        (staging / MANIFEST).write_text(
            json.dumps({"name": raw.name, "source": source, "sha256": digests}, indent=1) + "\n"
        )
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
        return final
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def verify_acquired(name: str, root: str | os.PathLike) -> None:
    """Re-check an acquired dataset's files against ACQUIRED.json."""
    raw = RAW_DATASETS.get(name)
    base = Path(root) / raw.name
    manifest_path = base / MANIFEST
    if not manifest_path.exists():
        raise RawDataMissing(f"{base} was not acquired (no {MANIFEST}); run `fdabench acquire --raw {name}`")
    with reading(manifest_path, f"the record of an acquisition ({MANIFEST})"):
        recorded = read_json_object(manifest_path, MANIFEST)["sha256"]
    changed = [
        path for path, digest in recorded.items() if not (base / path).exists() or content_sha256(base / path) != digest
    ]
    if changed:
        raise ValueError(f"{base}: {len(changed)} files changed since acquisition, e.g. {changed[:5]}")


def raw_dir(root: str | os.PathLike | None, name: str) -> Path:
    """<root>/<name> for a dataset's `prepare` (root: data/raw or a mirror); a clear error when absent."""
    raw = RAW_DATASETS.get(name)
    if root is None:
        raise RawDataMissing(_missing_message(raw, None, _everything(raw)))
    missing = _missing_in(raw, Path(root) / raw.name)
    if missing:
        raise RawDataMissing(_missing_message(raw, Path(root), missing))
    return Path(root) / raw.name


# -- the registered raw datasets ------------------------------------------------------------------------


def _torchvision_download(dataset_class: str) -> Callable[[Path], None]:
    """Download with torchvision into a temporary root, then move <root>/<Name>/* into the target."""

    def download(target: Path) -> None:
        import torchvision.datasets as datasets

        with tempfile.TemporaryDirectory(dir=target.parent) as root:
            for train in (True, False):
                getattr(datasets, dataset_class)(root, train=train, download=True)
            for item in (Path(root) / dataset_class).iterdir():
                shutil.move(str(item), target / item.name)

    return download


def _gunzip_all(base: Path) -> None:
    """Decompress every raw/*.gz next to itself (torchvision reads the uncompressed idx files)."""
    for path in sorted((base / "raw").glob("*.gz")):
        out = path.with_suffix("")
        if not out.exists():
            with (
                atomic_path(out) as partial,
                reading(path, "a gzip'd idx file"),
                gzip.open(path, "rb") as source,
                open(partial, "wb") as target,
            ):
                shutil.copyfileobj(source, target)


def _idx_files(pairs: dict[str, str]) -> tuple[RawFile, ...]:
    return tuple(RawFile(f"raw/{name}.gz", digest) for name, digest in pairs.items())


register(
    RawDataset(
        name="MNIST",
        description="MNIST handwritten digits (LeCun et al.), idx files",
        how_to_get="torchvision.datasets.MNIST(root, download=True), or the four *-idx?-ubyte.gz files from "
        "yann.lecun.com/exdb/mnist into <mirror>/MNIST/raw/",
        files=_idx_files(
            {
                "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
                "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
                "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
                "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
            }
        ),
        download=_torchvision_download("MNIST"),
        finalize=_gunzip_all,
    )
)

register(
    RawDataset(
        name="FashionMNIST",
        description="Fashion-MNIST (Xiao et al. 2017), idx files",
        how_to_get="torchvision.datasets.FashionMNIST(root, download=True), or the four *-idx?-ubyte.gz files from "
        "github.com/zalandoresearch/fashion-mnist into <mirror>/FashionMNIST/raw/",
        files=_idx_files(
            {
                "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
                "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
                "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
                "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
            }
        ),
        download=_torchvision_download("FashionMNIST"),
        finalize=_gunzip_all,
    )
)


def _cifar10_download(target: Path) -> None:
    import torchvision.datasets as datasets

    for train in (True, False):
        datasets.CIFAR10(target, train=train, download=True)


def _cifar10_check(base: Path) -> None:
    """torchvision's own md5 check of the python batches."""
    import torchvision.datasets as datasets

    for train in (True, False):
        datasets.CIFAR10(base, train=train, download=False)  # raises 'Dataset not found or corrupted'


register(
    RawDataset(
        name="CIFAR10",
        description="CIFAR-10 (Krizhevsky 2009), python batches",
        how_to_get="torchvision.datasets.CIFAR10(root, download=True), or extract cifar-10-python.tar.gz from "
        "www.cs.toronto.edu/~kriz/cifar.html into <mirror>/CIFAR10/ (giving CIFAR10/cifar-10-batches-py/)",
        files=tuple(
            RawFile(f"cifar-10-batches-py/{name}", None)
            for name in (
                "data_batch_1",
                "data_batch_2",
                "data_batch_3",
                "data_batch_4",
                "data_batch_5",
                "test_batch",
                "batches.meta",
            )
        ),
        download=_cifar10_download,
        check=_cifar10_check,
    )
)


def _uci_heart_download(target: Path) -> None:
    from torchvision.datasets.utils import download_url

    base = "https://archive.ics.uci.edu/ml/machine-learning-databases/heart-disease/"
    for name in (
        "processed.cleveland.data",
        "processed.hungarian.data",
        "processed.switzerland.data",
        "processed.va.data",
        "heart-disease.names",
    ):
        download_url(base + name, str(target), name)


register(
    RawDataset(
        name="heart_disease",
        description="UCI Heart Disease, 4 centres (FLamby's Fed-Heart-Disease)",
        how_to_get="the processed.{cleveland,hungarian,switzerland,va}.data files of "
        "archive.ics.uci.edu/dataset/45/heart+disease into <mirror>/heart_disease/",
        files=(
            RawFile("processed.cleveland.data", "a74b7efa387bc9d108d7d0115d831fe9b414b29ae7124f331b622b4efa0427c8"),
            RawFile("processed.hungarian.data", "d1ad108f785768cd3d7e82dc522e6f5a61eea93cccfb3a46ee8076f73fc3d796"),
            RawFile("processed.switzerland.data", "834a405ccf5b66ab4056bb77794adc8df0b7125186454c0a1d002d33c6c3b314"),
            RawFile("processed.va.data", "e7c93d8d0d2acdadfa4c5e8de768e2191e7f618b952e29623f1f0d5949ff6b8f"),
        ),
        download=_uci_heart_download,
    )
)

register(
    RawDataset(
        name="office_caltech10_surf",
        description="Office-Caltech10 SURF bag-of-words features (Gong et al. 2012)",
        how_to_get="the four <domain>_SURF_L10.mat files (amazon, caltech10, dslr, webcam; keys fts, labels) "
        "distributed with Gong et al.'s GFK code, into <mirror>/office_caltech10_surf/",
        files=(
            RawFile("amazon_SURF_L10.mat", "df32548b994e18d364c99e1f317e1fae100597259f0423a41b90f4f68187bb1f"),
            RawFile("caltech10_SURF_L10.mat", "4f9334c8ced489d5054de97a5fd51a61f017f3bcd1f38c9a85c6d78cb9d7bda5"),
            RawFile("dslr_SURF_L10.mat", "44d673c68e1d07b837893aa74dba3b986e4a6cc3fd66f0dd357683bdef059216"),
            RawFile("webcam_SURF_L10.mat", "a6a9c78b4b7181dfbb58bcfd351d4ebd737f171c31247b8884948aa156d3f700"),
        ),
    )
)

register(
    RawDataset(
        name="amazon_reviews",
        description="Amazon multi-domain sentiment reviews (Blitzer et al. 2007), sorted_data_acl",
        how_to_get="domain_sentiment_data.tar.gz from www.cs.jhu.edu/~mdredze/datasets/sentiment/; repack its "
        "sorted_data_acl/{books,dvd,electronics,kitchen}/{positive,negative}.review as "
        "<mirror>/amazon_reviews/sorted_data_acl.tar.xz with the folder renamed amazon_reviews_mds/ (the "
        "checksum is of that archive)",
        files=(RawFile("sorted_data_acl.tar.xz", "6732749ffb900821c56e4f0bc7f8d88ac6b97dc6f36b2582ec3dd8c278d66197"),),
    )
)


def _domain_root(directory: Path, domains: tuple[str, ...]) -> Path:
    """The folder (directory itself or below it, depth <= 2) that holds every domain folder."""
    candidates = [directory] + [p for p in directory.iterdir() if p.is_dir()]
    candidates += [q for p in candidates[1:] for q in p.iterdir() if q.is_dir()]
    for candidate in candidates:
        if all((candidate / domain).is_dir() for domain in domains):
            return candidate
    raise FileNotFoundError(f"no folder with {', '.join(domains)} below {directory}")


def _google_drive_archive(file_id: str, filename: str, domains: tuple[str, ...]) -> Callable[[Path], None]:
    """Download a DomainBed archive from Google Drive with torchvision; move its domain folders into place."""

    def download(target: Path) -> None:
        from torchvision.datasets.utils import download_file_from_google_drive, extract_archive

        with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
            download_file_from_google_drive(file_id, scratch, filename)
            archive = Path(scratch) / filename
            extract_archive(str(archive), scratch)
            archive.unlink()
            root = _domain_root(Path(scratch), domains)
            for domain in domains:
                shutil.move(str(root / domain), target / domain)

    return download


register(
    RawDataset(
        name="VLCS",
        description="VLCS (Fang et al. 2013) in DomainBed's layout",
        how_to_get="DomainBed's download script (python -m domainbed.scripts.download), or VLCS.tar.gz (Google Drive "
        "id 1skwblH1_okBwxWxmRsp9_qi15hyPpxg8) extracted to "
        "<mirror>/VLCS/{Caltech101,LabelMe,SUN09,VOC2007}/<class>/",
        domains=("Caltech101", "LabelMe", "SUN09", "VOC2007"),
        download=_google_drive_archive(
            "1skwblH1_okBwxWxmRsp9_qi15hyPpxg8", "VLCS.tar.gz", ("Caltech101", "LabelMe", "SUN09", "VOC2007")
        ),
    )
)
register(
    RawDataset(
        name="PACS",
        description="PACS (Li et al. 2017) in DomainBed's layout",
        how_to_get="DomainBed's download script, or PACS.zip (Google Drive id 1JFr8f805nMUelQWWmfnJR3y4_SYoN5Pd) whose "
        "kfold/ folder becomes <mirror>/PACS/{art_painting,cartoon,photo,sketch}/<class>/",
        domains=("art_painting", "cartoon", "photo", "sketch"),
        download=_google_drive_archive(
            "1JFr8f805nMUelQWWmfnJR3y4_SYoN5Pd", "PACS.zip", ("art_painting", "cartoon", "photo", "sketch")
        ),
    )
)
register(
    RawDataset(
        name="office_home",
        description="Office-Home (Venkateswara et al. 2017) in DomainBed's layout",
        how_to_get="DomainBed's download script, or office_home.zip (Google Drive id "
        "1uY0pj7oFsjMxRwaD3Sxy0jgel0fsYXLC) whose OfficeHomeDataset_10072016/ becomes "
        "<mirror>/office_home/{Art,Clipart,Product,Real World}/<class>/",
        domains=("Art", "Clipart", "Product", "Real World"),
        download=_google_drive_archive(
            "1uY0pj7oFsjMxRwaD3Sxy0jgel0fsYXLC", "office_home.zip", ("Art", "Clipart", "Product", "Real World")
        ),
    )
)
register(
    RawDataset(
        name="terra_incognita",
        description="TerraIncognita (Beery et al. 2018), locations 38, 43, 46, 100, in DomainBed's layout",
        how_to_get="DomainBed's download script (it selects 10 categories at locations 38, 43, 46, 100 of the Caltech "
        "Camera Traps from lila.science) giving <mirror>/terra_incognita/location_<id>/<class>/",
        domains=("location_100", "location_38", "location_43", "location_46"),
    )
)
register(
    RawDataset(
        name="domain_net",
        description="DomainNet (Peng et al. 2019) in DomainBed's layout",
        how_to_get="DomainBed's download script, or the six zips of ai.bu.edu/M3SDA (clipart, infograph, painting, "
        "quickdraw, real, sketch) extracted to <mirror>/domain_net/<domain>/<class>/",
        domains=("clipart", "infograph", "painting", "quickdraw", "real", "sketch"),
    )
)
