"""What each registry held before any plugin loaded, so that a plugin that replaces a shipped entry is found.

Each registry package (`fdabench.methods`, `fdabench.data`, `fdabench.models`) calls `record_shipped` once its
built-in modules have registered their members and before it loads plugins (`fdabench.core.plugins.load_plugins`).
`replaced_names` then says which of those names no longer give the member fdabench registered: a plugin took the
name (`METHODS._members["fedda"] = Mine`, or any other way round `Registry.register`'s refusal)."""

from __future__ import annotations

from typing import Any

from fdabench.core.registry import Registry

#: registry family -> {name: the member fdabench registered under it}
_SHIPPED: dict[str, dict[str, Any]] = {}


def record_shipped(registry: Registry) -> None:
    """Remember `registry`'s members as fdabench registered them (the first call per family counts)."""
    _SHIPPED.setdefault(registry.family, dict(registry.items()))


def shipped_member(family: str, name: str) -> Any | None:
    """The member fdabench registered under `name` in `family`, or None (a plugin's name, or not recorded)."""
    return _SHIPPED.get(family, {}).get(name)


def replaced_names(registry: Registry) -> dict[str, Any]:
    """name -> the member that now stands where fdabench registered another (None where the name was removed)."""
    now = dict(registry.items())
    return {
        name: now.get(name) for name, member in _SHIPPED.get(registry.family, {}).items() if now.get(name) is not member
    }
