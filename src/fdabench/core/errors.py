"""Errors the command line reports as one readable message (no traceback)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class ParamsError(ValueError):
    """params.yaml is invalid; the message lists every problem with its key and the allowed values."""


def did_you_mean(name: object, allowed: Iterable[object]) -> str:
    """The clause `; did you mean 'x'?` with the valid names nearest to `name` (difflib), or "" when none is near:
    appended to a message that refuses an unknown name."""
    close = difflib.get_close_matches(str(name), [str(value) for value in allowed], n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
