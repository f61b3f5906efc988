"""The benchmark script runs and reports what it promises (timings themselves are not asserted)."""

import torch

from fdabench import bench


def test_resnet18_layer_sizes_scale():
    sizes = bench.resnet18_layer_sizes(100_000)
    assert len(sizes) == 62 and sum(sizes) == 100_000 and min(sizes) >= 1
    assert sum(bench.resnet18_layer_sizes(bench.RESNET18_PARAMETERS)) == bench.RESNET18_PARAMETERS


def test_aggregation_rows_columns():
    rows = bench.aggregation_rows([2], [5_000], torch.device("cpu"), repeats=1, batches=3)
    assert rows[0]["N"] == 2 and rows[0]["m"] == 5_000 and rows[0]["fedgp_ratio"] > 0


def test_memory_probe_streaming_stays_small():
    """Streaming keeps one m-vector of sums (plus the batch in flight); the stored form holds B x m."""
    m, count, batches = 2_000_000, 2, 12
    rows = {row["mode"]: row for row in bench.memory_rows(count, m, batches)}
    # The bound: (N + 3) m floats; measured about 2.9 m beyond the N sources, which are allocated first.
    assert 0 < rows["streaming"]["extra_bytes"] <= (count + 3) * m * 4
    assert rows["stored"]["extra_bytes"] >= batches * m * 4
