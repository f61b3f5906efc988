"""Training stage commands: train one cell (through the fork server when it can), and the fork server itself."""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fdabench.cli.common import CommandError, bounded, json_argument, problem_arguments, require_json, require_prepared
from fdabench.cli.file_arguments import reads
from fdabench.cli.files import INPUT, INPUT_FOLDER, OUTPUT, PathRole
from fdabench.jobs.heal import kept_path


def cmd_train(args: argparse.Namespace) -> int:
    from fdabench.cell.digest import seal
    from fdabench.cell.fingerprint import CodeFingerprint
    from fdabench.cell.run import run_cell
    from fdabench.cell.setup import CellInputError
    from fdabench.core.devices import pin
    from fdabench.core.io import write_json_atomic
    from fdabench.federation.checkpoint import checkpoint_path

    config, code = _cell_and_code(args)
    if isinstance(config, dict) and "format" in config:
        raise CommandError(
            f"--cell is a file's contents (format {config['format']!r}), not a resolved cell configuration: pass the "
            "cell's configuration (a cell result's `config`), or its plan file with --plan as the train rule does"
        )
    missing = [key for key in CELL_CONFIG_KEYS if not isinstance(config, dict) or key not in config]
    if missing:
        raise CommandError(
            f"--cell lacks {', '.join(missing)}: pass a resolved cell configuration, or the cell's plan "
            "file with --plan as the train rule does (`snakemake <cell path>` runs one cell)"
        )
    require_prepared(args.prepared)
    require_json(args.partition, "partition", "its partition job", kind="fdabench.partition")
    if args.device is not None:
        config = {**config, "device": args.device}  # the setting the cell runs with is the one it records
    label = f"{config['experiment']}/{config['method']}/{config['target']}/seed{config['seed']}"
    if args.checkpoint_every < 0:
        raise SystemExit(
            f"fdabench: --checkpoint-every is a number of rounds or 0 (never), not {args.checkpoint_every}"
        )
    try:
        pin(args.pin_gpu)  # before anything starts CUDA
    except ValueError as error:
        raise SystemExit(f"fdabench: {error}") from None
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
                code=_own_code(config) if code is None else CodeFingerprint.from_json(code),
            )
    except CellInputError as error:
        raise SystemExit(str(error)) from None
    write_json_atomic(args.output, seal(result))  # the digest that lets readers tell an edited cell
    checkpoint.unlink(missing_ok=True)
    print(
        f"{label}: final {result['metric']} {result['final']:.4f} ({result['train_seconds']:.1f}s training) -> "
        f"{args.output}"
    )
    return 0


