"""`fdabench` command line: the entry points the Snakemake rules call. Each stage's module registers its own
subcommands and handlers (config, data, train, report, bench, flower, theory); a handler parses nothing itself,
calls the library and writes what it returns (library imports are deferred so that data jobs never load torch
and every `--help` answers at once)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence

from fdabench.cli import archive, bench, config, data, flower, report, theory, train
from fdabench.cli.common import CommandError
from fdabench.cli.files import guarded
from fdabench.jobs.forkserver import SERVED

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
    """Run a command. Expected failures (invalid params, a bad or missing file, bad JSON, an unknown name, an output
    over an input) are one line naming the file or value and the fix, exit status 2; --debug shows their traceback
    instead. SIGINT and SIGTERM end any command with one line and exit status 130 or 143; an output not finished by
    then is not written (`fdabench.core.io`)."""
    previous = {number: signal.signal(number, _interrupt) for number in INTERRUPTS}
    # over the file-size limit (ulimit -f), a write fails with EFBIG, reported by the writer, instead of killing us
    previous[signal.SIGXFSZ] = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        return _run(list(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt as interrupt:
        number = getattr(interrupt, "signal", signal.SIGINT)
        print(
            f"fdabench: interrupted by {signal.Signals(number).name}; outputs not finished were not written",
            file=sys.stderr,
        )
        return 128 + number
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


#: the signals that end a command with one line (exit status 128 + the signal's number)
INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived: raised where the command is, so that every writer's cleanup runs."""

    def __init__(self, number: int):
        super().__init__(number)
        self.signal = number


def _interrupt(number: int, _frame: object) -> None:
    raise Interrupted(number)


def _run(argv: list[str]) -> int:
    if argv[:1] and argv[0] in SERVED:
        # Every job of the workflow starts here: hand the command line to the fork server before anything else
        # is built; its child parses it, as below, and reports the same errors and exit status.
        from fdabench.jobs import forkserver

        if forkserver.enabled():
            code = forkserver.run(argv)
            if code is not None:
                return code
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "forkserver":
        from fdabench.jobs import forkserver

        forkserver.serve(args.socket, handler=main)
        return 0
    if args.command in SERVED and argv[:1] != [args.command]:  # `fdabench --debug train ...`
        from fdabench.jobs import forkserver

        if forkserver.enabled():
            code = forkserver.run(argv)
            if code is not None:
                return code
    try:
        with guarded(parser, args):  # the declared outputs checked; the inputs protected from every write
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
