"""params.yaml validation: every mistake is reported with its key and the allowed values."""

import copy
import json
import os
import subprocess
import sys

import pytest
import yaml

from fdabench.config import ParamsError, load_params, validate_params


@pytest.fixture(scope="module")
def raw(repo_root):
    return yaml.safe_load((repo_root / "params.yaml").read_text())


def _error(raw) -> str:
    with pytest.raises(ParamsError) as caught:
        validate_params(raw)
    return str(caught.value)


def test_shipped_params_are_valid(raw):
    params = validate_params(raw)
    cells = list(params.cells())
    assert len(cells) == len({cell.path for cell in cells}) > 0
    assert params.tables()["table1"]["experiments"] == ["colored_digits", "rotated_digits"]


def test_method_typo_names_key_and_allowed_values(raw):
    broken = copy.deepcopy(raw)
    broken["suites"]["demo"]["methods"] = ["source_only", "fedgpp"]
    message = _error(broken)
    assert "suites.demo.methods[1]: unknown method 'fedgpp'" in message
    assert "did you mean 'fedgp'" in message  # the nearest valid names
    allowed = message.split("allowed values: ")[1].split("\n")[0].split("; did you mean")[0].split(", ")
    assert allowed == sorted(allowed) and {
        "fedda",
        "fedgp",
        "oracle",
        "source_only",
        "target_only",
        "fedda_auto",
    } <= set(allowed)
    assert set(raw["methods"]) <= set(allowed)  # the variants of params.yaml are allowed too


def test_unknown_key(raw):
    broken = copy.deepcopy(raw)
    broken["suites"]["demo"]["experiments"]["colored_digits"]["trian"] = {}
    message = _error(broken)
    assert "suites.demo.experiments.colored_digits: unknown key(s) 'trian'" in message
    assert (
        "allowed keys: dataset, dataset_options, method_options, methods, partition, partitioner, published, "
        "resources, seeds, targets, train" in message
    )


def test_wrong_type(raw):
    broken = copy.deepcopy(raw)
    broken["suites"]["demo"]["seeds"] = [0, "one"]
    assert "suites.demo.seeds[1]: 'one' has the wrong type; expected integer" in _error(broken)


def test_unknown_dataset_lists_registered_datasets(raw):
    broken = copy.deepcopy(raw)
    broken["suites"]["demo"]["experiments"]["colored_digits"]["dataset"] = "colored_mnist_typo"
    message = _error(broken)
    assert "dataset: 'colored_mnist_typo' is not allowed; allowed values:" in message and "rotated_digits" in message


@pytest.mark.parametrize("bad", ["../escape", ".hidden", "has space", "a/b", "semi;colon"])
def test_unsafe_names_are_rejected(raw, bad):
    broken = copy.deepcopy(raw)
    broken["methods"][bad] = {"algorithm": "fedgp"}
    assert f"name {bad!r} is not allowed" in _error(broken)


def test_unsafe_target_name(raw):
    broken = copy.deepcopy(raw)
    broken["suites"]["demo"]["experiments"]["colored_digits"]["targets"] = ["../x"]
    assert "must be 'all' or a list of target names" in _error(broken)


def test_unknown_target(raw):
    broken = copy.deepcopy(raw)
    broken["suites"]["demo"]["experiments"]["colored_digits"]["targets"] = ["-80"]
    assert "'-80' is not a target of colored_digits; allowed: +90, +80, -90" in _error(broken)


def test_method_hparams_checked_against_the_algorithm(raw):
    broken = copy.deepcopy(raw)
    broken["methods"]["fedgp"] = {"beta": 1.5, "betta": 0.1}
    message = _error(broken)
    assert "methods.fedgp: unknown key(s) 'betta'; allowed keys: beta, filter, mode" in message
    assert "methods.fedgp.beta: 1.5 is greater than the maximum of 1" in message


def test_variant_needs_a_registered_algorithm(raw):
    broken = copy.deepcopy(raw)
    broken["methods"]["fedgp_b0.3"] = {"beta": 0.3}
    assert "methods.fedgp_b0.3: 'fedgp_b0.3' is not a registered method, so it needs `algorithm:`" in _error(broken)
    broken["methods"]["fedgp_b0.3"] = {"algorithm": "fedgp", "beta": 0.3}
    broken["suites"]["demo"]["methods"].append("fedgp_b0.3")
    params = validate_params(broken)
    assert params.method_variant("fedgp_b0.3") == (
        "fedgp",
        {"beta": 0.3, "mode": "projection", "scale_alignment": "steps_and_lr", "filter": True},
    )


