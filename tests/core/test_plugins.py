"""Plugins (fdabench.core.plugins, fdabench.cell.plugin_fingerprint): members registered through entry points, named
errors when one cannot be, and plugin code in the fingerprints of the cells that use it."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from broken_plugin import install_broken_plugin
from fdabench.cell import fingerprint
from fdabench.cell.fingerprint import code_fingerprint
from fdabench.cell.plugin_fingerprint import plugin_aware_fingerprint
from fdabench.config import ParamsError, load_params, validate_params
from fdabench.core import plugins
from fdabench.core.plugins import load_plugins, shipped_names
from fdabench.core.registry import Registry, UnknownNameError
from fdabench.methods import METHODS, RoundLoopMethod
from workflows import TINY_PARAMS

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fdabench-fedgp-nofilter"

METHOD_MODULE = """
from fdabench.tensor_math.aggregation import fedavg
from fdabench.methods import Aggregate, RoundLoopMethod

from {package}.helper import SCALE


class Mine(RoundLoopMethod):
    name = "{name}"
    family = "fda"

    def aggregate(self, inputs):
        return Aggregate(SCALE * fedavg(inputs.source_updates, inputs.source_counts))
"""


@pytest.fixture
def plugin_package(tmp_path, monkeypatch):
    """A plugin package `myplugin` on sys.path: `method.py` (class Mine, name "mine") imports `helper.py`."""

    def write(helper: str = "SCALE = 1.0\n", name: str = "mine") -> Path:
        package = tmp_path / "myplugin"
        package.mkdir(exist_ok=True)
        (package / "__init__.py").write_text("")
        (package / "method.py").write_text(METHOD_MODULE.format(package="myplugin", name=name))
        (package / "helper.py").write_text(helper)
        for module in [m for m in sys.modules if m.split(".")[0] == "myplugin"]:
            del sys.modules[module]
        fingerprint._module_hash.cache_clear()
        return package

    monkeypatch.syspath_prepend(str(tmp_path))
    return write


def _installed(monkeypatch, *points: EntryPoint) -> None:
    monkeypatch.setattr(plugins, "entry_points", lambda group: [p for p in points if p.group == group])


def test_entry_point_registers_its_class_under_its_name(plugin_package, monkeypatch):
    plugin_package()
    _installed(monkeypatch, EntryPoint("mine", "myplugin.method:Mine", "fdabench.methods"))
    registry: Registry = Registry("method")
    assert load_plugins(registry) == ["mine"]
    assert issubclass(registry.get("mine"), RoundLoopMethod)
    assert load_plugins(registry) == []  # loading again adds nothing
    assert shipped_names(registry) == []


def _skipped(registry: Registry, capsys, name: str, reason: str) -> str:
    """load_plugins skips a plugin that cannot be registered with one line on stderr, keeps the reason under its name
    (`registry.broken`), and refuses the name with it."""
    assert load_plugins(registry) == []
    line = capsys.readouterr().err
    assert line.startswith("fdabench: skipped a plugin: ") and len(line.strip().splitlines()) == 1, line
    assert re.search(reason, registry.broken[name]) and "Traceback" not in line
    return registry.broken[name]


def test_entry_point_named_otherwise_than_its_class_is_refused(plugin_package, monkeypatch, capsys):
    plugin_package(name="other")
    _installed(monkeypatch, EntryPoint("mine", "myplugin.method:Mine", "fdabench.methods"))
    registry: Registry = Registry("method")
    _skipped(registry, capsys, "mine", "registered as 'other'; name the entry point 'other'")
    with pytest.raises(UnknownNameError, match="registered as 'other'"):
        registry.get("mine")


def test_plugin_naming_a_missing_attribute_is_skipped(plugin_package, monkeypatch, capsys):
    plugin_package()
    _installed(monkeypatch, EntryPoint("mine", "myplugin.method:Missing", "fdabench.methods"))
    _skipped(Registry("method"), capsys, "mine", "failed to load: AttributeError: .*Missing.*pip uninstall")


def test_plugin_taking_a_shipped_name_is_refused_for_the_suites_that_use_it(
    plugin_package, monkeypatch, capsys, repo_root
):
    plugin_package(name="fedgp")
    _installed(monkeypatch, EntryPoint("fedgp", "myplugin.method:Mine", "fdabench.methods"))
    monkeypatch.setattr(METHODS, "broken", {})
    _skipped(METHODS, capsys, "fedgp", "a method 'fedgp' exists already; give the plugin's method another name")
    assert METHODS.get("fedgp").__module__ == "fdabench.methods.fda"
    with pytest.raises(ParamsError, match=r"colored_digits: method 'fedgp': entry point 'fedgp' .*pip uninstall"):
        load_params(repo_root / "params.yaml")  # the demo suite runs fedgp: which of the two is unclear
    without = copy.deepcopy(TINY_PARAMS)
    without["suites"]["tiny"]["methods"] = ["source_only"]
    assert len(list(validate_params(without).cells())) == 2  # a suite without fedgp is not blocked


def test_broken_plugin_blocks_only_the_suites_that_use_it(plugin_package, monkeypatch, capsys, repo_root):
    plugin_package(helper="raise RuntimeError('broken on import')\n")
    _installed(monkeypatch, EntryPoint("mine", "myplugin.method:Mine", "fdabench.methods"))
    monkeypatch.setattr(METHODS, "broken", {})
    _skipped(METHODS, capsys, "mine", "failed to load: RuntimeError: broken on import")
    assert load_params(repo_root / "params.yaml").suite_name == "demo"  # no suite uses it
    using = copy.deepcopy(TINY_PARAMS)
    using["suites"]["tiny"]["methods"] = ["source_only", "mine"]
    with pytest.raises(ParamsError, match=r"unknown method 'mine'.*\n    the fdabench\.methods plugin 'mine' .*failed"):
        validate_params(using)


def test_plugin_that_fails_to_load_names_the_fix(plugin_package, monkeypatch, capsys):
    plugin_package(helper="raise ImportError('no such thing')\n")
    _installed(monkeypatch, EntryPoint("mine", "myplugin.method:Mine", "fdabench.methods"))
    _skipped(
        Registry("method"),
        capsys,
        "mine",
        "failed to load: ImportError: no such thing.*pip uninstall.*FDABENCH_PLUGINS=0",
    )


def test_switch_loads_no_plugin(plugin_package, monkeypatch):
    plugin_package()
    _installed(monkeypatch, EntryPoint("mine", "myplugin.method:Mine", "fdabench.methods"))
    monkeypatch.setenv("FDABENCH_PLUGINS", "0")
    registry: Registry = Registry("method")
    assert load_plugins(registry) == [] and "mine" not in registry


def test_shipped_names_are_the_fdabench_members():
    assert "fedgp" in shipped_names(METHODS) and all(
        METHODS.get(name).__module__.startswith("fdabench.") for name in shipped_names(METHODS)
    )


def test_unknown_method_error_says_how_to_register_one(repo_root):
    with pytest.raises(ParamsError) as caught:
        load_params(repo_root / "params.yaml", {"methods": {"fedgp_mine": {"beta": 0.3}}})
    message = str(caught.value)
    assert "'fedgp_mine' is not a registered method, so it needs `algorithm:`" in message
    assert "src/fdabench/methods/__init__.py" in message and "entry-point group fdabench.methods" in message


def test_plugin_code_is_in_its_fingerprint(plugin_package):
    plugin_package()
    first = plugin_aware_fingerprint(["myplugin.method"])
    assert {"myplugin.method", "myplugin.helper", "fdabench.tensor_math.aggregation", "fdabench.methods.base"} <= set(
        first.modules
    )
    plugin_package(helper='"""A docstring changes nothing."""\nSCALE = 1.0\n')
    assert plugin_aware_fingerprint(["myplugin.method"]).digest == first.digest
    plugin_package(helper="SCALE = 2.0\n")
    changed = plugin_aware_fingerprint(["myplugin.method"])
    assert changed.digest != first.digest
    assert {m for m in first.modules if first.modules[m] != changed.modules[m]} == {"myplugin.helper"}


def test_shipped_roots_keep_their_fingerprint():
    roots = ["fdabench.cell.run", "fdabench.methods.fda", "fdabench.data.digits", "fdabench.models.small"]
    assert plugin_aware_fingerprint(roots) == code_fingerprint(roots)


def test_example_plugin_installs_and_appears_in_validate(tmp_path, repo_root):
    """The example package, installed (not editable) into a folder on PYTHONPATH: its entry point is found,
    `fdabench validate` names it, and FDABENCH_PLUGINS=0 hides it."""
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target)]
        + [str(EXAMPLE)],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")])}
    validate = [sys.executable, "-m", "fdabench", "validate", "--params", str(repo_root / "params.yaml")]
    shown = subprocess.run(validate, env=env, capture_output=True, text=True, check=True).stdout
    assert "plugin fdabench.methods: fedgp_nofilter (fdabench-fedgp-nofilter 0.1.0)" in shown
    hidden = subprocess.run(validate, env={**env, "FDABENCH_PLUGINS": "0"}, capture_output=True, text=True, check=True)
    assert "fedgp_nofilter" not in hidden.stdout
    code = textwrap.dedent(
        """
        from fdabench.methods import METHODS
        from fdabench.cell.plugin_fingerprint import plugin_aware_fingerprint
        from fdabench.cell.fingerprint import defining_module
        print(sorted(plugin_aware_fingerprint([defining_module(METHODS.get("fedgp_nofilter"))]).modules))
        """
    )
    modules = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert "fdabench_fedgp_nofilter.method" in modules and "fdabench_fedgp_nofilter.rule" in modules
    first = "import fdabench_fedgp_nofilter.method\nfrom fdabench.methods import METHODS\n"
    first += "print(METHODS.get('fedgp_nofilter'))"
    imported_first = subprocess.run([sys.executable, "-c", first], env=env, capture_output=True, text=True)
    assert imported_first.returncode == 0 and "FedGPNoFilter" in imported_first.stdout, imported_first.stderr


def test_a_broken_installed_plugin_costs_one_line_and_blocks_only_the_suites_that_use_it(tmp_path, repo_root):
    """An installed distribution (metadata on PYTHONPATH) whose module raises on import: every command says so in one
    line and goes on; a suite that names its method is refused with that line, exit status 2, no traceback."""
    site = install_broken_plugin(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    validate = [sys.executable, "-m", "fdabench", "validate", "--params", str(repo_root / "params.yaml")]
    ran = subprocess.run(validate, env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert "plugin fdabench.methods: brokenplug (brokenplug 0.1) skipped: it could not be registered" in ran.stdout
    assert ran.stderr.count("\n") == 1 and ran.stderr.startswith(
        "fdabench: skipped a plugin: the fdabench.methods plugin 'brokenplug' (brokenplug:Method, from brokenplug) "
        "failed to load: RuntimeError: broken on import. Fix it or uninstall it (pip uninstall brokenplug)"
    ), ran.stderr
    (tmp_path / "mine.yaml").write_text("suites: {demo: {methods: [source_only, brokenplug]}}\n")
    used = subprocess.run([*validate, "--with", str(tmp_path / "mine.yaml")], env=env, capture_output=True, text=True)
    assert used.returncode == 2 and "Traceback" not in used.stderr, used.stderr
    assert "unknown method 'brokenplug'" in used.stderr and "pip uninstall brokenplug" in used.stderr.split("\n", 1)[1]


PHASE_AND_STREAM_PLUGIN = """
import torch

