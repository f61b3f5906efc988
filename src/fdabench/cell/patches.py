"""Shipped code that no longer is what fdabench's source says: a function, class or method a plugin replaced or
patched once loaded.

Every loaded fdabench module is read against its own syntax tree (the one `fdabench.cell.fingerprint` hashes):
- a function or class it defines (`def`, `class`) must still be the object written there: a function whose code
  (`__code__`) comes from that file under that qualified name, with the literal defaults the source gives, and a
  class of that module and name;
- each method a class body defines (plain, static, class method or property) the same, under `Class.method`;
- a name it imports from another fdabench module must still be the object that module holds;
- a constant it or a class body assigns from an immutable literal (a number, string, tuple, ...), or from a call of
  a frozen dataclass with literal arguments (a method's `Roles(...)`, `Delivery(...)`, `Requires(...)`), must still
  equal it.

Additions (a new attribute, a new module) are not patches: shipped code never reads them. What a patch names is
its module: a cell is affected when its fingerprint covers that module (`fdabench.cell.plugin_scope`)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fdabench.cell import fingerprint
from fdabench.cell.fingerprint import PACKAGE

_MISSING = object()
_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), tuple, frozenset)


@dataclass(frozen=True)
class Patch:
    """`module`'s `name` (`Class.method` for a method) differs from its source; `origin`: the file of the object
    that stands there now, where it has one (a function or class written elsewhere)."""

    module: str
    name: str
    origin: Path | None


def shipped_patches() -> list[Patch]:
    """Every patch of a loaded fdabench module (see the module docstring), in module order."""
    graph = fingerprint._graph(PACKAGE)
    found = []
    for module in sorted(name for name in list(sys.modules) if name in graph.files):
        live = sys.modules.get(module)
        if isinstance(live, types.ModuleType):
            found += _module_patches(module, vars(live), graph.tree(module), graph.files[module])
    return found


def _module_patches(module: str, namespace: dict[str, Any], tree: ast.Module, path: Path) -> list[Patch]:
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            live = namespace.get(node.name, _MISSING)
            if not _is_written_here(live, node, module, node.name, path):
                found.append(Patch(module, node.name, _origin(live)))
            elif isinstance(node, ast.ClassDef):
                found += _class_patches(module, live, node, path, namespace)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "fdabench":
            for alias in node.names:
                local = alias.asname or alias.name
                if not _import_holds(namespace.get(local, _MISSING), node.module, alias.name):
                    found.append(Patch(module, local, _origin(namespace.get(local))))
        else:
            found += [Patch(module, name, None) for name in _changed_constants(node, namespace, namespace)]
    return found


def _import_holds(live: Any, source: str, name: str) -> bool:
    """Whether `live`, bound by `from source import name`, is still what fdabench's `source` gives. A shipped
    function or class of that name also holds: then `source` itself was patched, which its own check names."""
    held = sys.modules.get(source)
    expected = getattr(held, name, sys.modules.get(f"{source}.{name}", _MISSING)) if held is not None else _MISSING
    if expected is _MISSING or live is expected:
        return True
    target = inspect.unwrap(live) if callable(live) else live
    if isinstance(target, types.FunctionType):
        return _in_package(Path(target.__code__.co_filename)) and target.__code__.co_qualname == name
    return isinstance(target, type) and target.__module__.split(".")[0] == "fdabench" and target.__qualname__ == name


def _in_package(path: Path) -> bool:
    return path.resolve().is_relative_to(PACKAGE)


def _class_patches(module: str, cls: type, node: ast.ClassDef, path: Path, scope: dict[str, Any]) -> list[Patch]:
    found = []
    for statement in node.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            live = vars(cls).get(statement.name, _MISSING)
            qualified = f"{node.name}.{statement.name}"
            if not _is_written_here(_method_function(live), statement, module, qualified, path):
                found.append(Patch(module, qualified, _origin(_method_function(live))))
        else:
            changed = _changed_constants(statement, vars(cls), scope)
            found += [Patch(module, f"{node.name}.{name}", None) for name in changed]
    return found


def _method_function(member: Any) -> Any:
    """The function behind a class attribute: a static or class method's, a property's getter, or itself."""
    if isinstance(member, staticmethod | classmethod):
        return member.__func__
    if isinstance(member, property):
        return member.fget
    return member


def _is_written_here(live: Any, node: ast.AST, module: str, qualified: str, path: Path) -> bool:
    """Whether `live` is the function or class `node` defines in `module` (at `path`) as `qualified`."""
    if live is _MISSING:
        return False
    if isinstance(node, ast.ClassDef):
        return isinstance(live, type) and live.__module__ == module and live.__qualname__ == qualified
    function = inspect.unwrap(live) if callable(live) else live
    if not isinstance(function, types.FunctionType):
        return bool(node.decorator_list)  # a decorator may return another kind of object: not a patch to tell
    code = function.__code__
    return (
        Path(code.co_filename).resolve() == path.resolve()
        and code.co_qualname == qualified
        and _defaults_hold(function, node)
    )


def _defaults_hold(function: types.FunctionType, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the function's literal defaults are still those of its source (other defaults are not compared)."""
    written = [_literal(default) for default in node.args.defaults]
    live = list(function.__defaults__ or ())
    if len(written) != len(live):
        return False
    keywords = function.__kwdefaults__ or {}
    pairs = list(zip(written, live)) + [
        (_literal(default), keywords.get(argument.arg, _MISSING))
        for argument, default in zip(node.args.kwonlyargs, node.args.kw_defaults)
        if default is not None
    ]
    return all(source is _MISSING or _same_value(source, now) for source, now in pairs)


