"""What every command shares: the one-line error, JSON arguments, input and output checks, the suite and cell
arguments."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterable
from typing import Any

from fdabench.cli.file_arguments import reads


class CommandError(Exception):
    """An expected failure of a command: reported as one line, exit status 2."""


def json_argument(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not valid JSON: {error}") from None


def require_json(path: str, what: str, job: str, kind: str | None = None) -> Any:
    """The JSON of an input file; refuse one that is missing, empty or truncated, naming it and the job that makes it
    again, and one of another kind than `kind` (`fdabench.core.formats`), naming what it is."""
    from fdabench.core.formats import check_kind
    from fdabench.core.readers import FileReadError, read_json

    try:
        payload = read_json(path, f"a {what} file")
    except FileNotFoundError:
        raise CommandError(f"{path}: no such file; run {job} first (snakemake does)") from None
    except FileReadError as error:
        if os.path.isdir(path):
            raise CommandError(f"{path} is a directory, not a {what} file; pass the file {job} writes") from None
        raise CommandError(
            f"{path}: {what} file is not readable JSON ({error.problem}); delete it and rerun {job} (snakemake makes "
            "it again)"
        ) from None
    if kind is not None:
        check_kind(path, payload, kind)
    return payload


def require_prepared(path: str) -> None:
    """Refuse a `--prepared` that is not a prepared data directory (a file, or a folder without header.json), naming
    what it is; then check its header as `require_json` does."""
    from fdabench.core.formats import describe, kind_of
    from fdabench.core.readers import read_json

    if os.path.isfile(path):
        try:
            what = describe(kind_of(read_json(path)))
        except (OSError, ValueError):
            what = "a file"
        raise CommandError(
            f"--prepared {path} is {what}, not a prepared data directory; pass the folder that "
            "fdabench prepare writes (data/prepared/<dataset>/<options>)"
        )
    require_json(os.path.join(path, "header.json"), "prepared data", "its prepare job", kind="fdabench.prepared")


def require_kind(paths: Iterable[str], kind: str) -> None:
    """Refuse, before anything is read for real, an input of another kind than `kind` (`fdabench.core.formats`);
    a file that cannot be read is left to the command's own reader (its message says what is wrong)."""
    from fdabench.core.formats import check_kind
    from fdabench.core.readers import read_json

    for path in paths:
        try:
            payload = read_json(path)
        except (OSError, ValueError):
            continue
        check_kind(path, payload, kind)


def require_writable(output: str) -> None:
    """Fail before any compute when the result could not be written: a directory where the file goes, or a folder
    that cannot be made or written."""
    import tempfile
    from pathlib import Path

    folder = Path(output).parent
    if Path(output).is_dir():
        raise CommandError(
            f"cannot write {output}: it is a directory; pass a file path (or move the directory). Nothing was trained."
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise CommandError(
            f"cannot write {output} ({error.strerror or error}); make {folder} writable or choose another results "
            "folder. Nothing was trained."
        ) from None


def refuse_overwriting_inputs(
    inputs: Iterable[str | None], outputs: Iterable[str | None], input_folders: Iterable[str | None] = ()
) -> None:
    """Refuse, before anything is done, an output that is one of the inputs, lies inside an input folder, or is a
    folder (replaced as a whole) holding an input; and two outputs that are the same file. Paths are compared after
    normalisation (`os.path.realpath`: links, `..`, relative and absolute spellings)."""
    files = {os.path.realpath(path): path for path in inputs if path}
    folders = {os.path.realpath(path): path for path in input_folders if path}
    written: dict[str, str] = {}
    for output in (path for path in outputs if path):
        real = os.path.realpath(output)
        clash = (
            files.get(real)
            or folders.get(real)
            or next((given for folder, given in folders.items() if real.startswith(folder + os.sep)), None)
        )
        clash = clash or next((given for path, given in files.items() if path.startswith(real + os.sep)), None)
        if clash is not None:
            raise CommandError(
                f"{output} would overwrite the input {clash}; choose another output path (nothing was written)"
            )
        if real in written:
            raise CommandError(f"{written[real]} and {output} are the same file; give each output its own path")
        written[real] = output


def suite_cell(args: argparse.Namespace, command: str) -> tuple[Any, str, str]:
    """(params of SUITE, EXPERIMENT, METHOD) from a command's positional `cell` arguments; `command` names it in
    the error."""
    from fdabench.config import load_params

    if len(args.cell) != 3:
        raise CommandError(f"{command} takes SUITE EXPERIMENT METHOD")
    suite, experiment, method = args.cell
    return load_params(args.params).for_suite(suite), experiment, method


def cell_arguments(parser: argparse.ArgumentParser, purpose: str) -> None:
    """--params, --target, --seed: which cell of SUITE EXPERIMENT METHOD (`purpose`: the action they serve)."""
    reads(parser.add_argument("--params", default="params.yaml", help=f"{purpose}: the params file"), "params")
    parser.add_argument("--target", help=f"{purpose}: the target (default: the experiment's first)")
    parser.add_argument("--seed", type=int, help=f"{purpose}: the seed (default: the experiment's first)")


def suite_arguments(parser: argparse.ArgumentParser) -> None:
    reads(
        parser.add_argument("--params", default="params.yaml", help="the params file (default: params.yaml)"), "params"
    )
    reads(
        parser.add_argument(
            "--with",
            dest="with_params",
            action="append",
            default=[],
            metavar="FILE",
            help="a params file merged over --params (repeatable), as `snakemake --configfile FILE` merges it: e.g. a "
            "suite of your own that `extends` a shipped one",
        ),
        "params",
    )
    parser.add_argument("--suite", help="the suite to use (default: params `suite`)")
