"""The one rule for every name that becomes part of a path or a command line: suites, experiments, method
variants (with a sweep's `.draw<k>` / `.fold<f>`), targets, tables, figures, theory checks and registered members
(plugins included). What the file system and the shell need: printable characters that are neither path
separators nor shell syntax, no leading `-` (read as an option), a length that fits one file name with the longest
prefix and suffix `fdabench.core.paths` puts around it, and paths, filled with the longest names, that fit the file
system's limit on a whole path."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from fdabench.core import paths

#: the characters of a name (also the Snakefile's wildcard constraint): letters, digits and _ . + -; `(?!\n)$` ends
#: the match at the end in both JSON schema's regular expressions and Python's (where `$` alone lets a final newline
#: through: jsonschema matches with re.search)
NAME_PATTERN = r"^[A-Za-z0-9_+-][A-Za-z0-9_.+-]*(?!\n)$"
NAME_RULE = "letters, digits and _ . + - only, not starting with '.'"
#: a file name (one path component) longer than this many bytes is refused by the file system (NAME_MAX of ext4,
#: xfs, btrfs, APFS and NTFS)
COMPONENT_BYTES = 255
#: a path longer than this many bytes is refused by the kernel (Linux PATH_MAX 4096, less the closing NUL)
PATH_BYTES = 4095
#: targets may start with '-' (colored_digits' -90): they reach a command only as `--target=NAME` and a path only
#: below a folder, never as an argument of their own
LEADING_DASH_ALLOWED = ("target",)

_FIELD = re.compile(r"\{(\w+)\}")


def path_patterns() -> list[str]:
    """Every path pattern of `fdabench.core.paths` (the log patterns included)."""
    constants = [value for name, value in vars(paths).items() if name.isupper() and isinstance(value, str)]
    patterns = [pattern for pattern in constants if _FIELD.search(pattern)]
    return patterns + list(paths.LOGS.values())


def _longest_affix() -> int:
    """The most characters any pattern puts beside a field in one file name (`{experiment}_rounds.png`: 11)."""
    affixes = [
        len(_FIELD.sub("", component))
        for pattern in path_patterns()
        for component in pattern.split("/")
        if _FIELD.search(component)
    ]
    return max(affixes)


#: the longest name: one that still fits a file name with the longest prefix and suffix around it
MAX_NAME_LENGTH = COMPONENT_BYTES - _longest_affix()


def shown(name: str, limit: int = 40) -> str:
    """`name` for a message: repr, cut to `limit` characters (a name can be thousands of characters long)."""
    return repr(name) if len(name) <= limit else f"{name[:limit]!r}... ({len(name)} characters)"


def name_problem(name: object, kind: str) -> str | None:
    """Why `name` (of `kind`: suite, experiment, method, target, table, ...) cannot name files and commands, or None.
    Matched whole: a trailing newline, which `$` lets through in a Python regular expression, is refused too."""
    if not isinstance(name, str):
        return f"{kind} name {name!r} is not a string"
    if not re.fullmatch(NAME_PATTERN, name):
        return f"{kind} name {shown(name)} is not allowed ({NAME_RULE})"
    if name.startswith("-") and kind not in LEADING_DASH_ALLOWED:
        return f"{kind} name {shown(name)} starts with '-', which a command reads as an option; rename it"
    if len(name) > MAX_NAME_LENGTH:
        return (
            f"{kind} name {shown(name)} is longer than {MAX_NAME_LENGTH} characters (a file name holds "
            f"{COMPONENT_BYTES} bytes with the file's prefix and suffix); shorten it"
        )
    return None


def filled_paths(values: Mapping[str, object]) -> Iterable[str]:
    """Every path pattern whose fields `values` all give, filled with them."""
    for pattern in path_patterns():
        if set(_FIELD.findall(pattern)) <= set(values):
            yield paths.fill(pattern, **values)


def path_problem(values: Mapping[str, object], root: str = ".") -> str | None:
    """Why the paths `values` (the longest name of each field) make would be refused by the file system, or None:
    the first file name longer than COMPONENT_BYTES, else the first path, absolute under `root`, longer than
    PATH_BYTES."""
    base = len(os.path.abspath(root).encode()) + 1
    for path in filled_paths(values):
        for component in path.split("/"):
            if len(component.encode()) > COMPONENT_BYTES:
                return (
                    f"the file name {shown(component)} would be {len(component.encode())} bytes, above the file "
                    f"system's {COMPONENT_BYTES}; shorten the names"
                )
        if base + len(path.encode()) > PATH_BYTES:
            return (
                f"the path {shown(path)} would be {base + len(path.encode())} bytes from /, above the file system's "
                f"{PATH_BYTES}; shorten the names or work in a shorter folder"
            )
    return None