def test_unknown_suite_and_table_experiment(raw):
    broken = copy.deepcopy(raw)
    broken["suite"] = "paper_typo"
    broken["suites"]["demo"]["tables"]["table1"]["experiments"].append("nope")
    message = _error(broken)
    assert (
        "suite: 'paper_typo' is not defined; allowed values: demo, paper, paper_cpu, hospital, midrc_dry_run, smoke, "
        "theory" in message
    )
    assert "tables.table1.experiments[2]: unknown experiment 'nope'" in message


def test_dvc_suites_must_be_defined(raw):
    broken = copy.deepcopy(raw)
    broken["dvc"] = {"suites": ["demo", "smoke_typo"]}
    assert "dvc.suites: 'smoke_typo' is not defined; allowed values: demo, paper" in _error(broken)
    params = validate_params({**raw, "dvc": {"suites": ["demo", "smoke"]}})
    assert params.dvc_suites == ["demo", "smoke"] and params.for_suite("smoke").suite_name == "smoke"
    assert validate_params({k: v for k, v in raw.items() if k != "dvc"}).dvc_suites == [raw["suite"]]


def test_cluster_resources_resolve_default_suite_experiment(raw):
    params = validate_params(raw)
    assert params.resources("colored_digits") == {"runtime": 60, "mem_mb": 4096}  # the defaults
    paper = params.for_suite("paper")
    assert paper.resources("colored_mnist") == {"runtime": 120, "mem_mb": 16000}  # the suite's
    assert paper.resources("domain_net") == {"runtime": 2880, "mem_mb": 96000}  # the experiment's
    broken = copy.deepcopy(raw)
    broken["suites"]["demo"]["experiments"]["colored_digits"]["resources"] = {"runtime": 0}
    assert "suites.demo.experiments.colored_digits.resources.runtime: 0 is less than the minimum of 1" in _error(broken)


def test_train_model_must_be_registered(raw):
    broken = copy.deepcopy(raw)
    broken["suites"]["demo"]["train"]["model"] = "resnet_typo"
    message = _error(broken)
    assert (
        "suites.demo.train.model: 'resnet_typo' is not allowed; allowed values: cifar_cnn, digits_cnn," in message
        and "resnet18" in message
    )


def test_cell_config_resolution_order(raw):
    changed = copy.deepcopy(raw)
    changed["suites"]["demo"]["experiments"]["rotated_digits"]["train"] = {"rounds": 7}
    params = validate_params(changed)
    cell = params.cell("rotated_digits", "fedgp", "30", 1)
    assert cell.path == "results/cells/demo/rotated_digits/fedgp/30/seed1.json"
    assert cell.config["train"]["rounds"] == 7  # experiment over suite over dataset defaults
    assert cell.config["train"]["model"] == "mlp"  # suite over dataset default
    assert cell.config["train"]["target_batch_size"] == 16  # dataset default
    assert cell.config["hparams"] == {
        "beta": 0.5,
        "mode": "projection",
        "scale_alignment": "steps_and_lr",
        "filter": True,
    }


