"""`fdabench bench`: the benchmarks."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fdabench.cli.common import CommandError, bounded, cell_arguments, suite_cell
from fdabench.cli.file_arguments import reads
from fdabench.cli.files import INPUT, OUTPUT, OUTPUT_ROOT, UPDATED


def cmd_bench_cell(args: argparse.Namespace) -> int:
    from fdabench.config.lookup import MissingCellInputs
    from fdabench.core.io import write_json_atomic
    from fdabench.speed.cell import bench_cell, compare_cohort

    params, experiment, method = suite_cell(args, "bench cell")
    cell = (params, experiment, method, args.target, args.seed, args.rounds, args.threads or 1)
    device = None if args.device == "all" else args.device
    try:
        if args.cohort == "both":
            result = compare_cohort(*cell, device, args.repeats or 2)
        else:
            result = bench_cell(*cell, device, args.cohort)
    except (MissingCellInputs, ValueError) as error:
        print(f"fdabench: {error}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=1))
    if args.output:
        write_json_atomic(args.output, result)
    return 0


def cmd_bench_cells(args: argparse.Namespace) -> int:
    from fdabench.config.lookup import MissingCellInputs
    from fdabench.core.io import write_json_atomic
    from fdabench.speed.cells import bench_cells

    params, experiment, method = suite_cell(args, "bench cells")
    device = None if args.device == "all" else args.device
    try:
        result = bench_cells(
            params, experiment, method, args.targets, args.seeds, args.draws, args.repeats or 2, device
        )
    except (MissingCellInputs, ValueError) as error:
        print(f"fdabench: {error}", file=sys.stderr)
        return 2
    print(json.dumps({k: v for k, v in result.items() if k != "finals"}, indent=1))
    if args.output:
        write_json_atomic(args.output, result)
    return 0


def cmd_bench_gpu(args: argparse.Namespace) -> int:
    from fdabench.core.io import write_text_atomic
    from fdabench.core.readers import FileReadError, read_json, read_text
    from fdabench.speed.gpu import report, run

    if args.worker:  # one packed cell's process, started by the packing stage
        from fdabench.speed.gpu.stages import worker

        if not args.output:
            raise CommandError("bench gpu --worker SPEC needs --output FILE")
        worker(args.worker, args.output)
        return 0
    page = None
    if args.docs:  # read first: a page that cannot take the block is refused before anything is measured or written
        page = read_text(args.docs, "a docs page (--docs)")
        try:
            report.fill_docs(page, "")
        except ValueError as error:
            raise FileReadError(args.docs, str(error)) from None
    if args.source:
        try:
            result = report.validate_result(read_json(args.source, "a GPU bench result (bench gpu --from)"))
        except FileReadError:
            raise
        except ValueError as error:
            raise FileReadError(args.source, str(error)) from None
        paths = run.write_outputs(args.output_dir, result)
    else:
        from fdabench.jobs.validation import load_checked_params

        budget = run.DEFAULT_BUDGET if args.budget_seconds is None else args.budget_seconds
        result = run.run_gpu_bench(load_checked_params(args.params), args.output_dir, args.dry_run, budget)
        paths = (Path(args.output_dir) / run.JSON_NAME, Path(args.output_dir) / run.MARKDOWN_NAME)
    if page is not None:
        write_text_atomic(args.docs, report.fill_docs(page, report.docs_block(result)))
    print(read_text(paths[1], "the bench report"))
    statuses = {name: stage["status"] for name, stage in result["stages"].items()}
    print(f"wrote {paths[0]} and {paths[1]}; stages: " + ", ".join(f"{n} {s}" for n, s in statuses.items()))
    return 0 if all(status in ("ok", "skipped") for status in statuses.values()) else 1


def cmd_bench(args: argparse.Namespace) -> int:
    from fdabench.core.io import write_text_atomic
    from fdabench.speed import aggregation as bench

    if args.what == "cell":
        return cmd_bench_cell(args)
    if args.what == "cells":
        return cmd_bench_cells(args)
    if args.what == "batching":
        from fdabench.speed.cells import batching_support, batching_table

        print(batching_table(batching_support()))
        return 0
    if args.what == "gpu":
        return cmd_bench_gpu(args)
    if args.what == "aggregation":
        import torch

        from fdabench.core.devices import cuda_available

        if args.threads:
            torch.set_num_threads(args.threads)
        devices = ["cpu"] + (["cuda"] if cuda_available() else []) if args.device == "all" else [args.device]
        frame = bench.aggregation_frame(args.sources, args.sizes, devices, args.repeats or 5, args.batches)
    elif args.what == "memory":
        frame = bench.memory_frame(args.sources[0], args.sizes[0], args.batches)
    else:
        import pandas as pd

        frame = pd.DataFrame(bench.startup_rows(args.repeats or 5))
    print(frame.to_markdown(index=False, floatfmt=".4g"))
    if args.output:
        write_text_atomic(args.output, frame.to_csv(index=False))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this stage's subcommands."""
    p = sub.add_parser(
        "bench",
        help="benchmarks: aggregation time vs the memory-bandwidth floor; auto-weighting memory; training-job "
        "start-up; a few rounds of one cell against centralised training (cell SUITE EXPERIMENT METHOD); a GPU "
        "machine checked and measured within a time budget (gpu)",
    )
    p.add_argument("what", choices=["aggregation", "memory", "startup", "cell", "cells", "gpu"], help="which benchmark")
    p.add_argument(
        "cell",
        nargs="*",
        metavar="SUITE EXPERIMENT METHOD",
        help="cell: which cell (its first target and seed); cells: which cells (every target and seed, or those given)",
    )
    p.add_argument("--targets", nargs="+", help="cells: the targets (default: the experiment's)")
    p.add_argument(
        "--seeds", type=bounded("seeds"), nargs="+", help="cells: the seeds (default: the suite's; any others too)"
    )
    p.add_argument("--draws", type=bounded("count"), help="cells: the method's first K sweep draws (a sweep suite)")
    cell_arguments(p, "cell")
    p.add_argument(
        "--rounds", type=bounded("rounds"), default=3, help="cell: FDA rounds to time, after at most one warm-up round"
    )
    p.add_argument(
        "--cohort",
        choices=["auto", "on", "off", "both"],
        help="cell: the train setting cohort (default: the cell's); both: off and on alternately, compared",
    )
    p.add_argument("--sources", type=bounded("count"), nargs="+", default=[2, 10, 50], help="numbers of sources N")
    p.add_argument(
        "--sizes",
        type=bounded("count"),
        nargs="+",
        default=[100_000, 1_000_000, 11_689_512],
        help="update sizes m (1.1e7 is ResNet-18)",
    )
    p.add_argument("--batches", type=bounded("count"), default=8, help="target batch updates B for auto-weighting")
    p.add_argument("--device", choices=["cpu", "cuda", "all"], default="all", help="all: CPU, and CUDA when present")
    p.add_argument(
        "--repeats",
        type=bounded("count"),
        help="aggregation, startup: timings of each (default 5); cell --cohort both, cells: runs of each mode "
        "(default 2)",
    )
    p.add_argument("--threads", type=bounded("threads_per_cell"), help="torch CPU threads (default: torch's)")
    p.add_argument("--output", type=OUTPUT, help="also write the table as CSV (cell, cells: the measurements as JSON)")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="gpu: every stage on the CPU at toy sizes (CI; checks the code paths and the output, measures nothing)",
    )
    p.add_argument(
        "--output-dir",
        type=OUTPUT_ROOT,
        default="results/bench_gpu",
        help="gpu: where bench_gpu.json and bench_gpu.md go (default results/bench_gpu)",
    )
    p.add_argument(
        "--budget-seconds",
        type=bounded("budget_seconds", float),
        help="gpu: the time the stages may take together (default 480); a stage that no longer fits is skipped, "
        "with the reason recorded",
    )
    reads(
        p.add_argument(
            "--from",
            dest="source",
            type=INPUT,
            metavar="JSON",
            help="gpu: measure nothing; check this bench_gpu.json and write its Markdown (with --docs, the page's "
            "block)",
        ),
        "bench_gpu",
    )
    reads(
        p.add_argument(
            "--docs",
            type=UPDATED,
            metavar="PAGE",
            help="gpu: also fill the gpu-bench block of this Markdown page (docs/benchmarks.md) with the result",
        ),
        "markdown",
    )
    p.add_argument("--worker", type=INPUT, metavar="SPEC", help=argparse.SUPPRESS)  # gpu: one packed cell's process
    p.set_defaults(handler=cmd_bench)
