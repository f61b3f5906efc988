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


def test_a_recorded_pass_holds_for_its_very_tree_only(tmp_path, monkeypatch):
    """A passing whole gate recorded for a tree is read back for that tree; an edit to any tracked source or test file
    (not to the documentation) makes the gate run again."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for name, text in {"src/pkg/a.py": "A = 1\n", "tests/test_a.py": "T = 1\n", "docs/a.md": "doc\n"}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    monkeypatch.setattr(check, "ROOT", tmp_path)
    monkeypatch.setattr(check, "PASSED", tmp_path / "tests" / "passed.json")
    assert check.recorded_pass() is None  # nothing recorded
    check.record_pass(["pkg.a: 3 mutants, 3 killed"])
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)  # the record itself is tracked, and left out
    assert check.recorded_pass() == ["pkg.a: 3 mutants, 3 killed"]
    (tmp_path / "docs/a.md").write_text("another doc\n")
    assert check.recorded_pass() == ["pkg.a: 3 mutants, 3 killed"]
    for name in ("src/pkg/a.py", "tests/test_a.py"):
        before = (tmp_path / name).read_text()
        (tmp_path / name).write_text(before + "# edited\n")  # on disk, not yet staged: still another tree
        assert check.recorded_pass() is None, name
        (tmp_path / name).write_text(before)
    assert check.recorded_pass() == ["pkg.a: 3 mutants, 3 killed"]
