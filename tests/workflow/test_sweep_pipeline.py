"""A sweep end to end: its cells, its per-rule tables and diagrams, its report entries; adding a draw schedules only
the new cells."""

import json
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from fdabench.core import paths
from workflows import TINY_PARAMS, planned_jobs, snakemake_in

pytestmark = pytest.mark.pipeline

SWEEP_PARAMS = {
    "suite": "tinysweep",
    "suites": {
        "tinysweep": {
            "seeds": [0, 1],
            "methods": ["target_only", "fedgp", "fedda"],
            "train": {**TINY_PARAMS["suites"]["tiny"]["train"], "rounds": 2},
            "validation": {"target_holdout": 8},
            "sweep": {"draws": 2, "reference": "fedgp"},
            "experiments": {
                "colored_digits": {
                    "dataset": "colored_digits",
                    "targets": ["-90", "+90"],
                    "partition": {"holdout_fraction": 0.2, "target_labelled": 24},
                }
            },
        }
    },
}


def test_a_sweep_runs_to_its_tables_and_a_new_draw_runs_only_its_cells(tmp_path, repo_root):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(SWEEP_PARAMS))
    result = snakemake_in(tmp_path, repo_root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for output in paths.sweep_outputs("tinysweep", ["source_val", "target_val", "last", "oracle"]):
        assert (tmp_path / output).stat().st_size > 0, output
    table = pd.read_csv(tmp_path / "results/tinysweep/sweep_target_val.csv")
    assert set(table["method"]) == {"target_only", "fedgp", "fedda"}
    draws = table.groupby("method")["n_draws"].max().to_dict()
    assert draws == {"target_only": 1, "fedgp": 2, "fedda": 2}  # target_only has nothing to vary: one draw
    assert (table.loc[table["target"] != "Avg", "n_trials"] == 2).all()
    cell = json.loads((tmp_path / "results/cells/tinysweep/colored_digits/fedgp.draw1/-90/seed0.json").read_text())
    assert cell["config"]["sweep"]["draw"] == 1 and "target_val_accuracy" in cell["rounds"][-1]
    nothing = snakemake_in(tmp_path, repo_root, "--dry-run")
    assert "Nothing to be done" in nothing.stdout + nothing.stderr
    progress = subprocess.run(
        [sys.executable, "-m", "fdabench", "status"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    assert "fedgp: 8 of 8 cells; 2 of 2 draws complete" in progress and "target_only: 4 of 4 cells" in progress

    grown = json.loads(json.dumps(SWEEP_PARAMS))
    grown["suites"]["tinysweep"]["sweep"]["draws"] = 3
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(grown))
    jobs = planned_jobs(snakemake_in(tmp_path, repo_root, "--dry-run", "--quiet", "rules"))
    # the new draw of the 2 methods with a space x 2 targets x 2 trials; nothing else retrains
    assert jobs.get("train") == "8", jobs
    assert jobs.get("sweep") == "1" and "partition" not in jobs and "prepare" not in jobs
    progress = subprocess.run(
        [sys.executable, "-m", "fdabench", "status"], cwd=tmp_path, capture_output=True, text=True
    ).stdout
    assert "fedgp: 8 of 12 cells; 2 of 3 draws complete" in progress
