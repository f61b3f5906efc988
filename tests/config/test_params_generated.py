"""Generated params files, by class (Hypothesis; about 20 s): a small but full params file with one or two fields
replaced, in every field and key, by a value its JSON schema allows (hypothesis-jsonschema, from the sub-schema of
that field), a value of another type, a boundary number, or a hostile string (control characters, newlines, very
long, unicode, markup, shell syntax). One invariant: `load_params` either accepts the file, which then plans (what a
dry run asks of it, every planned path within the file system's limits), or refuses it with a ParamsError of one
line per problem, never another exception.

The seed corpus (test_params_generated_corpus.json) holds every failure the generator has found, each replayed as
its own case: when this test fails, add the falsifying mutation printed by Hypothesis to the corpus, then fix the
class of failure at its root."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from fdabench.config import ParamsError, load_params, params_schema
from fdabench.config.names import COMPONENT_BYTES, PATH_BYTES
from fdabench.core import paths
from fdabench.core.io import canonical_json

CORPUS = Path(__file__).with_name("test_params_generated_corpus.json")

#: a small params file that uses most keys of the schema; it validates as it is
BASE: dict[str, Any] = {
    "suite": "tiny",
    "device": "cpu",
    "threads_per_cell": 1,
    "checkpoint_every": 0,
    "limits": {"rounds": 1000, "cells": 100},
    "dvc": {"suites": ["tiny"]},
    "data": {"root": "data"},
    "datasets": {"colored_digits": {"label_noise": 0.0}},
    "methods": {
        "fedgp": {"beta": 0.5},
        "fedgp_b0.2": {"algorithm": "fedgp", "beta": 0.2, "by_target": {"-90": {"beta": 0.3}}},
    },
    "suites": {
        "tiny": {
            "seeds": [0, 1],
            "methods": ["source_only", "fedgp", "fedgp_b0.2"],
            "train": {
                "model": "mlp",
                "model_options": {"hidden": [16]},
                "rounds": 3,
                "warmup_rounds": 1,
                "source_batch_size": 16,
                "target_batch_size": 8,
                "final_rounds": 2,
            },
            "resources": {"runtime": 10, "mem_mb": 1000},
            "validation": {"target_holdout": 8},
            "sweep": {"draws": 2, "train": ["source_lr"], "reference": "fedgp"},
            "experiments": {
                "colored_digits": {
                    "dataset": "colored_digits",
                    "targets": ["-90"],
                    "seeds": [0],
                    "partition": {"target_labelled": 48},
                    "method_options": {"fedgp": {"beta": 0.4}},
                }
            },
            "tables": {"table1": {"experiments": ["colored_digits"], "title": "Table 1", "metrics": ["accuracy"]}},
            "figures": {"beta": {"kind": "beta", "experiments": ["colored_digits"], "title": "β"}},
        }
    },
}

BOUNDARY_NUMBERS = [0, -1, 1, 2, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**63, -(2**63), 10**30,
                    0.5, -0.0, 1e-320, 1e308, 1e39, math.nan, math.inf, -math.inf]  # fmt: skip
HOSTILE_STRINGS = ["", " ", "-x", "--help", ".", "..", "../x", "a/b", "a\\b", "x\n", "\nx", "a\rb", "a\tb", "a\x00b",
                   "a\x1b[31mb", "\u202eevil", "a\u200bb", "ü", "😀", "Ω" * 200, "s" * 300, "s" * 5000,
                   "<script>alert(1)</script>", "{{x}}", "${x}", "$(rm -rf /)", "`x`", "a;b", "a|b", "'", '"',
                   "*", "~", "con", "a b"]  # fmt: skip
OTHER_TYPES = [None, True, False, 0, 1.5, "x", [], [1], {}, {"a": 1}]


def _places(value: Any, where: tuple = ()) -> list[tuple]:
    """Every place of a params tree: values (path) and mapping keys (path + ("<key>",))."""
    places = [where] if where else []
    if isinstance(value, dict):
        for key, item in value.items():
            places.append((*where, key, "<key>"))
            places += _places(item, (*where, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            places += _places(item, (*where, index))
    return places


PLACES = _places(BASE)
SCHEMA = params_schema()


def _schema_at(schema: dict[str, Any], where: tuple) -> dict[str, Any] | None:
    """The sub-schema of a place (None where the schema leaves it open)."""
    for part in where:
        if "oneOf" in schema:
            schema = next((option for option in schema["oneOf"] if "items" in option), schema["oneOf"][0])
        if isinstance(part, int):
            schema = schema.get("items")
        elif part in schema.get("properties", {}):
            schema = schema["properties"][part]
        else:
            schema = schema.get("additionalProperties")
        if not isinstance(schema, dict):
            return None
    return schema


def _has(node: Any, part: Any) -> bool:
    if isinstance(node, dict):
        return part in node
    return isinstance(node, list) and isinstance(part, int) and part < len(node)


def _edit(raw: dict[str, Any], where: tuple, value: Any) -> dict[str, Any]:
    """`raw` with the value at `where` replaced (or, where it ends in "<key>", its key renamed) by `value`; a place
    an earlier edit removed is left alone."""
    raw = copy.deepcopy(raw)
    *parents, last = where
    if last == "<key>":
        *parents, last = parents
    node = raw
    for part in parents:
        if not _has(node, part):
            return raw
        node = node[part]
    if not _has(node, last):
        return raw
    if where[-1] != "<key>":
        node[last] = value
    elif isinstance(value, str) and value not in node:
        node[value] = node.pop(last)
    return raw


def from_params_schema(schema: dict[str, Any]) -> st.SearchStrategy:
    """Values a (sub-)schema of params allows: hypothesis-jsonschema's `from_schema` for everything but objects, which
    are assembled here from their properties' strategies (hypothesis-jsonschema 0.23.1 draws objects through a
    Hypothesis internal that Hypothesis 6.1xx no longer has)."""
    if "oneOf" in schema:
        return st.one_of([from_params_schema(option) for option in schema["oneOf"]])
    if schema.get("type") != "object":
        return from_schema(schema)
    properties = {name: from_params_schema(spec) for name, spec in schema.get("properties", {}).items()}
    required = {name: properties.pop(name) for name in schema.get("required", [])}
    fixed = st.fixed_dictionaries(required, optional=properties)
    extra = schema.get("additionalProperties")
    if not isinstance(extra, dict):
        return fixed
    names = from_schema({"type": "string", **schema.get("propertyNames", {})})
    return st.tuples(fixed, st.dictionaries(names, from_params_schema(extra), max_size=2)).map(
        lambda parts: {**parts[1], **parts[0]}
    )


@st.composite
def mutations(draw) -> list[tuple[tuple, Any]]:
    """One or two (place, new value) edits of BASE."""
    edits = []
    for _ in range(draw(st.sampled_from([1, 1, 2]))):
        where = draw(st.sampled_from(PLACES))
        kinds = (
            ["hostile", "key"] if where[-1] == "<key>" else ["schema", "schema", "schema", "type", "number", "hostile"]
        )
        kind = draw(st.sampled_from(kinds))
        if kind == "schema":
            schema = _schema_at(SCHEMA, where)
            value = draw(from_params_schema(schema)) if schema else draw(st.sampled_from(OTHER_TYPES))
        elif kind == "type":
            value = draw(st.sampled_from(OTHER_TYPES))
        elif kind == "number":
            value = draw(st.sampled_from(BOUNDARY_NUMBERS))
        elif kind == "key":
            value = draw(st.text(st.characters(codec="utf-8"), min_size=1, max_size=12))
        else:
            value = draw(st.sampled_from(HOSTILE_STRINGS))
        edits.append((where, value))
    return edits


def dry_plan(params) -> list[str]:
    """What a dry run (`snakemake -n`) asks of validated params, as the Snakefile's PARAMS calls ask it
    (workflow/rules/*.smk), and every path it plans."""
    planned = [paths.fill(paths.METRICS, suite=params.suite_name)]
    params.device_problem()
    for experiment in params.experiment_names():
        dataset = params.experiment(experiment)["dataset"]
        params.partitioner(experiment)
        params.resources(experiment)
        planned += params.raw_paths(dataset, params.dataset_options(dataset, experiment))
        planned.append(params.prepared_path(experiment))
        canonical_json(params.partition_options(experiment))
        planned += [
            paths.fill(paths.PARTITION, data=params.data_root, suite=params.suite_name, experiment=experiment,
                       target=target, seed=seed)
            for target in params.targets(experiment)
            for seed in params.seeds(experiment)
        ]  # fmt: skip
        for seed in params.seeds(experiment):  # the narrowest consumer of a cell's seed (leave_one_domain_out)
            np.random.RandomState(seed)
        for method in params.methods(experiment):
            params.logs_betas(method)
    params.method_families()
    for cell in params.cells():
        canonical_json(cell.config)
        planned += [cell.path, cell.log_path]
    params.cell_gpus()
    params.sweep()
    params.published_experiments()
    for name in params.tables():
        planned += [
            paths.fill(paths.TABLE, suite=params.suite_name, table=name, ext=ext) for ext in paths.TABLE_EXTENSIONS
        ]
    for name in params.figures():
        planned.append(paths.fill(paths.FIGURE, suite=params.suite_name, figure=name))
    for check in params.theory_checks():
        params.theory_roles(check), params.theory_draws(check), params.theory_beta(check)
    return planned


def _one_line_per_problem(message: str) -> None:
    lines = message.splitlines()
    assert "Traceback" not in message
    if len(lines) == 1:
        return  # a file-level refusal (YAML, a repeated key)
    assert lines[0] == "invalid params:", message
    assert all(line.startswith(("  - ", "    ")) for line in lines[1:]), message


def _check(edits: list[tuple[tuple, Any]], tmp_path: Path) -> None:
    raw = BASE
    for where, value in edits:
        raw = _edit(raw, tuple(where), value)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True), encoding="utf-8")
    try:
        params = load_params(path)
    except ParamsError as error:
        _one_line_per_problem(str(error))
        return
    arguments = [params.suite_name, *params.experiment_names(), *(cell.method for cell in params.cells())]
    assert not [argument for argument in arguments if argument.startswith("-")]  # read as options by a command
    for planned in dry_plan(params):
        assert planned.isprintable(), planned
        assert all(len(part.encode()) <= COMPONENT_BYTES for part in planned.split("/")), planned
        assert len(str(Path(planned).absolute()).encode()) <= PATH_BYTES, planned


def test_the_base_file_is_valid_and_plans(tmp_path):
    _check([], tmp_path)


def _corpus() -> list[dict[str, Any]]:
    return json.loads(CORPUS.read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", _corpus(), ids=lambda case: case["found"][:60])
def test_each_corpus_case_is_accepted_and_plans_or_refused_in_one_line_per_problem(case, tmp_path):
    _check([(tuple(where), value) for where, value in case["edits"]], tmp_path)


def test_generated_params_are_accepted_and_plan_or_refused_in_one_line_per_problem(tmp_path):
    @settings(
        max_examples=300,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
        # a failure is reported as generated: shrinking it can take minutes and gigabytes on a CI worker
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
    )
    @given(edits=mutations())
    def check(edits):
        _check(edits, tmp_path)

    check()
