"""The plan a run keeps for the next parse (fdabench.jobs.plan_cache): answers come back exactly as they were worked
out, a changed configuration, environment or code gives another key, only `save` writes, and the modules the
Snakefile imports to parse import neither torch nor the library."""

import json
import re
import subprocess
import sys

import pytest

from fdabench.jobs import plan_cache
from fdabench.jobs.plan_cache import PlanCache, PlannedParams, plan_key

CONFIG = {"suite": "tiny", "suites": {"tiny": {"experiments": {"b": {}, "a": {}}}}}


def test_the_key_changes_with_the_configuration_its_order_and_the_environment(monkeypatch):
    key = plan_key(CONFIG, {})
    assert plan_key(json.loads(json.dumps(CONFIG)), {}) == key
    reordered = {"suite": "tiny", "suites": {"tiny": {"experiments": {"a": {}, "b": {}}}}}  # experiments' order
    assert plan_key(reordered, {}) != key
    assert plan_key(CONFIG, {"FDABENCH_DATA_MIRROR": "/mirror"}) != key
    assert plan_key(CONFIG, {"HOME": "/elsewhere"}) == key  # only fdabench's own variables
    monkeypatch.setattr(plan_cache, "server_key", lambda directory: "other code")  # code, plugins, distributions
    assert plan_key(CONFIG, {}) != key


def test_answers_come_back_as_computed_and_only_save_writes(tmp_path):
    cache = PlanCache("k1", tmp_path)
    calls = []

    def compute():
        calls.append(1)
        return {"tables": {"z": [1, 2]}, "a": (3, 4)}

    first = cache.get("answer", ("x", 1), compute)
    assert first == {"tables": {"z": [1, 2]}, "a": [3, 4]} and list(first) == ["tables", "a"]  # as JSON, in order
    first["tables"]["z"].append(5)  # a copy: the caller may change it
    assert cache.get("answer", ("x", 1), compute) == {"tables": {"z": [1, 2]}, "a": [3, 4]} and len(calls) == 1
    assert cache.get("answer", ("y", 1), lambda: iter([1, 2])) == [1, 2]  # an iterator is listed
    with pytest.raises(TypeError):
        cache.get("not json", (), object)
    assert not list(tmp_path.iterdir())  # nothing written before save

    cache.save()
    stored = PlanCache("k1", tmp_path)
    assert stored.stored and stored.get("answer", ("x", 1), lambda: pytest.fail("recomputed")) == first | {
        "tables": {"z": [1, 2]}
    }
    assert not PlanCache("k2", tmp_path).stored  # another key starts empty
    (tmp_path / "k1.json").write_text("{truncated")
    assert not PlanCache("k1", tmp_path).stored  # an unreadable plan is worked out again


def test_old_plans_are_removed(tmp_path):
    for index in range(plan_cache.KEPT + 3):
        cache = PlanCache(f"key{index}", tmp_path)
        cache.get("a", (), lambda index=index: index)
        cache.save()
    assert len(list(tmp_path.glob("*.json"))) == plan_cache.KEPT


def test_planned_params_ask_the_params_only_for_what_is_not_stored(tmp_path):
    loads = []

    class Params:
        suite_name = "tiny"

        def tables(self):
            return {"table1": {"experiments": ["a"]}}

    def load():
        loads.append(1)
        return Params()

    planned = PlannedParams(PlanCache("k", tmp_path), load)
    assert planned.tables() == {"table1": {"experiments": ["a"]}} and planned.value("suite_name") == "tiny"
    planned._cache.save()
    again = PlannedParams(PlanCache("k", tmp_path), load)
    assert again.tables() == planned.tables() and again.value("suite_name") == "tiny" and len(loads) == 2


def test_the_snakefile_parses_without_torch_or_the_library(repo_root):
    """What workflow/rules/common.smk imports at its top: no torch, no params validation, no registries (the
    library is imported only where the plan lacks an answer)."""
    text = (repo_root / "workflow/rules/common.smk").read_text(encoding="utf-8")
    top = re.findall(r"^from (fdabench[\w.]*) import", text, re.MULTILINE)
    assert "fdabench.jobs.plan_cache" in top and "fdabench.jobs.heal" in top
    probe = "import sys\n" + "".join(f"import {module}\n" for module in top)
    probe += "print([name for name in ('torch', 'fdabench.config', 'fdabench.methods') if name in sys.modules])"
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert found.strip() == "[]"


def test_only_a_run_that_executes_heals(repo_root):
    text = (repo_root / "workflow/rules/common.smk").read_text(encoding="utf-8")
    executing = text.split("def executing():", 1)[1].split("\n\n", 1)[0]
    assert "workflow.dryrun" in executing and "workflow.executor_plugin is not None" in executing
    begin = text.split("def begin_run():", 1)[1].split("\n\n", 1)[0]
    assert "if executing():" in begin
    # healing is called from begin_run and onerror only, never while the Snakefile is parsed
    callers = [line for line in text.splitlines() if "heal_workspace()" in line and not line.startswith("def ")]
    assert [line.strip() for line in callers] == ["heal_workspace()", "heal_workspace()"]
