"""Fed-Heart: the four UCI Heart Disease centres (FLamby's Fed-Heart-Disease)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fdabench.data.base import DATASETS, DatasetSource, DomainArrays, PreparedDataset
from fdabench.data.raw import raw_dir

HEART_COLUMNS = ("age", "sex", "cp", "trestbps", "chol", "fbs", "restecg", "thalach", "exang", "oldpeak", "slope", "ca", "thal", "num")
HEART_CENTRES = {  # FLamby's centre order 0..3
    "cleveland": "processed.cleveland.data",
    "hungarian": "processed.hungarian.data",
    "switzerland": "processed.switzerland.data",
    "va": "processed.va.data",
}
AGE_DECADES = (40, 50, 60, 70)  # age decade classes: <40, 40s, 50s, 60s, >=70


def heart_auxiliary(name: str, table) -> np.ndarray:
    if name == "sex":
        return table["sex"].to_numpy().astype(np.int64)
    if name == "age_decade":
        return np.searchsorted(np.asarray(AGE_DECADES), table["age"].to_numpy(), side="right").astype(np.int64)
    raise ValueError(f"unknown auxiliary label {name!r}")


@DATASETS.register("fed_heart")
class FedHeart(DatasetSource):
    """13 clinical features per patient, label = num > 0 (heart disease). Missing values ('?') stay NaN in
    the prepared data; the `standardize` partition transform imputes them with the median and scales every
    feature, fitted on the training clients only. With `auxiliary: [sex, age_decade]` those become extra
    labels and are removed from the inputs (the weakly-supervised set-up)."""

    name = "fed_heart"
    task = "classification"
    domains = tuple(HEART_CENTRES)
    raw_datasets = ("heart_disease",)
    model = "mlp"
    AUXILIARY_CLASSES = {"sex": 2, "age_decade": len(AGE_DECADES) + 1}
    options_schema = {
        "auxiliary": {"type": "array", "items": {"enum": ["sex", "age_decade"]}, "uniqueItems": True,
                      "description": "features turned into auxiliary labels (and removed from the inputs)"},
    }
    default_options = {"auxiliary": []}
    default_train = {
        "model": "mlp",
        "model_options": {"hidden": [32]},
        "rounds": 50,
        "warmup_rounds": 2,
        "local_epochs": 1,
        "optimizer": "adam",
        "source_lr": 1e-3,
        "target_lr": 1e-3,
        "source_batch_size": 32,
        "target_batch_size": 8,
    }
    # DESIGN.md §3: the target centre labels 20% of its (training) data, the small centre 2 (switzerland) all.
    default_partition = {"holdout_fraction": 0.2, "target_labelled": 0.2, "target_labelled_overrides": {"switzerland": 1.0}, "standardize": True}

    def prepare(self, options: dict[str, Any], raw_root: str | None = None) -> PreparedDataset:
        import pandas as pd

        base = raw_dir(raw_root, "heart_disease")
        auxiliary = list(options["auxiliary"])
        features = [c for c in HEART_COLUMNS[:-1] if c not in auxiliary and not (c == "age" and "age_decade" in auxiliary)]
        domains = {}
        for centre, filename in HEART_CENTRES.items():
            table = pd.read_csv(base / filename, header=None, names=list(HEART_COLUMNS), na_values="?")
            x = table[features].to_numpy(dtype=np.float32)
            y = (table["num"].to_numpy() > 0).astype(np.int64)
            aux = {name: heart_auxiliary(name, table) for name in auxiliary}
            domains[centre] = DomainArrays(x, y, aux)
        meta = {"options": options, "features": features, "auxiliary_classes": {a: self.AUXILIARY_CLASSES[a] for a in auxiliary}}
        return PreparedDataset(self.name, self.task, 2, (len(features),), domains, meta=meta)
