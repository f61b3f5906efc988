"""The benchmark script runs and reports what it promises (timings themselves are not asserted)."""

from statistics import median

import pytest
import torch

from fdabench.cell.setup import load_problem
from fdabench.config.lookup import MissingCellInputs, cell_inputs
from fdabench.speed import aggregation as bench
from fdabench.speed.cell import bench_cell, compare_cohort


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


def test_bench_cell_times_rounds_parts_and_the_centralised_reference(tiny_inputs, monkeypatch):
    root, params = tiny_inputs
    monkeypatch.chdir(root)
    result = bench_cell(params, "colored_digits", "fedgp", rounds=3, device="cpu")
    # warm-up (1 round, untimed) then 3 FDA rounds, all timed
    assert result["timed_rounds"] == {"fda": 3} and result["cell"]["target"] == "-90"
    problem, _ = load_problem(
        params.cell("colored_digits", "fedgp", "-90", 0).config,
        *cell_inputs(params, "colored_digits", "-90", 0),
        torch.device("cpu"),
    )
    per_round = sum(len(client) for client in problem.sources) + len(problem.target_labelled)  # 1 local epoch each
    assert result["samples"] == 3 * per_round
    assert result["samples_per_second"] == pytest.approx(result["samples"] / result["seconds"])
    shares = result["share_of_time"]
    assert set(shares) == {"source_training", "target_training", "aggregation", "evaluation", "other"}
    assert sum(shares.values()) == pytest.approx(1.0) and min(shares.values()) >= -1e-9
    assert shares["source_training"] > 0 and shares["evaluation"] > 0
    # the centralised reference trains on whole epochs of the pooled sources: within one epoch of the cell's count
    pooled = sum(len(client) for client in problem.sources)
    assert abs(result["centralised"]["samples"] - result["samples"]) <= pooled / 2 + 1
    assert result["fl_overhead"] == pytest.approx(
        (result["seconds"] / result["samples"]) / (result["centralised"]["seconds"] / result["centralised"]["samples"])
    )
    assert result["peak_memory_bytes"] > 0


def test_bench_cell_names_the_command_that_builds_missing_inputs(tiny_inputs, tmp_path, monkeypatch):
    _, params = tiny_inputs
    monkeypatch.chdir(tmp_path)  # nothing built here
    with pytest.raises(
        MissingCellInputs, match=r"snakemake --cores 2 data/prepared/colored_digits/\w+ .* --config suite=tiny"
    ):
        bench_cell(params, "colored_digits", "fedgp")


@pytest.mark.parametrize(
    ("experiment", "method", "target", "message"),
    [
        ("nowhere", "fedgp", None, "suite tiny has no experiment 'nowhere'; allowed: colored_digits"),
        ("colored_digits", "ditto", None, "suite tiny has no method 'ditto'; allowed: source_only, fedgp"),
        ("colored_digits", "fedgp", "+80", r"experiment colored_digits has no target '\+80'; allowed: -90"),
    ],
)
def test_bench_cell_refuses_a_cell_the_suite_does_not_have(tiny_inputs, experiment, method, target, message):
    _, params = tiny_inputs
    with pytest.raises(ValueError, match=message):
        bench_cell(params, experiment, method, target)


def test_bench_cell_compares_one_by_one_with_cohorts_in_one_process(tiny_inputs, monkeypatch):
    root, params = tiny_inputs
    monkeypatch.chdir(root)
    result = compare_cohort(params, "colored_digits", "fedgp", rounds=2, device="cpu", repeats=2)
    assert [run["cohort"] for run in result["runs"]] == ["off", "on", "off", "on"]  # alternating
    off, on = result["cohort"]["off"], result["cohort"]["on"]
    # one by one: no cohort; as cohorts: the sources (equal sizes) as one cohort in each of the 3 rounds
    assert off["cohorts_trained"] == 0 and on["cohorts_trained"] == 3
    assert off["seconds_per_fda_round"] == median(
        run["seconds_per_round"]["fda"] for run in result["runs"] if run["cohort"] == "off"
    )
    assert result["speedup"] == pytest.approx(off["seconds_per_fda_round"] / on["seconds_per_fda_round"])
    assert result["faster"] == ("on" if result["speedup"] > 1 else "off")
    assert result["auto_picks"] == "off" and result["auto_picks_faster"] == (result["faster"] == "off")
    with pytest.raises(ValueError, match="repeats must be 1 or more"):
        compare_cohort(params, "colored_digits", "fedgp", repeats=0)