def _changed_constants(node: ast.stmt, namespace: dict[str, Any], scope: dict[str, Any]) -> list[str]:
    """The names `node` assigns an immutable literal (or a declared value, `_declared`, its class found in the module's
    `scope`) to whose value in `namespace` is no longer it."""
    if isinstance(node, ast.Assign):
        targets, value = node.targets, node.value
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        targets, value = [node.target], node.value
    else:
        return []
    written = _literal(value)
    if written is _MISSING:
        written = _declared(value, scope)
    if written is _MISSING or not _immutable(written):
        return []
    changed = []
    for target in targets:
        if isinstance(target, ast.Name):
            now = namespace.get(target.id, _MISSING)
            # a value of another kind (an enum member, a descriptor) is what the class machinery made of it
            if now is _MISSING or (_immutable(now) and not _same_value(written, now)):
                changed.append(target.id)
    return changed


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _MISSING


def _declared(node: ast.expr, scope: dict[str, Any]) -> Any:
    """The value of a call of a frozen dataclass named in `scope` with literal arguments (a method's declarative
    values: `Roles(warmup=True)`); _MISSING for anything else."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return _MISSING
    cls = scope.get(node.func.id)
    if not (isinstance(cls, type) and _frozen_dataclass(cls)) or any(k.arg is None for k in node.keywords):
        return _MISSING
    args = [_literal(argument) for argument in node.args]
    kwargs = {keyword.arg: _literal(keyword.value) for keyword in node.keywords}
    if _MISSING in args or _MISSING in kwargs.values():
        return _MISSING
    try:
        return cls(*args, **kwargs)
    except (TypeError, ValueError):
        return _MISSING


def _frozen_dataclass(cls: type) -> bool:
    return dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen


def _immutable(value: Any) -> bool:
    return isinstance(value, _IMMUTABLE) or (not isinstance(value, type) and _frozen_dataclass(type(value)))


def _same_value(written: Any, now: Any) -> bool:
    return type(written) is type(now) and (written == now or written != written and now != now)  # NaN equals NaN


def _origin(live: Any) -> Path | None:
    """The source file of the function or class that stands where a shipped one was, if it has one."""
    target = inspect.unwrap(live) if callable(live) else live
    try:
        return Path(inspect.getfile(target)).resolve()
    except (TypeError, OSError):
        return None
