"""The package's import graph: layers import downwards only, no module imports itself back through others,
and fdabench modules import each other at the top of a module (except the CLI, which defers everything so
that `--help` and data jobs start without torch). Every import counts, wherever it is written."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "fdabench"

# Bottom to top. A module may import modules of its own layer or of lower layers. Each layer is a set of
# packages (docs/architecture.md draws this table from here).
LAYERS = (
    ("fdabench", "fdabench.core"),  # foundations: errors, registries, files, paths, plugins
    ("fdabench.tensor_math", "fdabench.data", "fdabench.models"),  # pure math, datasets, networks
    ("fdabench.federation",),  # the round loop and local training
    ("fdabench.methods",),  # the methods
    ("fdabench.cell",),  # a cell's setup, run, result file and code fingerprint, from its resolved configuration
    (
        "fdabench.config",
        "fdabench.flower",
        "fdabench.testing",
    ),  # params.yaml and finding its cells; cell execution over Flower, the method test kit
    # speed benchmarks, reports, the theory check; the reproduction tooling (the papers, paper vs ours, the archive)
    ("fdabench.speed", "fdabench.report", "fdabench.theory", "fdabench.reproduction"),
    ("fdabench.jobs", "fdabench.cli", "fdabench.__main__"),  # job-level plumbing and the command line
)
# What the report may read: cell files, never params, the registries or the papers (a figure's published values are
# handed to it by the command line, from the reproduction package).
REPORT_MAY_IMPORT = (
    "fdabench.cell.reading",  # the cell files, checked against their digests, each cell once
    "fdabench.cell.result",
    "fdabench.cell.digest",  # a cell's digest: what tells a tracker's exporter a cell it has written already
    "fdabench.core.io",
    "fdabench.core.readers",  # the figures a page embeds
    "fdabench.core.families",
    "fdabench.core.metrics",
    "fdabench.core.selection",
    "fdabench.core.staging",
    "fdabench.report",
    "fdabench.config.theory_roles",
)
# The CLI package defers library imports (every --help and data job starts without torch); the fork server's
# client runs in every training job and imports only what handing the job over needs (the plugin scan and the
# server's warm-up are imported where they run).
DEFERRED_IMPORTS_ALLOWED = ("fdabench.cli", "fdabench.jobs.forkserver")


def _module_name(path: Path) -> str:
    parts = ["fdabench", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1]) if parts[-1] == "__init__" else ".".join(parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _target(module: str, name: str | None) -> str:
    """The module an import binds: `from fdabench import paths` imports the module fdabench.core.paths."""
    if name is not None and f"{module}.{name}" in MODULES:
        return f"{module}.{name}"
    return module


def _imports(module: str) -> list[tuple[str, bool]]:
    """(imported fdabench module, whether the import sits inside a function or class body)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                (alias.name, id(node) not in top_level)
                for alias in node.names
                if alias.name.split(".")[0] == "fdabench"
            ]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] == "fdabench"
            and node.level == 0
        ):
            found += [(_target(node.module, alias.name), id(node) not in top_level) for alias in node.names]
    return found


def _layer(module: str) -> int:
    best = None
    for index, layer in enumerate(LAYERS):
        for prefix in layer:
            if module == prefix or (prefix != "fdabench" and module.startswith(prefix + ".")):
                best = index
    if best is None:
        raise AssertionError(f"{module} is in no layer of tests/repository/test_architecture.py")
    return best


def _edges() -> set[tuple[str, str]]:
    return {(module, imported) for module in MODULES for imported, _ in _imports(module) if imported != module}


def test_every_module_has_a_layer():
    for module in MODULES:
        _layer(module)


def test_no_import_cycles():
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for module, imported in _edges():
        graph[module].add(imported)
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as error:
        pytest.fail("import cycle: " + " -> ".join(error.args[1]))


def test_layers_import_downwards_only():
    upward = sorted((a, b) for a, b in _edges() if _layer(b) > _layer(a))
    assert not upward, "upward imports: " + ", ".join(f"{a} -> {b}" for a, b in upward)


# The tooling built on the library: the reproduction package and the speed benchmarks. Only the top layer (the command
# line, job plumbing, the entry point) and the tooling itself may import it; the library never does.
TOOLING = ("fdabench.reproduction", "fdabench.speed")
MAY_IMPORT_TOOLING = (*TOOLING, "fdabench.cli", "fdabench.jobs", "fdabench.__main__")


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


def test_the_library_never_imports_its_tooling():
    found = sorted(
        (module, imported)
        for module in MODULES
        if not _within(module, MAY_IMPORT_TOOLING)
        for imported, _ in _imports(module)
        if _within(imported, TOOLING)
    )
    assert not found, "the library imports its tooling: " + ", ".join(f"{a} -> {b}" for a, b in found)


def test_the_report_reads_cell_files_only():
    for module in MODULES:
        if module.startswith(("fdabench.report", "fdabench.theory.report")):
            for imported, _ in _imports(module):
                assert imported.startswith(REPORT_MAY_IMPORT), f"{module} imports {imported}"


def test_no_method_imports_the_round_loop():
    """A method gives the loop its rules; it never drives the loop (the loop's module, or the sites it talks to)."""
    loop = ("fdabench.federation.rounds", "fdabench.federation.sites")
    found = [
        (module, imported)
        for module in MODULES
        if module.startswith("fdabench.methods")
        for imported, _ in _imports(module)
        if imported.startswith(loop)
    ]
    assert not found, f"methods importing the round loop: {found}"


def test_fdabench_imports_sit_at_the_top_of_modules():
    deferred = [
        (module, imported)
        for module in MODULES
        if not any(module == allowed or module.startswith(allowed + ".") for allowed in DEFERRED_IMPORTS_ALLOWED)
        for imported, nested in _imports(module)
        if nested
    ]
    assert not deferred, deferred


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from fdabench.methods.base import METHODS\n", ["fdabench.methods.base"]),
        ("from fdabench.core import paths\n", ["fdabench.core.paths"]),
        ("def f():\n    from fdabench.cli import main\n", ["fdabench.cli"]),
    ],
)
def test_the_checker_sees_imports_wherever_they_are(tmp_path, monkeypatch, source, expected):
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    monkeypatch.setitem(MODULES, "fdabench.probe", probe)
    assert [name for name, _ in _imports("fdabench.probe")] == expected
