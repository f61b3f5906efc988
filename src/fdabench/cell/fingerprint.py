"""Code fingerprints: which code a result depends on, so a change to that code makes the result stale.

A job's fingerprint hashes the *normalised* source of every fdabench module its components reach through
imports. Normalised means the module's syntax tree without docstrings: comments, blank lines, formatting
and docstrings never change a fingerprint; any change to what the code does (a constant, an operator, a
default) does. The reach is followed precisely: `from fdabench.data import Partition` reaches the module
that defines `Partition` (data/partition.py), not every module the `fdabench.data` package re-exports, so
a change to one method or dataset leaves the jobs of the others current.

Roots per kind of job (what the job runs):
- prepare: the dataset's module;
- partition: the partitioner's and the dataset's modules;
- train (a cell): fdabench.cell.run (loading, problem building, the cell summary) and the modules of the
  cell's method, dataset, partitioner and model, as registered under the names in its configuration;
- theory init: the theory check's job (fdabench.theory.init) and the cell's model, dataset and partitioner.

The reach stops at the *bookkeeping* modules (`BOOKKEEPING`): how files are read and written, how fingerprints and
plugins are worked out, error types and file-kind tags. None of them can change a number a job computes, so a change to
them reruns nothing. A recorded fingerprint is compared module by module (`fdabench.reproduction.staleness`): the job is
current when every module today's fingerprint reaches has the hash it had when the job ran; a module the job's record
lists and today's reach no longer does (a bookkeeping module, recorded before it was one) is not a change, because a
module leaves the reach of unchanged code only by becoming bookkeeping.

Package versions (torch, numpy, ...) are recorded in each cell file beside the fingerprint, not in it.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from fdabench.core.readers import read_text
from fdabench.data import DATASETS, PARTITIONERS
from fdabench.methods import METHODS
from fdabench.models import MODELS

PACKAGE = Path(__file__).resolve().parents[1]  # src/fdabench
RUNNER = "fdabench.cell.run"
#: Modules that never change a number a job computes, where the reach of every fingerprint stops: the package's
#: version string (recorded beside the fingerprint), file reading and writing and the hashes that name files
#: (`core.io`; folders: `core.staging`; a file that cannot be read, named in one error: `core.readers`), error types
#: (`core.errors`), file-kind tags (`core.formats`), the registries' name lookup (`core.registry`: the member found
#: is fingerprinted by its own module), plugin loading (`core.plugins`: a plugin's code enters the fingerprints of
#: the cells that use it, `cell.plugin_fingerprint`) and fingerprinting itself.
BOOKKEEPING = frozenset(
    {
        "fdabench",
        "fdabench.core.io",
        "fdabench.core.readers",
        "fdabench.core.staging",
        "fdabench.core.errors",
        "fdabench.core.formats",
        "fdabench.core.registry",
        "fdabench.core.plugins",
        "fdabench.cell.fingerprint",
        "fdabench.cell.plugin_fingerprint",
    }
)
THEORY_RUNNER = "fdabench.theory.init"


@dataclass(frozen=True)
class CodeFingerprint:
    """`digest`: one hash of every reached module; `modules`: each module's own hash (to name what changed)."""

    digest: str
    modules: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"fingerprint": self.digest, "modules": dict(self.modules)}

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> CodeFingerprint:
        """The fingerprint `to_json` wrote; a clear error for anything else."""
        if not (
            isinstance(payload, dict)
            and isinstance(payload.get("fingerprint"), str)
            and isinstance(payload.get("modules"), dict)
        ):
            raise ValueError(f"not a code fingerprint (JSON with fingerprint and modules): {str(payload)[:80]}")
        return cls(payload["fingerprint"], dict(payload["modules"]))


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its __init__.py)."""
    files = {}
    for path in sorted(package.rglob("*.py")):
        parts = ["fdabench", *path.relative_to(package).with_suffix("").parts]
        files[".".join(parts[:-1]) if parts[-1] == "__init__" else ".".join(parts)] = path
    return files


def normalised_source(text: str) -> str:
    """The syntax tree of `text` without docstrings, as a string: equal for equal behaviour up to comments,
    formatting and documentation."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


