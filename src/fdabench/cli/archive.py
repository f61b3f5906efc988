"""The reproduction archive (`fdabench.reproduction.archive`, docs/reproduction.md): `fdabench archive add` records
finished cells in it, `fdabench archive export` rebuilds the cell files of the records that are current, and `fdabench
compare --archive` (`compare_archive`) regenerates the published comparison's pages, summary and README block from it
alone, marking the cells whose code fingerprint is no longer today's as from an older commit."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fdabench.cell.lock import LOCK
from fdabench.cli.common import CommandError, suite_arguments
from fdabench.cli.file_arguments import reads
from fdabench.cli.files import INPUT, OUTPUT_ROOT, UPDATED
from fdabench.core.readers import FileReadError, read_text
from fdabench.reproduction.equivalence import RECORD

README = Path("README.md")
PAGES = ("csv", "md", "html")


def _cell_files(given: list[str]) -> list[Path]:
    """The cell files named, a folder standing for every cell file under it."""
    files = []
    for name in given:
        path = Path(name)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.json") if not p.name.startswith("."))
            if not found:
                raise CommandError(f"{path}: no cell files under it")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise CommandError(f"{path}: no such cell file or folder")
    return files


def cmd_add(args: argparse.Namespace) -> int:
    from fdabench.cell.reading import read_verified_cell
    from fdabench.cell.result import IncompleteCellError
    from fdabench.reproduction.archive import (
        add_records,
        archive_path,
        read_archive,
        record_from_cell,
        seal_records,
        write_archive,
    )

    records: dict[str, list[dict[str, Any]]] = {}
    for path in _cell_files(args.cells):
        try:
            record = record_from_cell(read_verified_cell(path), str(path))
        except IncompleteCellError as error:
            raise CommandError(f"{error}; nothing was added") from None
        except ValueError as error:
            raise CommandError(f"{error}; nothing was added") from None
        records.setdefault(record["cell"]["suite"], []).append(record)
    if not args.any_versions:
        _check_versions([record for new in records.values() for record in new], Path(args.lock), args.lock != str(LOCK))
    if args.archive and len(records) > 1:
        raise CommandError(
            f"cells of several suites ({', '.join(sorted(records))}): one archive holds one suite; add each suite's "
            "cells apart, or leave out --archive (each suite then goes to its own)"
        )
    merged = {}
    for suite, new in records.items():
        path = Path(args.archive) if args.archive else archive_path(suite)
        try:
            merged[path] = add_records(read_archive(path), new)
        except ValueError as error:
            raise CommandError(f"{path}: {error}; nothing was added") from None
    for path, (all_records, counts) in merged.items():  # every archive checked before any is written
        all_records, sealed = seal_records(all_records)
        write_archive(path, all_records)
        print(
            f"{path}: {counts['added']} added, {counts['replaced']} replaced, {counts['unchanged']} unchanged; "
            f"{len(all_records)} cells, {path.stat().st_size} bytes"
            + (f"; {sealed} records archived before digests now carry one" if sealed else "")
        )
    return 0


def cmd_seal(args: argparse.Namespace) -> int:
    """Give every record of the archives that carries no digest (archived before digests existed) its digest, so
    that from now on an edit to it is refused; the records with one are verified, and nothing else changes."""
    from fdabench.reproduction.archive import read_archive, seal_records, write_archive

    archives = [Path(name) for name in args.archives]
    missing = [str(path) for path in archives if not path.is_file()]
    if missing:
        raise CommandError(f"{', '.join(missing)}: no such archive; nothing was sealed")
    sealed = {path: seal_records(read_archive(path)) for path in archives}  # every archive verified before any write
    for path, (records, count) in sealed.items():
        if count:
            write_archive(path, records)
        print(f"{path}: {count} of {len(records)} records sealed (the others carried a digest, verified)")
    return 0


def cmd_vouch(args: argparse.Namespace) -> int:
    """Record the code equivalences (`fdabench.reproduction.equivalence`) that the same cells run with the old code
    (`--before` cell files, `--before-archive` records) and with today's (`--after`) show, bit for bit; nothing is
    recorded unless every `--after` cell has its old run and agrees with it."""
    from fdabench.cell.reading import cell_identity, cell_name, read_cells
    from fdabench.core.io import write_json_atomic
    from fdabench.reproduction.archive import identity, read_archive, record_from_cell
    from fdabench.reproduction.equivalence import VouchError, merged, read_record, record_payload, vouch

    record = Path(args.record)
    recorded = read_record(record)  # a bad record is refused before anything is compared
    old: dict[tuple, dict[str, Any]] = {}
    if args.before:
        old.update({cell_identity(cell): cell for cell in read_cells(_cell_files(args.before)).values()})
    for path in args.before_archive or []:
        if not Path(path).is_file():
            raise CommandError(f"{path}: no such archive; pass an archive holding the old runs")
        old.update({_identity_key(identity(record)): record for record in read_archive(path)})
    new = read_cells(_cell_files(args.after)).values()
    pairs, unpaired = [], []
    for cell in new:
        before = old.get(cell_identity(cell))
        if before is None:
            unpaired.append(cell_name(cell))
            continue
        after = record_from_cell(cell) if _is_record(before) else cell
        pairs.append((cell_name(cell), before, after))
    if unpaired:
        raise CommandError(f"no old run of {', '.join(unpaired)}: give it with --before or --before-archive")
    try:
        entries = vouch(pairs, current_fingerprint)
    except VouchError as error:
        raise CommandError(f"{error}; nothing was recorded") from None
    for entry in entries:
        evidence = entry["evidence"]
        print(
            f"{entry['module']}: {entry['before'] or 'not reached'} -> {entry['after']} "
            f"({evidence['cells']} cells: {', '.join(evidence['datasets'])}; {len(evidence['methods'])} methods)"
        )
    if not entries:
        print(f"{len(pairs)} pairs agree and ran the same code: nothing to vouch for")
        return 0
    if args.dry_run:
        print(f"dry run: {record} not written")
        return 0
    write_json_atomic(record, record_payload(merged(recorded, entries)))
    print(f"{record}: {len(entries)} equivalences from {len(pairs)} pairs of cells recorded")
    return 0


def _identity_key(found: tuple) -> tuple:
    """An archive record's identity as `fdabench.cell.reading.cell_identity` gives a cell's (strings)."""
    return tuple(None if value is None else str(value) for value in found)


def _is_record(payload: dict[str, Any]) -> bool:
    from fdabench.reproduction.archive import ARCHIVE_FORMAT

    return payload.get("format") == ARCHIVE_FORMAT


def _check_versions(records: list[dict[str, Any]], lock: Path, named: bool) -> None:
    """Refuse (CommandError, nothing added) records whose versions disagree with the lock (`fdabench.cell.lock`);
    where the default lock is absent, say that nothing was checked; a lock `named` on the command line must exist."""
    import fdabench
    from fdabench.cell.lock import locked_pins, version_disagreements

    if not lock.is_file():
        if named:
            raise CommandError(f"{lock}: no such lock file; nothing was added")
        print(f"{lock}: no such lock file here; the cells' versions were not checked against one")
        return
    pins, python = locked_pins(read_text(lock, "a lock file (requirements.lock)"))
    if "torch" not in pins:
        raise FileReadError(lock, "pins no torch: not a lock `uv pip compile` wrote, or cut short")
    found = {
        "/".join(str(record["cell"][key]) for key in ("experiment", "method", "target", "seed")): problems
        for record in records
        if (problems := version_disagreements(record.get("versions") or {}, pins, python, fdabench.__version__))
    }
    if found:
        shown = "; ".join(f"{cell}: {', '.join(problems)}" for cell, problems in list(found.items())[:3])
        raise CommandError(
            f"{len(found)} of {len(records)} cells ran other versions than {lock} pins ({shown}"
            f"{'; ...' if len(found) > 3 else ''}); nothing was added. The archive holds what the locked environment "
            "produced: rerun them after the README's install, or record them anyway with --any-versions"
        )


def current_fingerprint(config: dict[str, Any]) -> dict[str, Any] | None:
    """The code fingerprint today's source gives the cell of `config`, as a cell records it ({fingerprint, modules});
    None where it cannot be computed, e.g. its method is no longer registered."""
    from fdabench.cell.plugin_scope import cell_code
    from fdabench.core.registry import UnknownNameError

    try:
        return cell_code(config).to_json()
    except (UnknownNameError, KeyError, ValueError, ImportError):
        return None


def archived_cells(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records as cells (`fdabench.reproduction.archive.cell_from_record`), each with `archive.older_commit`:
    whether its code differs from what today's source gives its configuration
    (`fdabench.reproduction.staleness.code_changes`)."""
    from fdabench.reproduction.archive import cell_from_record
    from fdabench.reproduction.equivalence import shipped
    from fdabench.reproduction.staleness import code_changes

    equivalences = shipped()
    cells = []
    for record in records:
        cell = cell_from_record(record)
        current = current_fingerprint(record["config"])
        cell["archive"]["older_commit"] = (
            current is None or code_changes(record["code"], current, equivalences.holds) != []
        )
        cells.append(cell)
    return cells


