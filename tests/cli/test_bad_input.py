"""The bad-input catalogue: every case gets a clear message that names the problem and the fix, before any
compute, and nothing already computed is overwritten or deleted. The documentation's bad-input catalogue
(docs/reference/bad-input.md) is generated from these cases when the site is built (docs/hooks/reference.py)."""

from __future__ import annotations

import contextlib
import copy
import errno
import gzip
import hashlib
import importlib.util
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml

from fdabench.cell.setup import CellInputError, load_problem
from fdabench.cli import main
from fdabench.config import ParamsError, validate_params
from fdabench.core import devices
from fdabench.core.io import write_json_atomic
from fdabench.data import PreparedDataset, get_partitioner, raw
from fdabench.data.base import DomainArrays, PreparedDataError
from fdabench.data.image_folders import ManifestError, read_manifest
from fdabench.federation.problem import build_problem

REPO = Path(__file__).resolve().parents[2]
SHIPPED = yaml.safe_load((REPO / "params.yaml").read_text())


@dataclass(frozen=True)
class Case:
    name: str  # as listed in the generated bad-input catalogue
    message: str  # a regular expression the message must match
    run: Callable[[Path], str]  # returns the message of the error the case raises


def _params(edit) -> Callable[[Path], str]:
    def run(_: Path) -> str:
        raw_params = copy.deepcopy(SHIPPED)
        edit(raw_params)
        with pytest.raises(ParamsError) as caught:
            validate_params(raw_params)
        return str(caught.value)

    return run


def _demo(raw_params):
    return raw_params["suites"]["demo"]


def _experiment(raw_params):
    return _demo(raw_params)["experiments"]["colored_digits"]


def _train(raw_params):
    return _demo(raw_params).setdefault("train", {})


def _rename_experiment(name):
    def edit(raw_params):
        _demo(raw_params)["experiments"][name] = _demo(raw_params)["experiments"].pop("synthetic")

    return edit


def _tiny_prepared(path: Path, x=None) -> PreparedDataset:
    x = np.zeros((12, 2), np.float32) if x is None else x
    domains = {d: DomainArrays(x.copy(), np.arange(12) % 2) for d in ("a", "b")}
    prepared = PreparedDataset("amazon_reviews", "classification", 2, (2,), domains)  # labelled_target by default
    prepared.save(path)
    return prepared


def _partition_file(prepared_dir: Path, path: Path, target="b", seed=0) -> Path:
    assert main(
        [
            "--debug",  # the library's own exception, not the command line's one line
            "partition",
            "--prepared",
            str(prepared_dir),
            f"--target={target}",
            "--seed",
            str(seed),
            "--partitioner",
            "labelled_target",
            "--options",
            '{"target_labelled": 4}',
            "--output",
            str(path),
        ]
    ) in (0, None)
    return path


def _error(run, *exceptions) -> str:
    with pytest.raises(exceptions) as caught:
        run()
    return str(caught.value)


def _missing_raw(tmp: Path) -> str:
    return _error(lambda: raw.acquire("MNIST", tmp / "raw", mirror=tmp / "empty"), raw.RawDataMissing)


def _raw_checksum(tmp: Path) -> str:
    spec = raw.RawDataset(
        name="FakeSet",
        description="a fake",
        how_to_get="make it",
        files=(raw.RawFile("raw/a.gz", hashlib.sha256(b"expected").hexdigest()),),
        finalize=raw._gunzip_all,
    )
    raw.RAW_DATASETS._members["FakeSet"] = spec
    try:
        (tmp / "mirror/FakeSet/raw").mkdir(parents=True)
        with gzip.open(tmp / "mirror/FakeSet/raw/a.gz", "wb") as handle:
            handle.write(b"tampered")
        message = _error(lambda: raw.acquire("FakeSet", tmp / "raw", mirror=tmp / "mirror"), ValueError)
        assert not (tmp / "raw/FakeSet").exists()
        return message
    finally:
        del raw.RAW_DATASETS._members["FakeSet"]


