"""`fdabench` command line: the entry points the Snakemake rules call. Each stage's module registers its own
subcommands and handlers (config, data, train, report, bench, flower, theory); a handler parses nothing itself,
calls the library and writes what it returns (library imports are deferred so that data jobs never load torch
and every `--help` answers at once)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from fdabench.cli import archive, bench, config, data, flower, report, theory, train
from fdabench.cli.common import CommandError

STAGES = (config, data, train, report, archive, bench, flower, theory)


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose refusal is one line (argparse prints the whole usage first), exit status 2; its
    subcommands' parsers are of this class too."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` shows the usage)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="fdabench", description="Federated domain adaptation experiments (called by the Snakemake rules)."
    )
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an expected failure instead of its one line"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for stage in STAGES:
        stage.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command. Expected failures (invalid params, a bad or missing file, bad JSON, an unknown name) are
    one line naming the file or value and the fix, exit status 2; --debug shows their traceback instead."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["train"]:
        # Every training job starts here: hand the command line to the fork server before anything else is
        # built; its child parses it, as below, and reports the same errors and exit status.
        from fdabench.jobs import forkserver

        if forkserver.enabled():
            code = forkserver.run(argv)
            if code is not None:
                return code
    args = build_parser().parse_args(argv)
    if args.command == "forkserver":
        from fdabench.jobs import forkserver

        forkserver.serve(args.socket, handler=main)
        return 0
    if args.command == "train" and argv[:1] != ["train"]:  # `fdabench --debug train ...`
        from fdabench.jobs import forkserver

        if forkserver.enabled():
            code = forkserver.run(argv)
            if code is not None:
                return code
    try:
        code = args.handler(args)
        sys.stdout.flush()  # a closed pipe (fdabench status | head) is reported here, not at exit
        return code
    except BrokenPipeError:
        # the reader stopped reading (e.g. `head`): nothing left to say; keep the exit quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except EXPECTED_ERRORS as error:
        if args.debug:
            raise
        message = str(error) if not isinstance(error, OSError) or not error.filename else _os_error(error)
        print(f"fdabench: {message}", file=sys.stderr)
        return 2


def _os_error(error: OSError) -> str:
    return f"{error.filename}: {error.strerror or error}; check the path (--debug shows where it failed)"


def _expected_errors() -> tuple[type[BaseException], ...]:
    from fdabench.core.errors import ParamsError
    from fdabench.core.registry import UnknownNameError

    # ValueError covers bad JSON and the library's refusals of bad data (each names the file and the fix)
    return (CommandError, ParamsError, UnknownNameError, OSError, ValueError)


EXPECTED_ERRORS = _expected_errors()


if __name__ == "__main__":
    sys.exit(main())
