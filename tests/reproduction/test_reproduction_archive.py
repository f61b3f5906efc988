"""The reproduction archive (docs/reproduction.md): `fdabench archive add` records finished cells in canonical,
deterministic bytes, `fdabench compare --archive` regenerates from it exactly what the cell files give, marks the
cells whose code changed since they ran as from an older commit and keeps them apart, `fdabench archive export`
rebuilds the cell files that `fdabench status` (and so Snakemake) reads as current, and the committed pages, summary
and README block equal what the committed archives regenerate, from a folder with no results.

The cells here are synthetic (made in a temporary folder from the `paper_cpu` suite's real configurations and code
fingerprints, with made-up rounds); nothing synthetic is ever added to the committed archives."""

from __future__ import annotations

import gzip
import json
import random
import shutil
from pathlib import Path

import pytest

from fdabench.cell.digest import EditedError, payload_digest, seal
from fdabench.cell.plugin_scope import cell_code
from fdabench.cli import main
from fdabench.config import load_params
from fdabench.jobs.heal import recorded_state
from fdabench.models import resolved_model_options
from fdabench.reproduction.archive import (
    ARCHIVE_FORMAT,
    archive_path,
    cell_from_record,
    decode,
    encode,
    read_archive,
    record_from_cell,
)
from fdabench.reproduction.paper_vs_ours import STATUS_BEGIN, STATUS_END, best_round

REPO = Path(__file__).resolve().parents[2]
SUITE = "paper_cpu"
EXPERIMENTS = {"fmnist_noise": 3, "fmnist_noise_target_lr_half": 2, "fmnist_source_labels": 2}  # seeds each
README_TEXT = f"# title\n\nintro\n\n{STATUS_BEGIN}\nSuite `{SUITE}` (old counts)\n{STATUS_END}\n\nafter\n"


def _cell(config: dict, code: dict) -> dict:
    """A complete cell of `config` with made-up rounds: 3 warm-up and 12 FDA rounds, source validation, betas for
    an auto-weighted method (as the training job writes them: `fdabench.cell.result.cell_result`)."""
    rng = random.Random(f"{config['experiment']}/{config['method']}/{config['target']}/{config['seed']}")
    auto = "auto" in config["method"]
    rounds = []
    for index in range(15):
        record = {
            "round": index,
            "phase": "warmup" if index < 3 else "fda",
            "loss": rng.uniform(0.2, 2.0),
            "accuracy": rng.randrange(300, 900) / 1000,
            "source_val_accuracy": rng.randrange(300, 900) / 1000,
            "bytes_uplink": 1000,
            "bytes_downlink": 1000,
            "seconds": rng.uniform(1, 2),
        }
        if auto and index >= 3:
            record["betas"] = [rng.random() for _ in range(3)]
        rounds.append(record)
    tail = rounds[-5:]
    final = sum(record["accuracy"] for record in tail) / 5
    return {
        "format": "fdabench.cell/1",
        "status": "complete",
        "cell": {
            key: config[key] for key in ("suite", "experiment", "dataset", "method", "algorithm", "target", "seed")
        },
        "config": config,
        "metric": "accuracy",
        "higher_is_better": True,
        "final": final,
        "finals": {"accuracy": final, "loss": sum(record["loss"] for record in tail) / 5},
        "final_rounds": 5,
        "rounds": rounds,
        "bytes": {"uplink_total": 15000, "downlink_total": 15000, "per_round_mean": 2000.0},
        "model_size": 1234,
        "sources": ["a", "b", "c"],
        "model": {
            "name": config["train"]["model"],
            "options": resolved_model_options(config["train"]["model"], config["train"].get("model_options", {})),
        },
        "wall_seconds": 12.5,
        "train_seconds": 12.0,
        "train_cpu_seconds": 11.5,
        "device": "cpu",
        "cuda_visible_devices": None,
        "threads": 1,
        "partition_hash": "0" * 64,
        "code": code,
        "uses_unlabelled_target": False,
        "family": "fda",
        "versions": {"fdabench": "0.1.0", "torch": "2.15.0", "python": "3.11.7"},
    }


