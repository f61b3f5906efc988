"""What every command shares: the one-line error, JSON arguments, input and output checks, the suite and cell
arguments."""

from __future__ import annotations

import argparse
import json
from typing import Any


class CommandError(Exception):
    """An expected failure of a command: reported as one line, exit status 2."""


def json_argument(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not valid JSON: {error}") from None


def require_json(path: str, what: str, job: str) -> None:
    """Refuse an input file that is missing, empty or truncated, naming it and the job that makes it again."""
    from fdabench.core.io import read_json

    try:
        read_json(path)
    except FileNotFoundError:
        raise CommandError(f"{path}: no such file; run {job} first (snakemake does)") from None
    except (OSError, ValueError) as error:
        raise CommandError(
            f"{path}: {what} file is not readable JSON ({error}); delete it and rerun {job} (snakemake makes it again)"
        ) from None


def require_writable(output: str) -> None:
    """Fail before any compute when the result could not be written."""
    import tempfile
    from pathlib import Path

    folder = Path(output).parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise SystemExit(
            f"fdabench: cannot write {output} ({error.strerror or error}); make {folder} writable or choose another "
            "results folder. Nothing was trained."
        ) from None


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
    parser.add_argument("--params", default="params.yaml", help=f"{purpose}: the params file")
    parser.add_argument("--target", help=f"{purpose}: the target (default: the experiment's first)")
    parser.add_argument("--seed", type=int, help=f"{purpose}: the seed (default: the experiment's first)")


def suite_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--params", default="params.yaml", help="the params file (default: params.yaml)")
    parser.add_argument(
        "--with",
        dest="with_params",
        action="append",
        default=[],
        metavar="FILE",
        help="a params file merged over --params (repeatable), as `snakemake --configfile FILE` merges it: e.g. a "
        "suite of your own that `extends` a shipped one",
    )
    parser.add_argument("--suite", help="the suite to use (default: params `suite`)")