def _truncated_prepared(tmp: Path) -> str:
    _tiny_prepared(tmp / "prepared")
    data = (tmp / "prepared/x0.npy").read_bytes()
    (tmp / "prepared/x0.npy").write_bytes(data[:-8])
    return _error(lambda: PreparedDataset.load(tmp / "prepared"), PreparedDataError)


def _edited_prepared(tmp: Path) -> str:
    _tiny_prepared(tmp / "prepared")
    data = bytearray((tmp / "prepared/x1.npy").read_bytes())
    data[-1] ^= 0xFF  # same size, other content
    (tmp / "prepared/x1.npy").write_bytes(bytes(data))
    partition = tmp / "partition.json"
    message = _error(lambda: _partition_file(tmp / "prepared", partition), PreparedDataError)
    assert not partition.exists()
    return message


def _mismatched_partition(tmp: Path) -> str:
    _tiny_prepared(tmp / "first")
    partition = _partition_file(tmp / "first", tmp / "partition.json")
    _tiny_prepared(tmp / "second", x=np.ones((12, 2), np.float32))
    config = {"target": "b", "seed": 0}
    return _error(lambda: load_problem(config, str(tmp / "second"), str(partition), "cpu"), CellInputError)


def _other_target_partition(tmp: Path) -> str:
    _tiny_prepared(tmp / "prepared")
    partition = _partition_file(tmp / "prepared", tmp / "partition.json", target="a")
    config = {"target": "b", "seed": 0}
    return _error(lambda: load_problem(config, str(tmp / "prepared"), str(partition), "cpu"), CellInputError)


def _manifest(tmp: Path, rows: list[str], header="path,state,label") -> tuple[Path, Path]:
    images = tmp / "images"
    for state in ("IL", "NC"):
        (images / state).mkdir(parents=True, exist_ok=True)
        for k in range(3):
            (images / state / f"{k}.png").write_bytes(b"png")
    manifest = tmp / "manifest.csv"
    good = [f"{state}/{k}.png,{state},{k}" for state in ("IL", "NC") for k in range(2)]
    manifest.write_text("\n".join([header, *good, *rows]) + "\n")
    return manifest, images


def _manifest_case(rows, header="path,state,label", domains=None, num_classes=None):
    def run(tmp: Path) -> str:
        manifest, images = _manifest(tmp, rows, header)
        return _error(
            lambda: read_manifest(manifest, images, "state", "label", [], domains, num_classes=num_classes),
            ManifestError,
        )

    return run


def _non_finite(value):
    def run(tmp: Path) -> str:
        x = np.zeros((12, 2), np.float32)
        x[3, 1] = value
        prepared = _tiny_prepared(tmp / "prepared", x=x)
        partition = get_partitioner("labelled_target").split(prepared, "b", 0, {"target_labelled": 4})
        return _error(lambda: build_problem(prepared, partition, "cpu"), ValueError)

    return run


def _empty_client(tmp: Path) -> str:
    x, y = np.zeros((20, 1), np.float32), np.array([0] * 18 + [1] * 2)  # class 1: 2 samples for ~4 clients
    domains = {"train": DomainArrays(x, y), "test": DomainArrays(x, y)}
    PreparedDataset("fashion_mnist", "classification", 2, (1,), domains).save(tmp / "prepared")
    output = tmp / "partition.json"
    options = {"clients": 10, "split": "label1", "target_share": "iid", "target_labelled": 1}
    with pytest.raises(SystemExit) as caught:
        main(
            [
                "partition",
                "--prepared",
                str(tmp / "prepared"),
                "--target=noise0.2",
                "--seed",
                "0",
                "--partitioner",
                "feature_noise",
                "--options",
                json.dumps(options),
                "--output",
                str(output),
            ]
        )
    assert not output.exists()
    return str(caught.value)


def _zero_labelled(tmp: Path) -> str:
    prepared = _tiny_prepared(tmp / "prepared")
    return _error(
        lambda: get_partitioner("labelled_target").split(prepared, "b", 0, {"target_labelled": 0.01}), ValueError
    )


