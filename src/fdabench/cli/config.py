"""Commands about params.yaml and its cells: validate, check-method, schema, cells, status."""

from __future__ import annotations

import argparse
import json
import sys

from fdabench.cli.common import CommandError, json_argument, suite_arguments
from fdabench.cli.files import OUTPUT


def cmd_validate(args: argparse.Namespace) -> int:
    from fdabench.config import ParamsError
    from fdabench.core.plugins import loaded_plugins
    from fdabench.jobs.validation import load_checked_params

    params = load_checked_params(args.params, layers=args.with_params, suite=args.suite)
    if params.device_problem():
        raise ParamsError(f"{args.params}: {params.device_problem()}")
    cells = list(params.cells())
    print(
        f"{args.params}: valid; suite {params.suite_name!r}: {len(params.experiment_names())} experiments, "
        f"{len(cells)} cells"
    )
    for line in loaded_plugins():
        print(f"plugin {line}")
    return 0


def cmd_check_method(args: argparse.Namespace) -> int:
    from fdabench.testing import check_method, failures, format_results

    try:
        results = check_method(args.name, args.hparams)
    except (KeyError, ValueError) as error:
        raise CommandError(str(error).strip("'\"")) from None
    print(format_results(args.name, results))
    return 1 if failures(results) else 0


def cmd_schema(args: argparse.Namespace) -> int:
    from fdabench.config import params_schema
    from fdabench.core.io import write_text_atomic

    text = json.dumps(params_schema(), indent=2) + "\n"
    if args.output:
        write_text_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_cells(args: argparse.Namespace) -> int:
    from fdabench.jobs.validation import load_checked_params

    for cell in load_checked_params(args.params, layers=args.with_params, suite=args.suite).cells():
        print(cell.path)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from fdabench.jobs.status import STATES, format_status, suite_status
    from fdabench.jobs.validation import load_checked_params

    if args.cell:
        return _cell_status(args)
    params = load_checked_params(args.params, layers=args.with_params, suite=args.suite)
    states = suite_status(params)
    print(format_status(params, states, show=STATES if args.all else STATES[1:]))
    return 1 if args.check and any(state.state != "current" for state in states) else 0


def _cell_status(args: argparse.Namespace) -> int:
    """`fdabench status CELL`: one cell in full (`fdabench.jobs.status.format_cell`)."""
    from fdabench.cell.plugin_scope import cell_code
    from fdabench.jobs.status import cell_state, format_cell, parse_cell_name
    from fdabench.jobs.validation import load_checked_params

    try:
        suite, key = parse_cell_name(args.cell)
    except ValueError as error:
        raise CommandError(str(error)) from None
    if suite and args.suite and suite != args.suite:
        raise CommandError(f"{args.cell} is a cell of suite {suite}, not of --suite {args.suite}")
    params = load_checked_params(args.params, layers=args.with_params, suite=suite or args.suite)
    if key not in set(params.cell_keys()):
        raise CommandError(
            f"{args.cell}: suite {params.suite_name} has no such cell; `fdabench cells` lists the suite's cells"
        )
    state = cell_state(params.cell(*key))
    print(format_cell(state, cell_code(state.cell.config).to_json()))
    return 1 if args.check and state.state != "current" else 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this stage's subcommands."""
    p = sub.add_parser("validate", help="validate params.yaml and count its cells")
    suite_arguments(p)
    p.set_defaults(handler=cmd_validate)

    p = sub.add_parser(
        "check-method",
        help="check a registered round-loop method against the properties of its kind (fdabench.testing): β = 0, "
        "order of sources, zero and tiny updates, privacy boundary, resume",
    )
    p.add_argument("name", help="a registered method (shipped or a plugin's)")
    p.add_argument("--hparams", type=json_argument, help="hyper-parameters as JSON (defaults fill the rest)")
    p.set_defaults(handler=cmd_check_method)

    p = sub.add_parser("schema", help="print (or write) the JSON schema of params.yaml")
    p.add_argument("--output", type=OUTPUT, help="write here instead of printing")
    p.set_defaults(handler=cmd_schema)

    p = sub.add_parser("cells", help="list the cell result paths of the active suite")
    suite_arguments(p)
    p.set_defaults(handler=cmd_cells)

    p = sub.add_parser(
        "status",
        help="which cells of the active suite are current, edited (changed since their job wrote them), stale (other "
        "config or code), failed or missing; or one cell in full, with its resolved configuration",
    )
    suite_arguments(p)
    p.add_argument(
        "cell",
        nargs="?",
        help="one cell, as its training job is named (suite/experiment/method/target/seed<N>, the suite optional) or "
        "its result path: its state, files, resolved configuration and code fingerprint",
    )
    p.add_argument("--all", action="store_true", help="list current cells too")
    p.add_argument("--check", action="store_true", help="exit with status 1 unless every cell is current")
    p.set_defaults(handler=cmd_status)
