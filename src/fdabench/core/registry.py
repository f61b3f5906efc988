"""Name -> class registries (DomainBed style): adding a member is adding a class (or a factory function)
and decorating it with its family's `register`; the public name is the class's `name` attribute or the
function's own name (or a data record's `name`), written once."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from fdabench.core.errors import did_you_mean

T = TypeVar("T")


class UnknownNameError(KeyError):
    """A name that is not registered; the message lists the allowed names."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want plain text
        return str(self.args[0])


def member_name(member: Any) -> str:
    """A class's own `name` attribute (not an inherited one), a function's name, or an instance's `name`."""
    if isinstance(member, type):
        if "name" not in vars(member):
            raise TypeError(f"{member.__qualname__} sets no `name` of its own, so it cannot be registered")
        return member.name
    return member.__name__ if callable(member) and hasattr(member, "__name__") else member.name


class Registry(Generic[T]):
    """A mapping from public names to classes or factories of one family."""

    def __init__(self, family: str):
        self.family = family
        self._members: dict[str, T] = {}
        #: name -> why the plugin that declares it could not be registered (`fdabench.core.plugins.load_plugins`)
        self.broken: dict[str, str] = {}

    def register(self, member: T) -> T:
        """Decorator: add `member` under its name (`member_name`)."""
        name = member_name(member)
        if name in self._members:
            raise ValueError(f"{self.family} {name!r} is registered twice")
        self._members[name] = member
        return member

    def get(self, name: str) -> T:
        try:
            return self._members[name]
        except KeyError:
            if name in self.broken:
                raise UnknownNameError(self.broken[name]) from None
            raise UnknownNameError(
                f"unknown {self.family} {name!r}; allowed: {', '.join(self.names())}{did_you_mean(name, self.names())}"
            ) from None

    def names(self) -> list[str]:
        return sorted(self._members)

    def __contains__(self, name: object) -> bool:
        return name in self._members

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def items(self) -> list[tuple[str, T]]:
        return [(name, self._members[name]) for name in self.names()]


def derive_defaults(cls: type, schema_attribute: str, defaults_attribute: str) -> None:
    """Set a class's `defaults_attribute` from its `schema_attribute` (called for every subclass)."""
    setattr(cls, defaults_attribute, schema_defaults(getattr(cls, schema_attribute)))


def schema_defaults(properties: dict[str, Any], owner: str = "") -> dict[str, Any]:
    """The `default` of every JSON-schema property that has one: the one place a component's option defaults
    are written. A property without a default is an optional setting whose absence means "not set" (its
    description says what that does) and stays out of resolved configurations."""
    return {key: copy.deepcopy(spec["default"]) for key, spec in properties.items() if "default" in spec}