@pytest.fixture(scope="module")
def params():
    return load_params(REPO / "params.yaml", suite=SUITE)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, params):
    """A folder with the synthetic cells under results/cells/paper_cpu/ and their paths."""
    root = tmp_path_factory.mktemp("archive")
    paths = []
    for cell in params.cells():
        seeds = EXPERIMENTS.get(cell.experiment, 0)
        if cell.seed >= seeds:
            continue
        path = root / cell.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_cell(cell.config, cell_code(cell.config).to_json())), encoding="utf-8")
        paths.append(path)
    assert len(paths) >= 40
    return root, paths


def _run(*argv) -> int:
    return main([str(arg) for arg in argv])


def _compare_outputs(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "README.md").write_text(README_TEXT, encoding="utf-8")
    return {
        "--csv": folder / "paper_vs_ours.csv",
        "--md": folder / "paper_vs_ours.md",
        "--html": folder / "paper_vs_ours.html",
        "--summary-csv": folder / "summary.csv",
        "--readme": folder / "README.md",
    }


def _flags(outputs: dict[str, Path]) -> list:
    return [item for pair in outputs.items() for item in pair]


def test_compare_from_the_archive_equals_compare_from_the_cell_files(workspace, tmp_path):
    root, paths = workspace
    archive = tmp_path / SUITE / "cells.jsonl.gz"
    assert _run("archive", "add", root / "results" / "cells" / SUITE, "--archive", archive) == 0
    assert len(read_archive(archive)) == len(paths)
    from_cells, from_archive = _compare_outputs(tmp_path / "cells"), _compare_outputs(tmp_path / "archive")
    assert _run("compare", *paths, *_flags(from_cells), "--suite", SUITE) == 0
    assert _run("compare", "--archive", archive, *_flags(from_archive)) == 0
    for flag, path in from_cells.items():
        assert from_archive[flag].read_bytes() == path.read_bytes(), flag
    readme = from_archive["--readme"].read_text(encoding="utf-8")
    assert "FedGP paper Table 12" in readme and readme.endswith("after\n") and "(older commit)" not in readme
    assert "older commit" not in from_archive["--md"].read_text(encoding="utf-8")
    # nothing but the archive was read: the cells can go
    shutil.rmtree(tmp_path / "archive")
    outputs = _compare_outputs(tmp_path / "archive")
    assert _run("compare", "--archive", archive, *_flags(outputs), "--check") == 1  # the README block is old
    assert _run("compare", "--archive", archive, *_flags(outputs)) == 0
    assert _run("compare", "--archive", archive, *_flags(outputs), "--check") == 0
    assert outputs["--md"].read_bytes() == from_cells["--md"].read_bytes()


def test_a_record_keeps_what_the_comparison_and_the_selection_rules_read(workspace):
    _, paths = workspace
    cell = json.loads(paths[0].read_text(encoding="utf-8"))
    record = record_from_cell(cell)
    assert record["format"] == ARCHIVE_FORMAT and record["config"] == cell["config"]
    assert record["code"] == cell["code"] and record["versions"] == cell["versions"]
    assert record["train_cpu_seconds"] == 11.5 and record["device"] == "cpu"
    assert set(record["rounds"]) == {"round", "phase", "accuracy", "source_val_accuracy"}  # no loss, bytes, seconds
    assert (
        record["best_round"]["value"] == pytest.approx(best_round(cell) / 100)
        and record["best_round"]["phase"] == "fda"
    )
    rebuilt = cell_from_record(record)
    assert rebuilt["final"] == cell["final"] and rebuilt["finals"] == cell["finals"]
    assert [r["accuracy"] for r in rebuilt["rounds"]] == [r["accuracy"] for r in cell["rounds"]]
    assert rebuilt["rounds"][5].keys() == {"round", "phase", "accuracy", "source_val_accuracy"}
    assert rebuilt["archive"] == {"format": ARCHIVE_FORMAT}
    auto = next(json.loads(p.read_text()) for p in paths if "auto" in p.parts[-3])
    rebuilt = cell_from_record(record_from_cell(auto))
    assert [r.get("betas") for r in rebuilt["rounds"]] == [r.get("betas") for r in auto["rounds"]]


