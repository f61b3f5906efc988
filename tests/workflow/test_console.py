"""What a run prints for a training job: the cell by name and the files it reads, never the cell's configuration
(`fdabench status CELL` shows that)."""

import re

import pytest
import yaml

from fdabench.config import validate_params
from workflows import TINY_PARAMS, job_blocks, snakemake_in

pytestmark = pytest.mark.pipeline


def test_a_training_job_is_named_by_its_cell_and_reads_its_plan(tmp_path, repo_root):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(TINY_PARAMS))
    plan = snakemake_in(tmp_path, repo_root, "--dry-run", "--printshellcmds")
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    blocks = job_blocks(plan.stdout, "train")
    cells = validate_params(TINY_PARAMS).cells()
    expected = {f"{c.suite}/{c.experiment}/{c.method}/{c.target}/seed{c.seed}" for c in cells}
    named = set()
    for block in blocks:
        assert "{" not in block, block  # no configuration, no fingerprint: JSON has braces
        wildcards = dict(item.split("=") for item in re.search(r"wildcards: (.+)", block)[1].split(", "))
        name = "{suite}/{experiment}/{method}/{target}/seed{seed}".format(**wildcards)
        command = re.search(r"Shell command: (.+)", block)[1]
        assert command.startswith(f"fdabench train --plan .snakemake/fdabench-cells/{name}.json --prepared "), command
        named.add(name)
    assert named == expected and len(blocks) == len(expected)