from fdabench.core.streams import SEED_STRIDE, Purpose, register_purpose, stream
from fdabench.federation.records import register_phase
from fdabench.methods import Aggregate, Objective, Phase, RoundLoopMethod
from fdabench.tensor_math.aggregation import fedavg

CALIBRATE = register_phase("calibrate", "the target alone on its labelled samples, after the FDA rounds")
JITTER = register_purpose("calibrate_jitter", Purpose(SEED_STRIDE, 500_009, 0, "the target's draw each round"))


class Calibrated(RoundLoopMethod):
    name = "calibrated"
    family = "fda"

    def phases(self, settings, has_sources):
        return [*super().phases(settings, has_sources), Phase(CALIBRATE, 2, sources=False, step="local")]

    def local_objective(self, context):
        if context.role != "target":
            return Objective()
        generator = torch.Generator().manual_seed(stream(context.seed, JITTER))
        return Objective(statistics=torch.rand(1, generator=generator).item())

    def aggregate(self, inputs):
        return Aggregate(fedavg(inputs.source_updates, inputs.source_counts), {"jitter": inputs.target_statistics})
"""


def test_a_plugin_adds_a_phase_and_a_random_stream(tmp_path, monkeypatch):
    """A plugin method registers a phase and a random stream of its own from its module, as the shipped methods do;
    its cell's rounds are recorded in that phase and its draws come from that stream."""
    import torch

    from fdabench.core import streams
    from fdabench.federation import records
    from fdabench.federation.rounds import run_rounds
    from fdabench.federation.settings import TrainSettings
    from tiny import AUX_TRAIN, aux_problem

    package = tmp_path / "phaseplugin"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "method.py").write_text(PHASE_AND_STREAM_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(records, "PHASES", dict(records.PHASES))
    monkeypatch.setattr(streams, "PURPOSES", dict(streams.PURPOSES))
    monkeypatch.setattr(METHODS, "_members", dict(METHODS._members))
    monkeypatch.delitem(sys.modules, "phaseplugin.method", raising=False)
    _installed(monkeypatch, EntryPoint("calibrated", "phaseplugin.method:Calibrated", "fdabench.methods"))
    assert load_plugins(METHODS) == ["calibrated"]

    settings = TrainSettings.from_dict({**AUX_TRAIN, "rounds": 2})
    history = run_rounds(METHODS.get("calibrated")(), aux_problem(), settings, 3, torch.device("cpu"))
    assert [record["phase"] for record in history["rounds"]] == ["fda", "fda", "calibrate", "calibrate"]
    drawn = torch.rand(1, generator=torch.Generator().manual_seed(streams.stream(3, "calibrate_jitter"))).item()
    assert [record.get("jitter") for record in history["rounds"]] == [drawn, drawn, None, None]
    assert streams.stream(3, "calibrate_jitter") == 3 * streams.SEED_STRIDE + 500_009


def test_a_phase_registered_again_with_another_meaning_is_refused(monkeypatch):
    from fdabench.federation import records

    monkeypatch.setattr(records, "PHASES", dict(records.PHASES))
    assert records.register_phase("encoder", records.PHASES["encoder"]) == "encoder"  # the same meaning: nothing
    with pytest.raises(ValueError, match="phase 'encoder' is registered already"):
        records.register_phase("encoder", "my plugin's encoder")
    with pytest.raises(ValueError, match="unknown phase 'calibrate'.*register_phase"):
        records.round_record(0, "calibrate", {}, 0, 0, 0.0)
