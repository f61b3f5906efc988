"""Report stage commands: tables, figures, DVC metrics and plot series, published vs ours, and the cells as the runs
of an experiment tracker (DVCLive, MLflow, TensorBoard)."""

from __future__ import annotations

import argparse
import sys

from fdabench.cli.common import CommandError, json_argument, require_json
from fdabench.cli.file_arguments import reads
from fdabench.cli.files import INPUT, OUTPUT, OUTPUT_FOLDER, UPDATED, PathRole
from fdabench.core.readers import FileReadError, read_text


def cmd_table(args: argparse.Namespace) -> int:
    from fdabench.cell.result import IncompleteCellError, MixedCodeError
    from fdabench.core.io import write_json_atomic, write_text_atomic
    from fdabench.jobs.status import unreadable_cells_message
    from fdabench.report.tables import (
        cells_frame,
        html_table,
        markdown_table,
        table_json,
        tidy_table,
        unlabelled_target_methods,
        validation_notes,
    )

    try:
        cells = cells_frame(args.cells, args.metrics, allow_mixed_code=args.allow_mixed_code)
    except MixedCodeError as error:
        print(f"fdabench: {error}", file=sys.stderr)
        return 2
    except IncompleteCellError:
        raise CommandError(unreadable_cells_message(args.cells)) from None
    tidy = tidy_table(cells)
    unlabelled = unlabelled_target_methods(cells)
    withheld = validation_notes(cells)
    if args.csv:
        write_text_atomic(args.csv, tidy.to_csv(index=False, float_format="%.6g"))
    if args.md:
        write_text_atomic(args.md, markdown_table(tidy, args.title, unlabelled, withheld))
    if args.json:
        write_json_atomic(args.json, table_json(tidy))
    if args.html:
        write_text_atomic(args.html, html_table(tidy, args.title, unlabelled, withheld))
    if not (args.csv or args.md or args.json or args.html):
        print(markdown_table(tidy, args.title, unlabelled, withheld))
    return 0


def cmd_metrics(args: argparse.Namespace) -> int:
    from pathlib import Path

    from fdabench.core.io import write_json_atomic

    tables = {
        Path(path).stem: require_json(path, "table", "its table job", kind="fdabench.table")
        for path in sorted(args.tables)
    }
    write_json_atomic(args.output, tables)
    print(f"{len(tables)} tables -> {args.output}")
    return 0


def cmd_figure(args: argparse.Namespace) -> int:
    from fdabench.report.figures import plot_betas, plot_final, plot_rounds, plot_sweep
    from fdabench.reproduction.lookups import published_mark

    families = dict(args.methods) if args.methods else None
    if args.kind in ("shift", "beta", "alpha"):
        plot_sweep(args.cells, args.output, args.kind, args.title, families)
    elif args.kind == "betas":
        plot_betas(args.cells, args.output, args.title)
    elif args.kind == "final":  # the published values marked, from the reproduction package
        plot_final(args.cells, args.output, args.title, families, published_mark)
    else:
        plot_rounds(args.cells, args.output, args.title, families)
    return 0


def cmd_cells_table(args: argparse.Namespace) -> int:
    from fdabench.core.io import write_text_atomic
    from fdabench.report.tables import cells_html

    write_text_atomic(args.html, cells_html(args.cells, args.title))
    return 0