def archive_suite(records: list[dict[str, Any]], archive: Path) -> str | None:
    suites = {record["cell"]["suite"] for record in records}
    if len(suites) > 1:
        raise CommandError(f"{archive}: records of several suites ({', '.join(sorted(suites))})")
    return next(iter(suites), None)


def readme_suite(text: str) -> str | None:
    """The suite the README's status block is generated for (its first line names it), or None."""
    import re

    from fdabench.reproduction.paper_vs_ours import STATUS_BEGIN, STATUS_END

    if STATUS_BEGIN not in text or STATUS_END not in text:
        return None
    block = text.split(STATUS_BEGIN, 1)[1].split(STATUS_END, 1)[0]
    found = re.search(r"Suite `([^`]+)`", block)
    return found.group(1) if found else None


def committed_outputs(archive: Path, suite: str, readme: Path = README) -> dict[str, Path]:
    """Where an archive's regenerated outputs are committed: the pages paper_vs_ours.{csv,md,html} beside it, the
    summary `<archive folder>.csv` beside its folder (docs/reproduction/paper_cpu.csv for
    docs/reproduction/paper_cpu/cells.jsonl.gz), and `readme` where its status block names the suite."""
    folder = archive.parent
    outputs = {ext: folder / f"paper_vs_ours.{ext}" for ext in PAGES}
    outputs["summary"] = folder.parent / f"{folder.name}.csv"
    if readme.is_file() and readme_suite(read_text(readme, "the README")) == suite:
        outputs["readme"] = readme
    return outputs


