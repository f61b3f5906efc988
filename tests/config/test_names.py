"""The one name rule (fdabench.config.names): every name that becomes a path or a command argument is refused by
`validate` when the file system or the shell could not carry it, before any job."""

import copy

import pytest

from fdabench.config import ParamsError, validate_params
from fdabench.config.names import COMPONENT_BYTES, MAX_NAME_LENGTH, PATH_BYTES, name_problem, path_problem
from workflows import TINY_PARAMS


def _problems(raw) -> str:
    with pytest.raises(ParamsError) as caught:
        validate_params(raw)
    message = str(caught.value)
    assert message.startswith("invalid params:\n") and "Traceback" not in message
    return message


def _renamed_suite(name: str) -> dict:
    raw = copy.deepcopy(TINY_PARAMS)
    raw["suite"], raw["suites"] = name, {name: raw["suites"]["tiny"]}
    return raw


def test_the_longest_name_fits_a_file_name_with_every_prefix_and_suffix():
    assert name_problem("a" * MAX_NAME_LENGTH, "suite") is None
    assert "longer than" in name_problem("a" * (MAX_NAME_LENGTH + 1), "suite")
    # results/<suite>/figures/<experiment>_rounds.png: 11 characters around the name (the sweep's are longer)
    assert MAX_NAME_LENGTH + len("_rounds.png") <= COMPONENT_BYTES


def test_a_300_character_suite_name_is_refused_before_any_job():
    message = _problems(_renamed_suite("s" * 300))
    assert "suite name 'ssss" in message and f"(300 characters) is longer than {MAX_NAME_LENGTH} characters" in message
    assert "s" * 41 not in message  # the name is cut in the message


def test_a_300_character_variant_name_is_refused_before_any_job():
    raw = copy.deepcopy(TINY_PARAMS)
    raw["methods"]["v" * 300] = {"algorithm": "fedgp"}
    raw["suites"]["tiny"]["methods"].append("v" * 300)
    assert "method name 'vvvv" in _problems(raw)


def test_a_name_of_the_longest_length_is_accepted_and_plans():
    name = "s" * MAX_NAME_LENGTH
    params = validate_params(_renamed_suite(name))
    assert all(len(part) <= COMPONENT_BYTES for cell in params.cells() for part in cell.path.split("/"))


@pytest.mark.parametrize("name", ["tiny\n", "tiny\r", "ti\tny", "tiny\x00", "tí ny", "<b>tiny</b>", "a/b", ".x"])
def test_names_with_characters_a_path_or_terminal_cannot_carry_are_refused(name):
    assert "is not allowed" in _problems(_renamed_suite(name))


def test_a_trailing_newline_is_refused_in_every_kind_of_name():
    raw = copy.deepcopy(TINY_PARAMS)
    suite = raw["suites"]["tiny"]
    suite["experiments"]["colored_digits\n"] = suite["experiments"].pop("colored_digits")
    suite["tables"]["table1\n"] = {"experiments": ["colored_digits\n"]}
    message = _problems(raw)
    assert "name 'colored_digits\\n' is not allowed" in message and "name 'table1\\n' is not allowed" in message


@pytest.mark.parametrize("where", ["suite", "method", "experiment", "table"])
def test_a_leading_dash_is_refused_where_a_command_would_read_an_option(where):
    raw = copy.deepcopy(TINY_PARAMS)
    suite = raw["suites"]["tiny"]
    if where == "suite":
        raw = _renamed_suite("-tiny")
    elif where == "method":
        raw["methods"]["-fedgp"] = {"algorithm": "fedgp"}
        suite["methods"].append("-fedgp")
    elif where == "experiment":
        suite["experiments"]["-colored"] = suite["experiments"].pop("colored_digits")
        suite["tables"]["table1"]["experiments"] = ["-colored"]
    else:
        suite["tables"]["-table"] = suite["tables"].pop("table1")
    assert f"{where} name '-" in _problems(raw) and "starts with '-'" in _problems(raw)


def test_a_target_may_start_with_a_dash():
    assert name_problem("-90", "target") is None
    assert validate_params(copy.deepcopy(TINY_PARAMS)).cells()


def test_a_data_root_that_makes_a_path_too_long_is_refused():
    raw = copy.deepcopy(TINY_PARAMS)
    raw["data"] = {"root": "/".join(["d" * 200] * 21)}  # 4220 characters: every partition path is too long
    assert "above the file system's 4095" in _problems(raw)
    assert path_problem({"suite": "s", "experiment": "e", "target": "t", "seed": 0, "data": "data"}) is None


def test_a_file_name_above_the_file_system_limit_is_named():
    problem = path_problem({"suite": "s" * (COMPONENT_BYTES + 1)})
    assert f"would be {COMPONENT_BYTES + 6} bytes, above the file system's {COMPONENT_BYTES}" in problem  # <suite>.json
    assert path_problem({"suite": "s"}) is None and PATH_BYTES == 4095


def test_a_registered_member_whose_name_a_command_would_read_as_an_option_is_refused(monkeypatch):
    """A plugin's method named '-fedda' (letters, digits and _ . + - only): a suite that uses it is refused, naming
    the registered member, before any job."""
    from fdabench.methods import METHODS
    from fdabench.methods.fda import FedDA

    plugin = type("DashedFedDA", (FedDA,), {"name": "-fedda"})
    monkeypatch.setitem(METHODS._members, "-fedda", plugin)
    raw = copy.deepcopy(TINY_PARAMS)
    raw["methods"]["fedda_dashed"] = {"algorithm": "-fedda"}
    raw["suites"]["tiny"]["methods"].append("fedda_dashed")
    assert "registered method name '-fedda' starts with '-'" in _problems(raw)
