"""`fdabench flower`: one cell through Flower (export, simulate, deploy, app)."""

from __future__ import annotations

import argparse
import sys

from fdabench.cli.common import bounded, cell_arguments, suite_cell
from fdabench.cli.file_arguments import reads
from fdabench.cli.files import INPUT_FOLDER, OUTPUT, OUTPUT_ROOT, PathRole


def cmd_flower(args: argparse.Namespace) -> int:
    """fdabench flower export|simulate|deploy|app: one cell of a round-loop suite through Flower."""
    try:
        import flwr  # noqa: F401
    except ImportError:
        print('fdabench: the flower commands need Flower: uv pip install -e ".[flower]"', file=sys.stderr)
        return 2
    from fdabench.config.lookup import MissingCellInputs
    from fdabench.core.errors import ParamsError
    from fdabench.core.readers import FileReadError
    from fdabench.flower import deploy, simulation
    from fdabench.flower.faults import Fault
    from fdabench.flower.transport import SiteFailure

    try:
        if args.action == "export":
            params, experiment, method = suite_cell(args, "flower export")
            manifest = simulation.export_cell(params, experiment, method, args.target, args.seed, args.output)
            for site in manifest["sites"]:
                print(f"{args.output}/{site['file']}: {site['role']} {site['name']}, {site['samples']} samples")
            return 0
        if len(args.cell) != 1:
            print(f"fdabench: flower {args.action} takes the folder `flower export` wrote", file=sys.stderr)
            return 2
        folder = args.cell[0]
        if args.result is None or (args.action == "app" and args.output is None):
            needed = "--result and --output" if args.action == "app" else "--result"
            print(f"fdabench: flower {args.action} needs {needed}", file=sys.stderr)
            return 2
        policy = (args.dropout, args.timeout, args.wait_seconds)
        if args.action == "app":
            options = simulation.run_options(folder, args.result, *policy, threads=args.threads)
            options.pop("site-files")
            app = deploy.write_app(args.output, options)
            print(f"{app}: flwr run {app} <connection>  (each SuperNode: --node-config \"site-data='<its file>'\")")
            return 0
        if args.action == "simulate":
            faults = [Fault.parse(text) for text in args.fault or []]
            history = simulation.simulate(
                folder, args.result, *policy, threads=args.threads, faults=faults, sites_at_once=args.sites_at_once
            )
        else:
            history = deploy.deploy_locally(folder, args.result, *policy, threads=args.threads, work=args.work)
    except (FileReadError, ParamsError):
        raise  # a bad input file or params: one line and exit status 2, as in every command
    except (MissingCellInputs, SiteFailure, ValueError, FileNotFoundError, RuntimeError, TimeoutError) as error:
        print(f"fdabench: {error}", file=sys.stderr)
        return 1
    last = history["rounds"][-1]
    print(f"{args.result}: {len(history['rounds'])} rounds, final {history['metric']} {last[history['metric']]:.4f}")
    return 0


def _exported_folder(args: argparse.Namespace) -> list[tuple[PathRole, str]]:
    """simulate, deploy, app: the folder `flower export` wrote is their input (export's ARGs name a cell)."""
    return [] if args.action == "export" else [(INPUT_FOLDER, path) for path in args.cell[:1]]


def register(sub: argparse._SubParsersAction) -> None:
    """Add this stage's subcommands."""
    from fdabench.flower import DEFAULT_DROPOUT, DEFAULT_TIMEOUT_SECONDS, DEFAULT_WAIT_SECONDS, DROPOUT_POLICIES

    p = sub.add_parser(
        "flower",
        help="one cell through Flower: export its site files, run them on Flower's simulation engine or a local "
        "deployment (a process per site), or write the Flower app for a deployment across machines",
    )
    p.add_argument("action", choices=["export", "simulate", "deploy", "app"], help="what to do with the cell")
    reads(
        p.add_argument(
            "cell", nargs="+", metavar="ARG", help="export: SUITE EXPERIMENT METHOD; others: the exported folder"
        ),
        "flower_export",
    )
    cell_arguments(p, "export")
    p.add_argument("--output", type=OUTPUT_ROOT, help="export: the folder for the site files; app: the app folder")
    p.add_argument("--result", type=OUTPUT, help="simulate, deploy, app: the result file the server writes")
    p.add_argument("--dropout", choices=DROPOUT_POLICIES, default=DEFAULT_DROPOUT, help="what a missing site does")
    p.add_argument(
        "--timeout",
        type=bounded("timeout_seconds", float),
        default=DEFAULT_TIMEOUT_SECONDS,
        help="seconds a site has to answer a message",
    )
    p.add_argument(
        "--wait-seconds",
        type=bounded("wait_seconds", float),
        default=DEFAULT_WAIT_SECONDS,
        help="--dropout wait: how long to keep asking",
    )
    p.add_argument(
        "--threads", type=bounded("threads_per_cell"), default=1, help="torch threads of the server and of each site"
    )
    p.add_argument(
        "--sites-at-once",
        type=bounded("sites_at_once"),
        help="simulate: how many sites train at a time, each in a process of its own (default: one per CPU)",
    )
    p.add_argument("--work", type=OUTPUT_ROOT, help="deploy: keep the processes' logs here")
    p.add_argument(
        "--fault",
        action="append",
        metavar="SITE:ROUND:KIND[:TIMES]",
        help="simulate: a planned fault (drop, nan, shape, drop-eval) to rehearse the dropout policy "
        "(fdabench.flower.faults)",
    )
    p.set_defaults(handler=cmd_flower, derived_files=_exported_folder)