class _Graph:
    """The fdabench import graph of one source tree, each `from X import Y` resolved to Y's defining module."""

    def __init__(self, package: Path):
        self.files = module_files(package)
        self._trees: dict[str, ast.Module] = {}
        self._imports: dict[str, set[str]] = {}

    def tree(self, module: str) -> ast.Module:
        if module not in self._trees:
            self._trees[module] = ast.parse(read_text(self.files[module], "a Python module"))
        return self._trees[module]

    def _absolute(self, module: str, node: ast.ImportFrom) -> str | None:
        if node.level == 0:
            return node.module
        base = module.split(".")
        if self.files[module].name != "__init__.py":
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def defining_module(self, module: str, name: str, seen: frozenset = frozenset()) -> str:
        """Where `name`, imported from `module`, comes from: a submodule, a module it re-exports from, or
        `module` itself."""
        if f"{module}.{name}" in self.files:
            return f"{module}.{name}"
        if module not in self.files or (module, name) in seen:
            return module
        for node in self.tree(module).body:
            if isinstance(node, ast.ImportFrom):
                source = self._absolute(module, node)
                for alias in node.names:
                    if (alias.asname or alias.name) == name and source and source.split(".")[0] == "fdabench":
                        return self.defining_module(source, alias.name, seen | {(module, name)})
        return module

    def imports(self, module: str) -> set[str]:
        if module not in self._imports:
            self._imports[module] = self._find_imports(module)
        return self._imports[module]

    def _find_imports(self, module: str) -> set[str]:
        reached = set()
        for node in ast.walk(self.tree(module)):
            if isinstance(node, ast.Import):
                reached |= {alias.name for alias in node.names if alias.name.split(".")[0] == "fdabench"}
            elif isinstance(node, ast.ImportFrom):
                source = self._absolute(module, node)
                if source and source.split(".")[0] == "fdabench":
                    reached |= {self.defining_module(source, alias.name) for alias in node.names}
        return {name for name in reached if name in self.files}

    def closure(self, roots: Iterable[str]) -> set[str]:
        """The modules reached from `roots` through imports, stopping at the bookkeeping ones (`BOOKKEEPING`)."""
        reached, pending = set(), [root for root in roots if root in self.files and root not in BOOKKEEPING]
        while pending:
            module = pending.pop()
            if module not in reached:
                reached.add(module)
                pending += sorted(self.imports(module) - reached - BOOKKEEPING)
        return reached


@cache
def _graph(package: Path) -> _Graph:
    return _Graph(package)


@cache
def _module_hash(path: Path) -> str:
    return hashlib.sha256(normalised_source(read_text(path, "a Python module")).encode()).hexdigest()[:16]


def code_fingerprint(roots: Iterable[str], package: Path = PACKAGE) -> CodeFingerprint:
    """The fingerprint of the modules reached from `roots` (dotted module names) in the source tree at
    `package` (default: the installed fdabench)."""
    return _fingerprint(tuple(sorted(set(roots))), package)


@cache
def _fingerprint(roots: tuple[str, ...], package: Path) -> CodeFingerprint:
    graph = _graph(package)
    modules = {name: _module_hash(graph.files[name]) for name in sorted(graph.closure(roots))}
    digest = hashlib.sha256("\n".join(f"{name} {h}" for name, h in modules.items()).encode()).hexdigest()[:16]
    return CodeFingerprint(digest, modules)


def defining_module(component: Any) -> str:
    """The module a registered class or function is written in."""
    return inspect.unwrap(component).__module__


def prepare_roots(dataset: str) -> list[str]:
    return [defining_module(DATASETS.get(dataset))]


def partition_roots(dataset: str, partitioner: str) -> list[str]:
    return [defining_module(PARTITIONERS.get(partitioner)), *prepare_roots(dataset)]


def _problem_roots(config: dict[str, Any]) -> list[str]:
    """The modules of a cell's model, partitioner and dataset."""
    return [
        defining_module(MODELS.get(config["train"]["model"])),
        *partition_roots(config["dataset"], config["partitioner"]),
    ]


def theory_roots(config: dict[str, Any]) -> list[str]:
    """The modules a theory check's initial quantities depend on: its job's, and the cell's problem's."""
    return [THEORY_RUNNER, *_problem_roots(config)]


def cell_roots(config: dict[str, Any]) -> list[str]:
    """The modules a cell's result depends on directly (see the module docstring)."""
    return [RUNNER, *_problem_roots(config), defining_module(METHODS.get(config["algorithm"]))]


def cell_fingerprint(config: dict[str, Any], package: Path = PACKAGE) -> CodeFingerprint:
    return code_fingerprint(cell_roots(config), package)
