"""What a reader of a sweep's table should be warned of: too few draws to rank (how unstable, from the bootstrap
over draws), methods whose selected cells are the same results, and a rule selecting on a small validation split.
Each warning is one line, written under the table and on the console."""

from __future__ import annotations

import itertools

import pandas as pd

from fdabench.report.sweep_search import FEW_DRAWS, SearchBootstrap


def few_draws(frame: pd.DataFrame, bootstrap: SearchBootstrap | None) -> list[str]:
    """Methods searched with fewer than `FEW_DRAWS` draws, and how often the bootstrap over draws changes the winner
    (methods with one draw vary nothing and are not searched)."""
    draws = frame.groupby(["experiment", "method"])["draw"].nunique()
    searched = draws[draws > 1]
    few = searched[searched < FEW_DRAWS]
    if few.empty:
        return []
    counts = ", ".join(f"{method} {count}" for (_, method), count in few.items())
    line = f"Few draws: {counts} (fewer than {FEW_DRAWS}); rankings are unstable"
    if bootstrap is None or bootstrap.wins.empty:
        return [line + "."]
    lines = []
    for experiment, wins in bootstrap.wins.groupby("experiment", sort=False):
        wins = wins.sort_values("win_share", ascending=False)
        shares = [f"{r.method} in {_percent(r.win_share)}" for r in wins.itertuples() if r.win_share > 0]
        shares[0] += " of the resamples"
        where = f" ({experiment})" if bootstrap.wins["experiment"].nunique() > 1 else ""
        lines.append(f"{line}{where}: resampling the draws, the best Avg goes to {', '.join(shares)}.")
    return lines


def _percent(share: float) -> str:
    return "<1%" if share < 0.005 else f"{100 * share:.0f}%"


def identical_selections(selected: pd.DataFrame) -> list[str]:
    """Pairs of methods whose selected cells recorded the same results in every (experiment, target, trial) block
    they share: the table cannot tell them apart."""
    digests = selected.pivot_table(
        index=["experiment", "target", "trial"], columns="method", values="digest", aggfunc="first"
    )
    methods = list(dict.fromkeys(selected["method"]))
    lines = []
    for first, second in itertools.combinations(methods, 2):
        shared = digests[[first, second]].dropna()
        if len(shared) and (shared[first] == shared[second]).all():
            lines.append(
                f"Same results: {first} and {second} selected cells that recorded identical rounds in all "
                f"{len(shared)} blocks; their difference is no evidence about either."
            )
    return lines


def small_validation(frame: pd.DataFrame, rule: str, min_validation: int) -> list[str]:
    """`target_val` choosing on fewer target validation samples per cell than `min_validation` (hold-out: its
    size; k-fold: the labelled samples over k)."""
    if rule != "target_val":
        return []
    holdout, folds = int(frame["target_validation"].max()), int(frame["target_folds"].max())
    size = holdout
    if folds > 1:
        labelled = frame["target_labelled"].dropna()
        size = int(labelled.min()) // folds if len(labelled) else 0
    if not size or size >= min_validation:
        return []
    return [
        f"Small validation: target_val selects on {size} target samples per cell (fewer than min_validation = "
        f"{min_validation}); one sample moves its validation accuracy by {100 / size:.1f} points."
    ]


def sweep_warnings(
    frame: pd.DataFrame,
    selected: pd.DataFrame,
    rule: str,
    bootstrap: SearchBootstrap | None,
    min_validation: int,
) -> list[str]:
    """Every warning of one rule's table (`last` selects nothing, so its draws cannot be too few)."""
    return [
        *([] if rule == "last" else few_draws(frame, bootstrap)),
        *identical_selections(selected),
        *small_validation(frame, rule, min_validation),
    ]
