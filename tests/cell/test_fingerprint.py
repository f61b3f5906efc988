"""Code fingerprints (fdabench.cell.fingerprint): a change to code a job depends on changes its fingerprint; a
comment, docstring or formatting change, or a change to code it does not reach, does not."""

import shutil
from pathlib import Path

import pytest

import fdabench
from fdabench.cell.fingerprint import (
    BOOKKEEPING,
    RUNNER,
    CodeFingerprint,
    _Graph,
    cell_fingerprint,
    cell_roots,
    code_fingerprint,
    normalised_source,
    partition_roots,
    prepare_roots,
)
from fdabench.config import validate_params

INSTALLED = Path(fdabench.__file__).resolve().parent

PARAMS = validate_params(
    {
        "suite": "fp",
        "suites": {
            "fp": {
                "seeds": [0],
                "methods": ["source_only", "fedgp", "fedda_auto", "dadil_e"],
                "experiments": {
                    "digits": {"dataset": "colored_digits", "targets": ["-90"]},
                    "synthetic": {"dataset": "synthetic_regression", "targets": ["s1-n14"], "methods": ["fedda"]},
                },
            }
        },
    }
)


def _config(experiment, method):
    target = "-90" if experiment == "digits" else "s1-n14"
    return PARAMS.cell(experiment, method, target, 0).config


def _edited(tmp_path: Path, name: str, module: str, edit) -> Path:
    """A copy of the package with `edit(text) -> text` applied to `module` (a path under the package)."""
    package = tmp_path / name / "fdabench"
    shutil.copytree(INSTALLED, package, ignore=shutil.ignore_patterns("__pycache__"))
    path = package / module
    path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
    return package


def _digests(package: Path) -> dict[tuple[str, str], str]:
    cells = [("digits", m) for m in ("source_only", "fedgp", "fedda_auto", "dadil_e")] + [("synthetic", "fedda")]
    return {cell: cell_fingerprint(_config(*cell), package).digest for cell in cells}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    return _digests(_edited(tmp_path_factory.mktemp("base"), "copy", "core/io.py", lambda text: text))


def test_a_copy_of_the_package_has_the_installed_fingerprints(baseline):
    assert baseline == _digests(INSTALLED)
    assert len(set(baseline.values())) == len(baseline)  # every cell here depends on different code


def test_comments_docstrings_and_formatting_do_not_change_a_fingerprint(tmp_path, baseline):
    def cosmetic(text):
        text = text.replace('"""FedGP:', '"""FedGP, reworded:', 1)  # a docstring
        text = text.replace("\ndef fedgp(", "\n# a new comment\n\n\ndef fedgp(", 1)
        return text.replace("    flat = flatten_updates(", "    flat = flatten_updates (", 1)  # spacing

    package = _edited(tmp_path, "cosmetic", "tensor_math/aggregation.py", cosmetic)
    assert (package / "tensor_math/aggregation.py").read_text() != (
        INSTALLED / "tensor_math/aggregation.py"
    ).read_text()
    assert _digests(package) == baseline


def test_a_change_to_shared_round_loop_code_changes_every_round_loop_cell(tmp_path, baseline):
    def edit(text):  # the server step without its learning rate
        assert "settings.server_lr * aggregate.delta" in text
        return text.replace("settings.server_lr * aggregate.delta", "aggregate.delta")

    package = _edited(tmp_path, "loop", "federation/rounds.py", edit)
    after = _digests(package)
    changed = {cell for cell in baseline if after[cell] != baseline[cell]}
    assert changed == set(baseline)  # every method here runs the round loop (DaDiL's encoder too)
    fingerprint = cell_fingerprint(_config("digits", "fedgp"), package)
    before = cell_fingerprint(_config("digits", "fedgp"))
    assert [m for m in fingerprint.modules if fingerprint.modules[m] != before.modules[m]] == [
        "fdabench.federation.rounds"
    ]


def test_a_change_to_one_method_changes_only_its_cells(tmp_path, baseline):
    package = _edited(tmp_path, "fedgp", "methods/fda.py", lambda t: t + "\nEXTRA_CONSTANT = 1\n")
    after = _digests(package)
    assert {cell for cell in baseline if after[cell] != baseline[cell]} == {
        ("digits", "fedgp"),
        ("digits", "fedda_auto"),  # auto-weighting imports FedGP's combination and scale alignment
        ("synthetic", "fedda"),
    }


