"""Office-Caltech10 SURF: the loader on generated stand-in .mat files (every run) and on the real mirror."""

import os
from pathlib import Path

import numpy as np
import pytest

from fdabench.data import get_dataset, get_partitioner, office_caltech
from fdabench.data.raw import RawDataMissing

STAND_IN_SIZES = {"amazon": 23, "caltech10": 31, "dslr": 12, "webcam": 15}


def _write_stand_in(folder: Path, sizes=STAND_IN_SIZES, seed: int = 0) -> None:
    """MATLAB v5 files in the published format: `fts` uint8 (N, 800) counts, `labels` uint8 (N, 1) in 1..10."""
    import scipy.io

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for domain, size in sizes.items():
        counts = rng.poisson(0.25, size=(size, office_caltech.FEATURES)).astype(np.uint8)
        labels = (np.arange(size) % office_caltech.CLASSES + 1).astype(np.uint8).reshape(-1, 1)
        scipy.io.savemat(folder / office_caltech.file_name(domain), {"fts": counts, "labels": labels}, format="5")


@pytest.fixture
def stand_in_root(tmp_path):
    """A raw root (data/raw layout) holding stand-in files."""
    _write_stand_in(tmp_path / office_caltech.RAW_NAME)
    return tmp_path


def test_stand_in_files_load(stand_in_root):
    source = get_dataset("office_caltech10")
    assert source.needs_raw_data and source.domains == ("amazon", "caltech10", "dslr", "webcam")
    prepared = source.prepare(source.default_options, str(stand_in_root))
    assert prepared.input_shape == (800,) and prepared.num_outputs == 10
    assert {name: len(arrays.y) for name, arrays in prepared.domains.items()} == STAND_IN_SIZES
    amazon = prepared.domains["amazon"]
    assert amazon.x.dtype == np.float32 and amazon.y.min() == 0 and amazon.y.max() == 9  # labels 1..10 -> 0..9
    # Hellinger features: unit L2 norm per sample (for histograms that are not empty)
    norms = np.linalg.norm(amazon.x, axis=1)
    assert np.allclose(norms[norms > 0], 1.0, atol=1e-5)


def test_hellinger_features_are_per_sample_maps():
    counts = np.array([[4.0, 0.0, 12.0], [1.0, 1.0, 2.0], [0.0, 0.0, 0.0]])
    hellinger = office_caltech.preprocess(counts, "hellinger")
    assert np.allclose(hellinger[0], [0.5, 0.0, np.sqrt(0.75)]) and np.allclose(hellinger[2], 0.0)
    # a sample's features never depend on the other samples (no statistic is fitted)
    assert np.array_equal(office_caltech.preprocess(counts[1:2], "hellinger")[0], hellinger[1])
    assert np.allclose(office_caltech.preprocess(counts, "l1")[1], [0.25, 0.25, 0.5])


def test_missing_files_are_named_with_the_fix(tmp_path):
    source = get_dataset("office_caltech10")
    with pytest.raises(RawDataMissing, match="amazon_SURF_L10.mat"):
        source.prepare(source.default_options, None)
    (tmp_path / office_caltech.RAW_NAME).mkdir()
    with pytest.raises(RawDataMissing, match="dslr_SURF_L10.mat"):
        source.prepare(source.default_options, str(tmp_path))


def test_malformed_file_is_refused(stand_in_root):
    import scipy.io

    scipy.io.savemat(
        stand_in_root / office_caltech.RAW_NAME / office_caltech.file_name("dslr"),
        {"features": np.zeros((3, 800))},
        format="5",
    )
    source = get_dataset("office_caltech10")
    with pytest.raises(ValueError, match="expected keys 'fts' and 'labels'"):
        source.prepare(source.default_options, str(stand_in_root))


def test_leave_one_domain_out_on_the_stand_in(stand_in_root):
    source = get_dataset("office_caltech10")
    prepared = source.prepare(source.default_options, str(stand_in_root))
    partition = get_partitioner(source.partitioner).split(prepared, "dslr", 0, source.default_partition)
    assert [client.name for client in partition.sources] == ["amazon", "caltech10", "webcam"]
    target = [partition.target_labelled, partition.target_unlabelled, partition.target_test]
    assert sum(len(client.indices) for client in target) == STAND_IN_SIZES["dslr"]


@pytest.mark.realdata
def test_real_office_caltech10_surf():
    mirror = os.environ.get("FDABENCH_DATA_MIRROR")
    if not mirror:
        pytest.skip("no dataset mirror: set FDABENCH_DATA_MIRROR to a folder with office_caltech10_surf/*.mat")
    source = get_dataset("office_caltech10")
    prepared = source.prepare(source.default_options, mirror)
    sizes = {name: arrays.x.shape for name, arrays in prepared.domains.items()}
    assert sizes == {"amazon": (958, 800), "caltech10": (1123, 800), "dslr": (157, 800), "webcam": (295, 800)}
    for arrays in prepared.domains.values():
        assert set(np.unique(arrays.y)) == set(range(10))
        assert np.allclose(np.linalg.norm(arrays.x, axis=1), 1.0, atol=1e-5)
