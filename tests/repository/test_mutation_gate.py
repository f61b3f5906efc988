"""The mutation gate's bookkeeping (tests/mutation/check.py) without running mutmut: which explained mutants it runs
again, in which calls, and which modules a run may record as verified."""

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location("mutation_check", Path(__file__).parents[1] / "mutation" / "check.py")
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)

REASONS = {"pkg.a.x_f__mutmut_3": "equivalent", "pkg.b.x_g__mutmut_1": "equivalent"}


@pytest.fixture
def gate(tmp_path, monkeypatch):
    """Two modules, pkg.a and pkg.b, in a scratch root, and a verified.json there."""
    for module in ("a", "b"):
        (tmp_path / "src" / "pkg").mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / "pkg" / f"{module}.py").write_text(f"def {module}(): return 1\n")
    monkeypatch.setattr(check, "ROOT", tmp_path)
    monkeypatch.setattr(check, "VERIFIED", tmp_path / "verified.json")
    monkeypatch.setattr(check, "MODULES", ["pkg.a", "pkg.b"])
    return tmp_path


def test_only_the_explained_mutants_of_an_unchanged_verified_module_are_skipped(gate):
    (gate / "verified.json").write_text(json.dumps({"pkg.a": check.module_digest("pkg.a", REASONS)}))
    assert check.known_survivors(REASONS) == {"pkg.a.x_f__mutmut_3"}
    (gate / "src" / "pkg" / "a.py").write_text("def a(): return 2\n")  # an edit: its mutants may differ now
    assert check.known_survivors(REASONS) == set()


def test_a_newly_explained_mutant_unverifies_its_module(gate):
    (gate / "verified.json").write_text(json.dumps({"pkg.a": check.module_digest("pkg.a", REASONS)}))
    more = {**REASONS, "pkg.a.x_f__mutmut_4": "equivalent"}
    assert check.known_survivors(more) == set()


def test_a_run_with_known_survivors_makes_the_mutants_first_then_runs_the_rest_by_name(gate, monkeypatch):
    commands = []
    monkeypatch.setattr(subprocess, "run", lambda command, **kwargs: commands.append(command[3:]))
    monkeypatch.setattr(
        check,
        "statuses",
        lambda: {
            "pkg.a.x_f__mutmut_3": "not checked",
            "pkg.a.x_f__mutmut_4": "not checked",
            "pkg.b.x_g__mutmut_1": "killed",
        },
    )
    check.run_mutmut({"pkg.a.x_f__mutmut_3"})
    assert commands == [["run", "pkg.b.x*"], ["run", "pkg.a.x_f__mutmut_4"]]
    commands.clear()
    check.run_mutmut(set())
    assert commands == [["run"]]


def test_a_module_is_recorded_only_when_every_explained_mutant_survived(gate):
    results = {"pkg.a.x_f__mutmut_3": "no tests", "pkg.b.x_g__mutmut_1": "timeout"}
    check.record_verified(["pkg.a", "pkg.b"], results, REASONS)
    assert json.loads((gate / "verified.json").read_text()) == {"pkg.a": check.module_digest("pkg.a", REASONS)}
