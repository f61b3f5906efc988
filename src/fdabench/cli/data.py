"""Data stage commands: acquire raw data, prepare a dataset's domains, write stand-ins, partition."""

from __future__ import annotations

import argparse
import os
import sys
import time

from fdabench.cli.common import CommandError, bounded, json_argument, require_prepared
from fdabench.cli.file_arguments import reads
from fdabench.cli.files import INPUT_FOLDER, OUTPUT, OUTPUT_FOLDER, OUTPUT_ROOT


def cmd_prepare(args: argparse.Namespace) -> int:
    import torch

    from fdabench.config.partition_checks import generation_error
    from fdabench.config.resolve import given_dataset_options
    from fdabench.config.schema import object_schema, schema_errors
    from fdabench.data import get_dataset

    source = get_dataset(args.dataset)
    problems = schema_errors(args.options or {}, object_schema(source.options_schema), prefix=("--options",))
    if problems:
        raise CommandError(f"{args.dataset} options: {'; '.join(problems)} (the keys of datasets.{args.dataset})")
    torch.set_num_threads(args.threads)
    options = given_dataset_options(args.dataset, args.options or {})
    too_big = generation_error(args.dataset, options)
    if too_big:
        raise CommandError(too_big)
    started = time.perf_counter()
    prepared = source.prepare(options, raw_root=args.raw_root)
    prepared.save(args.output)
    sizes = ", ".join(f"{name}: {len(arrays.y)}" for name, arrays in prepared.domains.items())
    print(f"prepared {args.dataset} ({sizes}) in {time.perf_counter() - started:.1f}s -> {args.output}")
    return 0


def cmd_stand_in(args: argparse.Namespace) -> int:
    from fdabench.data.image_folders import write_stand_in

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
    from fdabench.core.formats import PARTITION
    from fdabench.core.io import write_json_atomic
    from fdabench.data import PreparedDataset, get_dataset, get_partitioner, partition_options

    require_prepared(args.prepared)
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
    payload = {"format": PARTITION, **partition.to_json(prepared)}  # its content_hash is of the partition alone
    write_json_atomic(args.output, payload)
    counts = ", ".join(f"{c['name']}: {c['count']}" for c in payload["clients"])
    print(f"partition {prepared.name} target {args.target} seed {args.seed}: {counts} -> {args.output}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this stage's subcommands."""
    p = sub.add_parser("prepare", help="build a dataset's domains (embedded, generated or from raw files)")
    p.add_argument("--dataset", required=True, help="dataset name (params.yaml datasets)")
    p.add_argument("--options", type=json_argument, help="dataset options as JSON (defaults fill the rest)")
    p.add_argument(
        "--raw-root",
        type=INPUT_FOLDER,
        help="directory holding the raw datasets it reads (data/raw, or a mirror: same layout)",
    )
    p.add_argument("--output", type=OUTPUT_FOLDER, required=True, help="the prepared dataset directory")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (image decoding and resizing)")
    p.set_defaults(handler=cmd_prepare)

    p = sub.add_parser(
        "stand-in", help="write a generated stand-in manifest and images for midrc, chexpert or mimic (dry runs)"
    )
    p.add_argument("dataset", choices=["midrc", "chexpert", "mimic"], help="the hospital dataset to stand in for")
    p.add_argument("--output", type=OUTPUT_ROOT, required=True, help="directory for manifest.csv and images/")
    p.add_argument("--per-domain", type=bounded("count"), default=60, help="images per domain (default 60)")
    p.set_defaults(handler=cmd_stand_in)

    p = sub.add_parser(
        "acquire", help="bring a raw dataset into data/raw from a mirror (or, with --download, its source), verified"
    )
    p.add_argument(
        "--raw", required=True, help="raw dataset name (e.g. FashionMNIST, MNIST, CIFAR10, heart_disease, PACS)"
    )
    p.add_argument("--root", type=OUTPUT_ROOT, default="data/raw", help="where raw datasets are kept")
    p.add_argument("--mirror", type=INPUT_FOLDER, help="local mirror directory (default: $FDABENCH_DATA_MIRROR)")
    p.add_argument(
        "--download", action="store_true", help="download from the canonical source when the mirror lacks it (network)"
    )
    p.add_argument("--verify", action="store_true", help="re-check an acquired dataset against its manifest")
    p.set_defaults(handler=cmd_acquire)

    p = sub.add_parser("partition", help="split a prepared dataset into sources and target splits")
    reads(
        p.add_argument(
            "--prepared", type=INPUT_FOLDER, required=True, help="the prepared dataset directory (fdabench prepare)"
        ),
        "prepared",
    )
    p.add_argument("--target", required=True, help="target name (use --target=-90 for names starting with '-')")
    p.add_argument("--seed", type=int, required=True, help="the seed of the split")
    p.add_argument("--partitioner", help="partitioner name (default: the dataset's)")
    p.add_argument("--options", type=json_argument, help="partitioner options as JSON (defaults fill the rest)")
    p.add_argument("--output", type=OUTPUT, required=True, help="the partition JSON (indices and manifest)")
    p.set_defaults(handler=cmd_partition)
