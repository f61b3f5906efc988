"""Every number a consumer takes is bounded by that consumer's limit, declared once in the params schema
(fdabench.config.schema.BOUNDS), and every CLI option that sets the same thing refuses the same values, naming the
option, before anything runs."""

import contextlib
import copy
import io
from pathlib import Path

import pytest

from fdabench.cli import main
from fdabench.config import params_schema, validate_params
from fdabench.config.schema import BOUNDS, object_schema, option_schema, value_problem
from fdabench.data import DATASETS, PARTITIONERS
from fdabench.methods import METHODS
from workflows import TINY_PARAMS, params_refusal


def _numbers(schema, where=""):
    """(place, schema) of every integer or number in a schema tree."""
    if isinstance(schema, dict):
        kinds = schema.get("type") if isinstance(schema.get("type"), list) else [schema.get("type")]
        if "integer" in kinds or "number" in kinds:
            yield where, schema
        for key, value in schema.items():
            yield from _numbers(value, f"{where}.{key}")
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            yield from _numbers(value, f"{where}[{index}]")


def _component_schemas():
    yield "params", params_schema()
    components = ((METHODS, "hparams_schema"), (DATASETS, "options_schema"), (PARTITIONERS, "options_schema"))
    for registry, attribute in components:
        for name, member in registry.items():
            yield name, object_schema(getattr(member, attribute))


def test_every_number_of_the_schema_and_of_every_component_has_a_maximum():
    unbounded = [
        f"{owner}{where}"
        for owner, schema in _component_schemas()
        for where, spec in _numbers(schema)
        if "maximum" not in spec and "exclusiveMaximum" not in spec
    ]
    assert not unbounded


def _tiny(**changes):
    raw = copy.deepcopy(TINY_PARAMS)
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = raw
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return raw


def test_a_seed_above_what_numpy_random_state_takes_is_refused_and_the_largest_plans():
    message = params_refusal(_tiny(suites__tiny__seeds=[2**32]))
    assert "seeds[0]: 4294967296 is greater than the maximum of 4294967295 (numpy.random.RandomState" in message
    cells = list(validate_params(_tiny(suites__tiny__seeds=[2**32 - 1])).cells())
    assert {cell.seed for cell in cells} == {2**32 - 1}


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("threads_per_cell", 2**31, "greater than the maximum of 2147483647 (torch.set_num_threads takes a C int)"),
        ("gpus", [128], "greater than the maximum of 127 (torch numbers CUDA devices with an int8"),
        (
            "checkpoint_every",
            2**63,
            f"greater than the maximum of {2**63 - 1} (torch and numpy hold integers as int64)",
        ),
    ],
)
def test_top_level_numbers_are_bounded_by_their_consumer(key, value, expected):
    assert expected in params_refusal(_tiny(**{key: value}))


@pytest.mark.parametrize(
    ("setting", "value", "expected"),
    [
        ("eval_batch_size", 2**63, f"greater than the maximum of {2**63 - 1} (torch and numpy hold integers as int64)"),
        ("weight_decay", 1e39, "greater than the maximum of 3.4028234663852886e+38 (the models compute in float32"),
    ],
)
def test_training_numbers_are_bounded_by_their_consumer(setting, value, expected):
    assert expected in params_refusal(
        _tiny(suites__tiny__train={**TINY_PARAMS["suites"]["tiny"]["train"], setting: value})
    )


def test_a_component_option_is_bounded_as_the_settings_are():
    raw = _tiny(methods={"fedgp": {"beta": 0.5}, "wide": {"algorithm": "knn_per", "neighbours": 2**63}})
    assert "methods.wide.neighbours: 9223372036854775808 is greater than the maximum of" in params_refusal(raw)


def test_an_option_that_shadows_a_setting_takes_the_setting_s_bound():
    train_rounds = params_schema()["properties"]["suites"]["additionalProperties"]["properties"]["train"]
    rounds = train_rounds["properties"]["rounds"]
    assert option_schema("rounds") == {key: rounds[key] for key in ("type", "minimum", "maximum")}
    assert option_schema("seeds")["maximum"] == BOUNDS["seeds"]["maximum"]
    assert value_problem("seeds", 2**32) and value_problem("seeds", 2**32 - 1) is None


def _cli(arguments: list[str]) -> str:
    """The one error line (usage left out) of a command refused with exit status 2."""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), pytest.raises(SystemExit) as caught:
        code = main(arguments)
        raise SystemExit(code)
    assert caught.value.code == 2, stderr.getvalue()
    lines = stderr.getvalue().strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0], stderr.getvalue()
    return lines[0]


SIMULATE = ["flower", "simulate", "site_files", "--result", "r.json"]
BENCH_CELL = ["bench", "cell", "tiny", "colored_digits", "fedgp"]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ([*SIMULATE, "--timeout", "-3"], "argument --timeout: -3.0 is less than or equal to the minimum of 0"),
        ([*SIMULATE, "--threads", "0"], "argument --threads: 0 is less than the minimum of 1"),
        ([*BENCH_CELL, "--rounds", "0"], "argument --rounds: 0 is less than the minimum of 1"),
        ([*BENCH_CELL, "--seed", str(2**32)], "argument --seed: 4294967296 is greater than the maximum of 4294967295"),
        (["bench", "aggregation", "--sizes", "-5"], "argument --sizes: -5 is less than the minimum of 1"),
        (["bench", "aggregation", "--sizes", "1.5"], "argument --sizes: '1.5' is not a whole number"),
        (
            ["bench", "gpu", "--budget-seconds", "0"],
            "argument --budget-seconds: 0.0 is less than or equal to the minimum of 0",
        ),
    ],
)
def test_cli_options_are_refused_before_anything_runs_naming_the_option(arguments, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert expected in _cli(arguments)
    assert not list(tmp_path.iterdir())


def test_stand_in_with_a_negative_count_writes_nothing(tmp_path):
    output = tmp_path / "stand_in"
    assert "argument --per-domain: -5 is less than the minimum of 1" in _cli(
        ["stand-in", "midrc", "--output", str(output), "--per-domain", "-5"]
    )
    assert not output.exists()


def test_bench_cell_with_an_unknown_suite_is_refused_in_one_line(tmp_path, monkeypatch, repo_root):
    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text((repo_root / "params.yaml").read_text())
    line = _cli(["bench", "cell", "demoo", "colored_digits", "fedgp", "--rounds", "1"])
    assert line.startswith("fdabench: unknown suite 'demoo'; allowed values: demo,") and "did you mean 'demo'" in line


@pytest.mark.parametrize(
    ("hparams", "expected"),
    [
        ('{"beta": 7}', "fedgp: invalid hyper-parameters: beta: 7 is greater than the maximum of 1"),
        ('{"betta": 0.5}', "unknown key(s) 'betta'"),
        ("[0.5]", "is not a mapping of hyper-parameters"),
    ],
)
def test_check_method_validates_hparams_before_any_check_runs(hparams, expected, monkeypatch):
    from fdabench.testing import method_checks

    def no_run(*args, **kwargs):
        raise AssertionError("a check ran")

    monkeypatch.setattr(method_checks, "_Run", no_run)
    assert expected in _cli(["check-method", "fedgp", "--hparams", hparams])
