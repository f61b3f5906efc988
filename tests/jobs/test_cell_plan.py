"""A cell's plan file: what its training job runs with, rewritten only when it changes, and refused when it is
another kind of file."""

import json
import os

import pytest

from fdabench.core.formats import WrongKindError
from fdabench.jobs.cell_plan import plan_digest, read_plan, write_plan

CONFIG = {"experiment": "digits", "method": "fedgp", "hparams": {"beta": 0.5}, "seed": 0, "device": "auto"}
CODE = {"fingerprint": "ab" * 8, "modules": {"fdabench.methods.fda": "cd" * 8}}


def test_a_plan_reads_back_what_was_written(tmp_path):
    path = tmp_path / "cells" / "seed0.json"
    assert write_plan(path, CONFIG, CODE)
    assert read_plan(path) == (CONFIG, CODE)


def test_an_unchanged_plan_is_not_rewritten(tmp_path):
    """Its modification time stays, so Snakemake does not take it for a new input of a finished cell."""
    path = tmp_path / "seed0.json"
    write_plan(path, CONFIG, CODE)
    os.utime(path, (1_000_000, 1_000_000))
    assert not write_plan(path, dict(reversed(list(CONFIG.items()))), CODE)  # the same plan in another key order
    assert path.stat().st_mtime == 1_000_000
    changed = {**CONFIG, "hparams": {"beta": 0.25}}
    assert write_plan(path, changed, CODE)
    assert path.stat().st_mtime != 1_000_000 and read_plan(path) == (changed, CODE)


def test_the_digest_changes_with_the_configuration_and_the_code_only():
    digest = plan_digest(CONFIG, CODE)
    assert len(digest) == 16 and digest == plan_digest(dict(reversed(list(CONFIG.items()))), CODE)
    assert plan_digest({**CONFIG, "hparams": {"beta": 0.25}}, CODE) != digest
    assert plan_digest(CONFIG, {**CODE, "modules": {"fdabench.methods.fda": "ef" * 8}}) != digest


def test_a_cell_result_is_not_a_plan(tmp_path):
    path = tmp_path / "seed0.json"
    path.write_text(json.dumps({"format": "fdabench.cell/1", "config": CONFIG, "code": CODE}))
    with pytest.raises(WrongKindError, match=r"seed0\.json is a cell result, not a cell's plan"):
        read_plan(path)