def cmd_plots(args: argparse.Namespace) -> int:
    from fdabench.report.dvc_plots import write_dvc_plots

    rounds, betas = write_dvc_plots(args.cells, args.rounds, args.betas)
    print(f"{rounds} per-round series -> {args.rounds}; {betas} β series -> {args.betas}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from fdabench.report.trackers import MissingExtraError, tracked_runs

    runs = tracked_runs(args.cells)  # every cell read before a tracker's library is loaded or anything written
    try:
        if args.tracker == "dvclive":
            from fdabench.report.trackers.to_dvclive import write_dvclive

            print(f"{len(runs)} cells, {write_dvclive(runs, args.output)} series -> {args.output}")
        elif args.tracker == "tensorboard":
            from fdabench.report.trackers.to_tensorboard import write_tensorboard

            print(f"{write_tensorboard(runs, args.logdir)} runs -> {args.logdir}")
        else:
            from fdabench.report.trackers.to_mlflow import write_mlflow

            written, skipped = write_mlflow(runs, args.tracking_uri, args.experiment)
            print(f"{written} runs logged to MLflow, {skipped} already there")
    except MissingExtraError as error:
        raise CommandError(str(error)) from None
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from fdabench.core.io import write_text_atomic
    from fdabench.reproduction import paper_vs_ours as report

    if args.archive:  # the archive's records instead of cell files (fdabench.cli.archive)
        from fdabench.cli.archive import compare_archive

        return compare_archive(args)
    if not args.cells or not (args.csv and args.md):
        raise CommandError("compare takes cell files with --csv and --md, or --archive ARCHIVE")
    if args.check:
        raise CommandError("--check compares the pages an archive regenerates with the files: give --archive")
    readme = None
    if args.readme:  # read first: a README that cannot take the block is refused before anything is written
        if not args.suite:
            raise SystemExit("fdabench compare: --readme needs --suite (the suite the cells belong to)")
        readme = read_text(args.readme, "the README (--readme)")
        try:
            report.replace_status(readme, "")
        except ValueError as error:
            raise FileReadError(args.readme, str(error)) from None
    table = report.paper_vs_ours(args.cells)
    ranks = report.average_ranks(report.suite_means(args.cells))
    write_text_atomic(args.csv, report.with_gap_causes(table).to_csv(index=False, float_format="%.4g"))
    write_text_atomic(args.md, report.paper_vs_ours_markdown(table, ranks))
    if args.html:
        write_text_atomic(args.html, report.paper_vs_ours_html(table, ranks))
    summary = report.paper_vs_ours_summary(table)
    if args.summary_csv:
        write_text_atomic(args.summary_csv, summary.to_csv(index=False))
    if readme is not None:
        write_text_atomic(args.readme, report.replace_status(readme, report.status_table(summary, args.suite)))
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    import os

    from fdabench.cell.result import IncompleteCellError, MixedCodeError, check_same_code
    from fdabench.config.sweep import SWEEP_DEFAULTS
    from fdabench.core import paths
    from fdabench.core.io import write_text_atomic
    from fdabench.jobs.status import unreadable_cells_message
    from fdabench.report import sweep, sweep_curves, sweep_search, sweep_settings, sweep_warnings
    from fdabench.report.tables import html_page

    rope = SWEEP_DEFAULTS["rope"] if args.rope is None else args.rope
    min_validation = SWEEP_DEFAULTS["min_validation"] if args.min_validation is None else args.min_validation
    if rope < 0 or min_validation < 1:
        raise CommandError("--rope must be >= 0 and --min-validation >= 1")
    try:
        cells = sweep.read_sweep_cells(args.cells)
        if not args.allow_mixed_code:
            check_same_code(dict(zip(args.cells, cells)))
    except MixedCodeError as error:
        raise CommandError(str(error)) from None
    except IncompleteCellError:
        raise CommandError(unreadable_cells_message(args.cells)) from None
    title = args.title or args.suite
    families = sweep.sweep_families(cells)
    summaries = {}
    for rule in args.rules:
        try:
            frame = sweep.sweep_frame(cells, rule, args.early_stopping)
            selected = sweep.select(frame, rule)
        except sweep.SelectionError as error:
            raise CommandError(str(error)) from None
        summary = sweep.summary_table(selected, rule)
        reference = args.reference or summary["method"].iloc[0]
        try:
            tests = sweep.paired_tests(selected, reference)
        except sweep.SelectionError as error:
            raise CommandError(str(error)) from None
        tests = tests.merge(sweep.bayesian_tests(selected, reference, rope), on="method", how="left")
        ranks, friedman, nemenyi = sweep.average_ranks(selected)
        search = None if rule == "last" else sweep_search.search_bootstrap(frame, rule)
        warnings = sweep_warnings.sweep_warnings(frame, selected, rule, search, min_validation)
        chosen = sweep_settings.chosen_settings(selected)
        chosen_tables = (
            sweep_settings.chosen_table(selected),
            sweep_settings.summary_display(sweep_settings.settings_summary(chosen)),
        )
        fill = {"suite": args.suite, "rule": rule}
        figure, curves = paths.fill(paths.SWEEP_FIGURE, **fill), paths.fill(paths.SWEEP_CURVES, **fill)
        sweep.plot_critical_difference(ranks, nemenyi, figure, f"{title} — {rule}: average ranks", families)
        sweep_curves.plot_selected_curves(cells, selected, curves, f"{title} — {rule}: the selected draws")
        table_folder = os.path.dirname(paths.fill(paths.SWEEP_TABLE, ext="md", **fill))
        markdown = sweep.rule_markdown(
            rule,
            title,
            frame,
            summary,
            tests,
            ranks,
            friedman,
            args.early_stopping,
            os.path.relpath(figure, table_folder),
            search=None if search is None else search.intervals,
            chosen=chosen_tables,
            warnings=warnings,
            curves=os.path.relpath(curves, table_folder),
        )
        table = summary
        if search is not None:  # the CSV holds both intervals
            table = summary.merge(search.intervals, on=["experiment", "method", "target"], how="left")
        write_text_atomic(
            paths.fill(paths.SWEEP_TABLE, ext="csv", **fill), table.to_csv(index=False, float_format="%.6g")
        )
        write_text_atomic(paths.fill(paths.SWEEP_TABLE, ext="md", **fill), markdown)
        write_text_atomic(paths.fill(paths.SWEEP_TESTS, **fill), tests.to_csv(index=False, float_format="%.6g"))
        write_text_atomic(paths.fill(paths.SWEEP_CHOSEN, **fill), chosen.to_csv(index=False))
        significance = sweep.significance_table(tests, ranks, summary["metric"].iloc[0])
        tables = [(sweep.layout(summary), sweep.rule_caption(title, rule), True)]
        if search is not None:
            tables.append(
                (sweep.search_layout(summary, search.intervals), "search interval (bootstrap over draws)", True)
            )
        tables += [
            (chosen_tables[0], "chosen settings", True),
            (chosen_tables[1], "chosen settings per method: median and range", True),
            (significance, f"against {reference}, and average ranks", True),
        ]
        page = html_page(
            tables,
            [f"Warning. {warning}" for warning in warnings]
            + sweep.notes(frame, rule, args.early_stopping, summary)
            + [f"Friedman test over the blocks: p = {friedman:.3g}"],
            [
                (curves, "Learning curves of the selected draws."),
                (
                    figure,
                    "Critical-difference diagram: average ranks (1 = best); methods the Nemenyi test does not tell "
                    "apart (α = 0.05) joined by a bar.",
                ),
            ],
        )
        write_text_atomic(paths.fill(paths.SWEEP_TABLE, ext="html", **fill), page)
        summaries[rule] = summary
        print(f"{rule}: {len(frame)} (method, target, trial, draw) values, {len(selected)} selections")
        for warning in warnings:
            print(f"  warning: {warning}")
    tidy = sweep.rules_summary(summaries)
    higher = bool(cells[0]["higher_is_better"])
    write_text_atomic(
        paths.fill(paths.SWEEP_RULES, suite=args.suite, ext="csv"), tidy.to_csv(index=False, float_format="%.6g")
    )
    search_note = sweep.search_note(frame)
    markdown = sweep.summary_markdown(tidy, title, higher, search_note)
    write_text_atomic(paths.fill(paths.SWEEP_RULES, suite=args.suite, ext="md"), markdown)
    pivot = tidy.assign(value=[sweep.format_interval(r.mean, r.ci_low, r.ci_high, r.metric) for r in tidy.itertuples()])
    pivot = pivot.pivot_table(
        index=["experiment", "method"], columns="rule", values="value", aggfunc="first", sort=False
    )
    write_text_atomic(
        paths.fill(paths.SWEEP_RULES, suite=args.suite, ext="html"),
        html_page(
            [(pivot[list(args.rules)], sweep.rules_caption(title), True)],
            ["oracle: " + "an upper bound, selected on the test split; never a result.", search_note],
        ),
    )
    return 0


def _sweep_outputs(args: argparse.Namespace) -> list[tuple[PathRole, str]]:
    """The files `sweep` writes under results/<suite>/."""
    from fdabench.core import paths

    return [(OUTPUT, path) for path in paths.sweep_outputs(args.suite, args.rules)]


def register(sub: argparse._SubParsersAction) -> None:
    """Add this stage's subcommands."""
    p = sub.add_parser("table", help="tabulate cells: tidy CSV, paper-layout Markdown, JSON metrics")
    reads(p.add_argument("cells", type=INPUT, nargs="+", help="cell result files"), "cell")
    p.add_argument("--csv", type=OUTPUT, help="write the tidy table (CSV) here")
    p.add_argument("--md", type=OUTPUT, help="write the paper-layout table (Markdown) here")
    p.add_argument("--json", type=OUTPUT, help="write the metrics (JSON, for dvc metrics) here")
    p.add_argument("--html", type=OUTPUT, help="the Markdown table as an HTML page (what the Snakemake report shows)")
    p.add_argument("--title", help="title shown above the output")
    p.add_argument(
        "--metrics", nargs="+", help="metrics from each cell's finals (default: its primary metric), e.g. accuracy auc"
    )
    p.add_argument(
        "--allow-mixed-code",
        action="store_true",
        help="tabulate cells that ran with different versions of code they share (refused by default)",
    )
    p.set_defaults(handler=cmd_table)

    p = sub.add_parser("figure", help="plot cells")
    p.add_argument(
        "kind",
        choices=["rounds", "final", "betas", "shift", "beta", "alpha"],
        help="rounds: metric per round, a row of panels per method family; final: final metric per method and "
        "target with its seeds and the published value (a table at a glance); betas: auto-weighting β per source "
        "and round; shift: final metric vs the level in the target name; beta (alpha): final metric vs β (α)",
    )
    reads(p.add_argument("cells", type=INPUT, nargs="+", help="cell result files"), "cell")
    p.add_argument("--output", type=OUTPUT, required=True, help="the file to write")
    p.add_argument("--title", help="title shown above the output")
    p.add_argument(
        "--methods",
        type=json_argument,
        help="JSON list of [method, family] pairs, the whole suite's methods in table order: fixes each method's "
        "colour, so it is the same in every figure (default: the given cells' methods)",
    )
    p.set_defaults(handler=cmd_figure)

    p = sub.add_parser("metrics", help="a suite's table JSON files in one file, keyed by table (for dvc metrics)")
    reads(p.add_argument("tables", type=INPUT, nargs="*", help="table JSON files (fdabench table --json)"), "table")
    p.add_argument("--output", type=OUTPUT, required=True, help="the file to write")
    p.set_defaults(handler=cmd_metrics)

    p = sub.add_parser(
        "cells-table", help="every cell with its final metric, device, seconds, code and settings (HTML)"
    )
    reads(p.add_argument("cells", type=INPUT, nargs="+", help="cell result files"), "cell")
    p.add_argument("--html", type=OUTPUT, required=True, help="the HTML page to write")
    p.add_argument("--title", help="title shown above the output")
    p.set_defaults(handler=cmd_cells_table)

    p = sub.add_parser(
        "plots", help="the per-round series `dvc plots` draws: one CSV per experiment and method (β: per source)"
    )
    reads(p.add_argument("cells", type=INPUT, nargs="+", help="cell result files"), "cell")
    p.add_argument(
        "--rounds",
        type=OUTPUT_FOLDER,
        required=True,
        help="folder for rounds/<experiment>/<method>.csv (replaced as a whole)",
    )
    p.add_argument(
        "--betas",
        type=OUTPUT_FOLDER,
        required=True,
        help="folder for betas/<experiment>/<method>/<source>.csv (replaced as a whole)",
    )
    p.set_defaults(handler=cmd_plots)

    p = sub.add_parser(
        "export",
        help="a suite's cells as the runs of an experiment tracker: one run per cell, per-round metrics as steps",
    )
    trackers = p.add_subparsers(dest="tracker", required=True, metavar="TRACKER")
    p = trackers.add_parser(
        "dvclive",
        help="a DVCLive folder (metrics.json: each cell's final metrics; plots/metrics: its per-round series), "
        "what dvc.yaml's report stage declares as metrics and plots",
    )
    reads(p.add_argument("cells", type=INPUT, nargs="+", help="cell result files"), "cell")
    p.add_argument("--output", type=OUTPUT_FOLDER, required=True, help="the DVCLive folder (replaced as a whole)")
    p.set_defaults(handler=cmd_export)
    p = trackers.add_parser("mlflow", help="MLflow runs (needs the mlflow extra: pip install 'fdabench[mlflow]')")
    reads(p.add_argument("cells", type=INPUT, nargs="+", help="cell result files"), "cell")
    p.add_argument(
        "--tracking-uri",
        help="the MLflow tracking store, e.g. sqlite:///mlflow.db or http://host:5000 (default: MLflow's own, "
        "$MLFLOW_TRACKING_URI, else sqlite:///mlflow.db in the current folder)",
    )
    p.add_argument("--experiment", help="the MLflow experiment of every run (default: each cell's suite)")
    p.set_defaults(handler=cmd_export)
    p = trackers.add_parser(
        "tensorboard",
        help="a TensorBoard log folder (needs the tensorboard extra: pip install 'fdabench[tensorboard]')",
    )
    reads(p.add_argument("cells", type=INPUT, nargs="+", help="cell result files"), "cell")
    p.add_argument(
        "--logdir", type=OUTPUT_FOLDER, required=True, help="the log folder, one run per cell (replaced as a whole)"
    )
    p.set_defaults(handler=cmd_export)

    p = sub.add_parser(
        "sweep",
        help="a sweep's cells read with each selection rule: results/<suite>/sweep_<rule>.{csv,md,html}, paired tests, "
        "average ranks and a critical-difference diagram, and every rule side by side (sweep_rules.*)",
    )
    reads(
        p.add_argument(
            "cells", type=INPUT, nargs="+", help="the sweep's cell result files (every draw, trial and fold)"
        ),
        "cell",
    )
    p.add_argument("--suite", required=True, help="the suite: outputs go to results/<suite>/")
    p.add_argument(
        "--rules",
        nargs="+",
        default=["source_val", "target_val", "last", "oracle"],
        choices=["source_val", "target_val", "last", "oracle"],
        help="the selection rules (default: all)",
    )
    p.add_argument("--reference", help="the method every other is compared with (default: the first)")
    p.add_argument("--early-stopping", action="store_true", help="rules also pick the round by validation")
    p.add_argument(
        "--rope",
        type=float,
        help="region of practical equivalence of the Bayesian comparison, in the table's unit (default: the sweep "
        "setting rope's default)",
    )
    p.add_argument(
        "--min-validation",
        type=int,
        help="warn when target_val selects on fewer target validation samples per cell (default: the sweep setting "
        "min_validation's default)",
    )
    p.add_argument("--title", help="title shown above the output")
    p.add_argument("--allow-mixed-code", action="store_true", help="read cells that ran with different code")
    p.set_defaults(handler=cmd_sweep, derived_files=_sweep_outputs)

    p = sub.add_parser("compare", help="published vs ours for every cell with a published number")
    reads(p.add_argument("cells", type=INPUT, nargs="*", help="cell result files (or --archive)"), "cell")
    reads(
        p.add_argument(
            "--archive",
            type=INPUT,
            help="read the cells' records in this reproduction archive instead of cell files (docs/reproduction.md), "
            "nothing trained; without --csv and --md, write the archive's committed pages: paper_vs_ours.{csv,md,html} "
            "beside it, the summary <archive folder>.csv and the README's status block when it names the suite",
        ),
        "archive",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="with --archive: write nothing; exit with status 1 unless every output equals what the archive "
        "regenerates (CI's check of the committed pages)",
    )
    p.add_argument("--csv", type=OUTPUT, help="the CSV table to write")
    p.add_argument("--md", type=OUTPUT, help="the Markdown table to write")
    p.add_argument("--html", type=OUTPUT, help="also as an HTML page (what the Snakemake report shows)")
    p.add_argument(
        "--summary-csv",
        type=OUTPUT,
        help="also the per-table summary (rows matched, on which settings, within 3 points)",
    )
    reads(
        p.add_argument(
            "--readme", type=UPDATED, help="rewrite the reproduction-status block of this README from the summary"
        ),
        "markdown",
    )
    p.add_argument("--suite", help="the suite the cells belong to (named in the README block)")
    p.set_defaults(handler=cmd_compare)