def cmd_train_group(args: argparse.Namespace) -> int:
    """Train several cells as one group (`fdabench.federation.lockstep`): every cell is checked before any trains,
    each writes its own result (and checkpoint) as `fdabench train` does, as soon as it ends; a cell that fails fails
    alone, and the command then exits with status 1 naming it.

    A cell whose output already holds its finished result (`fdabench.jobs.heal.recorded_state`: the same
    configuration and code) is kept, not trained again: a group job reruns because one of its cells changed or is
    missing. When a cell fails, the cells that finished keep their results in a hidden file beside their output
    (`kept_path`; Snakemake removes a failed job's new outputs), which the next run puts back in place."""
    from fdabench.core.devices import pin
    from fdabench.federation.lockstep import run_together
    from fdabench.jobs.cell_plan import read_plan

    cells = len(args.plan)
    prepared = args.prepared * cells if len(args.prepared) == 1 else args.prepared
    logs = args.log or [None] * cells
    if not (len(prepared) == len(args.partition) == len(args.output) == len(logs) == cells):
        raise CommandError(
            f"train-group takes one --partition and one --output per --plan (one --log too, if any; and one "
            f"--prepared, or one per plan): {cells} plans, {len(args.partition)} partitions, {len(args.output)} "
            f"outputs, {len(args.log or [])} logs, {len(args.prepared)} prepared"
        )
    if args.checkpoint_every < 0:
        raise CommandError(f"--checkpoint-every is a number of rounds or 0 (never), not {args.checkpoint_every}")
    planned = []
    files = zip(args.plan, prepared, args.partition, args.output, logs, strict=True)
    for plan, folder, partition, output, log in files:
        try:
            config, code = read_plan(plan)
        except FileNotFoundError:
            raise CommandError(
                f"{plan}: no such file; snakemake writes a cell's plan before it runs the cell"
            ) from None
        require_prepared(folder)
        require_json(partition, "partition", "its partition job", kind="fdabench.partition")
        if args.device is not None:
            config = {**config, "device": args.device}
        planned.append(_GroupCell(config, code, folder, partition, output, log))
    try:
        pin(args.pin_gpu)  # before anything starts CUDA
    except ValueError as error:
        raise CommandError(str(error)) from None

    for cell in planned:
        cell.start_log(cells)
    pending = [cell for cell in planned if not cell.finished()]
    for cell in planned:
        if cell not in pending:
            cell.say(f"{cell.label}: finished with today's plan and code; kept -> {cell.output}")
    with _lines_to_cell_logs():
        outcomes, statistics = run_together([cell.train(args) for cell in pending])
    failed = [(cell, error) for cell, error in zip(pending, outcomes, strict=True) if isinstance(error, BaseException)]
    for cell, error in failed:
        cell.fail(error)
    if not failed:
        for cell in planned:
            kept_path(cell.output).unlink(missing_ok=True)
    print(
        f"{len(pending) - len(failed)} of {len(pending)} cells trained as one group, {cells - len(pending)} kept "
        f"({statistics.stacked_requests} local trainings and evaluations computed together in "
        f"{statistics.stacked_calls} stacked computations)",
        flush=True,
    )
    return 1 if failed else 0


class _CellLog(threading.local):
    """The log file of the cell the current thread trains, if any."""

    file: Any = None


_CELL_LOG = _CellLog()


class _Routed(io.TextIOBase):
    """A standard stream while a group trains: what a cell's thread writes goes to that cell's log as well."""

    def __init__(self, stream: Any):
        self.stream = stream

    def write(self, text: str) -> int:
        if _CELL_LOG.file is not None:
            _CELL_LOG.file.write(text)
            _CELL_LOG.file.flush()
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()