def test_a_change_to_one_dataset_changes_only_its_cells_and_report_code_changes_none(tmp_path, baseline):
    digits = _edited(tmp_path, "digits", "data/digits.py", lambda t: t + "\nEXTRA_CONSTANT = 1\n")
    after = _digests(digits)
    assert {cell for cell in baseline if after[cell] != baseline[cell]} == {c for c in baseline if c[0] == "digits"}
    report = _edited(tmp_path, "report", "report/tables.py", lambda t: t + "\nEXTRA_CONSTANT = 1\n")
    assert _digests(report) == baseline


@pytest.mark.parametrize("module", ["core/io.py", "core/errors.py", "core/formats.py", "cell/plugin_fingerprint.py"])
def test_a_change_to_bookkeeping_code_changes_no_cell(tmp_path, baseline, module):
    """Reading and writing files, error types, file kinds and fingerprinting compute no number: no job reruns."""
    package = _edited(tmp_path, "bookkeeping", module, lambda t: t + "\nEXTRA_CONSTANT = 1\n")
    assert _digests(package) == baseline


def test_the_reach_stops_at_bookkeeping_modules_and_nothing_else_drops_out():
    """Every module a cell reaches, less the bookkeeping ones, is still reached: the stop removes only those."""
    graph = _Graph(INSTALLED)
    roots = cell_roots(_config("digits", "fedgp"))
    reached = graph.closure(roots)
    assert not reached & BOOKKEEPING
    everything, pending = set(), list(roots)  # the reach without the stop
    while pending:
        module = pending.pop()
        if module not in everything:
            everything.add(module)
            pending += graph.imports(module)
    assert everything - reached == everything & BOOKKEEPING
    assert {"fdabench.core.io", "fdabench.cell.fingerprint"} <= everything  # the stop has something to stop
    assert RUNNER in reached and "fdabench.federation.rounds" in reached


def test_roots_are_the_modules_of_the_registered_components():
    config = _config("digits", "fedgp")
    assert cell_roots(config) == [
        "fdabench.cell.run",
        "fdabench.models.small",
        "fdabench.data.partitioners.leave_one_domain_out",
        "fdabench.data.digits",
        "fdabench.methods.fda",
    ]
    assert prepare_roots("colored_digits") == ["fdabench.data.digits"]
    assert partition_roots("synthetic_regression", "shift_and_subsample") == [
        "fdabench.data.partitioners.shift_and_subsample",
        "fdabench.data.synthetic",
    ]
    prepare = code_fingerprint(prepare_roots("colored_digits"))
    assert "fdabench.federation.rounds" not in prepare.modules and "fdabench.data.digits" in prepare.modules
    # a partitioner's cells reach its own module and what partitioners share, not the other partitioners
    partition = code_fingerprint(partition_roots("colored_digits", "leave_one_domain_out"))
    assert "fdabench.data.partition" in partition.modules
    assert not [name for name in partition.modules if name.startswith("fdabench.data.partitioners.feature")]


def test_imports_resolve_to_the_module_that_defines_the_name():
    graph = _Graph(INSTALLED)
    assert graph.defining_module("fdabench.data", "Partition") == "fdabench.data.partition"
    assert graph.defining_module("fdabench.methods", "METHODS") == "fdabench.methods.base"
    assert graph.defining_module("fdabench.core", "paths") == "fdabench.core.paths"
    assert graph.defining_module("fdabench.tensor_math.aggregation", "fedgp") == "fdabench.tensor_math.aggregation"
    # a package's re-exports do not pull in every member: the runner does not reach unrelated methods
    reached = graph.closure(["fdabench.cell.run"])
    assert "fdabench.methods.base" in reached and "fdabench.methods.dadil" not in reached


def test_normalised_source_ignores_documentation_and_layout_only():
    plain = normalised_source("def f(x):\n    return x + 1\n")
    assert plain == normalised_source('"""Module."""\n\n\ndef f(x):  # add one\n    """Doc."""\n    return (x+1)\n')
    assert plain != normalised_source("def f(x):\n    return x + 2\n")
    assert normalised_source('def f():\n    """Only a docstring."""\n') == normalised_source("def f():\n    pass\n")


def test_a_fingerprint_travels_as_json_and_back():
    """The train rule hands the job the fingerprint it worked out (its plan file, `fdabench train --plan`), as JSON."""
    fingerprint = cell_fingerprint(_config("digits", "fedgp"))
    assert CodeFingerprint.from_json(fingerprint.to_json()) == fingerprint
    for bad in ({"fingerprint": "abc"}, {"modules": {}}, ["abc", {}], "abc"):
        with pytest.raises(ValueError, match="not a code fingerprint"):
            CodeFingerprint.from_json(bad)
