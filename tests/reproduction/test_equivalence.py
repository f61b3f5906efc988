"""Code equivalences (fdabench.reproduction.equivalence): the same cells run with old and new code, bit for bit, let
archived cells stay current across a refactor; any difference, an unpaired cell or a new run from other code vouches
nothing."""

import copy
import datetime
import json
from pathlib import Path

import pytest

from fdabench.cli import main
from fdabench.cli.archive import current_fingerprint
from fdabench.core.readers import FileReadError
from fdabench.reproduction.archive import cell_from_record, read_archive, record_from_cell
from fdabench.reproduction.equivalence import (
    NONE,
    VouchError,
    equivalences_of,
    read_record,
    record_payload,
    shipped,
    vouch,
)
from fdabench.reproduction.staleness import code_changes

REPO = Path(__file__).resolve().parents[2]
MODULE = "fdabench.federation.rounds"


def _entry(before, after, module=MODULE):
    return {"module": module, "before": before, "after": after, "evidence": {}}


def test_an_equivalence_holds_along_its_chain_and_only_forwards():
    found = equivalences_of([_entry("a", "b"), _entry("b", "c"), _entry(None, "n", "fdabench.methods.server")])
    assert found.holds(MODULE, "a", "c") and found.holds(MODULE, "b", "c") and found.holds(MODULE, "a", "a")
    assert not found.holds(MODULE, "c", "a")
    assert not found.holds(MODULE, "a", "z")
    assert not found.holds("fdabench.federation.client", "a", "b")  # per module
    assert found.holds("fdabench.methods.server", None, "n")  # a module the old code did not reach
    assert not NONE.holds(MODULE, "a", "b")


def test_code_changes_consults_the_equivalences():
    now = {"fingerprint": "new", "modules": {MODULE: "b", "fdabench.cell.run": "r"}}
    recorded = {"fingerprint": "old", "modules": {MODULE: "a", "fdabench.cell.run": "r"}}
    assert code_changes(recorded, now) == [MODULE]
    assert code_changes(recorded, now, equivalences_of([_entry("a", "b")]).holds) == []
    assert code_changes(recorded, now, equivalences_of([_entry("b", "a")]).holds) == [MODULE]


@pytest.fixture(scope="module")
def pair():
    """An archived cell as its old run (its recorded code, one module's hash changed) and as the new run (today's)."""
    record = read_archive(REPO / "docs" / "reproduction" / "paper_cpu" / "cells.jsonl.gz")[0]
    new = cell_from_record(record)
    new["code"] = current_fingerprint(new["config"])
    old = copy.deepcopy(new)
    old["code"] = {"fingerprint": "old", "modules": {**new["code"]["modules"], MODULE: "before"}}
    old["train_seconds"] = new["train_seconds"] + 1.0  # timing is not a result
    return old, new


def test_identical_runs_vouch_for_the_modules_that_differ(pair):
    old, new = pair
    entries = vouch([("c", old, new)], current_fingerprint, datetime.date(2026, 1, 2))
    assert [(e["module"], e["before"], e["after"]) for e in entries] == [
        (MODULE, "before", new["code"]["modules"][MODULE])
    ]
    assert entries[0]["evidence"]["cells"] == 1 and entries[0]["evidence"]["vouched"] == "2026-01-02"
    assert entries[0]["evidence"]["datasets"] == [new["cell"]["dataset"]]
    as_record = vouch([("c", record_from_cell(old), record_from_cell(new))], current_fingerprint)
    assert [e["before"] for e in as_record] == ["before"]


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda cell: cell["rounds"][-1].update(accuracy=cell["rounds"][-1]["accuracy"] + 1e-12), "results differ"),
        (lambda cell: cell.update(final=cell["final"] + 1e-12), r"results differ at \.final"),
        (lambda cell: cell.update(threads=7), "differ in threads"),
        (lambda cell: cell["config"].update(seed=99), "different configurations"),
        (lambda cell: cell["code"].update(fingerprint="elsewhere"), "not today's"),
    ],
)
def test_any_difference_vouches_nothing(pair, edit, says):
    old, new = pair
    new = copy.deepcopy(new)
    edit(new)
    with pytest.raises(VouchError, match=says):
        vouch([("c", old, new)], current_fingerprint)


def test_a_plugin_is_never_vouched_for(pair):
    old, new = copy.deepcopy(pair[0]), pair[1]
    old["code"]["modules"] = {**old["code"]["modules"]}
    new = copy.deepcopy(new)
    new["code"]["modules"]["plugin:patcher"] = "p1"
    with pytest.raises(VouchError, match="plugin patcher"):
        vouch([("c", old, new)], lambda config: new["code"])
    with pytest.raises(VouchError, match="no pair"):
        vouch([], current_fingerprint)


def test_the_command_records_evidence_and_refuses_a_difference(pair, tmp_path, capsys):
    old, new = pair
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    (tmp_path / "old" / "c.json").write_text(json.dumps(old))
    (tmp_path / "new" / "c.json").write_text(json.dumps(new))
    record = tmp_path / "eq.json"
    argv = ["archive", "vouch", "--before", str(tmp_path / "old"), "--after", str(tmp_path / "new")]
    assert main([*argv, "--record", str(record)]) == 0
    written = equivalences_of(read_record(record))
    assert code_changes(old["code"], new["code"], written.holds) == []
    edited = copy.deepcopy(new)
    edited["final"] += 1.0
    (tmp_path / "new" / "c.json").write_text(json.dumps(edited))
    before = record.read_bytes()
    assert main([*argv, "--record", str(record)]) == 2
    assert "results differ at .final" in capsys.readouterr().err
    assert record.read_bytes() == before  # nothing recorded
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "c.json").write_text(json.dumps(new))
    assert main(["archive", "vouch", "--before", str(tmp_path / "alone"), "--after", str(tmp_path / "new")]) == 2


def test_a_record_of_another_shape_is_refused_by_name(tmp_path):
    bad = tmp_path / "eq.json"
    bad.write_text(json.dumps({**record_payload([]), "equivalences": [{"module": 3}]}))
    with pytest.raises(FileReadError, match="entry 0"):
        read_record(bad)


def test_the_shipped_record_reads():
    shipped.cache_clear()
    shipped()  # a FileReadError here names the file


def test_a_recorded_edge_keeps_its_wider_evidence():
    """Vouching again for an edge already recorded (a rerun of a few archived cells, paired with records written
    before the first vouch) keeps the wide evidence; a wider or equal new run replaces it; other edges are added."""
    from fdabench.reproduction.equivalence import merged

    def entry(before, after, cells):
        return {"module": MODULE, "before": before, "after": after, "evidence": {"cells": cells}}

    wide, narrow, wider, other = entry("a", "b", 407), entry("a", "b", 9), entry("a", "b", 500), entry("b", "c", 9)
    assert merged([wide], [narrow, other]) == [wide, other]
    assert merged([wide], [wider]) == [wider]
    assert merged([], [narrow]) == [narrow]
