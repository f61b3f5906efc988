"""Fingerprints that follow what a cell runs (fdabench.cell.plugin_scope): an installed plugin reruns only the cells
that use one of its members or whose code it changed, and names itself in their fingerprint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import yaml

from broken_plugin import install_broken_plugin
from fdabench.cell import fingerprint, plugin_fingerprint, plugin_scope
from fdabench.cell.digest import seal
from fdabench.cell.fingerprint import cell_fingerprint
from fdabench.cell.plugin_scope import cell_code
from fdabench.config import validate_params
from fdabench.core import plugins
from fdabench.core.plugins import load_plugins
from fdabench.jobs.status import suite_status
from fdabench.methods import METHODS
from fdabench.methods.fda import FedDA

PARAMS = {
    "suite": "scope",
    "suites": {
        "scope": {
            "seeds": [0],
            "methods": ["source_only", "fedda", "fedgp"],
            "experiments": {"digits": {"dataset": "colored_digits", "targets": ["-90"]}},
        }
    },
}

MINE = """
from fdabench.methods import Aggregate, RoundLoopMethod
from fdabench.tensor_math.aggregation import fedavg


class Mine(RoundLoopMethod):
    name = "mine"
    family = "fda"

    def aggregate(self, inputs):
        return Aggregate(fedavg(inputs.source_updates, inputs.source_counts))
"""

#: a plugin that, besides adding `mine`, gives the shipped FedDA another server step when imported
PATCHING = """
from fdabench.methods import Aggregate
from fdabench.methods.fda import FedDA


def median_aggregate(self, inputs):
    return Aggregate(inputs.source_updates.median(dim=0).values)


FedDA.aggregate = median_aggregate
"""

#: a plugin that puts its own class, disguised as fdabench's, where the registry had FedDA
REPLACING = """
from fdabench.methods import METHODS
from fdabench.methods.fda import FedDA

