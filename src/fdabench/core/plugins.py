"""Plugins: methods, datasets, partitioners and models registered by an installed package through Python entry
points, so a researcher's own component runs in the pipeline without a fork (docs/extending.md).

A plugin package declares, in its pyproject.toml,

    [project.entry-points."fdabench.methods"]
    fedgp_nofilter = "my_package.method:FedGPNoFilter"

with the groups of `GROUPS`; the entry point's name is the member's registered name (its `name`, or a model
factory's function name). The member is decorated with its registry's `register`, as a shipped one is: a
plugin's module that is imported before fdabench (its own tests) then registers itself when it finishes.
Each registry package (`fdabench.methods`, `fdabench.data`, `fdabench.models`) loads its groups when it is
imported, so plugins are registered before params.yaml is validated and wherever a name is looked up (the
CLI, the Snakefile, a training job). `FDABENCH_PLUGINS=0` loads none (the shipped registries alone). A
plugin is part of the code fingerprint of the cells that use one of its members or whose code it patched
(`fdabench.cell.plugin_scope`).
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from fdabench.core.registry import Registry, member_name

#: entry-point group -> the registry (by family name) its members join
GROUPS = {
    "fdabench.methods": "method",
    "fdabench.datasets": "dataset",
    "fdabench.partitioners": "partitioner",
    "fdabench.models": "model",
}
SWITCH = "FDABENCH_PLUGINS"  # "0": load no plugin
#: (group, entry point name) of the plugins `load_plugins` skipped
_SKIPPED: set[tuple[str, str]] = set()
PACKAGE = "fdabench"


class PluginError(RuntimeError):
    """An installed plugin that cannot be loaded or registered; the message names the fix."""


def plugins_enabled() -> bool:
    return os.environ.get(SWITCH, "1") != "0"


def group_of(registry: Registry) -> str:
    return next(group for group, family in GROUPS.items() if family == registry.family)


def load_plugins(registry: Registry) -> list[str]:
    """Register every installed entry point of `registry`'s group (once); the names added. A plugin that cannot be
    registered (it raises on import, names a missing attribute, is named otherwise than its member, or takes a name
    that exists) is skipped with one line on stderr, and its name is kept in `registry.broken` with the reason: a
    suite that uses the name is refused with it (`fdabench.config.checks`), and suites that do not use it run."""
    if not plugins_enabled():
        return []
    added = []
    for entry_point in sorted(entry_points(group=group_of(registry)), key=lambda point: point.name):
        try:
            name = _register(registry, entry_point)
        except PluginError as error:
            registry.broken[entry_point.name] = str(error)
            _SKIPPED.add((entry_point.group, entry_point.name))
            print(f"fdabench: skipped a plugin: {error}", file=sys.stderr)
            continue
        if name is not None:
            added.append(name)
    return added


def _register(registry: Registry, entry_point: EntryPoint) -> str | None:
    """Register one entry point's member; its name, or None where it is registered already."""
    if _being_imported(entry_point.module):
        return None  # the plugin's module imported fdabench first; its own `register` decorator registers it
    member = _load(entry_point)
    if entry_point.name in registry and registry.get(entry_point.name) is member:
        return None  # its module registered it with the decorator, or it was loaded before
    try:
        name = member_name(member)
    except (AttributeError, TypeError) as error:
        raise PluginError(
            f"entry point {entry_point.name!r} ({entry_point.value}): {error}{_fix(entry_point)}"
        ) from None
    if name != entry_point.name:
        raise PluginError(
            f"entry point {entry_point.name!r} ({entry_point.value}, group {entry_point.group}) loads a "
            f"{registry.family} registered as {name!r}; name the entry point {name!r}{_fix(entry_point)}"
        )
    try:
        registry.register(member)
    except ValueError:
        raise PluginError(
            f"entry point {entry_point.name!r} ({entry_point.value}, group {entry_point.group}): a "
            f"{registry.family} {name!r} exists already; give the plugin's {registry.family} another name"
            f"{_fix(entry_point)}"
        ) from None
    return name


def _distribution(entry_point: EntryPoint) -> str:
    return entry_point.dist.name if entry_point.dist else "its package"


def _fix(entry_point: EntryPoint) -> str:
    """How to get past a plugin that cannot be registered."""
    package = entry_point.dist.name if entry_point.dist else "the package that declares it"
    return f". Fix it or uninstall it (pip uninstall {package}), or run with {SWITCH}=0 to load no plugin"


