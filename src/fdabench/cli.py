"""`fdabench` command line: the entry points the Snakemake rules call. Each command parses its arguments,
calls the library and writes what it returns (library imports are deferred so that data jobs never load
torch and every `--help` answers at once)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any


class CommandError(Exception):
    """An expected failure of a command: reported as one line, exit status 2."""


def _json_argument(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not valid JSON: {error}") from None


def cmd_validate(args: argparse.Namespace) -> int:
    from fdabench.config import ParamsError, load_params
    from fdabench.plugins import loaded_plugins

    params = load_params(args.params, layers=args.with_params, suite=args.suite)
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
        raise SystemExit(f"fdabench: {error}") from None
    print(format_results(args.name, results))
    return 1 if failures(results) else 0


def cmd_schema(args: argparse.Namespace) -> int:
    from fdabench.config import params_schema
    from fdabench.io import write_text_atomic

    text = json.dumps(params_schema(), indent=2) + "\n"
    if args.output:
        write_text_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_cells(args: argparse.Namespace) -> int:
    from fdabench.config import load_params

    for cell in load_params(args.params, layers=args.with_params, suite=args.suite).cells():
        print(cell.path)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from fdabench.config import load_params
    from fdabench.status import STATES, format_status, suite_status

    params = load_params(args.params, layers=args.with_params, suite=args.suite)
    states = suite_status(params)
    print(format_status(params, states, show=STATES if args.all else STATES[1:]))
    return 1 if args.check and any(state.state != "current" for state in states) else 0


def cmd_prepare(args: argparse.Namespace) -> int:
    import torch

    from fdabench.config.schema import object_schema, schema_errors
    from fdabench.data import get_dataset

    source = get_dataset(args.dataset)
    problems = schema_errors(args.options or {}, object_schema(source.options_schema), prefix=("--options",))
    if problems:
        raise CommandError(f"{args.dataset} options: {'; '.join(problems)} (the keys of datasets.{args.dataset})")
    torch.set_num_threads(args.threads)
    options = {**source.default_options, **(args.options or {})}
    started = time.perf_counter()
    prepared = source.prepare(options, raw_root=args.raw_root)
    prepared.save(args.output)
    sizes = ", ".join(f"{name}: {len(arrays.y)}" for name, arrays in prepared.domains.items())
    print(f"prepared {args.dataset} ({sizes}) in {time.perf_counter() - started:.1f}s -> {args.output}")
    return 0


def cmd_stand_in(args: argparse.Namespace) -> int:
    from fdabench.data.images import write_stand_in

    manifest = write_stand_in(args.dataset, args.output, args.per_domain)
    print(f"{args.dataset} stand-in: {manifest} (images under {manifest.parent / 'images'})")
    return 0


def cmd_acquire(args: argparse.Namespace) -> int:
    from fdabench.data.raw import MIRROR_ENVIRONMENT_VARIABLE, RawDataMissing, acquire, verify_acquired

    try:
        if args.verify:
            verify_acquired(args.raw, args.root)
            print(f"{args.root}/{args.raw}: content unchanged since acquisition")
        else:
            mirror = args.mirror or os.environ.get(MIRROR_ENVIRONMENT_VARIABLE)
            path = acquire(args.raw, args.root, mirror=mirror, download=args.download)
            print(f"{args.raw}: verified -> {path}")
    except RawDataMissing as error:
        print(f"fdabench: {error}", file=sys.stderr)
        return 3
    return 0


def cmd_partition(args: argparse.Namespace) -> int:
    from fdabench.data import PreparedDataset, get_dataset, get_partitioner, partition_options
    from fdabench.io import write_json_atomic

    _require_json(os.path.join(args.prepared, "header.json"), "prepared data", "its prepare job")
    PreparedDataset.verify(args.prepared)
    prepared = PreparedDataset.load(args.prepared)
    partitioner = args.partitioner or get_dataset(prepared.name).partitioner
    options = partition_options(get_dataset(prepared.name), partitioner, args.options or {})
    partition = get_partitioner(partitioner).split(prepared, args.target, args.seed, options)
    empty = partition.empty_clients()
    if empty:
        raise SystemExit(
            f"fdabench: partition of {prepared.name} target {args.target} seed {args.seed} leaves {', '.join(empty)} "
            "without samples; use fewer clients, another split, or more labelled target samples"
        )
    payload = partition.to_json(prepared)
    write_json_atomic(args.output, payload)
    counts = ", ".join(f"{c['name']}: {c['count']}" for c in payload["clients"])
    print(f"partition {prepared.name} target {args.target} seed {args.seed}: {counts} -> {args.output}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from fdabench.federation.checkpoint import checkpoint_path
    from fdabench.gpus import pin
    from fdabench.io import write_json_atomic
    from fdabench.plugin_fingerprint import cell_code
    from fdabench.runner import CellInputError, run_cell

    config = args.cell
    missing = [key for key in CELL_CONFIG_KEYS if not isinstance(config, dict) or key not in config]
    if missing:
        raise CommandError(
            f"--cell lacks {', '.join(missing)}: pass a resolved cell configuration, as the train rule does "
            "(`snakemake <cell path>` runs one cell)"
        )
    _require_json(os.path.join(args.prepared, "header.json"), "prepared data", "its prepare job")
    _require_json(args.partition, "partition", "its partition job")
    label = f"{config['experiment']}/{config['method']}/{config['target']}/seed{config['seed']}"
    if args.checkpoint_every < 0:
        raise SystemExit(
            f"fdabench: --checkpoint-every is a number of rounds or 0 (never), not {args.checkpoint_every}"
        )
    try:
        pin(args.pin_gpu)  # before anything starts CUDA
    except ValueError as error:
        raise SystemExit(f"fdabench: {error}") from None
    _require_writable(args.output)
    checkpoint = checkpoint_path(args.output)
    try:
        with _RoundProgress(label) as on_round:
            result = run_cell(
                config,
                args.prepared,
                args.partition,
                args.threads,
                args.device,
                on_round=on_round,
                checkpoint=checkpoint,
                checkpoint_every=args.checkpoint_every,
            )
    except CellInputError as error:
        raise SystemExit(str(error)) from None
    result["code"] = cell_code(config).to_json()  # the runner's, plus a plugin's modules (fdabench.plugin_fingerprint)
    write_json_atomic(args.output, result)
    checkpoint.unlink(missing_ok=True)
    print(
        f"{label}: final {result['metric']} {result['final']:.4f} ({result['train_seconds']:.1f}s training) -> "
        f"{args.output}"
    )
    return 0


#: what `fdabench train --cell` reads of a resolved cell configuration (`fdabench.config.Params.cell`)
CELL_CONFIG_KEYS = ("experiment", "dataset", "method", "algorithm", "hparams", "target", "seed", "train")


def _require_json(path: str, what: str, job: str) -> None:
    """Refuse an input file that is missing, empty or truncated, naming it and the job that makes it again."""
    from fdabench.io import read_json

    try:
        read_json(path)
    except FileNotFoundError:
        raise CommandError(f"{path}: no such file; run {job} first (snakemake does)") from None
    except (OSError, ValueError) as error:
        raise CommandError(
            f"{path}: {what} file is not readable JSON ({error}); delete it and rerun {job} (snakemake makes it again)"
        ) from None


def _require_writable(output: str) -> None:
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


class _RoundProgress:
    """A rich progress bar on a terminal; a line every 10 rounds otherwise (Snakemake log files)."""

    def __init__(self, label: str):
        self.label = label
        self.progress = None
        self.task = None

    def __enter__(self):
        if sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[status]}"),
                TimeRemainingColumn(),
                transient=True,
            )
            self.progress.__enter__()
        return self.update

    def update(self, record: dict[str, Any], total: int, metric: str) -> None:
        status = f"{metric} {record[metric]:.4f}"
        if self.progress is not None:
            if self.task is None:
                self.task = self.progress.add_task(self.label, total=total, status=status)
            self.progress.update(self.task, completed=record["round"] + 1, status=status)
        elif (record["round"] + 1) % 10 == 0 or record["round"] + 1 == total:
            print(f"{self.label}: round {record['round'] + 1}/{total} {status}", file=sys.stderr, flush=True)

    def __exit__(self, *exc):
        if self.progress is not None:
            self.progress.__exit__(*exc)
        return False


def cmd_table(args: argparse.Namespace) -> int:
    from fdabench.cells import IncompleteCellError, MixedCodeError
    from fdabench.io import write_json_atomic, write_text_atomic
    from fdabench.report.tables import (
        cells_frame,
        html_table,
        markdown_table,
        table_json,
        tidy_table,
        unlabelled_target_methods,
    )
    from fdabench.status import unreadable_cells_message

    try:
        cells = cells_frame(args.cells, args.metrics, allow_mixed_code=args.allow_mixed_code)
    except MixedCodeError as error:
        print(f"fdabench: {error}", file=sys.stderr)
        return 2
    except IncompleteCellError:
        raise CommandError(unreadable_cells_message(args.cells)) from None
    tidy = tidy_table(cells)
    unlabelled = unlabelled_target_methods(cells)
    if args.csv:
        write_text_atomic(args.csv, tidy.to_csv(index=False, float_format="%.6g"))
    if args.md:
        write_text_atomic(args.md, markdown_table(tidy, args.title, unlabelled))
    if args.json:
        write_json_atomic(args.json, table_json(tidy))
    if args.html:
        write_text_atomic(args.html, html_table(tidy, args.title, unlabelled))
    if not (args.csv or args.md or args.json or args.html):
        print(markdown_table(tidy, args.title, unlabelled))
    return 0


def cmd_metrics(args: argparse.Namespace) -> int:
    from pathlib import Path

    from fdabench.io import read_json, write_json_atomic

    tables = {Path(path).stem: read_json(path) for path in sorted(args.tables)}
    write_json_atomic(args.output, tables)
    print(f"{len(tables)} tables -> {args.output}")
    return 0


def cmd_figure(args: argparse.Namespace) -> int:
    from fdabench.report.figures import plot_betas, plot_final, plot_rounds, plot_sweep

    families = dict(json.loads(args.methods)) if args.methods else None
    if args.kind in ("shift", "beta", "alpha"):
        plot_sweep(args.cells, args.output, args.kind, args.title, families)
    elif args.kind == "betas":
        plot_betas(args.cells, args.output, args.title)
    else:
        {"rounds": plot_rounds, "final": plot_final}[args.kind](args.cells, args.output, args.title, families)
    return 0


def cmd_cells_table(args: argparse.Namespace) -> int:
    from fdabench.io import write_text_atomic
    from fdabench.report.tables import cells_html

    write_text_atomic(args.html, cells_html(args.cells, args.title))
    return 0


def cmd_plots(args: argparse.Namespace) -> int:
    from fdabench.report.dvc_plots import write_dvc_plots

    rounds, betas = write_dvc_plots(args.cells, args.rounds, args.betas)
    print(f"{rounds} per-round series -> {args.rounds}; {betas} β series -> {args.betas}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    from fdabench.io import write_text_atomic
    from fdabench.report import paper_vs_ours as report

    table = report.paper_vs_ours(args.cells)
    ranks = report.average_ranks(report.suite_means(args.cells))
    write_text_atomic(args.csv, table.to_csv(index=False, float_format="%.4g"))
    write_text_atomic(args.md, report.paper_vs_ours_markdown(table, ranks))
    if args.html:
        write_text_atomic(args.html, report.paper_vs_ours_html(table, ranks))
    summary = report.paper_vs_ours_summary(table)
    if args.summary_csv:
        write_text_atomic(args.summary_csv, summary.to_csv(index=False))
    if args.readme:
        if not args.suite:
            raise SystemExit("fdabench compare: --readme needs --suite (the suite the cells belong to)")
        readme = Path(args.readme)
        write_text_atomic(readme, report.replace_status(readme.read_text(), report.status_table(summary, args.suite)))
    return 0


def cmd_theory_init(args: argparse.Namespace) -> int:
    from fdabench.io import write_json_atomic
    from fdabench.runner import CellInputError, run_theory_init

    try:
        record = run_theory_init(args.cell, args.prepared, args.partition, args.beta, args.draws, args.threads)
    except CellInputError as error:
        raise SystemExit(str(error)) from None
    write_json_atomic(args.output, record)
    print(
        f"{record['target']} seed {record['seed']}: d2 {record['d2']:.4g} sigma2 {record['sigma2']:.4g} -> predicted "
        f"{record['predicted_winner']}"
    )
    return 0


def cmd_theory_report(args: argparse.Namespace) -> int:
    from fdabench.cells import read_cell
    from fdabench.io import read_json, write_text_atomic
    from fdabench.report.theory import plot_theory, theory_frame, theory_markdown

    frame = theory_frame([read_json(p) for p in args.initial], [read_cell(p) for p in args.cells], args.roles)
    write_text_atomic(args.csv, frame.to_csv(index=False, float_format="%.6g"))
    write_text_atomic(args.md, theory_markdown(frame, args.title))
    plot_theory(frame, args.png, args.title)
    print(
        f"agreement between predicted and actual fixed-beta winners: {frame['agree'].mean():.1%} of {len(frame)} "
        f"settings"
    )
    return 0


def cmd_bench_cell(args: argparse.Namespace) -> int:
    from fdabench.bench_cell import MissingCellInputs, bench_cell, compare_cohort
    from fdabench.config import load_params
    from fdabench.io import write_json_atomic

    if len(args.cell) != 3:
        print("fdabench: bench cell takes SUITE EXPERIMENT METHOD", file=sys.stderr)
        return 2
    suite, experiment, method = args.cell
    params = load_params(args.params).for_suite(suite)
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


def cmd_flower(args: argparse.Namespace) -> int:
    """fdabench flower export|simulate|deploy|app: one cell of a round-loop suite through Flower."""
    try:
        import flwr  # noqa: F401
    except ImportError:
        print('fdabench: the flower commands need Flower: uv pip install -e ".[flower]"', file=sys.stderr)
        return 2
    from fdabench.bench_cell import MissingCellInputs
    from fdabench.flower import deploy, run
    from fdabench.flower.faults import Fault
    from fdabench.flower.transport import SiteFailure

    try:
        if args.action == "export":
            from fdabench.config import load_params

            if len(args.cell) != 3:
                print("fdabench: flower export takes SUITE EXPERIMENT METHOD", file=sys.stderr)
                return 2
            suite, experiment, method = args.cell
            params = load_params(args.params).for_suite(suite)
            manifest = run.export_cell(params, experiment, method, args.target, args.seed, args.output)
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
            options = run.run_options(folder, args.result, *policy, threads=args.threads)
            options.pop("site-files")
            app = deploy.write_app(args.output, options)
            print(f"{app}: flwr run {app} <connection>  (each SuperNode: --node-config \"site-data='<its file>'\")")
            return 0
        if args.action == "simulate":
            faults = [Fault.parse(text) for text in args.fault or []]
            history = run.simulate(folder, args.result, *policy, threads=args.threads, faults=faults)
        else:
            history = deploy.deploy_locally(folder, args.result, *policy, threads=args.threads, work=args.work)
    except (MissingCellInputs, SiteFailure, ValueError, FileNotFoundError, RuntimeError, TimeoutError) as error:
        print(f"fdabench: {error}", file=sys.stderr)
        return 1
    last = history["rounds"][-1]
    print(f"{args.result}: {len(history['rounds'])} rounds, final {history['metric']} {last[history['metric']]:.4f}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from fdabench import bench
    from fdabench.io import write_text_atomic

    if args.what == "cell":
        return cmd_bench_cell(args)
    if args.what == "aggregation":
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else []) if args.device == "all" else [args.device]
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


def cmd_forkserver(args: argparse.Namespace) -> int:
    from fdabench import forkserver

    forkserver.serve(args.socket, handler=main)
    return 0


def _cell_arguments(parser: argparse.ArgumentParser, purpose: str) -> None:
    """--params, --target, --seed: which cell of SUITE EXPERIMENT METHOD (`purpose`: the action they serve)."""
    parser.add_argument("--params", default="params.yaml", help=f"{purpose}: the params file")
    parser.add_argument("--target", help=f"{purpose}: the target (default: the experiment's first)")
    parser.add_argument("--seed", type=int, help=f"{purpose}: the seed (default: the experiment's first)")


def _suite_arguments(parser: argparse.ArgumentParser) -> None:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fdabench", description="Federated domain adaptation experiments (called by the Snakemake rules)."
    )
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an expected failure instead of its one line"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("validate", help="validate params.yaml and count its cells")
    _suite_arguments(p)
    p.set_defaults(handler=cmd_validate)

    p = sub.add_parser(
        "check-method",
        help="check a registered round-loop method against the properties of its kind (fdabench.testing): β = 0, "
        "order of sources, zero and tiny updates, privacy boundary, resume",
    )
    p.add_argument("name", help="a registered method (shipped or a plugin's)")
    p.add_argument("--hparams", type=_json_argument, help="hyper-parameters as JSON (defaults fill the rest)")
    p.set_defaults(handler=cmd_check_method)

    p = sub.add_parser("schema", help="print (or write) the JSON schema of params.yaml")
    p.add_argument("--output", help="write here instead of printing")
    p.set_defaults(handler=cmd_schema)

    p = sub.add_parser("cells", help="list the cell result paths of the active suite")
    _suite_arguments(p)
    p.set_defaults(handler=cmd_cells)

    p = sub.add_parser(
        "status", help="which cells of the active suite are current, stale (other config or code), failed or missing"
    )
    _suite_arguments(p)
    p.add_argument("--all", action="store_true", help="list current cells too")
    p.add_argument("--check", action="store_true", help="exit with status 1 unless every cell is current")
    p.set_defaults(handler=cmd_status)

    p = sub.add_parser("prepare", help="build a dataset's domains (embedded, generated or from raw files)")
    p.add_argument("--dataset", required=True, help="dataset name (params.yaml datasets)")
    p.add_argument("--options", type=_json_argument, help="dataset options as JSON (defaults fill the rest)")
    p.add_argument(
        "--raw-root", help="directory holding the raw datasets it reads (data/raw, or a mirror: same layout)"
    )
    p.add_argument("--output", required=True, help="the prepared dataset directory")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (image decoding and resizing)")
    p.set_defaults(handler=cmd_prepare)

    p = sub.add_parser(
        "stand-in", help="write a generated stand-in manifest and images for midrc, chexpert or mimic (dry runs)"
    )
    p.add_argument("dataset", choices=["midrc", "chexpert", "mimic"], help="the hospital dataset to stand in for")
    p.add_argument("--output", required=True, help="directory for manifest.csv and images/")
    p.add_argument("--per-domain", type=int, default=60, help="images per domain (default 60)")
    p.set_defaults(handler=cmd_stand_in)

    p = sub.add_parser(
        "acquire", help="bring a raw dataset into data/raw from a mirror (or, with --download, its source), verified"
    )
    p.add_argument(
        "--raw", required=True, help="raw dataset name (e.g. FashionMNIST, MNIST, CIFAR10, heart_disease, PACS)"
    )
    p.add_argument("--root", default="data/raw", help="where raw datasets are kept")
    p.add_argument("--mirror", help="local mirror directory (default: $FDABENCH_DATA_MIRROR)")
    p.add_argument(
        "--download", action="store_true", help="download from the canonical source when the mirror lacks it (network)"
    )
    p.add_argument("--verify", action="store_true", help="re-check an acquired dataset against its manifest")
    p.set_defaults(handler=cmd_acquire)

    p = sub.add_parser("partition", help="split a prepared dataset into sources and target splits")
    p.add_argument("--prepared", required=True, help="the prepared dataset directory (fdabench prepare)")
    p.add_argument("--target", required=True, help="target name (use --target=-90 for names starting with '-')")
    p.add_argument("--seed", type=int, required=True, help="the seed of the split")
    p.add_argument("--partitioner", help="partitioner name (default: the dataset's)")
    p.add_argument("--options", type=_json_argument, help="partitioner options as JSON (defaults fill the rest)")
    p.add_argument("--output", required=True, help="the partition JSON (indices and manifest)")
    p.set_defaults(handler=cmd_partition)

    p = sub.add_parser("train", help="run one cell and write its result JSON")
    p.add_argument("--cell", type=_json_argument, required=True, help="the resolved cell configuration (JSON)")
    p.add_argument("--prepared", required=True, help="the prepared dataset directory (fdabench prepare)")
    p.add_argument("--partition", required=True, help="the partition JSON (fdabench partition)")
    p.add_argument("--output", required=True, help="the file to write")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], help="override the cell's device")
    p.add_argument(
        "--checkpoint-every",
        type=int,
        default=0,
        metavar="K",
        help="save the round loop's state every K rounds beside the output and resume from it when rerun "
        "(0: never); removed once the result is written",
    )
    p.add_argument(
        "--pin-gpu",
        default="none",
        metavar="INDEX",
        help="run on this GPU only (CUDA_VISIBLE_DEVICES=INDEX; params.yaml gpus), or none (default)",
    )
    p.set_defaults(handler=cmd_train)

    p = sub.add_parser("table", help="tabulate cells: tidy CSV, paper-layout Markdown, JSON metrics")
    p.add_argument("cells", nargs="+", help="cell result files")
    p.add_argument("--csv", help="write the tidy table (CSV) here")
    p.add_argument("--md", help="write the paper-layout table (Markdown) here")
    p.add_argument("--json", help="write the metrics (JSON, for dvc metrics) here")
    p.add_argument("--html", help="the Markdown table as an HTML page (what the Snakemake report shows)")
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
    p.add_argument("cells", nargs="+", help="cell result files")
    p.add_argument("--output", required=True, help="the file to write")
    p.add_argument("--title", help="title shown above the output")
    p.add_argument(
        "--methods",
        help="JSON list of [method, family] pairs, the whole suite's methods in table order: fixes each method's "
        "colour, so it is the same in every figure (default: the given cells' methods)",
    )
    p.set_defaults(handler=cmd_figure)

    p = sub.add_parser("metrics", help="a suite's table JSON files in one file, keyed by table (for dvc metrics)")
    p.add_argument("tables", nargs="*", help="table JSON files (fdabench table --json)")
    p.add_argument("--output", required=True, help="the file to write")
    p.set_defaults(handler=cmd_metrics)

    p = sub.add_parser(
        "cells-table", help="every cell with its final metric, device, seconds, code and settings (HTML)"
    )
    p.add_argument("cells", nargs="+", help="cell result files")
    p.add_argument("--html", required=True, help="the HTML page to write")
    p.add_argument("--title", help="title shown above the output")
    p.set_defaults(handler=cmd_cells_table)

    p = sub.add_parser(
        "plots", help="the per-round series `dvc plots` draws: one CSV per experiment and method (β: per source)"
    )
    p.add_argument("cells", nargs="+", help="cell result files")
    p.add_argument("--rounds", required=True, help="folder for rounds/<experiment>/<method>.csv (replaced as a whole)")
    p.add_argument(
        "--betas", required=True, help="folder for betas/<experiment>/<method>/<source>.csv (replaced as a whole)"
    )
    p.set_defaults(handler=cmd_plots)

    p = sub.add_parser("compare", help="published vs ours for every cell with a published number")
    p.add_argument("cells", nargs="+", help="cell result files")
    p.add_argument("--csv", required=True, help="the CSV table to write")
    p.add_argument("--md", required=True, help="the Markdown table to write")
    p.add_argument("--html", help="also as an HTML page (what the Snakemake report shows)")
    p.add_argument(
        "--summary-csv", help="also the per-table summary (rows matched, on which settings, within 3 points)"
    )
    p.add_argument("--readme", help="rewrite the reproduction-status block of this README from the summary")
    p.add_argument("--suite", help="the suite the cells belong to (named in the README block)")
    p.set_defaults(handler=cmd_compare)

    p = sub.add_parser(
        "bench",
        help="benchmarks: aggregation time vs the memory-bandwidth floor; auto-weighting memory; training-job "
        "start-up; a few rounds of one cell against centralised training (cell SUITE EXPERIMENT METHOD)",
    )
    p.add_argument("what", choices=["aggregation", "memory", "startup", "cell"], help="which benchmark")
    p.add_argument(
        "cell", nargs="*", metavar="SUITE EXPERIMENT METHOD", help="cell: which cell (its first target and seed)"
    )
    _cell_arguments(p, "cell")
    p.add_argument("--rounds", type=int, default=3, help="cell: FDA rounds to time, after at most one warm-up round")
    p.add_argument(
        "--cohort",
        choices=["auto", "on", "off", "both"],
        help="cell: the train setting cohort (default: the cell's); both: off and on alternately, compared",
    )
    p.add_argument("--sources", type=int, nargs="+", default=[2, 10, 50], help="numbers of sources N")
    p.add_argument(
        "--sizes",
        type=lambda v: int(float(v)),
        nargs="+",
        default=[100_000, 1_000_000, 11_689_512],
        help="update sizes m (1.1e7 is ResNet-18)",
    )
    p.add_argument("--batches", type=int, default=8, help="target batch updates B for auto-weighting")
    p.add_argument("--device", choices=["cpu", "cuda", "all"], default="all", help="all: CPU, and CUDA when present")
    p.add_argument(
        "--repeats",
        type=int,
        help="aggregation, startup: timings of each (default 5); cell --cohort both: runs of each mode (default 2)",
    )
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    p.add_argument("--output", help="also write the table as CSV (cell: the measurements as JSON)")
    p.set_defaults(handler=cmd_bench)

    p = sub.add_parser(
        "flower",
        help="one cell through Flower: export its site files, run them on Flower's simulation engine or a local "
        "deployment (a process per site), or write the Flower app for a deployment across machines",
    )
    p.add_argument("action", choices=["export", "simulate", "deploy", "app"], help="what to do with the cell")
    p.add_argument(
        "cell", nargs="+", metavar="ARG", help="export: SUITE EXPERIMENT METHOD; others: the exported folder"
    )
    _cell_arguments(p, "export")
    p.add_argument("--output", help="export: the folder for the site files; app: the app folder")
    p.add_argument("--result", help="simulate, deploy, app: the result file the server writes")
    p.add_argument("--dropout", choices=["fail", "wait", "skip"], default="fail", help="what a missing site does")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds a site has to answer a message")
    p.add_argument("--wait-seconds", type=float, default=600.0, help="--dropout wait: how long to keep asking")
    p.add_argument("--threads", type=int, default=1, help="torch threads of the server and of each site")
    p.add_argument("--work", help="deploy: keep the processes' logs here")
    p.add_argument(
        "--fault",
        action="append",
        metavar="SITE:ROUND:KIND[:TIMES]",
        help="simulate: a planned fault (drop, nan, shape) to rehearse the dropout policy (fdabench.flower.faults)",
    )
    p.set_defaults(handler=cmd_flower)

    p = sub.add_parser("forkserver")  # internal: the server `fdabench train` starts (fdabench.forkserver)
    p.add_argument("socket", help="the Unix socket to serve on")
    p.set_defaults(handler=cmd_forkserver)

    theory = sub.add_parser("theory", help="the synthetic theory check (Delta error at initialisation vs training)")
    theory_sub = theory.add_subparsers(dest="theory_command", required=True, metavar="STEP")
    p = theory_sub.add_parser("init", help="d², σ², τ²d² and the rules' Delta errors at a cell's initial parameters")
    p.add_argument(
        "--cell", type=_json_argument, required=True, help="a resolved cell configuration (JSON): model, seed, target"
    )
    p.add_argument("--prepared", required=True, help="the prepared dataset directory (fdabench prepare)")
    p.add_argument("--partition", required=True, help="the partition JSON (fdabench partition)")
    p.add_argument("--beta", type=float, default=0.5, help="β of FedDA and FedGP")
    p.add_argument("--draws", type=int, default=100, help="Monte Carlo draws for σ²")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--output", required=True, help="the file to write")
    p.set_defaults(handler=cmd_theory_init)
    p = theory_sub.add_parser("report", help="heatmaps, table and agreement rate from init files and cells")
    p.add_argument("--initial", nargs="+", required=True, help="files written by `theory init`")
    p.add_argument("--cells", nargs="+", required=True, help="cell files of the rules")
    p.add_argument(
        "--roles",
        type=_json_argument,
        required=True,
        help='JSON {"fedda": "<method>", ...} for the roles '
        "target_only, source_only, fedda, fedgp, fedda_auto, fedgp_auto",
    )
    p.add_argument("--csv", required=True, help="the CSV table to write")
    p.add_argument("--md", required=True, help="the Markdown table to write")
    p.add_argument("--png", required=True, help="the heatmap figure to write (PNG)")
    p.add_argument("--title", help="title shown above the output")
    p.set_defaults(handler=cmd_theory_report)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command. Expected failures (invalid params, a bad or missing file, bad JSON, an unknown name) are
    one line naming the file or value and the fix, exit status 2; --debug shows their traceback instead."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["train"]:
        # Every training job starts here: hand the command line to the fork server before anything else is
        # built; its child parses it, as below, and reports the same errors and exit status.
        from fdabench import forkserver

        if forkserver.enabled():
            code = forkserver.run(argv)
            if code is not None:
                return code
    args = build_parser().parse_args(argv)
    if args.command == "train" and argv[:1] != ["train"]:  # `fdabench --debug train ...`
        from fdabench import forkserver

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
    from fdabench.errors import ParamsError
    from fdabench.registry import UnknownNameError

    # ValueError covers bad JSON and the library's refusals of bad data (each names the file and the fix)
    return (CommandError, ParamsError, UnknownNameError, OSError, ValueError)


EXPECTED_ERRORS = _expected_errors()


if __name__ == "__main__":
    sys.exit(main())
