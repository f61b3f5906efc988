"""What every command shares: the one-line error, JSON arguments, input checks, the suite and cell arguments
(outputs are checked by `fdabench.cli.files`)."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from typing import Any

from fdabench.cli.file_arguments import reads
from fdabench.cli.files import INPUT, INPUT_FOLDER


class CommandError(Exception):
    """An expected failure of a command: reported as one line, exit status 2."""


def json_argument(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not valid JSON: {error}") from None


def bounded(name: str, kind: type = int) -> Callable[[str], Any]:
    """An argparse type: a `kind` (int: written as one, or as a whole float such as 1.1e7) within the bound the params
    schema declares for `name` (`fdabench.config.schema.option_schema`: a setting the option shadows, or a CLI
    option's own), so that both refuse the same values, naming the option, before anything runs. The schema is
    imported when the option is given, so every --help stays quick."""

    def parse(text: str) -> Any:
        try:
            value = float(text) if kind is float else int(text) if text.strip().lstrip("+-").isdigit() else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if kind is int:
            if not (isinstance(value, int) or value.is_integer()):
                raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
            value = int(value)
        from fdabench.config.schema import value_problem

        problem = value_problem(name, value)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


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


def suite_cell(args: argparse.Namespace, command: str) -> tuple[Any, str, str]:
    """(params of SUITE, EXPERIMENT, METHOD) from a command's positional `cell` arguments; `command` names it in
    the error."""
    from fdabench.jobs.validation import load_checked_params

    if len(args.cell) != 3:
        raise CommandError(f"{command} takes SUITE EXPERIMENT METHOD")
    suite, experiment, method = args.cell
    return load_checked_params(args.params).for_suite(suite), experiment, method


def cell_arguments(parser: argparse.ArgumentParser, purpose: str) -> None:
    """--params, --target, --seed: which cell of SUITE EXPERIMENT METHOD (`purpose`: the action they serve)."""
    reads(
        parser.add_argument("--params", type=INPUT, default="params.yaml", help=f"{purpose}: the params file"), "params"
    )
    parser.add_argument("--target", help=f"{purpose}: the target (default: the experiment's first)")
    parser.add_argument("--seed", type=bounded("seeds"), help=f"{purpose}: the seed (default: the experiment's first)")


def problem_arguments(parser: argparse.ArgumentParser) -> None:
    """--prepared, --partition: the prepared dataset and the partition a cell's problem is built from."""
    reads(
        parser.add_argument(
            "--prepared", type=INPUT_FOLDER, required=True, help="the prepared dataset directory (fdabench prepare)"
        ),
        "prepared",
    )
    reads(
        parser.add_argument("--partition", type=INPUT, required=True, help="the partition JSON (fdabench partition)"),
        "partition",
    )


def suite_arguments(parser: argparse.ArgumentParser) -> None:
    reads(
        parser.add_argument(
            "--params", type=INPUT, default="params.yaml", help="the params file (default: params.yaml)"
        ),
        "params",
    )
    reads(
        parser.add_argument(
            "--with",
            dest="with_params",
            type=INPUT,
            action="append",
            default=[],
            metavar="FILE",
            help="a params file merged over --params (repeatable), as `snakemake --configfile FILE` merges it: e.g. a "
            "suite of your own that `extends` a shipped one",
        ),
        "params",
    )
    parser.add_argument("--suite", help="the suite to use (default: params `suite`)")
