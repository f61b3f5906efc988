"""`fdabench bench cells`: the same cells one by one and as one group, with the fields the speed issue asks for; and
docs/batching.md's table of which methods batch is the one `fdabench bench batching` prints."""

import json
import re
import subprocess
from pathlib import Path

from fdabench.speed.cells import batching_support, batching_table
from workflows import workflow_environment

FIELDS = {
    "cells",
    "one_by_one_seconds",
    "batched_seconds",
    "speedup",
    "samples_per_second",
    "arithmetic_floor_seconds",
    "arithmetic_floor",
    "fraction_of_floor",
    "max_abs_final_difference",
    "group_independence_max_abs_difference",
}


def test_bench_cells_writes_its_measurements(tiny_inputs, tmp_path):
    root, _ = tiny_inputs
    output = tmp_path / "bench.json"
    # seed 2 is not in the suite: the bench builds its partition itself, outside the workspace's data folder
    result = subprocess.run(
        ["fdabench", "bench", "cells", "tiny", "colored_digits", "fedgp", "--seeds", "0", "2", "--repeats", "1",
         "--output", str(output)],
        cwd=root, env=workflow_environment(root), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    bench = json.loads(output.read_text())
    assert set(bench) >= FIELDS
    assert bench["cells"] == 2
    assert bench["group_independence_max_abs_difference"] == 0.0
    assert bench["group"]["stacked_requests"] > bench["group"]["stacked_calls"] > 0
    assert bench["arithmetic_floor"]["flops"] > 0 and 0 < bench["fraction_of_floor"]["batched"] < 1
    assert not (root / "data" / "partitions" / "tiny" / "colored_digits" / "-90" / "seed2.json").exists()
    assert (root / "results" / "bench_cells" / "partitions" / "colored_digits" / "-90" / "seed2.json").exists()


def test_the_docs_table_of_batching_methods_is_current():
    page = (Path(__file__).resolve().parents[2] / "docs" / "batching.md").read_text()
    block = re.search(r"<!-- batching-table:start -->\n(.*?)\n<!-- batching-table:end -->", page, re.S)
    assert block, "docs/batching.md lost its batching-table block"
    assert block.group(1) == batching_table(batching_support()), (
        "docs/batching.md's table differs from what the methods do: paste `fdabench bench batching` into it"
    )