def _train_arguments(tmp: Path, output: Path, partition: Path | None = None) -> list[str]:
    """`fdabench train` of a demo cell on a tiny prepared dataset and its partition (or `partition`), to `output`."""
    _tiny_prepared(tmp / "prepared")
    partition = partition or _partition_file(tmp / "prepared", tmp / "partition.json")
    cell = validate_params(copy.deepcopy(SHIPPED)).cell("colored_digits", "fedgp", "+90", 0).config
    return ["train", "--cell", json.dumps(cell), "--prepared", str(tmp / "prepared"), "--partition", str(partition),
            "--output", str(output)]  # fmt: skip


def _unwritable_results(tmp: Path) -> list[str]:
    (tmp / "results").write_text("a file where the results folder should be")
    return _train_arguments(tmp, tmp / "results/cell.json")


def _full_disk(tmp: Path) -> str:
    target = tmp / "cell.json"
    write_json_atomic(target, {"status": "complete", "final": 0.5})
    before = target.read_bytes()
    write_text = Path.write_text

    def fills_the_disk(self, text, *args, **kwargs):
        write_text(self, text[:10], *args, **kwargs)  # part of the file, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    Path.write_text = fills_the_disk
    try:
        message = _error(lambda: write_json_atomic(target, {"status": "complete", "final": 0.7}), OSError)
    finally:
        Path.write_text = write_text
    assert target.read_bytes() == before  # the finished file is untouched
    assert [p.name for p in tmp.iterdir()] == ["cell.json"]  # no partial file left behind
    return message


def _cli(arguments) -> Callable[[Path], str]:
    """A command line (`arguments(tmp)`) that must fail with one line on stderr, exit status 2, no traceback."""

    def run(tmp: Path) -> str:
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            code = main(arguments(tmp))
        text = stderr.getvalue()
        assert code == 2 and "Traceback" not in text and len(text.strip().splitlines()) == 1, (code, text)
        return text

    return run


def _finished_cell(tmp: Path) -> Path:
    path = tmp / "cell.json"
    cell = {"format": "fdabench.cell/1", "status": "complete", "final": 0.5, "cell": {}, "config": {}}
    path.write_text(json.dumps(cell))
    return path


def _truncated_cell(tmp: Path) -> list[str]:
    path = _finished_cell(tmp)
    path.write_bytes(path.read_bytes()[:30])
    return ["table", str(path)]


def _newer_format_cell(tmp: Path) -> list[str]:
    path = _finished_cell(tmp)
    path.write_text(json.dumps({**json.loads(path.read_text()), "format": "fdabench.cell/2"}))
    return ["table", str(path)]


def _empty_header(tmp: Path) -> list[str]:
    _tiny_prepared(tmp / "prepared")
    (tmp / "prepared/header.json").write_text("")
    return [
        "partition",
        "--prepared",
        str(tmp / "prepared"),
        "--target=b",
        "--seed",
        "0",
        "--output",
        str(tmp / "p.json"),
    ]


def _truncated_partition(tmp: Path) -> list[str]:
    _tiny_prepared(tmp / "prepared")
    partition = _partition_file(tmp / "prepared", tmp / "partition.json")
    partition.write_bytes(partition.read_bytes()[:40])
    cell = validate_params(copy.deepcopy(SHIPPED)).cell("colored_digits", "fedgp", "+90", 0).config
    return ["train", "--cell", json.dumps(cell), "--prepared", str(tmp / "prepared"), "--partition", str(partition),
            "--output", str(tmp / "cell.json")]  # fmt: skip


def _restored(tmp: Path) -> Path:
    """A fresh tiny prepared dataset (the header `_empty_header` emptied, written again)."""
    _tiny_prepared(tmp / "prepared")
    return tmp / "prepared"