def regenerate(
    archive: Path, outputs: dict[str, Path] | None = None, readme: Path = README
) -> tuple[dict[Path, str], list[dict[str, Any]]]:
    """({output path: the text the archive regenerates for it}, the archive's cells): the committed outputs
    (`committed_outputs`) unless `outputs` names them (keys csv, md, html, summary, readme). Nothing for an archive
    with no records."""
    from fdabench.reproduction.archive import read_archive
    from fdabench.reproduction.paper_vs_ours import compare_texts

    records = read_archive(archive)
    suite = archive_suite(records, archive)
    if suite is None:
        return {}, []
    outputs = outputs if outputs is not None else committed_outputs(archive, suite, readme)
    cells = archived_cells(records)
    readme_text = read_text(outputs["readme"], "the README") if "readme" in outputs else None
    texts = compare_texts(cells, suite, readme_text)
    return {path: texts[key] for key, path in outputs.items()}, cells


def compare_archive(args: argparse.Namespace) -> int:
    """`fdabench compare --archive`: regenerate (or, --check, compare) the outputs from the archive alone."""
    from fdabench.core.io import write_text_atomic

    archive = Path(args.archive)
    if not archive.is_file():
        raise CommandError(f"{archive}: no such archive (fdabench archive add creates it)")
    if args.cells:
        raise CommandError("give cell files or --archive, not both")
    explicit = {
        key: Path(value)
        for key, value in {
            "csv": args.csv,
            "md": args.md,
            "html": args.html,
            "summary": args.summary_csv,
            "readme": args.readme,
        }.items()
        if value
    }
    from fdabench.cell.digest import UNSEALED
    from fdabench.reproduction.archive import read_archive, unsealed

    records = read_archive(archive)
    suite = archive_suite(records, archive)
    if args.suite and suite and args.suite != suite:
        raise CommandError(f"{archive} holds cells of suite {suite}, not {args.suite}")
    if suite is None:
        stray = [archive.parent / f"paper_vs_ours.{ext}" for ext in PAGES]
        stray = [path for path in stray if path.exists()]
        print(
            f"{archive}: no archived cells yet; nothing regenerated. The summary and the README block of suite "
            f"{archive.parent.name} are not backed by archived cells (docs/reproduction.md)."
        )
        if args.check and stray:
            print(f"pages without archived cells behind them: {', '.join(map(str, stray))}")
            return 1
        return 0
    texts, cells = regenerate(archive, explicit or None)
    older = sum(cell["archive"]["older_commit"] for cell in cells)
    unsealed_count = unsealed(records)
    if unsealed_count:
        print(
            f"{archive}: {unsealed_count} of {len(cells)} records are {UNSEALED}; add their digests with "
            f"`fdabench archive seal {archive}`"
        )
    if args.check:
        differing = [
            path for path, text in texts.items() if not path.is_file() or read_text(path, "a generated page") != text
        ]
        for path in differing:
            print(f"{path}: differs from what {archive} regenerates")
        if differing:
            print(f"regenerate them: fdabench compare --archive {archive}")
            return 1
        print(
            f"{archive}: {len(texts)} outputs equal what its {len(cells)} cells regenerate "
            f"({older} from an older commit)"
        )
        return 0
    for path, text in texts.items():
        write_text_atomic(path, text)
    print(f"{archive}: {len(cells)} cells ({older} from an older commit) -> " + ", ".join(str(path) for path in texts))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from collections import Counter

    from fdabench.cell.digest import is_sealed, seal
    from fdabench.core import paths
    from fdabench.core.io import write_json_atomic
    from fdabench.jobs.validation import load_checked_params
    from fdabench.reproduction.archive import ARCHIVE_NAME, ARCHIVE_ROOT, cell_from_record, read_archive, record_state

    if args.archive:
        archives = [Path(args.archive)]
        if not archives[0].is_file():
            raise CommandError(f"{archives[0]}: no such archive")
    else:
        archives = sorted(Path(ARCHIVE_ROOT).glob(f"*/{ARCHIVE_NAME}"))
        if args.suite:
            archives = [path for path in archives if path.parent.name == args.suite]
        if not archives:
            raise CommandError(f"no archive under {ARCHIVE_ROOT}" + (f" for suite {args.suite}" if args.suite else ""))
    root = Path(args.root)
    status = 0
    for archive in archives:
        records = read_archive(archive)
        suite = archive_suite(records, archive)
        if suite is None:
            print(f"{archive}: no archived cells yet")
            continue
        if args.suite and suite != args.suite:
            raise CommandError(f"{archive} holds cells of suite {suite}, not {args.suite}")
        params = load_checked_params(args.params, layers=args.with_params, suite=suite)
        planned = {(c.experiment, c.method, str(c.target), int(c.seed)): c for c in params.cells()}
        counts: Counter = Counter()
        written = kept = 0
        for record in records:
            key = (record["cell"]["experiment"], record["cell"]["method"], str(record["cell"]["target"]))
            cell = planned.get((*key, int(record["cell"]["seed"])))
            config = cell.config if cell else None
            code = current_fingerprint(config) if cell else None
            state, reason = record_state(record, config, code)
            counts[state] += 1
            path = root / paths.fill(
                paths.CELL, suite=suite, experiment=key[0], method=key[1], target=key[2], seed=record["cell"]["seed"]
            )
            if state != "current":
                print(f"  {state:16} {path}  {reason}")
            if state != "current" and not args.all:
                continue
            if path.exists() and not args.overwrite:
                kept += 1
                continue
            if not args.dry_run:
                exported = _exported_cell(cell_from_record(record), code if state == "current" else None)
                write_json_atomic(path, seal(exported) if is_sealed(record) else exported)  # unsealed: as it is
            written += 1
        summary = ", ".join(f"{counts[state]} {state}" for state in sorted(counts))
        verb = "would write" if args.dry_run else "wrote"
        print(
            f"{archive}: {len(records)} cells of suite {suite}: {summary}; {verb} {written} cell files under "
            f"{root / 'results' / 'cells' / suite}"
            + (f", kept {kept} that exist (--overwrite replaces them)" if kept else "")
        )
        if counts["current"] != len(records):
            print(
                "  the others are not current (from an older commit: the code they depend on changed since they ran; "
                f"config changed: params.yaml resolves them differently). Rerun them with `snakemake --cores N "
                f"--config suite={suite}` and add them again with `fdabench archive add results/cells/{suite}`"
                + ("" if args.all else "; --all writes them too (snakemake then reruns them)")
            )
            status = 1 if args.check else status
    return status


