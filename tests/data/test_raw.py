"""Raw acquisition: from a mirror, verified; clear errors naming what is missing or corrupt."""

import gzip
import json

import pytest

from fdabench.data import raw


@pytest.fixture
def fake_raw(monkeypatch, tmp_path):
    content = b"hello idx"
    spec = raw.RawDataset(
        name="FakeSet",
        description="a fake",
        how_to_get="make it",
        files=(raw.RawFile("raw/a.gz", __import__("hashlib").sha256(content).hexdigest()),),
        finalize=raw._gunzip_all,
    )
    monkeypatch.setitem(raw.RAW_DATASETS._members, "FakeSet", spec)
    mirror = tmp_path / "mirror"
    (mirror / "FakeSet" / "raw").mkdir(parents=True)
    with gzip.open(mirror / "FakeSet" / "raw" / "a.gz", "wb") as handle:
        handle.write(content)
    return mirror, content


def test_acquire_from_mirror_verifies_and_decompresses(fake_raw, tmp_path):
    mirror, content = fake_raw
    path = raw.acquire("FakeSet", tmp_path / "data_raw", mirror=mirror)
    assert (path / "raw" / "a").read_bytes() == content
    manifest = json.loads((path / raw.MANIFEST).read_text())
    assert manifest["source"].startswith("mirror:") and "raw/a.gz" in manifest["sha256"]
    raw.verify_acquired("FakeSet", tmp_path / "data_raw")


def test_corrupt_mirror_file_is_refused_and_nothing_is_left(fake_raw, tmp_path):
    mirror, _ = fake_raw
    with gzip.open(mirror / "FakeSet" / "raw" / "a.gz", "wb") as handle:
        handle.write(b"tampered")
    with pytest.raises(ValueError, match="corrupt or unexpected files:\n  raw/a.gz: sha256"):
        raw.acquire("FakeSet", tmp_path / "data_raw", mirror=mirror)
    assert not (tmp_path / "data_raw" / "FakeSet").exists()
    assert list((tmp_path / "data_raw").iterdir()) == []


def test_missing_dataset_names_files_and_how_to_get_them(tmp_path):
    with pytest.raises(raw.RawDataMissing) as caught:
        raw.acquire("MNIST", tmp_path, mirror=tmp_path / "empty")
    message = str(caught.value)
    assert "MNIST/raw/train-images-idx3-ubyte.gz" in message and "How to get it: torchvision.datasets.MNIST" in message
    with pytest.raises(raw.RawDataMissing, match="no mirror"):
        raw.raw_dir(None, "PACS")


def test_image_folder_layout_is_checked(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "PACS" / "photo" / "dog").mkdir(parents=True)
    (mirror / "PACS" / "photo" / "dog" / "1.jpg").write_bytes(b"x")
    with pytest.raises(raw.RawDataMissing) as caught:
        raw.acquire("PACS", tmp_path / "data_raw", mirror=mirror)
    assert "PACS/art_painting/<class>/<images>" in str(caught.value) and "PACS/photo" not in str(caught.value)


def test_changed_file_after_acquisition_is_detected(fake_raw, tmp_path):
    mirror, _ = fake_raw
    path = raw.acquire("FakeSet", tmp_path / "data_raw", mirror=mirror)
    (path / "raw" / "a").unlink()
    (path / "raw" / "a.gz").unlink()
    with gzip.open(path / "raw" / "a.gz", "wb") as handle:
        handle.write(b"other")
    with pytest.raises(ValueError, match="changed since acquisition"):
        raw.verify_acquired("FakeSet", tmp_path / "data_raw")