def _cuda_without_cuda(tmp: Path) -> str:
    (tmp / "params.yaml").write_text(yaml.safe_dump({**SHIPPED, "device": "cuda"}))
    available = devices.cuda_available
    devices.cuda_available = lambda: False
    try:
        return _cli(lambda t: ["validate", "--params", str(t / "params.yaml")])(tmp)
    finally:
        devices.cuda_available = available


def _params_text(text: str) -> Callable[[Path], list[str]]:
    """`fdabench validate` of params.yaml with `text` appended."""

    def arguments(tmp: Path) -> list[str]:
        (tmp / "params.yaml").write_text((REPO / "params.yaml").read_text() + text)
        return ["validate", "--params", str(tmp / "params.yaml")]

    return arguments


BILLION_LAUGHS = "\nlaughs:\n" + "".join(
    f"  l{k}: &l{k} [{', '.join([f'*l{k - 1}'] * 10) if k else ', '.join('x' * 10)}]\n" for k in range(9)
)


def _broken_plugin(tmp: Path) -> str:
    """A method plugin whose module is not there: skipped with one line (suites that use it are refused with it)."""
    from importlib.metadata import EntryPoint

    from fdabench.core import plugins
    from fdabench.core.registry import Registry

    installed = plugins.entry_points
    plugins.entry_points = lambda group: [EntryPoint("mine", "no_such_plugin.method:Mine", "fdabench.methods")]
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            plugins.load_plugins(Registry("method"))
    finally:
        plugins.entry_points = installed
    assert len(stderr.getvalue().strip().splitlines()) == 1
    return stderr.getvalue()


def _truncated_checkpoint(tmp: Path) -> str:
    from fdabench.federation.checkpoint import Checkpoints

    (tmp / ".cell.json.checkpoint.pt").write_bytes(b"PK\x03\x04 cut short")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert Checkpoints(tmp / ".cell.json.checkpoint.pt", 2, {}).load() is None
    assert not (tmp / ".cell.json.checkpoint.pt").exists()
    return printed.getvalue()


def _directory_for_a_cell(tmp: Path) -> str:
    from fdabench.jobs.heal import heal_cell

    (tmp / "seed0.json").mkdir()
    return heal_cell(tmp / "seed0.json", tmp / "marker", {}, dict, "results/cells/…/seed0.json")


def _partition_as_cell(tmp: Path) -> list[str]:
    _tiny_prepared(tmp / "prepared")
    return ["table", str(_partition_file(tmp / "prepared", tmp / "partition.json"))]


