"""Plugin code in fingerprints: `fdabench.cell.fingerprint` hashes the fdabench modules a job reaches; here a root
written outside fdabench (a plugin's method, dataset, partitioner or model, `fdabench.core.plugins`) adds its own
package's modules that it reaches through imports, normalised the same way, and the fdabench modules those import
(`external_modules`), and each installed plugin distribution gets its hash (`loaded_distributions`: its version
and files), which a cell records as `plugins`.

The fingerprints jobs record and are compared with are `fdabench.cell.plugin_scope`'s: a plugin enters only those of
the jobs that use one of its members or whose code it patched. `plugin_aware_fingerprint` and `cell_code` here put
every installed distribution into every fingerprint; they remain for `fdabench.cell.run`'s own fallback (a cell
trained without a fingerprint given), since this module, part of every cell's fingerprint, cannot change without
changing them all.

Kept apart from `fdabench.cell.fingerprint` because that module is itself part of every cell's fingerprint.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fdabench.cell import fingerprint
from fdabench.cell.fingerprint import PACKAGE, CodeFingerprint, code_fingerprint
from fdabench.core.plugins import plugin_distributions
from fdabench.core.readers import FileReadError, read_bytes, read_text
from fdabench.data import DATASETS, PARTITIONERS
from fdabench.methods import METHODS
from fdabench.models import MODELS

INTERNAL = "fdabench"


def _source_file(module: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def _is_module(name: str) -> bool:
    return _source_file(name) is not None


def _imports(module: str, path: Path) -> tuple[set[str], set[str]]:
    """(modules of `module`'s own top-level package, fdabench modules) that `module` imports."""
    top = module.split(".")[0]
    own, internal = set(), set()
    graph = fingerprint._graph(PACKAGE)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(read_text(path, "a plugin's Python module"))):
        if isinstance(node, ast.Import):
            names = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
            source = ".".join([*base, *([node.module] if node.module else [])])
            names = [(source, alias.name) for alias in node.names]
        else:
            continue
        for source, name in names:
            if source.split(".")[0] == INTERNAL:
                internal.add(graph.defining_module(source, name) if name else source)
            elif source.split(".")[0] == top:
                submodule = f"{source}.{name}" if name else None
                own.add(submodule if submodule and _is_module(submodule) else source)
    return own, {name for name in internal if name in graph.files}


def external_modules(roots: Iterable[str]) -> tuple[dict[str, Path], set[str]]:
    """The non-fdabench modules reached from `roots` (each within its own top-level package) by file, and
    the fdabench modules they import."""
    reached: dict[str, Path] = {}
    internal: set[str] = set()
    pending = [root for root in roots if root.split(".")[0] != INTERNAL]
    while pending:
        module = pending.pop()
        path = _source_file(module)
        if module in reached or path is None:
            continue
        reached[module] = path
        own, imported = _imports(module, path)
        internal |= imported
        pending += sorted(own - set(reached))
    return reached, internal


def plugin_aware_fingerprint(roots: Iterable[str]) -> CodeFingerprint:
    """`fdabench.cell.fingerprint.code_fingerprint(roots)`, plus the plugin modules reached from `roots` and every
    loaded plugin distribution (`plugin:<name>`)."""
    roots = list(roots)
    external, internal = external_modules(roots)
    plugins = {f"plugin:{record['name']}": record["hash"] for record in loaded_distributions()}
    if not external and not plugins:
        return code_fingerprint(roots)
    shipped = code_fingerprint([*roots, *internal])
    modules = dict(shipped.modules) | plugins
    for name, path in external.items():
        modules[name] = fingerprint._module_hash(path)
    modules = dict(sorted(modules.items()))
    digest = hashlib.sha256("\n".join(f"{name} {h}" for name, h in modules.items()).encode()).hexdigest()[:16]
    return CodeFingerprint(digest, modules)


@functools.cache
def _distributions() -> tuple[tuple[str, str, str], ...]:
    records = []
    for name, (version, files) in plugin_distributions().items():
        lines = [f"version {version}"] + [f"{path.name} {_file_hash(path)}" for path in files]
        records.append((name, version, hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]))
    return tuple(records)


def loaded_distributions() -> list[dict[str, str]]:
    """{name, version, hash} of every installed plugin distribution where plugins load (the hash: its version and
    its modules, normalised as fdabench's are, so a comment changes nothing); what a cell records as `plugins`.
    Worked out once per process."""
    return [{"name": name, "version": version, "hash": digest} for name, version, digest in _distributions()]


def _file_hash(path: Path) -> str:
    try:
        return fingerprint._module_hash(path)
    except (OSError, SyntaxError, ValueError):  # not Python that parses: its bytes, where they can be read
        try:
            return hashlib.sha256(read_bytes(path, "a plugin's file")).hexdigest()[:16]
        except FileReadError:
            return "unreadable"


def warm_cache() -> None:
    """Parse and hash now every fdabench module a cell's fingerprint can reach (from the runner and every
    registered method, dataset, partitioner and model, plugins' included), so that the fork server's children,
    each recording its cell's fingerprint, find that work done. The caches hold what the files said when read:
    a process that outlives an edit of them gives the old fingerprint (the fork server is keyed by the files,
    so a new server serves the edited code). Written here, not in `fdabench.cell.fingerprint`: that module is part
    of every cell's fingerprint."""
    members = [member for registry in (METHODS, DATASETS, PARTITIONERS, MODELS) for _, member in registry.items()]
    graph = fingerprint._graph(PACKAGE)
    for name in graph.closure([fingerprint.RUNNER, *(fingerprint.defining_module(member) for member in members)]):
        fingerprint._module_hash(graph.files[name])


def cell_code(config: dict[str, Any]) -> CodeFingerprint:
    """The fingerprint a cell records and is compared with (`fdabench.cell.fingerprint.cell_roots`, plugins
    included)."""
    return plugin_aware_fingerprint(fingerprint.cell_roots(config))
