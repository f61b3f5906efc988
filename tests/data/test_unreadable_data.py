"""Unreadable raw data, named: a truncated .gz in the mirror, an empty manifest, a truncated PNG and a .mat file that
is not one are each a FileReadError whose one line names the file and says what is wrong (issue 55)."""

from __future__ import annotations

import gzip
import io

import numpy as np
import pytest
from PIL import Image

from fdabench.cli import main
from fdabench.core.readers import FileReadError
from fdabench.data.image_folders import decode_images, read_manifest
from fdabench.data.office_caltech import load_domain
from fdabench.data.raw import RAW_DATASETS


def test_a_truncated_gz_in_the_mirror_is_named_where_it_lies(tmp_path, capsys):
    """Was an EOFError: the mirror's file is named (not the staging copy, gone by then) and nothing is acquired."""
    mirror, root = tmp_path / "mirror", tmp_path / "raw"
    files = RAW_DATASETS.get("MNIST").files
    for raw_file in files:
        path = mirror / "MNIST" / raw_file.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(b"\x00" * 4096))
    truncated = mirror / "MNIST" / files[0].path
    truncated.write_bytes(truncated.read_bytes()[:-30])
    assert main(["acquire", "--raw", "MNIST", "--mirror", str(mirror), "--root", str(root)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"fdabench: {truncated}: is truncated"), lines
    assert not (root / "MNIST").exists() and list(root.iterdir()) == []


def test_an_empty_manifest_is_named(tmp_path):
    """Was pandas' "No columns to parse from file", naming no file."""
    manifest = tmp_path / "manifest.csv"
    manifest.write_text("")
    with pytest.raises(FileReadError, match=r"manifest\.csv: is empty; pass a manifest"):
        read_manifest(manifest, tmp_path, domain_column="site", label_column="label", auxiliary=[], domains=None)


def test_a_truncated_png_is_named(tmp_path):
    buffer = io.BytesIO()
    Image.fromarray(np.arange(64 * 64 * 3, dtype=np.uint8).reshape(64, 64, 3)).save(buffer, format="PNG")
    good, truncated = tmp_path / "good.png", tmp_path / "truncated.png"
    good.write_bytes(buffer.getvalue())
    truncated.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    assert decode_images([good], 8).shape == (1, 3, 8, 8)
    with pytest.raises(FileReadError) as caught:
        decode_images([good, truncated], 8)
    assert str(caught.value).startswith(f"{truncated}: could not be read as an image")


def test_a_mat_file_that_is_not_one_is_named(tmp_path):
    path = tmp_path / "amazon_SURF_L10.mat"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(FileReadError, match=r"amazon_SURF_L10\.mat: could not be read as a MATLAB \.mat file"):
        load_domain(path)
