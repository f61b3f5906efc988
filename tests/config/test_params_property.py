"""Generated params edits (Hypothesis, bounded: 5 examples of each of 11 kinds, about 3 s): values of the wrong
type or out of range, names that do not exist, keys repeated in the YAML text, pairs of settings that contradict
each other. Each edit is either valid (`load_params` succeeds, the cells resolve and carry what was written) or
refused by `load_params` with a ParamsError of one line per problem: never another exception, never silently
ignored."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fdabench.config import ParamsError, load_params
from fdabench.federation.settings import TRAIN_SCHEMA
from workflows import TINY_PARAMS

BASE = copy.deepcopy(TINY_PARAMS)
BASE["methods"]["fedgp_b0.2"] = {"algorithm": "fedgp", "beta": 0.2, "by_target": {"-90": {"beta": 0.3}}}
BASE["suites"]["tiny"]["methods"].append("fedgp_b0.2")
NAME = st.text(alphabet="abcdefgxyz_+-90", min_size=1, max_size=8)
VALUES = st.one_of(
    st.integers(-3, 10**7),
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.text(max_size=4),
    st.booleans(),
    st.none(),
    st.lists(st.integers(0, 3), max_size=2),
)


@dataclass
class Edit:
    kind: str
    raw: dict[str, Any]
    text: str | None = None  # YAML text to load instead of `raw` dumped
    must_refuse: bool = False
    written: dict[str, Any] = field(default_factory=dict)  # train settings that must reach the cells if accepted


def _suite(raw):
    return raw["suites"]["tiny"]


KINDS = ["value", "name:method", "name:target", "name:table", "name:by_target", "name:labelled_override",
         "name:dataset", "duplicate", "pair:final_rounds", "pair:momentum", "pair:target_batch_size"]  # fmt: skip


@st.composite
def edits(draw, family: str) -> Edit:
    raw = copy.deepcopy(BASE)
    kind, _, variant = family.partition(":")
    if kind == "value":
        key, value = draw(st.sampled_from(sorted(TRAIN_SCHEMA))), draw(VALUES)
        _suite(raw)["train"][key] = value
        return Edit(kind, raw, written={key: value})
    if kind == "name":
        name, where = draw(NAME), variant
        unknown = {
            "method": name not in ("source_only", "fedgp", "fedgp_b0.2"),
            "target": name not in ("-90", "+90", "+80"),
            "table": name != "colored_digits",
            "by_target": name != "-90",
            "labelled_override": name != "-90",
            "dataset": True,
        }[where]
        experiment = _suite(raw)["experiments"]["colored_digits"]
        if where == "method":
            _suite(raw)["methods"].append(name)
        elif where == "target":
            experiment["targets"] = [name]
            unknown = unknown or name != "-90"  # a valid target is accepted: still not silent (it runs)
        elif where == "table":
            _suite(raw)["tables"]["table1"]["experiments"] = [name]
        elif where == "by_target":
            raw["methods"]["fedgp_b0.2"]["by_target"] = {name: {"beta": 0.4}}
        elif where == "labelled_override":
            experiment["partition"] = {"target_labelled_overrides": {name: 10}}
        else:
            experiment["dataset"] = f"{name}_nope"
        return Edit(f"{kind}:{where}", raw, must_refuse=unknown)
    if kind == "duplicate":
        text = yaml.safe_dump(raw, sort_keys=False)
        lines = text.splitlines()
        keyed = [index for index, line in enumerate(lines) if ": " in line and not line.lstrip().startswith("- ")]
        index = draw(st.sampled_from(keyed))
        return Edit(kind, raw, text="\n".join([*lines[: index + 1], lines[index], *lines[index + 1 :]]) + "\n",
                    must_refuse=True)  # fmt: skip
    rounds, final = draw(st.integers(1, 8)), draw(st.integers(1, 12))
    pair = variant
    train = {"final_rounds": {"rounds": rounds, "final_rounds": final},
             "momentum": {"optimizer": draw(st.sampled_from(["adam", "sgd"])), "momentum": 0.9},
             "target_batch_size": {"target_batch_size": draw(st.integers(0, 100))}}[pair]  # fmt: skip
    _suite(raw)["train"].update(train)
    contradicts = {
        "final_rounds": final > rounds,
        "momentum": train.get("optimizer") == "adam",
        "target_batch_size": train.get("target_batch_size", 0) > 48,  # the tiny suite labels 48 target samples
    }[pair]
    return Edit(f"pair:{pair}", raw, must_refuse=contradicts, written=train)


def _one_line_per_problem(message: str) -> None:
    lines = message.splitlines()
    if len(lines) == 1:
        return  # a file-level refusal (YAML, a repeated key, aliases)
    assert lines[0] == "invalid params:" and all(line.strip() for line in lines), message
    assert all(line.startswith("  - ") or line.startswith("    ") for line in lines[1:]), message
    assert "Traceback" not in message


@pytest.mark.parametrize("family", KINDS)
def test_every_params_edit_is_valid_and_used_or_refused_in_one_line_per_problem(family, tmp_path):
    @settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(edit=edits(family))
    def check(edit):
        _check(edit, tmp_path)

    check()


def _check(edit: Edit, tmp_path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(edit.text if edit.text is not None else yaml.safe_dump(edit.raw, sort_keys=False))
    try:
        params = load_params(path)
    except ParamsError as error:
        _one_line_per_problem(str(error))
        return
    assert not edit.must_refuse, f"{edit.kind} accepted silently"
    cells = list(params.cells())
    assert cells
    for key, value in edit.written.items():  # what was written reaches every cell: nothing ignored
        assert all(cell.config["train"][key] == value for cell in cells), (key, value)