def test_load_params_reports_yaml_errors(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("suite: [unclosed\n")
    with pytest.raises(ParamsError, match="not valid YAML"):
        load_params(path)


def test_exported_schema_is_in_sync(repo_root):
    """The exported schema is the shipped registries' (built without plugins, which may be installed here)."""
    exported = json.loads((repo_root / "workflow/schemas/params.schema.json").read_text())
    built = subprocess.run(
        [sys.executable, "-m", "fdabench", "schema"],
        env={**os.environ, "FDABENCH_PLUGINS": "0"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert exported == json.loads(built.stdout), "run: fdabench schema --output workflow/schemas/params.schema.json"


def test_auto_method_with_one_target_step_per_round_is_rejected(raw):
    broken = copy.deepcopy(raw)
    broken["suites"]["demo"]["experiments"]["synthetic"]["methods"] = ["fedda_auto"]
    message = _error(broken)
    assert "suites.demo.experiments.synthetic: method 'fedda_auto'" in message
    assert "set target_batch_size, or estimation: gradient_batches" in message


def test_paper_suite_runs_every_shipped_method(raw):
    """Every method appears in the published tables: each FDA table runs every method that needs no
    auxiliary labels and no training settings of its own, and the weakly-supervised table runs the weak family."""
    from fdabench.core.plugins import shipped_names
    from fdabench.methods import METHODS
    from fdabench.methods.weak import WeaklySupervised

    params = validate_params({**raw, "suite": "paper"})
    shipped = set(shipped_names(METHODS))  # an installed plugin's method is not the paper suite's business
    weak = {name for name in shipped if issubclass(METHODS.get(name), WeaklySupervised)}
    algorithms_in = {
        table: {params.method_variant(method)[0] for exp in spec["experiments"] for method in params.methods(exp)}
        for table, spec in params.tables().items()
    }
    # methods that need their own training settings (SCAFFOLD: plain SGD; FedBN: BatchNorm layers) run in the
    # heterogeneity suite, not under the published tables' settings
    own_settings = {name for name in shipped if METHODS.get(name).requires.train}
    assert own_settings == {"scaffold", "fedbn"}
    for table in ("table1", "table_extended", "table_noise", "table_label_shift", "table_fed_heart"):
        assert algorithms_in[table] == shipped - weak - own_settings, table
    # the sample-size table runs the rules its published Tables 15-16 compare
    assert algorithms_in["table_sample_size"] == {"fedda", "fedgp", "fedda_auto", "fedgp_auto_threshold"}
    assert algorithms_in["table_weak"] >= weak
    assert params.tables()["table1"]["experiments"] == ["colored_mnist", "vlcs", "terra_incognita"]


def test_method_options_and_by_target_override_a_variant(raw):
    """Precedence: method defaults < variant < variant's by_target.<target> < the experiment's method_options."""
    changed = copy.deepcopy(raw)
    changed["methods"]["fedda_auto"] = {
        "lr_decay_after_warmup": 0.5,
        "by_target": {"+90": {"lr_decay_after_warmup": 0.1, "target_batch_size": 2}},
    }
    changed["suites"]["demo"]["experiments"]["colored_digits"]["method_options"] = {
        "fedda_auto": {"target_batch_size": 4}
    }
    params = validate_params(changed)
    plus90 = params.cell("colored_digits", "fedda_auto", "+90", 0).config["hparams"]
    minus90 = params.cell("colored_digits", "fedda_auto", "-90", 0).config["hparams"]
    rotated = params.cell("rotated_digits", "fedda_auto", "30", 0).config["hparams"]
    assert (plus90["lr_decay_after_warmup"], plus90["target_batch_size"]) == (0.1, 4)
    assert (minus90["lr_decay_after_warmup"], minus90["target_batch_size"]) == (0.5, 4)
    assert (rotated["lr_decay_after_warmup"], rotated["target_batch_size"]) == (0.5, None)


def test_method_options_are_checked_against_the_method(raw):
    broken = copy.deepcopy(raw)
    broken["suites"]["demo"]["experiments"]["colored_digits"]["method_options"] = {
        "fedda_auto": {"lr_decay": 0.1},
        "nope": {},
    }
    broken["methods"]["fedda_auto"] = {"by_target": {"+90": {"target_batch_size": 0}}}
    message = _error(broken)
    assert "colored_digits.method_options.fedda_auto: unknown key(s) 'lr_decay'" in message
    assert "colored_digits.method_options.nope: 'nope' is not a method of this experiment" in message
    assert "methods.fedda_auto.by_target.+90.target_batch_size: 0 is less than the minimum of 1" in message


def test_a_suite_named_like_a_results_folder_is_refused(raw):
    raw = copy.deepcopy(raw)  # the fixture is shared by the module's tests
    raw["suites"]["cells"] = raw["suites"].pop("demo")
    raw["suite"] = "cells"
    with pytest.raises(ParamsError, match=r"suites\.cells: the name is taken by results/cells/; rename the suite"):
        validate_params(raw)


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda"])
def test_a_cell_is_the_same_cell_on_every_machine(monkeypatch, raw, device):
    from fdabench.core import devices

    def plan(has_cuda: bool) -> dict:
        monkeypatch.setattr(devices, "cuda_available", lambda: has_cuda)
        return {cell.path: cell.config for cell in validate_params({**raw, "device": device}).cells()}

    on_a_login_node, on_a_gpu_node = plan(False), plan(True)  # a cluster's login node may lack CUDA
    assert on_a_login_node == on_a_gpu_node and len(on_a_gpu_node) > 100
    assert {config["device"] for config in on_a_gpu_node.values()} == {device}  # as params.yaml gives it


def test_the_device_is_decided_where_the_cell_runs(monkeypatch, raw):
    from fdabench.cell.setup import CellInputError, cell_device
    from fdabench.core import devices

    monkeypatch.setattr(devices, "cuda_available", lambda: False)
    assert [devices.decide(name) for name in ("auto", "cpu")] == ["cpu", "cpu"] and devices.uses_cuda("cuda")
    assert "set device: auto or cpu" in validate_params({**raw, "device": "cuda"}).device_problem()
    with pytest.raises(CellInputError, match="CUDA is not available"):
        cell_device("cuda")
    monkeypatch.setattr(devices, "cuda_available", lambda: True)
    assert [devices.decide(name) for name in ("auto", "cpu", "cuda")] == ["cuda", "cpu", "cuda"]
    assert validate_params({**raw, "device": "cuda"}).device_problem() is None
    with pytest.raises(ValueError, match="use one of auto, cpu, cuda"):
        devices.decide("gpu")
