"""Name -> class registries (DomainBed style): adding a member is adding a class and a name."""

from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError):
    """A name that is not registered; the message lists the allowed names."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want plain text
        return str(self.args[0])


class Registry(Generic[T]):
    """A mapping from public names to classes or factories of one family."""

    def __init__(self, family: str):
        self.family = family
        self._members: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(member: T) -> T:
            if name in self._members:
                raise ValueError(f"{self.family} {name!r} is registered twice")
            self._members[name] = member
            return member

        return decorator

    def get(self, name: str) -> T:
        try:
            return self._members[name]
        except KeyError:
            raise UnknownNameError(
                f"unknown {self.family} {name!r}; allowed: {', '.join(self.names())}"
            ) from None

    def names(self) -> list[str]:
        return sorted(self._members)

    def __contains__(self, name: object) -> bool:
        return name in self._members

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def items(self) -> list[tuple[str, T]]:
        return [(name, self._members[name]) for name in self.names()]