def _exported_cell(cell: dict[str, Any], current: dict[str, Any] | None) -> dict[str, Any]:
    """The cell file of an archived cell: a current one (`fdabench.reproduction.staleness.code_changes` finds no module
    changed) carries today's fingerprint, which a workspace judges by its digest, and keeps the recorded one as
    `archive.recorded_code` where they differ (a module became bookkeeping since it ran)."""
    if current is not None and cell["code"] != current:
        cell["archive"]["recorded_code"] = cell["code"]
        cell["code"] = current
    return cell


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `archive` command and its subcommands."""
    archive = sub.add_parser(
        "archive",
        help="the reproduction archive: one compact record per finished cell, committed under docs/reproduction/ "
        "(fdabench compare --archive regenerates the published comparison from it)",
    )
    commands = archive.add_subparsers(dest="archive_command", required=True, metavar="COMMAND")

    p = commands.add_parser(
        "add",
        help="add finished cells to the archive of their suite, each replacing an older record of the same cell; "
        "refuses an incomplete cell, or one that ran other versions than requirements.lock pins (nothing is added "
        "then)",
    )
    reads(
        p.add_argument(
            "cells", type=INPUT, nargs="+", help="cell result files, or folders of them (e.g. results/cells/paper_cpu)"
        ),
        "cell",
    )
    reads(
        p.add_argument(
            "--archive",
            type=UPDATED,
            help="the archive file (default: docs/reproduction/<suite>/cells.jsonl.gz of the cells' suite)",
        ),
        "archive",
    )
    reads(
        p.add_argument(
            "--lock",
            type=INPUT,
            default=str(LOCK),
            help=f"the lock the cells' recorded torch, Python and fdabench versions must agree with (default {LOCK}); "
            "a cell that disagrees is refused and nothing is added",
        ),
        "lock",
    )
    p.add_argument(
        "--any-versions",
        action="store_true",
        help="add cells whatever versions they ran (the committed archives' test then fails on them)",
    )
    p.set_defaults(handler=cmd_add)

    p = commands.add_parser(
        "seal",
        help="add a digest to every record archived before records carried one (each record's digest is checked on "
        "every read, so an edited record is refused by name); records that carry one are verified, nothing else "
        "changes",
    )
    reads(
        p.add_argument(
            "archives", nargs="+", type=UPDATED, help="archive files (e.g. docs/reproduction/paper_cpu/cells.jsonl.gz)"
        ),
        "archive",
    )
    p.set_defaults(handler=cmd_seal)

    p = commands.add_parser(
        "vouch",
        help="record that today's code gives the same cells, bit for bit, as the code the old runs recorded, so "
        "that archived cells stay current across a refactor: every --after cell needs its old run (--before or "
        "--before-archive), on the same device, threads and versions; a module no pair ran is not vouched for",
    )
    reads(
        p.add_argument("--before", type=INPUT, nargs="+", help="the old runs: cell files, or folders of them"), "cell"
    )
    reads(
        p.add_argument("--before-archive", type=INPUT, nargs="+", help="the old runs as the records of archive files"),
        "archive",
    )
    reads(
        p.add_argument(
            "--after", type=INPUT, nargs="+", required=True, help="the same cells run with this checkout (folders ok)"
        ),
        "cell",
    )
    reads(
        p.add_argument(
            "--record",
            type=UPDATED,
            default=str(RECORD),
            help="the code-equivalence record file the entries are added to (default: the one fdabench ships)",
        ),
        "equivalences",
    )
    p.add_argument("--dry-run", action="store_true", help="write nothing; say what would be recorded")
    p.set_defaults(handler=cmd_vouch)

    p = commands.add_parser(
        "export",
        help="rebuild the cell files of the archived cells that are current (same configuration and code "
        "fingerprint as params.yaml and the source give now), so snakemake and fdabench status take them as done; "
        "lists the others (from an older commit, config changed). On a fresh clone, prepare the data first "
        "(snakemake --config suite=S --until partition): data made after the export make Snakemake rerun the cells",
    )
    reads(
        p.add_argument(
            "--archive", type=INPUT, help="one archive file (default: every docs/reproduction/<suite>/cells.jsonl.gz)"
        ),
        "archive",
    )
    suite_arguments(p)
    p.add_argument("--root", type=OUTPUT_ROOT, default=".", help="the folder results/cells/ is under (default: .)")
    p.add_argument("--all", action="store_true", help="also write the records that are not current")
    p.add_argument("--overwrite", action="store_true", help="replace cell files that exist (default: keep them)")
    p.add_argument("--dry-run", action="store_true", help="write nothing; say what would be written")
    p.add_argument("--check", action="store_true", help="exit with status 1 unless every archived cell is current")
    p.set_defaults(handler=cmd_export)
