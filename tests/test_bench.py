"""The benchmark script runs and reports what it promises (timings themselves are not asserted)."""

import torch

from fdabench import bench


def test_resnet18_layer_sizes_scale():
    sizes = bench.resnet18_layer_sizes(100_000)
    assert len(sizes) == 62 and sum(sizes) == 100_000 and min(sizes) >= 1
    assert sum(bench.resnet18_layer_sizes(bench.RESNET18_PARAMETERS)) == bench.RESNET18_PARAMETERS


def test_aggregation_rows_columns():
    rows = bench.aggregation_rows([2, 3], [5_000], torch.device("cpu"), repeats=1, batches=3)
    for row, count in zip(rows, (2, 3)):
        # the floor reads the N source updates and the target update once, in float32, over 62 layers
        assert (row["N"], row["m"], row["layers"]) == (count, 5_000, 62)
        assert row["floor_bytes"] == (count + 1) * 5_000 * 4
        assert abs(row["floor_GBps"] * row["floor_s"] * 1e9 - row["floor_bytes"]) < 1e-3 * row["floor_bytes"]


def test_memory_probe_streaming_stays_small():
    """Streaming keeps one m-vector of sums (plus the batch in flight); the stored form holds B x m.

    Asserted on the exact peak of live tensor storage; the resident-set growth is only required to be
    measured, since allocator and kernel behaviour (freed buffers kept for reuse, huge pages) move it.
    """
    m, count, batches = 2_000_000, 2, 12
    rows = {row["mode"]: row for row in bench.memory_rows(count, m, batches)}
    # The bound: (N + 3) m floats in all, i.e. at most 3 m beyond the N source updates.
    assert 2 * m * 4 <= rows["streaming"]["live_tensor_bytes"] <= 3 * m * 4
    assert rows["stored"]["live_tensor_bytes"] >= batches * m * 4
    assert rows["streaming"]["extra_bytes"] > 0 and rows["stored"]["extra_bytes"] >= batches * m * 4


def test_live_tensor_peak_counts_what_is_alive_at_once():
    existing = torch.zeros(1000)
    with bench.LiveTensorPeak(existing=[existing]) as tracker:
        existing.add_(1)  # in place on an input: not counted
        first = torch.ones(250)  # 1000 bytes
        view = first[:10]
        del first  # the view keeps the storage alive
        second = torch.ones(500)  # 2000 bytes, alive together with the first storage
        del view, second
        third = torch.ones(100)
        del third
    assert tracker.peak == 3000 and tracker.live == 0