def _being_imported(module: str) -> bool:
    loaded = sys.modules.get(module)
    return loaded is not None and bool(getattr(getattr(loaded, "__spec__", None), "_initializing", False))


def _load(entry_point: EntryPoint) -> Any:
    try:
        return entry_point.load()
    except Exception as error:  # whatever the plugin's import raises, it is reported as one line
        reason = " ".join(f"{type(error).__name__}: {error}".split())
        raise PluginError(
            f"the {entry_point.group} plugin {entry_point.name!r} ({entry_point.value}, from "
            f"{_distribution(entry_point)}) failed to load: {reason}{_fix(entry_point)}"
        ) from None


def is_shipped(member: Any) -> bool:
    """Whether a registered member is written in the fdabench package (not in a plugin)."""
    return inspect.unwrap(member).__module__.split(".")[0] == PACKAGE


def shipped_names(registry: Registry) -> list[str]:
    """The names of `registry` that fdabench itself registers (the registry without plugins)."""
    return [name for name, member in registry.items() if is_shipped(member)]


#: family -> the package whose __init__.py imports its built-in modules
BUILTIN_PACKAGES = {"method": "methods", "dataset": "data", "partitioner": "data", "model": "models"}


def unknown_name_hint(registry: Registry, name: str) -> str:
    """What to do about a name `registry` lacks: why the plugin that declares it could not be registered, or how to
    register a member of one's own (`registration_hint`)."""
    return registry.broken.get(name) or registration_hint(registry.family)


def registration_hint(family: str) -> str:
    """How a name of one's own becomes a registered `family` member (appended to unknown-name errors)."""
    group = next(group for group, member_family in GROUPS.items() if member_family == family)
    return (
        f"a {family} of your own is registered when its module is imported: import it in "
        f"src/fdabench/{BUILTIN_PACKAGES[family]}/__init__.py, or declare it in the entry-point group {group} of "
        f"your package and install that (pip install -e <package>); see docs/extending.md"
    )


def loaded_plugins() -> list[str]:
    """One line per installed plugin member: group, name and the distribution it comes from (and whether it was
    skipped, `load_plugins`)."""
    lines = []
    for group in GROUPS:
        for entry_point in sorted(entry_points(group=group), key=lambda point: point.name):
            distribution = entry_point.dist.name if entry_point.dist else "?"
            version = entry_point.dist.version if entry_point.dist else "?"
            skipped = " skipped: it could not be registered" if (group, entry_point.name) in _SKIPPED else ""
            lines.append(f"{group}: {entry_point.name} ({distribution} {version}){skipped}")
    return lines if plugins_enabled() else []


def plugin_distributions() -> dict[str, tuple[str, list[Path]]]:
    """Every installed plugin distribution where plugins load (none with FDABENCH_PLUGINS=0): name -> (version, the
    .py files of the top-level packages its entry points name, found without importing them): what a job's fingerprint
    holds of a plugin it uses or that patched its code (`fdabench.cell.plugin_scope`)."""
    if not plugins_enabled():
        return {}
    found: dict[str, tuple[str, set[Path]]] = {}
    for group in GROUPS:
        for entry_point in entry_points(group=group):
            name = entry_point.dist.name if entry_point.dist else entry_point.value.split(":")[0].split(".")[0]
            version = entry_point.dist.version if entry_point.dist else "?"
            roots = _top_level_roots(entry_point.value.split(":")[0].split(".")[0])
            found.setdefault(name, (version, set()))[1].update(source_files(roots))
    return {name: (version, sorted(files)) for name, (version, files) in sorted(found.items())}


def _top_level_roots(package: str) -> list[Path]:
    """A top-level package's folders, or its module's file (found without importing it)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    folders = list(spec.submodule_search_locations or [])
    return [Path(folder) for folder in folders] or ([Path(spec.origin)] if spec.origin else [])


def plugin_source_roots() -> list[Path]:
    """Every installed plugin's top-level package folder, or its module's file (found without importing it)."""
    roots: set[Path] = set()
    for group in GROUPS:
        for entry_point in entry_points(group=group):
            roots.update(_top_level_roots(entry_point.value.split(":")[0].split(".")[0]))
    return sorted(roots)


def source_files(roots: list[Path]) -> list[Path]:
    """The .py files of `plugin_source_roots()` (a module's file, or every .py file under a package folder)."""
    return sorted({path for root in roots for path in ([root] if root.suffix == ".py" else root.rglob("*.py"))})


def plugin_source_files() -> list[Path]:
    """The .py files of every installed plugin's top-level package (found without importing it)."""
    return source_files(plugin_source_roots())