METHODS._members["fedda"] = type("FedDA", (FedDA,), {"name": "fedda", "__module__": "fdabench.methods.fda"})
"""


def _clear_caches() -> None:
    plugin_fingerprint._distributions.cache_clear()
    plugin_scope._distribution_files.cache_clear()
    plugin_scope._patches.cache_clear()
    fingerprint._module_hash.cache_clear()


@pytest.fixture
def install(tmp_path, monkeypatch):
    """Install a plugin package `myplugin` (its `method.py` holds `text` and defines `Mine`, entry point `mine`) and
    load it into the real method registry; everything it registers or patches is undone afterwards."""
    monkeypatch.setattr(METHODS, "_members", dict(METHODS._members))
    monkeypatch.setattr(METHODS, "broken", {})
    monkeypatch.setattr(FedDA, "aggregate", FedDA.__dict__["aggregate"])  # restored after a patching plugin
    monkeypatch.syspath_prepend(str(tmp_path))

    def installed(text: str) -> None:
        package = tmp_path / "myplugin"
        package.mkdir()
        (package / "__init__.py").write_text("")
        (package / "method.py").write_text(textwrap.dedent(text))
        point = EntryPoint("mine", "myplugin.method:Mine", "fdabench.methods")
        monkeypatch.setattr(plugins, "entry_points", lambda group: [point] if group == point.group else [])
        _clear_caches()
        load_plugins(METHODS)

    yield installed
    for module in [name for name in sys.modules if name.split(".")[0] == "myplugin"]:
        del sys.modules[module]
    monkeypatch.undo()
    _clear_caches()


def _finished(root: Path, params) -> None:
    """Every cell of `params` written as run before any plugin was installed (fdabench's own fingerprint)."""
    for cell in params.cells():
        path = root / cell.path
        path.parent.mkdir(parents=True, exist_ok=True)
        code = cell_fingerprint(cell.config).to_json()
        path.write_text(
            json.dumps(seal({"format": "fdabench.cell/1", "status": "complete", "config": cell.config, "code": code}))
        )


def _states(root: Path, params) -> dict[str, tuple[str, str]]:
    return {state.cell.method: (state.state, state.reason) for state in suite_status(params, root)}


def test_an_additive_plugin_reruns_nothing_shipped(install, tmp_path):
    params = validate_params(PARAMS)
    _finished(tmp_path, params)
    install(MINE)
    assert _states(tmp_path, params) == {name: ("current", "") for name in ("source_only", "fedda", "fedgp")}
    with_mine = validate_params({**PARAMS, "suites": {"scope": {**PARAMS["suites"]["scope"], "methods": ["mine"]}}})
    modules = cell_code(next(with_mine.cells()).config).modules
    assert {"plugin:myplugin", "myplugin.method", "fdabench.tensor_math.aggregation"} <= set(modules)


def test_a_plugin_that_patches_fedda_reruns_exactly_the_cells_whose_code_covers_it(install, tmp_path):
    params = validate_params(PARAMS)
    _finished(tmp_path, params)
    install(PATCHING + MINE)
    assert FedDA.aggregate.__module__ == "myplugin.method"  # the patch took
    states = _states(tmp_path, params)
    covered = {
        cell.method for cell in params.cells() if "fdabench.methods.fda" in cell_fingerprint(cell.config).modules
    }
    assert covered == {"fedda", "fedgp"}  # the module FedDA is written in holds FedGP too; source_only's does not
    assert states == {
        method: ("stale", "code changed: plugin:myplugin") if method in covered else ("current", "")
        for method in ("source_only", "fedda", "fedgp")
    }


def test_a_plugin_that_points_a_shipped_name_elsewhere_reruns_the_cells_of_that_name(install, tmp_path):
    params = validate_params(PARAMS)
    _finished(tmp_path, params)
    # a stand-in that says it is written in FedDA's module, with FedDA's settings: the cell's roots and
    # configuration are those of the shipped FedDA, and only the registry tells them apart
    install(MINE + REPLACING)
    assert _states(tmp_path, params) == {
        "source_only": ("current", ""),
        "fedda": ("stale", "code changed: plugin:myplugin"),
        "fedgp": ("current", ""),
    }


def test_a_broken_unused_plugin_leaves_every_cell_current(install, tmp_path, capsys):
    params = validate_params(PARAMS)
    _finished(tmp_path, params)
    install(MINE + "\nraise ImportError('no such thing')\n")
    assert "mine" in METHODS.broken and "mine" not in METHODS
    assert capsys.readouterr().err.startswith("fdabench: skipped a plugin: the fdabench.methods plugin 'mine'")
    assert _states(tmp_path, params) == {name: ("current", "") for name in ("source_only", "fedda", "fedgp")}


def test_status_with_a_broken_installed_plugin_says_so_in_one_line_and_refuses_only_the_suites_using_it(tmp_path):
    """A distribution whose module raises on import, installed (metadata on PYTHONPATH) into a finished workspace."""
    site = install_broken_plugin(tmp_path / "site")
    work = tmp_path / "work"
    work.mkdir()
    (work / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    _finished(work, validate_params(PARAMS))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    status = subprocess.run(
        [sys.executable, "-m", "fdabench", "status", "--check"], cwd=work, env=env, capture_output=True, text=True
    )
    assert status.returncode == 0, status.stdout + status.stderr
    assert "suite scope: 3 cells: 3 current, 0 edited, 0 stale" in status.stdout
    assert status.stderr.count("\n") == 1 and status.stderr.startswith(
        "fdabench: skipped a plugin: the fdabench.methods plugin 'brokenplug' (brokenplug:Method, from brokenplug) "
        "failed to load: RuntimeError: broken on import"
    ), status.stderr
    using = {**PARAMS, "suites": {"scope": {**PARAMS["suites"]["scope"], "methods": ["source_only", "brokenplug"]}}}
    (work / "params.yaml").write_text(yaml.safe_dump(using))
    refused = subprocess.run(
        [sys.executable, "-m", "fdabench", "status"], cwd=work, env=env, capture_output=True, text=True
    )
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert "unknown method 'brokenplug'" in refused.stderr and "broken on import" in refused.stderr.split("\n", 1)[1]
