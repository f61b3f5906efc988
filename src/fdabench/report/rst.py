"""Text for the Snakemake report's captions, which are reStructuredText that docutils renders to HTML: a title from
params.yaml is shown as written and never read as markup (a `.. raw:: html` directive, a link, a role); and the
configuration files the report was built from, for its landing page."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any


def rst_text(text: str) -> str:
    """`text` as literal inline reStructuredText: runs of whitespace (newlines included) as one space, and every
    character but letters, digits and spaces escaped with a backslash, which reStructuredText shows as the character
    itself; docutils then escapes it for HTML."""
    return "".join(
        character if character.isalnum() or character == " " else "\\" + character
        for character in " ".join(text.split())
    )


def _shown_path(path: str | os.PathLike, cwd: str | os.PathLike) -> str:
    """`path` relative to `cwd` where it lies under it (params.yaml, suites/mine.yaml), else as given."""
    relative = os.path.relpath(os.path.abspath(path), os.path.abspath(cwd))
    return str(path) if relative.startswith(os.pardir) else relative


def built_from(
    workflow_files: Iterable[str | os.PathLike],
    command_line_files: Iterable[str | os.PathLike],
    command_line_settings: Mapping[str, Any],
    cwd: str | os.PathLike,
) -> str:
    """What a run's configuration was merged from, in merge order, as reStructuredText for the report's landing page:
    the Snakefile's `configfile` (params.yaml), then each `--configfile` (`fdabench ... --with FILE`), then the
    `--config key=value` settings, each as literal text (`rst_text`). Snakemake lists the command line's files first in
    `workflow.configfiles` but merges them last, over the Snakefile's."""
    command_line = [os.path.abspath(path) for path in command_line_files]
    files = [path for path in workflow_files if os.path.abspath(path) not in command_line]
    files += [path for path in workflow_files if os.path.abspath(path) in command_line]
    parts = [rst_text(_shown_path(path, cwd)) for path in dict.fromkeys(files)]
    if command_line_settings:
        settings = ", ".join(f"{key}={value}" for key, value in command_line_settings.items())
        parts.append("the command line's --config " + rst_text(settings))
    if not parts:
        return "no configuration file"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1] + " (merged in this order)"
