"""Fed-Heart on a generated stand-in in the UCI file format."""

import numpy as np
import pytest
import torch

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
                text[11] = "?"  # missing 'ca' (a column FLamby drops)
            if row == 5:
                text[4] = "?"  # missing 'chol': FLamby drops the row
            lines.append(",".join(text))
        (base / filename).write_text("\n".join(lines) + "\n")
    return tmp_path


def test_fed_heart_prepare_and_auxiliary_labels(heart_stand_in):
    source = get_dataset("fed_heart")
    everything = source.prepare({"rows": "all", "auxiliary": []}, raw_root=str(heart_stand_in))
    assert [len(d.y) for d in everything.domains.values()] == [40, 50, 60, 70]
    assert everything.input_shape == (13,) and np.isnan(everything.domains["cleveland"].x[3, 11])
    flamby = source.prepare({"rows": "flamby", "auxiliary": []}, raw_root=str(heart_stand_in))
    assert [len(d.y) for d in flamby.domains.values()] == [39, 49, 59, 69]  # the row missing 'chol' is dropped
    # 8 numeric columns, then cp and restecg (5 levels each in the stand-in) one-hot without their first level
    assert flamby.input_shape == (16,) and flamby.meta["features"][:2] == ["age", "sex"]
    assert {f.split("_")[0] for f in flamby.meta["features"][8:]} == {"cp", "restecg"}
    one_hot = flamby.domains["cleveland"].x[:, 8:12]
    assert set(np.unique(one_hot)) <= {0.0, 1.0} and (one_hot.sum(axis=1) <= 1).all()
    weak = source.prepare({"rows": "all", "auxiliary": ["sex", "age_decade"]}, raw_root=str(heart_stand_in))
    assert weak.input_shape == (11,) and weak.meta["features"][0] == "cp"  # sex and age removed from the inputs
    cleveland = weak.domains["cleveland"]
    assert list(cleveland.aux["sex"][:4]) == [0, 1, 0, 1]
    assert cleveland.aux["age_decade"].min() >= 0 and cleveland.aux["age_decade"].max() <= 4
    weak_flamby = source.prepare({"rows": "flamby", "auxiliary": ["sex", "age_decade"]}, raw_root=str(heart_stand_in))
    assert "sex" not in weak_flamby.meta["features"] and "age" not in weak_flamby.meta["features"]


def test_fed_heart_partition_and_problem(heart_stand_in):
    source = get_dataset("fed_heart")
    prepared = source.prepare({"rows": "flamby", "auxiliary": ["sex"]}, raw_root=str(heart_stand_in))
    partitioner = get_partitioner(source.partitioner)
    small = partitioner.split(prepared, "switzerland", 0, source.default_partition)
    train = len(small.target_labelled.indices) + len(small.target_unlabelled.indices)
    assert (
        len(small.target_unlabelled.indices) == 0 and train == 59 - 21
    )  # centre 2 labels all of its 66% training split
    fully_labelled = build_problem(prepared, small, "cpu")  # an empty unlabelled split is a valid client
    assert fully_labelled.target_unlabelled.inputs().shape == (0, 15) and len(fully_labelled.target_labelled) == 38
    other = partitioner.split(prepared, "va", 0, source.default_partition)
    assert len(other.target_test.indices) == 24 and len(other.target_labelled.indices) == round(0.2 * 45)
    problem = build_problem(prepared, other, "cpu")
    assert set(problem.target_labelled.aux) == {"sex"}
    standardised = build_problem(prepared, partitioner.split(prepared, "va", 0, source.default_partition), "cpu")
    pooled = torch.cat([client.inputs() for client in standardised.sources] + [standardised.target_labelled.inputs()])
    assert torch.allclose(pooled.mean(0), torch.zeros(15), atol=1e-5)  # fitted on sources + labelled target only
