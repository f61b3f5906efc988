"""The bootstrap over draws: scipy's bootstrap of the rule applied to resampled draws, trials held fixed, and how
often each method would have won."""

import numpy as np
import pytest
from scipy import stats

from fdabench.report import sweep, sweep_search
from report.test_sweep import cell

# validation and test per draw of method m, target a, trials 0 and 1
VALIDATION = {0: [0.5, 0.9, 0.2, 0.7], 1: [0.6, 0.1, 0.8, 0.8]}
TEST = {0: [0.55, 0.30, 0.95, 0.70], 1: [0.62, 0.20, 0.40, 0.90]}


def known_frame():
    cells = [
        cell("m", "a", trial, draw, TEST[trial][draw], 0.5, VALIDATION[trial][draw])
        for trial in (0, 1)
        for draw in range(4)
    ]
    return sweep.sweep_frame(cells, "target_val")


def test_the_search_interval_is_scipys_bootstrap_of_the_rule_over_resampled_draws():
    result = sweep_search.search_bootstrap(known_frame(), "target_val", resamples=400, seed=7)

    def statistic(draws0, draws1):
        picks = []
        for trial, draws in ((0, draws0), (1, draws1)):
            best = max(draws, key=lambda d: (VALIDATION[trial][d], -d))  # best validation, ties to the lowest draw
            picks.append(TEST[trial][best])
        return np.mean(picks)

    expected = stats.bootstrap(
        (np.arange(4), np.arange(4)),
        statistic,
        n_resamples=400,
        vectorized=False,
        paired=False,
        method="percentile",
        random_state=np.random.default_rng(7),
    ).confidence_interval
    intervals = result.intervals.set_index("target")
    for target in ("a", sweep.AVERAGE):  # one target: Avg is the target's mean
        assert intervals.loc[target, "search_low"] == pytest.approx(expected.low)
        assert intervals.loc[target, "search_high"] == pytest.approx(expected.high)
    # the selected draws (trial 0: draw 1, 0.30; trial 1: draw 2, 0.40, its tie with draw 3 to the lower) lie inside
    assert expected.low <= 0.35 <= expected.high and expected.low < expected.high


def test_a_method_with_one_draw_has_no_search_spread_and_the_win_shares_follow_the_resamples():
    # m: draw 0 validates best and tests 0.9; without it in a resample, draw 1 (0.1) is chosen. n: one draw, 0.5.
    cells = [cell("m", "a", 0, 0, 0.9, 0.5, 0.9), cell("m", "a", 0, 1, 0.1, 0.5, 0.1)]
    cells.append(cell("n", "a", 0, 0, 0.5, 0.5, 0.5))
    result = sweep_search.search_bootstrap(sweep.sweep_frame(cells, "target_val"), "target_val")
    intervals = result.intervals.set_index(["method", "target"])
    assert intervals.loc[("n", "a"), ["search_low", "search_high"]].tolist() == [0.5, 0.5]
    assert intervals.loc[("m", "a"), ["search_low", "search_high"]].tolist() == [0.1, 0.9]
    wins = result.wins.set_index("method")["win_share"]
    # a resample of 2 draws holds draw 0 with probability 3/4
    assert wins["m"] == pytest.approx(0.75, abs=0.03) and wins["m"] + wins["n"] == pytest.approx(1.0)


def test_the_oracle_resamples_by_test_and_the_numbers_repeat():
    frame = sweep.sweep_frame(
        [cell("m", "a", 0, d, t, 0.5, v) for d, (t, v) in enumerate([(0.2, 0.9), (0.8, 0.1), (0.5, 0.5)])],
        "oracle",
    )
    first = sweep_search.search_bootstrap(frame, "oracle")
    assert first.intervals["search_high"].max() == pytest.approx(0.8)  # the oracle picks the best test value
    assert first.intervals.equals(sweep_search.search_bootstrap(frame, "oracle").intervals)


def test_the_numbers_do_not_depend_on_the_order_of_the_cells():
    cells = [
        cell(m, t, k, d, 0.1 * d + 0.05 * k + (m == "n") * 0.02, 0.5, (d * 7 + k * 3) % 5 / 5)
        for m in ("m", "n")
        for t in "ab"
        for k in range(2)
        for d in range(3)
    ]
    forward = sweep_search.search_bootstrap(sweep.sweep_frame(cells, "target_val"), "target_val", resamples=300)
    backward = sweep_search.search_bootstrap(sweep.sweep_frame(cells[::-1], "target_val"), "target_val", resamples=300)
    key = ["method", "target"]
    forward_intervals = forward.intervals.sort_values(key).reset_index(drop=True)
    assert forward_intervals.equals(backward.intervals.sort_values(key).reset_index(drop=True))
    assert (
        forward.wins.sort_values("method")
        .reset_index(drop=True)
        .equals(backward.wins.sort_values("method").reset_index(drop=True))
    )
