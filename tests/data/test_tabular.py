"""Fed-Heart on a generated stand-in in the UCI file format."""

import numpy as np
import pytest

from fdabench.data import get_dataset, get_partitioner
from fdabench.data.tabular import HEART_CENTRES
from fdabench.federation.problem import build_problem


@pytest.fixture
def heart_stand_in(tmp_path):
    rng = np.random.default_rng(0)
    base = tmp_path / "heart_disease"
    base.mkdir()
    for index, filename in enumerate(HEART_CENTRES.values()):
        lines = []
        for row in range(40 + 10 * index):
            values = [rng.integers(29, 78), row % 2] + list(rng.integers(0, 5, 11)) + [rng.integers(0, 5)]
            text = [str(v) for v in values]
            if row == 3:
                text[11] = "?"  # missing 'ca'
            lines.append(",".join(text))
        (base / filename).write_text("\n".join(lines) + "\n")
    return tmp_path


def test_fed_heart_prepare_and_auxiliary_labels(heart_stand_in):
    source = get_dataset("fed_heart")
    plain = source.prepare({"auxiliary": []}, raw_root=str(heart_stand_in))
    assert [len(d.y) for d in plain.domains.values()] == [40, 50, 60, 70]
    assert plain.input_shape == (13,) and np.isnan(plain.domains["cleveland"].x[3, 11])
    weak = source.prepare({"auxiliary": ["sex", "age_decade"]}, raw_root=str(heart_stand_in))
    assert weak.input_shape == (11,) and weak.meta["features"][0] == "cp"  # sex and age removed from the inputs
    cleveland = weak.domains["cleveland"]
    assert list(cleveland.aux["sex"][:4]) == [0, 1, 0, 1]
    assert cleveland.aux["age_decade"].min() >= 0 and cleveland.aux["age_decade"].max() <= 4


def test_fed_heart_partition_and_problem(heart_stand_in):
    source = get_dataset("fed_heart")
    prepared = source.prepare({"auxiliary": ["sex"]}, raw_root=str(heart_stand_in))
    partitioner = get_partitioner(source.partitioner)
    small = partitioner.split(prepared, "switzerland", 0, source.default_partition)
    in_split = len(small.target_labelled.indices) + len(small.target_unlabelled.indices)
    assert len(small.target_unlabelled.indices) == 0 and in_split == 48  # centre 2 labels all of its 80%
    fully_labelled = build_problem(prepared, small, "cpu")  # an empty unlabelled split is a valid client
    assert fully_labelled.target_unlabelled.inputs().shape == (0, 12) and len(fully_labelled.target_labelled) == 48
    other = partitioner.split(prepared, "va", 0, source.default_partition)
    assert len(other.target_labelled.indices) == round(0.2 * 56)
    problem = build_problem(prepared, other, "cpu")
    assert not problem.sources[0].inputs().isnan().any()  # imputed and standardised
    assert set(problem.target_labelled.aux) == {"sex"}