CASES = [
    Case(
        "unknown suite", r"suite: 'dem' is not defined; allowed values: demo", _params(lambda r: r.update(suite="dem"))
    ),
    Case(
        "unknown method",
        r"suites\.demo\.methods\[\d+\]: unknown method 'fedgpp'; allowed values: .*; did you mean 'fedgp'",
        _params(lambda r: _demo(r)["methods"].append("fedgpp")),
    ),
    Case(
        "unknown dataset",
        r"experiments\.colored_digits\.dataset: 'colored' is not allowed; allowed values: ",
        _params(lambda r: _experiment(r).update(dataset="colored")),
    ),
    Case(
        "unknown target",
        r"targets\[0\]: '\+45' is not a target of colored_digits; allowed: \+90, \+80, -90",
        _params(lambda r: _experiment(r).update(targets=["+45"])),
    ),
    Case(
        "unknown experiment in a table",
        r"tables\.table1\.experiments\[0\]: unknown experiment 'nope'; allowed values: ",
        _params(lambda r: _demo(r)["tables"]["table1"].update(experiments=["nope"])),
    ),
    Case(
        "unknown key",
        r"\(top level\): unknown key\(s\) 'sweet'; allowed keys: ",
        _params(lambda r: r.update(sweet="demo")),
    ),
    Case(
        "wrong type",
        r"suites\.demo\.train\.rounds: 'ten' has the wrong type; expected integer",
        _params(lambda r: _train(r).update(rounds="ten")),
    ),
    Case(
        "β out of range",
        r"methods\.fedgp\.beta: 1\.5 is greater than the maximum of 1",
        _params(lambda r: r["methods"].update(fedgp={"beta": 1.5})),
    ),
    Case(
        "fraction out of range",
        r"partition\.holdout_fraction: 1\.5 is greater than or equal to the maximum of 1",
        _params(lambda r: _experiment(r).update(partition={"holdout_fraction": 1.5})),
    ),
    Case(
        "zero rounds",
        r"suites\.demo\.train\.rounds: 0 is less than the minimum of 1",
        _params(lambda r: _train(r).update(rounds=0)),
    ),
    Case(
        "negative seed",
        r"suites\.demo\.seeds\[0\]: -1 is less than the minimum of 0",
        _params(lambda r: _demo(r).update(seeds=[-1])),
    ),
    Case("no seeds", r"suites\.demo\.seeds: \[\] should be non-empty", _params(lambda r: _demo(r).update(seeds=[]))),
    Case(
        "negative batch size",
        r"suites\.demo\.train\.source_batch_size: -5 is less than the minimum of 0",
        _params(lambda r: _train(r).update(source_batch_size=-5)),
    ),
    Case(
        "a suite with no experiments",
        r"suites\.demo\.experiments: \{\} should be non-empty",
        _params(lambda r: _demo(r).update(experiments={})),
    ),
    Case(
        "a name with shell metacharacters",
        r"suites\.demo\.experiments: name 'a;rm -rf' is not allowed \(letters, digits and _ \. \+ - only",
        _params(_rename_experiment("a;rm -rf")),
    ),
    Case(
        "a name with a space",
        r"name 'a b' is not allowed \(letters, digits",
        _params(_rename_experiment("a b")),
    ),
    Case("a name with ../", r"name '\.\./x' is not allowed", _params(_rename_experiment("../x"))),
    Case(
        "zero labelled target samples (params)",
        r"partition\.target_labelled: 0 is less than or equal to the minimum of 0",
        _params(lambda r: _experiment(r).update(partition={"target_labelled": 0})),
    ),
    Case(
        "a suite named like a results folder",
        r"suites\.cells: the name is taken by results/cells/; rename the suite",
        _params(lambda r: r["suites"].update(cells=r["suites"]["demo"])),
    ),
    Case(
        "a missing raw file",
        r"MNIST/raw/train-images-idx3-ubyte\.gz(.|\n)*How to get it: torchvision\.datasets\.MNIST",
        _missing_raw,
    ),
    Case("a raw file with a wrong checksum", r"corrupt or unexpected files:\n  raw/a\.gz: sha256", _raw_checksum),
    Case(
        "truncated prepared data",
        r"x0\.npy is truncated or was edited \(\d+ bytes, expected \d+ bytes\); delete .* and rerun `fdabench "
        r"prepare`",
        _truncated_prepared,
    ),
    Case(
        "edited prepared data",
        r"x1\.npy changed since it was written; delete .* and rerun `fdabench prepare`",
        _edited_prepared,
    ),
    Case(
        "a partition that does not match its prepared data",
        r"was made from other prepared data than .*; rerun its partition job",
        _mismatched_partition,
    ),
    Case(
        "another cell's partition",
        r"partition .* is for target a seed 0, not this cell",
        _other_target_partition,
    ),
    Case(
        "manifest: missing columns",
        r"missing column\(s\) path; it has file, state, label",
        _manifest_case([], header="file,state,label"),
    ),
    Case(
        "manifest: absolute path",
        r"paths must be relative and stay inside image_root .*; rows \[4\]",
        _manifest_case(["/abs/x.png,IL,0"]),
    ),
    Case(
        "manifest: path escaping the image root",
        r"paths must be relative and stay inside image_root .*; rows \[4\]",
        _manifest_case(["../../etc/passwd,IL,0"]),
    ),
    Case(
        "manifest: duplicate ids",
        r"duplicate ids in column 'path': \['IL/0\.png'\]; rows \[0, 4\]",
        _manifest_case(["IL/0.png,NC,1"]),
    ),
    Case(
        "manifest: unknown label values",
        r"unknown label values \[7\] in column 'label' \(num_classes = 2: 0\.\.1\); rows \[4\]",
        _manifest_case(["IL/2.png,IL,7"], num_classes=2),
    ),
    Case(
        "manifest: empty domain",
        r"domain\(s\) \['CA'\] have no rows in column 'state'; present: \['IL', 'NC'\]",
        _manifest_case([], domains=["IL", "NC", "CA"]),
    ),
    Case(
        "NaN features",
        r"client a \(domain a\) has 1 non-finite input values \(NaN or infinite\); clean the raw data",
        _non_finite(np.nan),
    ),
    Case("infinite features", r"has 1 non-finite input values \(NaN or infinite\)", _non_finite(np.inf)),
    Case(
        "an empty client",
        r"leaves source client\d+(, source client\d+)* without samples; use fewer clients",
        _empty_client,
    ),
    Case(
        "a target with zero labelled samples (data)",
        r"target_labelled = 0\.01 selects 0 of 11 samples; need between 1 and 11",
        _zero_labelled,
    ),
    Case(
        "an unwritable results folder",
        r"cannot write .*cell\.json \(.*\); make .* writable or choose another folder\. Nothing was run",
        _cli(_unwritable_results),
    ),
    Case(
        "a full disk during a cell write",
        r"could not write .*cell\.json: No space left on device; free space or fix permissions and rerun \(an earlier "
        r"file there, if any, is untouched\)",
        _full_disk,
    ),
    Case(
        "NaN hyper-parameter",
        r"methods\.fedgp\.beta: nan is not a finite number; write a number \(NaN and infinity are refused\)",
        _params(lambda r: r["methods"].update(fedgp={"beta": float("nan")})),
    ),
    Case(
        "infinite learning rate",
        r"suites\.demo\.train\.source_lr: inf is not a finite number",
        _params(lambda r: _train(r).update(source_lr=float("inf"))),
    ),
    Case(
        "NaN momentum",
        r"suites\.demo\.train\.momentum: nan is not a finite number",
        _params(lambda r: _train(r).update(momentum=float("nan"))),
    ),
    Case(
        "a learning rate that diverges",
        r"train\.source_lr: 1e\+30 is above 100 \(training would diverge to NaN\); use a learning rate",
        _params(lambda r: _train(r).update(source_lr=1e30)),
    ),
    Case(
        "a model option of the wrong type",
        r"train\.model_options\.hidden: '32' has the wrong type; mlp expects list \(like its default \(64,\)\)",
        _params(lambda r: _train(r).update(model_options={"hidden": "32"})),
    ),
    Case(
        "a misspelt model option",
        r"train\.model_options: mlp has no option 'hiden'; its options: hidden",
        _params(lambda r: _train(r).update(model_options={"hiden": [32]})),
    ),
    Case(
        "an auto-weighting target batch as large as the labelled target",
        r"colored_digits: method 'fedda_auto', target '\+90': target_batch_size 48 leaves 1 target batch per round of "
        r"its 48 labelled samples; auto-weighting needs at least 2: set target_batch_size at most 24",
        _params(lambda r: _train(r).update(target_batch_size=48)),
    ),
    Case(
        "device cuda without CUDA",
        r"device: 'cuda' but this machine has no CUDA \(torch\.cuda\.is_available\(\) is false\); set device: auto "
        r"or cpu",
        _cuda_without_cuda,
    ),
    Case(
        "10¹² rounds",
        r"train\.rounds: 1000000000001 rounds \(with warm-up\) is above the limit of 100000; fewer rounds, or "
        r"confirm with `limits: \{rounds: 1000000000001\}`",
        _params(lambda r: _train(r).update(rounds=10**12, warmup_rounds=1)),
    ),
    Case(
        "10,000 seeds",
        r"suites\.demo: \d+ cells \(methods, with a sweep.s draws, x targets x seeds\), above the limit of 20000; "
        r"fewer seeds, targets or "
        r"methods, or confirm with `limits: \{cells: \d+\}`",
        _params(lambda r: _demo(r).update(seeds=list(range(10_000)))),
    ),
    Case(
        "a data root with shell characters",
        r"data\.root: path 'd --help; touch INJECTED; #' is not allowed \(letters, digits, spaces and _ \. \+ - / only",
        _params(lambda r: r["data"].update(root="d --help; touch INJECTED; #")),
    ),
    Case(
        "a data root starting with -",
        r"data\.root: path '--output' is not allowed",
        _params(lambda r: r["data"].update(root="--output")),
    ),
    Case(
        "a truncated cell in a table",
        r"^fdabench: .*cell\.json is not readable JSON \(truncated or edited: .*\); rerun `snakemake` \(it reruns "
        r"such cells",
        _cli(_truncated_cell),
    ),
    Case(
        "a cell of another format version in a table",
        r"cell\.json has format 'fdabench\.cell/2', not fdabench\.cell/1 \(written by another fdabench version\); "
        r"rerun `snakemake`",
        _cli(_newer_format_cell),
    ),
    Case(
        "validate --params a directory",
        r"^fdabench: .* is not a file; pass the params file \(--params params\.yaml\)",
        _cli(lambda tmp: ["validate", "--params", str(tmp)]),
    ),
    Case(
        "partition --target not a domain",
        r"^fdabench: .*'nope'.*",
        _cli(
            lambda tmp: [
                "partition",
                "--prepared",
                str(_restored(tmp)),
                "--target=nope",
                "--seed",
                "0",
                "--output",
                str(tmp / "p.json"),
            ]
        ),
    ),
    Case(
        "train --cell without a cell",
        r"^fdabench: --cell lacks experiment, dataset, method, algorithm, hparams, target, seed, train: pass a "
        r"resolved cell configuration",
        _cli(lambda tmp: ["train", "--cell", "{}", "--prepared", "p", "--partition", "q", "--output", "o"]),
    ),
    Case(
        "an empty header.json",
        r"^fdabench: .*header\.json: prepared data file is not readable JSON \(.*\); delete it and rerun its prepare "
        r"job",
        _cli(_empty_header),
    ),
    Case(
        "a truncated partition file",
        r"^fdabench: .*partition\.json: partition file is not readable JSON \(.*\); delete it and rerun its "
        r"partition job",
        _cli(_truncated_partition),
    ),
    Case(
        "prepare --options that params.yaml would reject",
        r"^fdabench: colored_digits options: --options\.label_noise: 2 is greater than the maximum of",
        _cli(
            lambda tmp: [
                "prepare",
                "--dataset",
                "colored_digits",
                "--options",
                '{"label_noise": 2}',
                "--output",
                str(tmp / "prepared"),
            ]
        ),  # fmt: skip
    ),
    Case(
        "a key repeated in params.yaml",
        r"^fdabench: .*params\.yaml: line \d+ repeats key 'suite' of the mapping that gives it at line 7 \(YAML would "
        r"keep the last value\); remove one of them",
        _cli(_params_text("suite: smoke\n")),
    ),
    Case(
        "nested aliases (a billion laughs)",
        r"params\.yaml: aliases expand the document beyond 100000 values \(nested or recursive aliases\)",
        _cli(_params_text(BILLION_LAUGHS)),
    ),
    Case(
        "a per-target override for a target no experiment has",
        r"methods\.fedgp\.by_target\.-9: no experiment that runs 'fedgp' has target '-9', so the override would be "
        r"ignored; did you mean '-90'\? \(targets: \+90, \+80, -90, .*\)",
        _params(lambda r: r["methods"].update(fedgp={"beta": 0.5, "by_target": {"-9": {"beta": 0.2}}})),
    ),
    Case(
        "a labelled-count override for a target the experiment lacks",
        r"partition\.target_labelled_overrides\.\+8: '\+8' is not a target of this experiment, so the override would "
        r"be ignored; its targets: \+90, \+80, -90; did you mean '\+80'",
        _params(lambda r: _experiment(r).update(partition={"target_labelled_overrides": {"+8": 10}})),
    ),
    Case(
        "final_rounds longer than the run",
        r"colored_digits\.train\.final_rounds: 10 is more than the run's 4 rounds \(the final metric would average "
        r"warm-up or fewer rounds\); set final_rounds at most 4",
        _params(lambda r: _experiment(r).update(train={"rounds": 4, "final_rounds": 10})),
    ),
    Case(
        "momentum with the adam optimiser",
        r"train\.momentum: 0\.9 is SGD's momentum, and optimizer is adam \(which would ignore it\); set optimizer: "
        r"sgd, or remove momentum",
        _params(lambda r: _experiment(r).update(train={"optimizer": "adam", "momentum": 0.9})),
    ),
    Case(
        "a target batch larger than the labelled target",
        r"colored_digits\.train\.target_batch_size: 100 is more than target '\+90''s 48 labelled samples \(one batch "
        r"would hold them all\); set 0 \(full batch\) or at most 48",
        _params(lambda r: _experiment(r).update(methods=["source_only", "fedgp"], train={"target_batch_size": 100})),
    ),
    Case(
        "table given a partition file",
        r"^fdabench: .*partition\.json is a partition, not a cell result; pass a cell result \(fdabench train",
        _cli(_partition_as_cell),
    ),
    Case(
        "metrics given a cell file",
        r"^fdabench: .*cell\.json is a cell result, not a table's metrics; pass a table's metrics \(fdabench table "
        r"--json",
        _cli(lambda tmp: ["metrics", str(_finished_cell(tmp)), "--output", str(tmp / "metrics.json")]),
    ),
    Case(
        "train --partition given a cell file",
        r"^fdabench: .*cell\.json is a cell result, not a partition; pass a partition \(fdabench partition",
        _cli(lambda tmp: _train_arguments(tmp, tmp / "out.json", partition=_finished_cell(tmp))),
    ),
    Case(
        "compare --csv the cell it reads",
        r"^fdabench: .*cell\.json would overwrite the input .*cell\.json; choose another output path \(nothing was "
        r"written\)",
        _cli(
            lambda tmp: ["compare", str(_finished_cell(tmp)), "--csv", str(tmp / "cell.json"), "--md", str(tmp / "a")]
        ),
    ),
    Case(
        "train --output an existing directory",
        r"^fdabench: cannot write .*: it is a directory; pass a file path \(or move the directory\)\. Nothing was "
        r"run",
        _cli(lambda tmp: _train_arguments(tmp, (tmp / "results").mkdir() or tmp / "results")),
    ),
    Case(
        "a plugin that fails to import",
        r"^fdabench: skipped a plugin: the fdabench\.methods plugin 'mine' \(no_such_plugin\.method:Mine, from its "
        r"package\) failed to load: ModuleNotFoundError: .*pip uninstall .*FDABENCH_PLUGINS=0",
        _broken_plugin,
    ),
    Case(
        "a truncated checkpoint",
        r"checkpoint .*\.cell\.json\.checkpoint\.pt is unreadable \(.*\); discarded, the cell starts over",
        _truncated_checkpoint,
    ),
    Case(
        "a directory where a cell file belongs",
        r"seed0\.json: was a directory, where the cell file belongs; moved aside to .*\.seed0\.json\.directory-\d+, "
        r"the cell runs",
        _directory_for_a_cell,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input_gets_a_clear_message(case, tmp_path):
    message = case.run(tmp_path)
    assert re.search(case.message, message), f"{case.name}: {message}"


def test_the_catalogue_is_large_and_the_generated_page_lists_every_case():
    assert len(CASES) >= 55 and len({case.name for case in CASES}) == len(CASES)
    spec = importlib.util.spec_from_file_location("fdabench_docs_reference", REPO / "docs" / "hooks" / "reference.py")
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    page = reference.bad_input_page(CASES)
    listed = re.findall(r"^\| ([^|]+?) \|", page, re.MULTILINE)[1:]  # skip the header
    assert listed == [case.name for case in CASES]
