"""Warnings under a sweep's tables: few draws (with the bootstrap's winner shares), methods whose selected cells
are the same results, and target validation smaller than min_validation."""

from fdabench.report import sweep, sweep_search, sweep_warnings
from report.test_sweep import cell, disagreeing_cells


def test_few_draws_are_named_with_how_often_the_winner_changes():
    cells = disagreeing_cells() + [cell("n", t, k, 0, 0.4, 0.5, 0.5) for t in "ab" for k in range(3)]
    frame = sweep.sweep_frame(cells, "target_val")
    bootstrap = sweep_search.search_bootstrap(frame, "target_val")
    (line,) = sweep_warnings.few_draws(frame, bootstrap)
    assert line.startswith("Few draws: m 3 (fewer than 10)")  # n has one draw: nothing searched
    share = bootstrap.wins.set_index("method")["win_share"]
    assert f"n in {100 * share['n']:.0f}% of the resamples, m in {100 * share['m']:.0f}%" in line
    assert 0 < share["n"] < 1
    selected = sweep.select(frame, "target_val")
    assert sweep_warnings.sweep_warnings(frame, selected, "target_val", bootstrap, 1) == [line]
    assert sweep_warnings.sweep_warnings(frame, selected, "last", None, 1) == []  # last selects nothing
    many = [cell("m", "a", 0, d, 0.5, 0.5, 0.5) for d in range(sweep_search.FEW_DRAWS)]
    assert sweep_warnings.few_draws(sweep.sweep_frame(many, "target_val"), None) == []


def test_methods_whose_selected_cells_recorded_the_same_rounds_are_named():
    cells = [cell(m, t, k, 0, 0.6 + 0.01 * k, 0.5, 0.5) for m in ("a", "b") for t in "xy" for k in range(2)]
    cells += [cell("c", t, k, 0, 0.6 + 0.01 * k + (t == "y") * 0.01, 0.5, 0.5) for t in "xy" for k in range(2)]
    selected = sweep.select(sweep.sweep_frame(cells, "last"), "last")
    (line,) = sweep_warnings.identical_selections(selected)
    assert line.startswith("Same results: a and b") and "all 4 blocks" in line


def test_a_small_target_validation_split_is_named_under_target_val_only():
    frame = sweep.sweep_frame(disagreeing_cells(), "target_val").assign(target_validation=12)
    (line,) = sweep_warnings.small_validation(frame, "target_val", 30)
    assert "12 target samples" in line and "8.3 points" in line
    assert sweep_warnings.small_validation(frame, "target_val", 12) == []
    assert sweep_warnings.small_validation(frame, "source_val", 30) == []
    folds = frame.assign(target_validation=0, target_folds=4, target_labelled=48)  # 12 a fold
    assert "12 target samples" in sweep_warnings.small_validation(folds, "target_val", 30)[0]
