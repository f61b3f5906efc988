"""Digests that let a cell file or an archive record say when it was edited after it was written.

A payload's digest (its `digest` key) is "sha256:" and the sha256 of its canonical JSON
(`fdabench.core.io.canonical_json`) without the `digest` key itself. Its writer adds it last (`seal`); every reader
checks it (`verify`). JSON numbers read back as the values written, so an unedited file verifies and a change to any
value, key or round (a finished cell's accuracy edited by hand) does not. A digest detects edits, not forgery:
whoever recomputes it can hide one.

Payloads written before digests existed carry none. `verify` says so (False) instead of passing them as checked,
and their readers report them by that name, "unsealed" (`fdabench status`, `fdabench compare --archive`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from fdabench.core.io import canonical_json

DIGEST_KEY = "digest"
ALGORITHM = "sha256"
#: what a reader says of a payload without a digest
UNSEALED = "unsealed (written before cells and archive records carried a digest: an edit to one cannot be detected)"


class EditedError(ValueError):
    """A payload whose digest does not match its contents: edited after it was written."""


def payload_digest(payload: dict[str, Any]) -> str:
    """The digest of `payload` (a JSON object) without its own `digest` key, as the payload reads back from JSON
    (tuples as lists, numpy numbers as Python numbers)."""
    contents = json.loads(canonical_json({key: value for key, value in payload.items() if key != DIGEST_KEY}))
    return f"{ALGORITHM}:{hashlib.sha256(canonical_json(contents).encode('utf-8')).hexdigest()}"


def seal(payload: dict[str, Any]) -> dict[str, Any]:
    """`payload` with its digest (any earlier digest replaced): what its writer writes."""
    return {**{key: value for key, value in payload.items() if key != DIGEST_KEY}, DIGEST_KEY: payload_digest(payload)}


def is_sealed(payload: dict[str, Any]) -> bool:
    return DIGEST_KEY in payload


def digest_matches(payload: dict[str, Any]) -> bool:
    """Whether `payload` is not known to be edited: its digest matches, or it has none."""
    return not is_sealed(payload) or payload[DIGEST_KEY] == payload_digest(payload)


def verify(payload: dict[str, Any], source: str) -> bool:
    """True when `payload`'s digest matches its contents, False when it has none (written before digests); raises
    `EditedError`, naming `source`, when it does not match."""
    if not digest_matches(payload):
        raise EditedError(
            f"{source}: edited after it was written (its digest does not match its contents); its numbers are not used"
        )
    return is_sealed(payload)
