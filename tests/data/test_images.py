"""Image-folder and manifest datasets on generated stand-ins in their real layouts."""

import numpy as np
import pytest
from PIL import Image

from fdabench.data import get_dataset
from fdabench.data.image_folders import ManifestError, read_manifest
from fdabench.federation.rounds import run_rounds


def _image(path, colour, size=(20, 12)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)


@pytest.fixture
def pacs_stand_in(tmp_path):
    root = tmp_path / "raw"
    for d, domain in enumerate(("art_painting", "cartoon", "photo", "sketch")):
        for c, name in enumerate(("dog", "elephant", "giraffe")):
            for k in range(2 + d):
                _image(root / "PACS" / domain / name / f"{k}.jpg", (40 * c, 60 * d, 10 * k))
    return root


def test_image_folder_prepare(pacs_stand_in):
    prepared = get_dataset("pacs").prepare(
        {"image_size": 16, "max_per_domain": None, "seed": 0}, raw_root=str(pacs_stand_in)
    )
    assert list(prepared.domains) == ["art_painting", "cartoon", "photo", "sketch"]
    assert prepared.num_outputs == 3 and prepared.input_shape == (3, 16, 16)
    assert prepared.meta["classes"] == ["dog", "elephant", "giraffe"]
    art = prepared.domains["art_painting"]
    assert art.x.shape == (6, 3, 16, 16) and art.x.dtype == np.uint8 and list(art.y) == [0, 0, 1, 1, 2, 2]
    assert art.x[2, 0].mean() == pytest.approx(40, abs=1)  # class elephant: red channel 40
    capped = get_dataset("pacs").prepare({"image_size": 8, "max_per_domain": 4, "seed": 0}, raw_root=str(pacs_stand_in))
    assert len(capped.domains["sketch"].y) == 4


def test_office_home_maps_the_real_world_folder(tmp_path):
    for domain in ("Art", "Clipart", "Product", "Real World"):
        _image(tmp_path / "office_home" / domain / "Mug" / "a.png", (1, 2, 3))
    prepared = get_dataset("office_home").prepare(
        {"image_size": 8, "max_per_domain": None, "seed": 0}, raw_root=str(tmp_path)
    )
    assert list(prepared.domains) == ["Art", "Clipart", "Product", "Real_World"]


@pytest.fixture
def manifest_stand_in(tmp_path):
    images = tmp_path / "images"
    rows = ["path,state,label,sex,age_decade,race"]
    for s, state in enumerate(("IL", "NC", "CA", "IN", "TX")):
        for k in range(3):
            _image(images / state / f"{k}.png", (50 * s, 20 * k, 0))
            rows.append(
                f"{state}/{k}.png,{state},{k % 2},{'Female' if k else 'Male'},{4 + k},{('White', 'Black', 'Other')[k]}"
            )
    manifest = tmp_path / "manifest.csv"
    manifest.write_text("\n".join(rows) + "\n")
    return manifest, images


def test_manifest_prepare_with_auxiliary_labels(manifest_stand_in):
    manifest, images = manifest_stand_in
    source = get_dataset("midrc")
    options = {**source.default_options, "manifest": str(manifest), "image_root": str(images), "image_size": 8}
    prepared = source.prepare(options)
    assert list(prepared.domains) == ["IL", "NC", "CA", "IN", "TX"]
    il = prepared.domains["IL"]
    assert il.x.shape == (3, 3, 8, 8) and list(il.y) == [0, 1, 0]
    assert sorted(il.aux) == ["age_decade", "race", "sex"] and list(il.aux["sex"]) == [0, 1, 1]
    # codes follow the declared value lists (Male 0 / Female 1, decades 0..9, White 0 / Black 1 / Other 2)
    assert list(il.aux["age_decade"]) == [4, 5, 6] and list(il.aux["race"]) == [0, 1, 2]
    assert prepared.meta["auxiliary_classes"] == {"sex": 2, "age_decade": 10, "race": 3}
    assert source.input_files(options) == [str(manifest)]


def test_manifest_errors_are_specific(manifest_stand_in, tmp_path):
    manifest, images = manifest_stand_in
    text = manifest.read_text()
    bad = tmp_path / "bad.csv"
    bad.write_text(text.replace("path,state", "file,state"))
    with pytest.raises(ManifestError, match="missing column\\(s\\) path"):
        read_manifest(bad, images, "state", "label", [], None)
    bad.write_text(
        text
        + "../../etc/passwd,IL,0,Male,4,White\n/abs/x.png,IL,0,Male,4,White\n"
        + "IL/none.png,IL,1,Male,4,White\nIL/0.png,IL,-1,Male,4,White\n"
    )
    with pytest.raises(ManifestError) as caught:
        read_manifest(bad, images, "state", "label", ["sex"], ["IL", "ZZ"])
    message = str(caught.value)
    assert "stay inside image_root" in message and "rows [15, 16]" in message
    assert "do not exist" in message and "IL/none.png" in message
    assert "non-negative integers; rows [18]" in message
    assert "domain(s) ['ZZ'] have no rows" in message
    bad.write_text(text.replace("IL/1.png,IL,1,Female", "IL/1.png,IL,2,female").replace("NC/0.png,NC", "IL/0.png,NC"))
    with pytest.raises(ManifestError) as caught:
        read_manifest(
            bad, images, "state", "label", ["sex"], None, num_classes=2, auxiliary_values={"sex": ["Male", "Female"]}
        )
    message = str(caught.value)
    assert "unknown label values [2] in column 'label'" in message
    assert "unknown values ['female'] in auxiliary column 'sex'" in message
    assert "duplicate ids in column 'path': ['IL/0.png']; rows [0, 3]" in message
    with pytest.raises(ManifestError, match="needs datasets.midrc.manifest and .image_root"):
        get_dataset("midrc").prepare(get_dataset("midrc").default_options)


def test_midrc_dry_run_suite_trains_on_the_stand_in(tmp_path, repo_root):
    """The hospital walk-through of docs/datasets.md: the stand-in manifest with the `midrc_dry_run` suite's settings
    runs the weakly-supervised family end to end (prepare, partition, train) and learns the stand-in's cue."""
    import yaml

    from fdabench.config import validate_params
    from fdabench.data import get_partitioner
    from fdabench.data.image_folders import write_stand_in
    from fdabench.federation.problem import build_problem
    from fdabench.federation.settings import TrainSettings
    from fdabench.methods import get_method

    raw = yaml.safe_load((repo_root / "params.yaml").read_text())
    params = validate_params({**raw, "suite": "midrc_dry_run"})
    manifest = write_stand_in("midrc", tmp_path / "midrc")
    source = get_dataset("midrc")
    options = {
        **params.dataset_options("midrc", "midrc"),
        "manifest": str(manifest),
        "image_root": str(tmp_path / "midrc" / "images"),
    }
    prepared = source.prepare(options)
    assert prepared.meta["auxiliary_classes"] == {"sex": 2, "age_decade": 10, "race": 3}
    partition = get_partitioner(params.partitioner("midrc")).split(prepared, "IL", 0, params.partition_options("midrc"))
    problem = build_problem(prepared, partition, "cpu")
    assert len(problem.target_labelled) == 8 and set(problem.aux_classes) == {"sex", "age_decade", "race"}
    settings = TrainSettings.from_dict(params.train_settings("midrc"))
    history = run_rounds(get_method("auxinfo_gp", {}), problem, settings, 0, "cpu")
    assert history["rounds"][-1]["auc"] > 0.9