@contextlib.contextmanager
def _lines_to_cell_logs():
    """Standard output and error routed (`_Routed`) while the cells train, so that each cell's lines (checkpoint
    messages, progress, warnings) are in its own log as a one-cell job's are."""
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Routed(stdout), _Routed(stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def _appending(log: str) -> Any:
    """A grouped cell's log, open to append to: written as the job runs, as Snakemake's redirection writes a one-cell
    job's (a log, never a result)."""
    return open(log, "a", encoding="utf-8")


class _GroupCell:
    """One cell of a `train-group` job: its plan, files and log."""

    def __init__(self, config: dict[str, Any], code: Any, prepared: str, partition: str, output: str, log: str | None):
        self.config, self.code, self.prepared, self.partition = config, code, prepared, partition
        self.output, self.log = output, log
        self.label = f"{config['experiment']}/{config['method']}/{config['target']}/seed{config['seed']}"

    def start_log(self, cells: int) -> None:
        from fdabench.core.io import write_text_atomic

        if self.log is not None:
            write_text_atomic(self.log, f"{self.label}: one of {cells} cells of a train-group job\n")

    def say(self, line: str) -> None:
        """A line on standard output and in the cell's own log."""
        print(line, flush=True)
        if self.log is not None:
            with _appending(self.log) as log:
                log.write(line + "\n")

    def finished(self) -> bool:
        """Whether the output holds the cell's finished result, putting a kept one back in place first."""
        from fdabench.core.io import write_text_atomic
        from fdabench.core.readers import read_text
        from fdabench.jobs.heal import recorded_state

        def current(path: Path) -> bool:
            return path.is_file() and recorded_state(path, self.config, lambda: self.code)[0] == "current"

        kept = kept_path(self.output)
        if current(Path(self.output)):
            kept.unlink(missing_ok=True)
            return True
        if current(kept):
            write_text_atomic(self.output, read_text(kept, "a kept cell result"))
            kept.unlink()
            self.say(f"{self.label}: put back the result an unfinished group run kept ({kept})")
            return True
        kept.unlink(missing_ok=True)
        return False

    def fail(self, error: BaseException) -> None:
        import traceback

        from fdabench.cell.setup import CellInputError

        reason = str(error) if isinstance(error, CellInputError) else f"{type(error).__name__}: {error}"
        print(f"fdabench: {self.output}: {reason}", file=sys.stderr, flush=True)
        if self.log is not None:
            with _appending(self.log) as log:
                if not isinstance(error, CellInputError):
                    log.write("".join(traceback.format_exception(error)))
                log.write(f"fdabench: {self.output}: {reason}\n")

    def train(self, args: argparse.Namespace) -> Any:
        from fdabench.cell.digest import seal
        from fdabench.cell.fingerprint import CodeFingerprint
        from fdabench.cell.run import run_cell
        from fdabench.core.io import write_json_atomic
        from fdabench.federation.checkpoint import checkpoint_path

        def job() -> str:
            checkpoint = checkpoint_path(self.output)
            with contextlib.ExitStack() as stack:
                if self.log is not None:
                    _CELL_LOG.file = stack.enter_context(_appending(self.log))
                    stack.callback(setattr, _CELL_LOG, "file", None)
                result = run_cell(
                    self.config,
                    self.prepared,
                    self.partition,
                    args.threads,
                    args.device,
                    on_round=_RoundProgress.lines(self.label),
                    checkpoint=checkpoint,
                    checkpoint_every=args.checkpoint_every,
                    code=CodeFingerprint.from_json(self.code),
                )
                sealed = seal(result)
                write_json_atomic(self.output, sealed)
                write_json_atomic(kept_path(self.output), sealed)  # until the whole group has finished
                checkpoint.unlink(missing_ok=True)
                print(
                    f"{self.label}: final {result['metric']} {result['final']:.4f} ({result['train_seconds']:.1f}s "
                    f"training) -> {self.output}",
                    flush=True,
                )
            return self.label

        return job


def _cell_and_code(args: argparse.Namespace) -> tuple[Any, Any]:
    """(configuration, code fingerprint or None) the cell runs with: its plan file's (`--plan`), or `--cell` and
    `--code`."""
    from fdabench.jobs.cell_plan import read_plan

    if args.plan is None:
        return args.cell, args.code
    if args.code is not None:
        raise CommandError("--code goes with --cell; a plan file (--plan) carries its own code fingerprint")
    try:
        return read_plan(args.plan)
    except FileNotFoundError:
        message = f"{args.plan}: no such file; snakemake writes a cell's plan before it runs the cell"
        raise CommandError(message) from None


def _own_code(config: dict[str, Any]) -> Any:
    """The cell's code fingerprint worked out here (`fdabench.cell.plugin_scope.cell_code`), as the Snakefile does
    for a plan; None where the configuration names no registered member (the cell's set-up then says which)."""
    from fdabench.cell.plugin_scope import cell_code
    from fdabench.core.registry import UnknownNameError

    try:
        return cell_code(config)
    except (KeyError, TypeError, UnknownNameError):
        return None


#: what `fdabench train --cell` reads of a resolved cell configuration (`fdabench.config.Params.cell`)
CELL_CONFIG_KEYS = ("experiment", "dataset", "method", "algorithm", "hparams", "target", "seed", "train")


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

    @classmethod
    def lines(cls, label: str) -> Callable[[dict[str, Any], int, str], None]:
        """The progress of a cell that shares its job with others: a line every 10 rounds, never a bar."""
        return cls(label).update

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


def _checkpoint(args: argparse.Namespace) -> list[tuple[PathRole, str]]:
    """The checkpoint `train --checkpoint-every` writes beside the output."""
    from fdabench.federation.checkpoint import checkpoint_path

    return [(OUTPUT, str(checkpoint_path(args.output)))]


def _group_checkpoints(args: argparse.Namespace) -> list[tuple[PathRole, str]]:
    """The checkpoints `train-group --checkpoint-every` writes beside each output, and the results it keeps
    (`kept_path`)."""
    from fdabench.federation.checkpoint import checkpoint_path

    checkpoints = [(OUTPUT, str(checkpoint_path(output))) for output in args.output]
    return checkpoints + [(OUTPUT, str(kept_path(output))) for output in args.output]


def register(sub: argparse._SubParsersAction) -> None:
    """Add this stage's subcommands."""
    p = sub.add_parser("train", help="run one cell and write its result JSON")
    cell = p.add_mutually_exclusive_group(required=True)
    reads(
        cell.add_argument(
            "--plan",
            type=INPUT,
            help="the cell's plan file: its resolved configuration and code fingerprint, as the train rule passes "
            "them (fdabench.jobs.cell_plan)",
        ),
        "cell_plan",
    )
    cell.add_argument("--cell", type=json_argument, help="the resolved cell configuration (JSON)")
    p.add_argument(
        "--code",
        type=json_argument,
        help="with --cell: the cell's code fingerprint (JSON: fingerprint, modules); default: computed here",
    )
    problem_arguments(p)
    p.add_argument("--output", type=OUTPUT, required=True, help="the file to write")
    p.add_argument("--threads", type=bounded("threads_per_cell"), default=1, help="torch CPU threads")
    p.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        help="the device setting the cell runs with and records in its configuration (default: the configuration's)",
    )
    p.add_argument(
        "--checkpoint-every",
        type=bounded("checkpoint_every"),
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
    p.set_defaults(handler=cmd_train, derived_files=_checkpoint)

    p = sub.add_parser(
        "train-group",
        help="train several cells as one group (each writes its own result JSON; batching: stacked cells compute "
        "their clients together)",
    )
    reads(p.add_argument("--plan", type=INPUT, nargs="+", required=True, help="the cells' plan files"), "cell_plan")
    reads(
        p.add_argument(
            "--prepared",
            type=INPUT_FOLDER,
            nargs="+",
            required=True,
            help="the prepared dataset directory (one for every cell, or one per plan)",
        ),
        "prepared",
    )
    reads(
        p.add_argument(
            "--partition", type=INPUT, nargs="+", required=True, help="each cell's partition file, in plan order"
        ),
        "partition",
    )
    p.add_argument("--output", type=OUTPUT, nargs="+", required=True, help="each cell's result file, in plan order")
    p.add_argument("--threads", type=bounded("threads_per_cell"), default=1, help="torch CPU threads")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], help="the device setting the cells run with")
    p.add_argument(
        "--checkpoint-every",
        type=bounded("checkpoint_every"),
        default=0,
        metavar="K",
        help="each cell saves its round loop's state every K rounds beside its output and resumes from it when rerun",
    )
    p.add_argument("--log", type=OUTPUT, nargs="+", help="each cell's own log file, in plan order")
    p.add_argument(
        "--pin-gpu",
        default="none",
        metavar="INDEX",
        help="run on this GPU only (CUDA_VISIBLE_DEVICES=INDEX; params.yaml gpus), or none (default)",
    )
    p.set_defaults(handler=cmd_train_group, derived_files=_group_checkpoints)

    p = sub.add_parser("forkserver")  # internal: the server `fdabench train` starts (fdabench.jobs.forkserver)
    p.add_argument("socket", help="the Unix socket to serve on")
    p.set_defaults(handler=None)  # served by `main` itself (it hands the server the whole CLI)