def test_the_archive_bytes_are_deterministic_sorted_and_free_of_timestamps(workspace, tmp_path):
    _, paths = workspace
    records = [record_from_cell(json.loads(path.read_text(encoding="utf-8"))) for path in paths]
    data = encode(records)
    assert encode(list(reversed(records))) == data
    assert data[4:8] == b"\0\0\0\0" and data[3] == 0  # gzip header: no mtime, no file name
    lines = gzip.decompress(data).decode().splitlines()
    assert lines == sorted(lines, key=lambda line: _identity(json.loads(line)))
    assert decode(data) == sorted(records, key=_identity)
    # adding the same cells in another order, in two sittings, gives the same bytes
    first, second = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    assert _run("archive", "add", *paths, "--archive", first) == 0
    assert _run("archive", "add", *paths[len(paths) // 2 :], "--archive", second) == 0
    assert _run("archive", "add", *reversed(paths[: len(paths) // 2]), "--archive", second) == 0
    assert first.read_bytes() == second.read_bytes()
    assert _run("archive", "add", *paths, "--archive", second) == 0  # every record unchanged
    assert first.read_bytes() == second.read_bytes()


def _identity(record):
    cell = record["cell"]
    return (cell["suite"], cell["experiment"], cell["method"], str(cell["target"]), cell["seed"])


def test_a_hand_edited_archive_is_refused(workspace):
    _, paths = workspace
    records = [record_from_cell(json.loads(path.read_text(encoding="utf-8"))) for path in paths[:3]]
    text = gzip.decompress(encode(records)).decode()
    lines = text.splitlines()
    for bad in (
        "\n".join(reversed(lines)) + "\n",  # out of order
        text.replace('"final":', '"final" :', 1),  # not canonical
        text.replace(ARCHIVE_FORMAT, "fdabench.archive/2", 1),  # another format
        "\n".join([lines[0], lines[0], *lines[1:]]) + "\n",  # a cell twice
    ):
        with pytest.raises(ValueError):
            decode(gzip.compress(bad.encode()))


def test_an_edited_record_is_refused_by_name_wherever_the_archive_is_read(workspace, tmp_path, capsys):
    _, paths = workspace
    archive = tmp_path / SUITE / "cells.jsonl.gz"
    assert _run("archive", "add", *paths[:4], "--archive", archive) == 0
    records = read_archive(archive)
    assert all(record["digest"] == payload_digest(record) for record in records)
    records[1] = {**records[1], "final": 0.99}  # in canonical form and order: only its digest tells
    archive.write_bytes(encode(records))
    edited = archive.read_bytes()
    cell = records[1]["cell"]
    name = f"line 2 ({SUITE}/{cell['experiment']}/{cell['method']}/{cell['target']}/seed {cell['seed']})"
    capsys.readouterr()
    for command in (
        ["compare", "--archive", archive, "--check"],
        ["compare", "--archive", archive, *_flags(_compare_outputs(tmp_path / "pages"))],
        ["archive", "add", paths[5], "--archive", archive],
        ["archive", "seal", archive],  # sealing never covers an edit
    ):
        assert _run(*command) == 2, command
        said = capsys.readouterr().err
        assert f"{archive}, {name}: edited after it was written" in said, said
        assert archive.read_bytes() == edited
    assert not (tmp_path / "pages" / "paper_vs_ours.md").exists()


def test_records_archived_before_digests_are_said_and_sealed_by_the_seal_command(workspace, tmp_path, capsys):
    _, paths = workspace
    archive = tmp_path / SUITE / "cells.jsonl.gz"
    assert _run("archive", "add", *paths[:4], "--archive", archive) == 0
    unsealed = [{key: value for key, value in record.items() if key != "digest"} for record in read_archive(archive)]
    archive.write_bytes(encode(unsealed))
    assert read_archive(archive) == unsealed  # read as they are
    outputs = _compare_outputs(tmp_path / "pages")
    capsys.readouterr()
    assert _run("compare", "--archive", archive, *_flags(outputs)) == 0
    assert f"{archive}: 4 of 4 records are unsealed (written before" in capsys.readouterr().out
    assert _run("archive", "seal", archive) == 0
    assert f"{archive}: 4 of 4 records sealed" in capsys.readouterr().out
    sealed = read_archive(archive)
    assert [{k: v for k, v in record.items() if k != "digest"} for record in sealed] == unsealed
    assert all(record["digest"] == payload_digest(record) for record in sealed)
    assert _run("compare", "--archive", archive, *_flags(outputs), "--check") == 0  # the same pages
    assert "unsealed" not in capsys.readouterr().out
    sealed[0] = {**sealed[0], "final": 0.01}
    with pytest.raises(EditedError, match="line 1 .*: edited after it was written"):
        decode(encode(sealed))


def test_add_replaces_a_cell_s_older_record_and_refuses_incomplete_cells(workspace, tmp_path):
    _, paths = workspace
    archive = tmp_path / "cells.jsonl.gz"
    assert _run("archive", "add", *paths[:4], "--archive", archive) == 0
    before = archive.read_bytes()
    rerun = json.loads(paths[0].read_text(encoding="utf-8"))
    rerun["final"] = 0.5
    rerun_path = tmp_path / "rerun" / "seed0.json"
    rerun_path.parent.mkdir()
    rerun_path.write_text(json.dumps(rerun), encoding="utf-8")
    running = {**rerun, "status": "running"}
    running_path = tmp_path / "running.json"
    running_path.write_text(json.dumps(running), encoding="utf-8")
    assert _run("archive", "add", rerun_path, running_path, "--archive", archive) == 2  # nothing added
    assert archive.read_bytes() == before
    assert _run("archive", "add", rerun_path, "--archive", archive) == 0
    records = read_archive(archive)
    assert len(records) == 4 and sum(record["final"] == 0.5 for record in records) == 1
    old = {key: value for key, value in rerun.items() if key != "code"}  # written before code fingerprints
    old_path = tmp_path / "old.json"
    old_path.write_text(json.dumps(old), encoding="utf-8")
    assert _run("archive", "add", old_path, "--archive", archive) == 2


def test_add_refuses_cells_that_ran_other_versions_than_the_lock_pins(workspace, tmp_path, monkeypatch, capsys):
    """A cell that ran another torch (a GPU machine's own image, say) is a valid run but not what the locked
    environment produces: refused with the reason, nothing added, unless --any-versions; a CUDA build of the locked
    torch is the locked torch."""
    _, paths = workspace
    archive = tmp_path / "cells.jsonl.gz"
    cell = json.loads(paths[0].read_text(encoding="utf-8"))
    locked_torch = cell["versions"]["torch"]

    def written(torch: str, name: str) -> Path:
        path = tmp_path / name / "seed0.json"
        path.parent.mkdir()
        path.write_text(json.dumps({**cell, "versions": {**cell["versions"], "torch": torch}}), encoding="utf-8")
        return path

    other, cuda = written("2.11.0+cu130", "other"), written(f"{locked_torch}+cu132", "cuda")
    lock = ("--lock", REPO / "requirements.lock")
    assert _run("archive", "add", paths[1], other, "--archive", archive, *lock) == 2
    assert not archive.exists()
    assert f"torch 2.11.0+cu130 (locked {locked_torch})" in capsys.readouterr().err
    assert _run("archive", "add", cuda, "--archive", archive, *lock) == 0
    assert _run("archive", "add", other, "--archive", archive, *lock, "--any-versions") == 0
    assert [record["versions"]["torch"] for record in read_archive(archive)] == ["2.11.0+cu130"]
    monkeypatch.chdir(tmp_path)  # no requirements.lock here: said, not skipped silently
    capsys.readouterr()
    assert _run("archive", "add", other, "--archive", archive) == 0
    assert "not checked" in capsys.readouterr().out
    assert _run("archive", "add", other, "--archive", archive, "--lock", "missing.lock") == 2  # named: must exist


def test_default_archive_is_the_suite_s_under_docs_reproduction(workspace, tmp_path, monkeypatch):
    _, paths = workspace
    monkeypatch.chdir(tmp_path)
    assert _run("archive", "add", *paths[:2]) == 0
    assert len(read_archive(archive_path(SUITE))) == 2
    assert archive_path(SUITE) == Path("docs/reproduction/paper_cpu/cells.jsonl.gz")
    # compare --archive alone writes the committed places: the pages beside the archive, the summary beside its
    # folder, and the README whose block names the suite
    Path("README.md").write_text(README_TEXT, encoding="utf-8")
    assert _run("compare", "--archive", archive_path(SUITE), "--check") == 1
    assert _run("compare", "--archive", archive_path(SUITE)) == 0
    folder = archive_path(SUITE).parent
    assert all((folder / f"paper_vs_ours.{ext}").is_file() for ext in ("csv", "md", "html"))
    summary = folder.parent / f"{SUITE}.csv"
    assert summary.read_text(encoding="utf-8").startswith("published_table,source,published_rows,matched")
    assert "(old counts)" not in Path("README.md").read_text(encoding="utf-8")
    assert _run("compare", "--archive", archive_path(SUITE), "--check") == 0
    summary.write_text(summary.read_text(encoding="utf-8").replace(",0", ",1", 1), encoding="utf-8")
    assert _run("compare", "--archive", archive_path(SUITE), "--check") == 1


def _with_older_code(archive: Path, older: Path, experiments: set[str], seeds: set[int]) -> None:
    """`archive` with the records of `experiments` at `seeds` as if run by other code (another fingerprint)."""
    older_loop = "0" * 16  # the round loop's module had other code
    records = [
        seal({**record, "code": _with_module(record["code"], "fdabench.federation.rounds", older_loop)})
        if record["cell"]["experiment"] in experiments and record["cell"]["seed"] in seeds
        else record
        for record in read_archive(archive)
    ]
    older.write_bytes(encode(records))


def test_cells_from_an_older_commit_are_marked_and_kept_apart(workspace, tmp_path):
    root, paths = workspace
    archive = tmp_path / "current.jsonl.gz"
    assert _run("archive", "add", *paths, "--archive", archive) == 0
    older = tmp_path / "older.jsonl.gz"
    # every fmnist_source_labels cell older; fmnist_noise's seed 2 older beside current seeds 0 and 1
    _with_older_code(archive, older, {"fmnist_source_labels"}, {0, 1})
    _with_older_code(older, older, {"fmnist_noise"}, {2})
    outputs = _compare_outputs(tmp_path / "pages")
    assert _run("compare", "--archive", older, *_flags(outputs)) == 0
    markdown = outputs["--md"].read_text(encoding="utf-8")
    assert "(older commit)" in markdown and "Rows marked (older commit) come from archived cells" in markdown
    assert "| fmnist_noise | noise0.4 | fedda (older commit) |" in markdown
    assert "| fmnist_noise | noise0.4 | fedda |" in markdown  # seeds 0 and 1 on their own row, never averaged with 2
    import pandas as pd

    table = pd.read_csv(outputs["--csv"])
    fedda = table[(table["published_table"] == "fmnist_noise") & (table["method"] == "fedda")]
    assert fedda.set_index("older_commit")["n_seeds"].to_dict() == {False: 2, True: 1}
    summary = pd.read_csv(outputs["--summary-csv"]).set_index("published_table")
    assert summary.loc["fmnist_noise", "from_older_commit"] == 0  # current cells match every row of it
    labels = summary.loc["fmnist_source_labels"]
    assert labels["from_older_commit"] == labels["matched"] > 0
    readme = outputs["--readme"].read_text(encoding="utf-8")
    assert "Matched rows resting on archived cells from an older commit" in readme
    # the same archive without the older records gives the current cells' counts
    fresh = _compare_outputs(tmp_path / "fresh")
    assert _run("compare", "--archive", archive, *_flags(fresh)) == 0
    counts = pd.read_csv(fresh["--summary-csv"]).set_index("published_table")
    assert counts.loc["fmnist_noise", "matched"] == summary.loc["fmnist_noise", "matched"]


def test_export_rebuilds_the_current_cells_that_status_reads_as_current(workspace, tmp_path, params, capsys):
    root, paths = workspace
    archive = tmp_path / SUITE / "cells.jsonl.gz"
    assert _run("archive", "add", *paths, "--archive", archive) == 0
    older = tmp_path / "older" / "cells.jsonl.gz"
    older.parent.mkdir()
    _with_older_code(archive, older, {"fmnist_noise_target_lr_half"}, {0})
    export = tmp_path / "clone"
    assert _run("archive", "export", "--archive", older, "--params", REPO / "params.yaml", "--root", export) == 0
    out = capsys.readouterr().out
    planned = {cell.path: cell for cell in params.cells()}
    written = sorted(export.rglob("*.json"))
    stale = [path for path in paths if "fmnist_noise_target_lr_half" in path.parts and path.name == "seed0.json"]
    assert stale and len(written) == len(paths) - len(stale)
    assert f"{len(stale)} older commit" in out and "older commit" in out
    for path in written:
        cell = planned[str(path.relative_to(export))]
        assert recorded_state(path, cell.config, lambda cell=cell: cell_code(cell.config).to_json())[0] == "current"
    # a cell file that exists is kept; --all writes the older records too, which status reads as stale
    assert (
        _run("archive", "export", "--archive", older, "--params", REPO / "params.yaml", "--root", export, "--all") == 0
    )
    for path in stale:
        exported = export / path.relative_to(root)
        cell = planned[str(path.relative_to(root))]
        state, reason = recorded_state(exported, cell.config, lambda cell=cell: cell_code(cell.config).to_json())
        assert state == "stale" and "code changed" in reason
    assert (
        _run("archive", "export", "--archive", older, "--params", REPO / "params.yaml", "--root", export, "--check")
        == 1
    )


def test_an_empty_archive_regenerates_nothing(tmp_path, capsys):
    archive = tmp_path / SUITE / "cells.jsonl.gz"
    archive.parent.mkdir()
    archive.write_bytes(encode([]))
    summary = tmp_path / f"{SUITE}.csv"
    summary.write_text("kept\n", encoding="utf-8")
    assert _run("compare", "--archive", archive, "--summary-csv", summary) == 0
    assert summary.read_text(encoding="utf-8") == "kept\n"
    assert "no archived cells yet" in capsys.readouterr().out
    assert _run("compare", "--archive", archive, "--check") == 0
    (archive.parent / "paper_vs_ours.md").write_text("a page no archived cell backs\n", encoding="utf-8")
    assert _run("compare", "--archive", archive, "--check") == 1


# ---- the committed archives -------------------------------------------------------------------------------------

COMMITTED = sorted((REPO / "docs" / "reproduction").glob("*/cells.jsonl.gz"))


def test_every_suite_behind_the_readme_block_has_an_archive():
    from fdabench.cli.archive import readme_suite

    suite = readme_suite((REPO / "README.md").read_text(encoding="utf-8"))
    assert suite and (REPO / "docs" / "reproduction" / suite / "cells.jsonl.gz") in COMMITTED


@pytest.mark.parametrize("archive", COMMITTED, ids=lambda path: path.parent.name)
def test_the_committed_pages_are_what_the_committed_archive_regenerates(archive, tmp_path, monkeypatch):
    """CI's check (`fdabench compare --archive <archive> --check`), from a folder that has the committed
    docs/reproduction and README and no results: the pages, the summary and the README block must equal what the
    archive regenerates, byte for byte. A suite with no archived cells yet has no pages, and docs/reproduction.md
    says its summary is not backed by archived cells; once it has some, the page no longer says so."""
    from fdabench.cli.archive import committed_outputs, regenerate

    records = read_archive(archive)  # canonical: refuses a hand-edited file
    suite = archive.parent.name
    assert all(record["cell"]["suite"] == suite for record in records)
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO / "docs" / "reproduction", checkout / "docs" / "reproduction")
    shutil.copy(REPO / "README.md", checkout / "README.md")
    monkeypatch.chdir(checkout)
    local = Path("docs") / "reproduction" / suite / "cells.jsonl.gz"
    page = (REPO / "docs" / "reproduction.md").read_text(encoding="utf-8")
    if not records:
        assert not any(Path(local.parent / f"paper_vs_ours.{ext}").exists() for ext in ("csv", "md", "html"))
        assert f"`{suite}`: no archived cells yet" in page, "docs/reproduction.md must say the summary is not backed"
        return
    assert f"`{suite}`: no archived cells yet" not in page, "docs/reproduction.md still says the archive is empty"
    texts, _ = regenerate(local)
    assert set(texts) >= set(committed_outputs(local, suite).values())
    for path, text in texts.items():
        assert path.read_text(encoding="utf-8") == text, f"{path}: run `fdabench compare --archive {local}`"


@pytest.mark.parametrize("archive", COMMITTED, ids=lambda path: path.parent.name)
def test_every_committed_gap_of_more_than_3_points_has_a_measured_cause(archive):
    """A row more than 3 points off its published value on its published record says what was measured about it:
    a marked variant or a reading (fdabench.reproduction.papers.gaps), never "no setting varied yet"."""
    import pandas as pd

    from fdabench.reproduction.paper_vs_ours import NOTHING_VARIED

    table_path = archive.parent / "paper_vs_ours.csv"
    if not table_path.exists():
        pytest.skip(f"{archive.parent.name} has no published comparison")
    table = pd.read_csv(table_path)
    unread = table[table["measured_cause"].fillna("").str.contains(NOTHING_VARIED)]
    assert unread.empty, unread[["experiment", "target", "method", "difference"]].to_string()


def _with_bookkeeping_recorded(archive: Path, edited: Path) -> None:
    """`archive` as if every record ran before `fdabench.core.io` became bookkeeping: the module in its record, and
    so another digest, every other module's code the same."""
    records = [
        seal({**record, "code": _with_module(record["code"], "fdabench.core.io", "0123456789abcdef")})
        for record in read_archive(archive)
    ]
    edited.write_bytes(encode(records))


def _with_module(code: dict, module: str, digest: str) -> dict:
    """A recorded code fingerprint (as archived by that code: sealed) in which `module` had the hash `digest`."""
    return {"fingerprint": "0" * 64, "modules": {**code["modules"], module: digest}}


def test_a_module_that_became_bookkeeping_leaves_archived_cells_current(workspace, tmp_path, params, capsys):
    root, paths = workspace
    archive = tmp_path / "current.jsonl.gz"
    assert _run("archive", "add", *paths, "--archive", archive) == 0
    edited = tmp_path / "edited" / "cells.jsonl.gz"
    edited.parent.mkdir()
    _with_bookkeeping_recorded(archive, edited)
    outputs = _compare_outputs(tmp_path / "pages")
    assert _run("compare", "--archive", edited, *_flags(outputs)) == 0
    assert "(older commit)" not in outputs["--md"].read_text(encoding="utf-8")
    assert "(0 from an older commit)" in capsys.readouterr().out
    export = tmp_path / "clone"
    assert _run("archive", "export", "--archive", edited, "--params", REPO / "params.yaml", "--root", export) == 0
    assert "older commit" not in capsys.readouterr().out
    planned = {cell.path: cell for cell in params.cells()}
    written = sorted(export.rglob("*.json"))
    assert len(written) == len(paths)
    for path in written:
        cell = planned[str(path.relative_to(export))]
        exported = json.loads(path.read_text(encoding="utf-8"))
        assert exported["code"] == cell_code(cell.config).to_json()  # the workspace judges the digest: current
        assert exported["archive"]["recorded_code"]["modules"]["fdabench.core.io"] == "0123456789abcdef"
        assert recorded_state(path, cell.config, lambda cell=cell: cell_code(cell.config).to_json())[0] == "current"
