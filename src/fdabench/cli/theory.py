"""`fdabench theory init|report`: the synthetic theory check."""

from __future__ import annotations

import argparse

from fdabench.cli.common import bounded, json_argument, problem_arguments, require_json, require_prepared
from fdabench.cli.file_arguments import reads
from fdabench.cli.files import INPUT, OUTPUT


def cmd_theory_init(args: argparse.Namespace) -> int:
    from fdabench.cell.setup import CellInputError
    from fdabench.core.formats import THEORY_INIT
    from fdabench.core.io import write_json_atomic
    from fdabench.theory.init import run_theory_init

    require_prepared(args.prepared)
    require_json(args.partition, "partition", "its partition job", kind="fdabench.partition")
    try:
        record = run_theory_init(args.cell, args.prepared, args.partition, args.beta, args.draws, args.threads)
    except CellInputError as error:
        raise SystemExit(str(error)) from None
    write_json_atomic(args.output, {"format": THEORY_INIT, **record})
    print(
        f"{record['target']} seed {record['seed']}: d2 {record['d2']:.4g} sigma2 {record['sigma2']:.4g} -> predicted "
        f"{record['predicted_winner']}"
    )
    return 0


def cmd_theory_report(args: argparse.Namespace) -> int:
    from fdabench.cell.reading import read_cells
    from fdabench.core.io import write_text_atomic
    from fdabench.theory.report import plot_theory, theory_frame, theory_markdown

    initial = [require_json(p, "theory init", "its theory_init job", kind="fdabench.theory_init") for p in args.initial]
    frame = theory_frame(initial, list(read_cells(args.cells).values()), args.roles)
    write_text_atomic(args.csv, frame.to_csv(index=False, float_format="%.6g"))
    write_text_atomic(args.md, theory_markdown(frame, args.title))
    plot_theory(frame, args.png, args.title)
    print(
        f"agreement between predicted and actual fixed-beta winners: {frame['agree'].mean():.1%} of {len(frame)} "
        f"settings"
    )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this stage's subcommands."""
    from fdabench.config.theory_roles import DEFAULT_DRAWS  # imports nothing: every --help stays quick

    theory = sub.add_parser("theory", help="the synthetic theory check (Delta error at initialisation vs training)")
    theory_sub = theory.add_subparsers(dest="theory_command", required=True, metavar="STEP")
    p = theory_sub.add_parser("init", help="d², σ², τ²d² and the rules' Delta errors at a cell's initial parameters")
    p.add_argument(
        "--cell", type=json_argument, required=True, help="a resolved cell configuration (JSON): model, seed, target"
    )
    problem_arguments(p)
    p.add_argument("--beta", type=float, default=0.5, help="β of FedDA and FedGP")
    p.add_argument("--draws", type=bounded("draws"), default=DEFAULT_DRAWS, help="Monte Carlo draws for σ²")
    p.add_argument("--threads", type=bounded("threads_per_cell"), default=1, help="torch CPU threads")
    p.add_argument("--output", type=OUTPUT, required=True, help="the file to write")
    p.set_defaults(handler=cmd_theory_init)
    p = theory_sub.add_parser("report", help="heatmaps, table and agreement rate from init files and cells")
    reads(
        p.add_argument("--initial", type=INPUT, nargs="+", required=True, help="files written by `theory init`"),
        "theory_init",
    )
    reads(p.add_argument("--cells", type=INPUT, nargs="+", required=True, help="cell files of the rules"), "cell")
    p.add_argument(
        "--roles",
        type=json_argument,
        required=True,
        help='JSON {"fedda": "<method>", ...} for the roles '
        "target_only, source_only, fedda, fedgp, fedda_auto, fedgp_auto",
    )
    p.add_argument("--csv", type=OUTPUT, required=True, help="the CSV table to write")
    p.add_argument("--md", type=OUTPUT, required=True, help="the Markdown table to write")
    p.add_argument("--png", type=OUTPUT, required=True, help="the heatmap figure to write (PNG)")
    p.add_argument("--title", help="title shown above the output")
    p.set_defaults(handler=cmd_theory_report)
