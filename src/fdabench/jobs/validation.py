"""params.yaml validated for a command or the workflow: the library's checks (`fdabench.config.validate_params`)
and the reproduction package's (an experiment's `published:` key names a published table:
`fdabench.reproduction.lookups.published_errors`), every problem in one ParamsError. The library never imports the
reproduction package; this is where the two meet."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from fdabench.config import Params, load_params, validate_params
from fdabench.reproduction.lookups import published_errors

#: the checks the library does not hold, run with its own
CHECKS = (published_errors,)


def validated_params(raw: Any) -> Params:
    """`validate_params` with `CHECKS`."""
    return validate_params(raw, CHECKS)


def load_checked_params(
    path: str | os.PathLike = "params.yaml",
    overrides: dict[str, Any] | None = None,
    layers: Sequence[str | os.PathLike] = (),
    suite: str | None = None,
) -> Params:
    """`load_params` with `CHECKS`."""
    return load_params(path, overrides, layers, suite, CHECKS)
