"""How much of a sweep's spread is the search's luck: a bootstrap over draws.

Each (method, target, trial) chose one of its draws. Resampling those draws with replacement (scipy's
`stats.bootstrap`, each (method, target, trial) resampled on its own, percentile intervals) and applying the rule
again to every resample shows what the table would read had the search drawn differently, with the trials held
fixed: a 95% interval per method and target (and Avg) beside the interval over trials, and how often each method
would have won. `last` chooses nothing (draw 0), so it has no search interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from fdabench.core.selection import ORACLE
from fdabench.report.sweep import AVERAGE, CONFIDENCE

#: bootstrap resamples of the draws, and the seed of their stream (the intervals are the same on every run)
RESAMPLES = 2000
SEED = 0
#: fewer draws than this and the tables warn that rankings are unstable (the issue's bound; DomainBed runs 20)
FEW_DRAWS = 10


@dataclass(frozen=True)
class SearchBootstrap:
    """`intervals`: experiment, method, target (and Avg), search_low, search_high; `wins`: experiment, method, the
    share of resamples in which the method has the best Avg."""

    intervals: pd.DataFrame
    wins: pd.DataFrame


def best_draw_test(validation: np.ndarray, test: np.ndarray, higher_is_better: bool, indices: np.ndarray) -> float:
    """The test metric of the draw among `indices` (positions in draw order) with the best validation value; ties
    to the lowest draw, as `fdabench.report.sweep.select`."""
    criterion = validation[indices] if higher_is_better else -validation[indices]
    best = indices[criterion == criterion.max()].min()
    return float(test[best])


def search_bootstrap(frame: pd.DataFrame, rule: str, resamples: int = RESAMPLES, seed: int = SEED) -> SearchBootstrap:
    """The bootstrap over draws of a rule's table (`frame`: `fdabench.report.sweep.sweep_frame` for `rule`)."""
    groups = []  # (experiment, method, target, trial, validation, test) in draw order
    # in key order, whatever the order of the cells: the resamples each group receives, so the numbers, depend on it
    for (experiment, method, target, trial), group in frame.groupby(["experiment", "method", "target", "trial"]):
        group = group.sort_values("draw")
        criterion = group["test"] if rule == ORACLE else group["validation"]
        groups.append((experiment, method, target, trial, criterion.to_numpy(float), group["test"].to_numpy(float)))
    higher = bool(frame["higher_is_better"].iloc[0])
    resampled = [index for index, group in enumerate(groups) if len(group[4]) > 1]
    fixed = {
        index: best_draw_test(g[4], g[5], higher, np.arange(len(g[4])))
        for index, g in enumerate(groups)
        if index not in resampled
    }
    outputs = _outputs(groups)

    def statistic(*samples: np.ndarray) -> np.ndarray:
        tests = dict(fixed)
        for index, sample in zip(resampled, samples):
            _, _, _, _, criterion, test = groups[index]
            tests[index] = best_draw_test(criterion, test, higher, np.asarray(sample, dtype=int))
        return np.array([_average(tests, members) for _, members in outputs])

    labels = [label for label, _ in outputs]
    if not resampled:  # no choice anywhere: the search interval is the value itself
        values = statistic()
        distribution = np.repeat(values[:, None], resamples, axis=1)
        low = high = values
    else:
        result = stats.bootstrap(
            [np.arange(len(groups[index][4])) for index in resampled],
            statistic,
            n_resamples=resamples,
            vectorized=False,
            paired=False,
            confidence_level=CONFIDENCE,
            method="percentile",
            random_state=np.random.default_rng(seed),
        )
        distribution = np.atleast_2d(result.bootstrap_distribution)
        low, high = result.confidence_interval
        constant = distribution.min(axis=1) == distribution.max(axis=1)  # scipy gives NaN; the interval is a point
        low = np.where(constant, distribution[:, 0], low)
        high = np.where(constant, distribution[:, 0], high)
    intervals = pd.DataFrame(labels, columns=["experiment", "method", "target"]).assign(
        search_low=low, search_high=high
    )
    return SearchBootstrap(intervals, _wins(labels, distribution, higher))


def _outputs(groups: list[tuple]) -> list[tuple[tuple[str, str, str], list[list[int]]]]:
    """(experiment, method, target or Avg) -> the groups it averages, as trials x targets of group positions: a
    target's mean over its trials, Avg's mean over trials with every target of the mean over targets (as
    `fdabench.report.sweep.summary_table`)."""
    outputs = []
    for experiment in dict.fromkeys(g[0] for g in groups):
        targets = list(dict.fromkeys(g[2] for g in groups if g[0] == experiment))
        for method in dict.fromkeys(g[1] for g in groups if g[0] == experiment):
            mine = {(g[2], g[3]): index for index, g in enumerate(groups) if g[0] == experiment and g[1] == method}
            trials = list(dict.fromkeys(trial for _, trial in mine))
            for target in targets:
                members = [[mine[(target, trial)]] for trial in trials if (target, trial) in mine]
                if members:
                    outputs.append(((experiment, method, target), members))
            complete = [
                [mine[(t, trial)] for t in targets] for trial in trials if all((t, trial) in mine for t in targets)
            ]
            if complete:
                outputs.append(((experiment, method, AVERAGE), complete))
    return outputs


def _average(tests: dict[int, float], members: list[list[int]]) -> float:
    return float(np.mean([np.mean([tests[index] for index in trial]) for trial in members]))


def _wins(labels: list[tuple[str, str, str]], distribution: np.ndarray, higher_is_better: bool) -> pd.DataFrame:
    """Per experiment and method: the share of resamples in which its Avg is the best (ties: the first method)."""
    rows = []
    for experiment in dict.fromkeys(label[0] for label in labels):
        positions = [i for i, label in enumerate(labels) if label[0] == experiment and label[2] == AVERAGE]
        if not positions:  # no method has every target in a trial
            continue
        averages = distribution[positions]
        best = (averages if higher_is_better else -averages).argmax(axis=0)
        for rank, position in enumerate(positions):
            rows.append(
                {"experiment": experiment, "method": labels[position][1], "win_share": float(np.mean(best == rank))}
            )
    return pd.DataFrame(rows, columns=["experiment", "method", "win_share"])
