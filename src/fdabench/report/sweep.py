"""A sweep's cells read with a model-selection rule: one draw per (method, target, trial) chosen by validation
only, that draw's test metric reported, with 95% intervals over trials and significance (DomainBed's
`collect_results`, for FDA).

Rules (`fdabench.core.selection`): `source_val` picks the draw with the best mean validation metric of the
sources' held-out samples, `target_val` the best on the target's validation samples (k-fold: the mean over the
folds, whose test metrics are averaged too), `last` takes draw 0 (no selection) and `oracle` the best test metric
(an upper bound, never a result). Every value is read at the cell's final rounds (the mean of its last
`final_rounds`, as its headline `final`), or with early stopping at the round of the best validation value (of the
phase the final comes from; the oracle's best test round). Ties go to the lowest draw.

Significance: every method against a reference, paired over (target, trial) blocks: the mean difference with its
95% t-interval and the Wilcoxon signed-rank test, Holm-adjusted over the methods; and average ranks within each
block with the Friedman test and the Nemenyi post-hoc test that the critical-difference diagram draws.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from fdabench.cell.reading import read_cells
from fdabench.core.io import atomic_path
from fdabench.core.metrics import PERCENT_METRICS
from fdabench.core.selection import ORACLE, RULES, SELECTION_RULES
from fdabench.report.style import method_styles

AVERAGE = "Avg"
CONFIDENCE = 0.95
#: what a cell of a sweep table means, in its title line (the main tables say theirs: fdabench.report.tables)
CONVENTION = "each cell: mean ± half-width of the 95% t-interval over trials"
#: posterior samples of the Bayesian signed-rank test, and the seed of their stream (the same numbers every run)
BAYES_SAMPLES = 20000
BAYES_SEED = 0
IDENTITY = ["experiment", "method", "target", "trial", "draw", "fold"]


class SelectionError(ValueError):
    """The cells cannot be read with the rule asked for (e.g. they record no validation it reads)."""


def validation_key(rule: str, metric: str) -> str:
    """The per-round key a rule reads: `source_val_<metric>`, `target_val_<metric>`, or the test metric itself."""
    return {"source_val": f"source_val_{metric}", "target_val": f"target_val_{metric}"}.get(rule, metric)


def _window(cell: dict[str, Any]) -> list[dict[str, Any]]:
    """The rounds a cell's final is read from, and the rounds early stopping may pick among (its final phase)."""
    rounds = cell["rounds"]
    return rounds[-cell["final_rounds"] :]


def _final_phase(cell: dict[str, Any]) -> list[dict[str, Any]]:
    rounds = cell["rounds"]
    phase = rounds[-1]["phase"]
    return [record for record in rounds if record["phase"] == phase]


def cell_scores(cell: dict[str, Any], rule: str, early_stopping: bool) -> tuple[float, float]:
    """(validation value the rule reads, test metric reported) of one cell. NaN validation where the cell records
    none (the rule then refuses the cells)."""
    metric = cell["metric"]
    key = validation_key(rule, metric)
    if early_stopping and rule != "last":
        phase = _final_phase(cell)
        values = [record.get(key, math.nan) for record in phase]
        if all(math.isnan(v) for v in values):
            return math.nan, math.nan
        better = np.nanargmax if cell["higher_is_better"] else np.nanargmin
        best = int(better(values))  # the first of equal values: the earliest round
        return float(values[best]), float(phase[best][metric])
    window = _window(cell)
    values = [record.get(key, math.nan) for record in window]
    return float(np.mean(values)), float(cell["final"])


def swept_settings(cells: list[dict[str, Any]]) -> dict[tuple[str, str], list[str]]:
    """(experiment, method) -> the settings its draws vary (`hparams.<name>`, `train.<name>`), from the cells'
    `sweep.values`."""
    swept: dict[tuple[str, str], dict[str, None]] = {}
    for cell in cells:
        config = cell["config"]
        sweep = config.get("sweep", {})
        key = (config["experiment"], sweep.get("method", config["method"]))
        swept.setdefault(key, {}).update(dict.fromkeys(sweep.get("values", {})))
    return {key: sorted(names) for key, names in swept.items()}


def setting_values(config: dict[str, Any], settings: list[str]) -> dict[str, Any]:
    """The value of each setting (`hparams.<name>`, `train.<name>`) a cell ran with: its draw's, or for draw 0 the
    configured one."""
    values = {}
    for setting in settings:
        group, name = setting.split(".", 1)
        values[setting] = config.get(group, {}).get(name)
    return values


def result_digest(cell: dict[str, Any]) -> str:
    """A hash of what a cell recorded every round: equal digests are the same results."""
    return hashlib.sha256(json.dumps(cell["rounds"], sort_keys=True).encode("utf-8")).hexdigest()


def sweep_frame(cells: Iterable[dict[str, Any]], rule: str, early_stopping: bool = False) -> pd.DataFrame:
    """One row per (experiment, method, target, trial, draw): the validation value the rule reads and the test
    metric, averaged over k-fold cells; `higher_is_better` and `metric` per row, the draw's `values` (every swept
    setting of the method) and the `digest` of its results."""
    cells = list(cells)
    swept = swept_settings(cells)
    rows = []
    for cell in cells:
        config = cell["config"]
        sweep = config.get("sweep", {})
        method = sweep.get("method", config["method"])
        validation, test = cell_scores(cell, rule, early_stopping)
        rows.append(
            {
                "experiment": config["experiment"],
                "method": method,
                "target": str(config["target"]),
                "trial": int(config["seed"]),
                "draw": int(sweep.get("draw", 0)),
                "fold": int(config.get("validation", {}).get("target_fold", 0)),
                "metric": cell["metric"],
                "higher_is_better": bool(cell["higher_is_better"]),
                "validation": validation,
                "test": test,
                "target_validation": int(config.get("validation", {}).get("target_holdout", 0)),
                "target_folds": int(config.get("validation", {}).get("target_folds", 1)),
                "target_labelled": config.get("partition", {}).get("target_labelled"),
                "scope": sweep.get("scope", "shared"),
                "values": setting_values(config, swept[(config["experiment"], method)]),
                "digest": result_digest(cell),
            }
        )
    if not rows:
        raise SelectionError("no cells to select from")
    frame = pd.DataFrame(rows)
    missing = frame[frame["validation"].isna()]
    if len(missing) and rule != "last":
        example = missing.iloc[0]
        raise SelectionError(
            f"rule {rule}: {len(missing)} of {len(frame)} cells record no {validation_key(rule, example['metric'])} "
            f"(e.g. {example['method']} draw {example['draw']}, target {example['target']}, trial {example['trial']}): "
            + (
                "set validation: {target_holdout: n} in the suite"
                if rule == "target_val"
                else "their partitioner holds no source samples out"
            )
        )
    keys = ["experiment", "method", "target", "trial", "draw"]
    folded = frame.groupby(keys, sort=False).agg(
        validation=("validation", "mean"),
        test=("test", "mean"),
        folds=("fold", "nunique"),
        metric=("metric", "first"),
        higher_is_better=("higher_is_better", "first"),
        target_validation=("target_validation", "first"),
        target_folds=("target_folds", "first"),
        target_labelled=("target_labelled", "first"),
        scope=("scope", "first"),
        values=("values", "first"),
        digest=("digest", lambda digests: " ".join(sorted(digests))),
    )
    return folded.reset_index()


def select(frame: pd.DataFrame, rule: str) -> pd.DataFrame:
    """The draw the rule picks per (experiment, method, target, trial), by validation only (`oracle`: by test),
    with its test metric; ties to the lowest draw. Columns: the keys, draw, test, validation, the draw's values and
    result digest, draws (candidates)."""
    if rule not in RULES:
        raise SelectionError(f"unknown selection rule {rule!r}; allowed: {', '.join(RULES)}")
    keys = ["experiment", "method", "target", "trial"]
    chosen = []
    for key, group in frame.groupby(keys, sort=False):
        group = group.sort_values("draw")
        if rule == "last":
            pick = group[group["draw"] == 0]
            if pick.empty:
                raise SelectionError(f"rule last: no draw 0 for {dict(zip(keys, key))}")
            row = pick.iloc[0]
        else:
            criterion = group["test"] if rule == ORACLE else group["validation"]
            sign = 1.0 if group["higher_is_better"].iloc[0] else -1.0
            row = group.iloc[int(np.argmax((sign * criterion).to_numpy()))]  # first maximum: the lowest draw
        chosen.append(
            {**dict(zip(keys, key)), **row[["draw", "test", "validation", "metric", "values", "digest"]].to_dict()}
        )
        chosen[-1]["draws"] = len(group)
        chosen[-1]["higher_is_better"] = bool(group["higher_is_better"].iloc[0])
    return pd.DataFrame(chosen)


def interval(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(mean, low, high) of the t-interval over `values` (NaN bounds for fewer than 2 values)."""
    values = np.asarray(values, dtype=float)
    mean = float(values.mean())
    if len(values) < 2:
        return mean, math.nan, math.nan
    sem = stats.sem(values)
    if sem == 0:
        return mean, mean, mean
    low, high = stats.t.interval(confidence, len(values) - 1, loc=mean, scale=sem)
    return mean, float(low), float(high)


def summary_table(selected: pd.DataFrame, rule: str) -> pd.DataFrame:
    """mean and 95% interval over trials per (experiment, method, target), and Avg: per trial the mean over the
    experiment's targets (trials with every target only), then over trials."""
    rows = []
    for (experiment, method), group in selected.groupby(["experiment", "method"], sort=False):
        targets = list(dict.fromkeys(selected.loc[selected["experiment"] == experiment, "target"]))
        for target, part in group.groupby("target", sort=False):
            rows.append(_summary_row(rule, experiment, method, target, part["test"], part))
        per_trial = group.groupby("trial")["test"].agg(["mean", "count"])
        complete = per_trial[per_trial["count"] == len(targets)]["mean"]
        if len(complete):
            rows.append(_summary_row(rule, experiment, method, AVERAGE, complete, group))
    return pd.DataFrame(rows)


def _summary_row(rule, experiment, method, target, values, part) -> dict[str, Any]:
    mean, low, high = interval(values.to_numpy())
    return {
        "rule": rule,
        "experiment": experiment,
        "method": method,
        "target": target,
        "metric": part["metric"].iloc[0],
        "mean": mean,
        "ci_low": low,
        "ci_high": high,
        "n_trials": len(values),
        "n_draws": int(part["draws"].max()),
        "selected_draws": " ".join(str(d) for d in part["draw"]),
        "upper_bound": rule == ORACLE,
    }


def blocks(selected: pd.DataFrame) -> pd.DataFrame:
    """The selected test metric as (experiment, target, trial) blocks x methods, blocks every method has."""
    matrix = selected.pivot_table(index=["experiment", "target", "trial"], columns="method", values="test")
    methods = list(dict.fromkeys(selected["method"]))
    return matrix[methods].dropna()


def paired_tests(selected: pd.DataFrame, reference: str) -> pd.DataFrame:
    """Every method against `reference` over the blocks both have: mean difference (method − reference) with its
    95% t-interval, the Wilcoxon signed-rank p-value, and Holm's adjustment over the methods."""
    from statsmodels.stats.multitest import multipletests

    matrix = blocks(selected)
    if reference not in matrix:
        raise SelectionError(f"reference method {reference!r} is not among {', '.join(matrix.columns)}")
    rows = []
    for method in matrix.columns:
        if method == reference:
            continue
        differences = (matrix[method] - matrix[reference]).to_numpy()
        mean, low, high = interval(differences)
        p_value = math.nan
        if len(differences) >= 2 and np.any(differences != 0):
            p_value = float(stats.wilcoxon(matrix[method], matrix[reference]).pvalue)
        rows.append(
            {
                "method": method,
                "reference": reference,
                "n_pairs": len(differences),
                "mean_difference": mean,
                "difference_ci_low": low,
                "difference_ci_high": high,
                "wilcoxon_p": p_value,
            }
        )
    frame = pd.DataFrame(rows)
    tested = frame["wilcoxon_p"].notna()
    frame["holm_p"] = math.nan
    if tested.any():
        frame.loc[tested, "holm_p"] = multipletests(frame.loc[tested, "wilcoxon_p"], method="holm")[1]
    return frame


def bayesian_tests(selected: pd.DataFrame, reference: str, rope: float) -> pd.DataFrame:
    """Every method against `reference` over the blocks both have, with baycomp's Bayesian signed-rank test
    (Benavoli et al. 2014): the posterior probability that the method is better by more than `rope` (in the table's
    unit: percentage points for accuracy and AUC), that the two are within it (equivalent), and that the reference
    is better by more than it."""
    import baycomp

    matrix = blocks(selected)
    higher = bool(selected["higher_is_better"].iloc[0])
    scale = 100 if selected["metric"].iloc[0] in PERCENT_METRICS else 1
    sign = 1.0 if higher else -1.0  # baycomp's "right" is the larger value
    rows = []
    for method in matrix.columns:
        if method == reference:
            continue
        probabilities = [math.nan] * 3
        if len(matrix) >= 2:
            probabilities = baycomp.SignedRankTest.probs(
                sign * matrix[reference].to_numpy(),
                sign * matrix[method].to_numpy(),
                rope / scale,
                nsamples=BAYES_SAMPLES,
                random_state=BAYES_SEED,
            )
            if rope == 0:
                probabilities = [probabilities[0], 0.0, probabilities[1]]
        worse, equivalent, better = (float(p) for p in probabilities)
        rows.append({"method": method, "p_better": better, "p_equivalent": equivalent, "p_worse": worse, "rope": rope})
    return pd.DataFrame(rows, columns=["method", "p_better", "p_equivalent", "p_worse", "rope"])


def average_ranks(selected: pd.DataFrame) -> tuple[pd.Series, float, pd.DataFrame | None]:
    """(average rank per method, 1 = best, ties averaged; the Friedman test's p-value; the Nemenyi post-hoc
    p-values) over the blocks. The tests need at least 3 methods and 2 blocks (NaN and None otherwise)."""
    import scikit_posthocs

    matrix = blocks(selected)
    higher = bool(selected["higher_is_better"].iloc[0])
    ranks = pd.DataFrame(
        stats.rankdata(-matrix.to_numpy() if higher else matrix.to_numpy(), axis=1), columns=matrix.columns
    )
    mean_ranks = ranks.mean().sort_values()
    if matrix.shape[1] < 3 or matrix.shape[0] < 2:
        return mean_ranks, math.nan, None
    friedman = float(stats.friedmanchisquare(*[matrix[m] for m in matrix.columns]).pvalue)
    nemenyi = scikit_posthocs.posthoc_nemenyi_friedman(matrix.to_numpy())
    nemenyi.index = nemenyi.columns = matrix.columns
    return mean_ranks, friedman, nemenyi


def format_interval(mean: float, low: float, high: float, metric: str) -> str:
    """ "mean ± half-width" (percent for accuracy and AUC); the mean alone without an interval."""
    scale = 100 if metric in PERCENT_METRICS else 1
    digits = ".2f" if scale == 100 else ".4g"
    text = f"{scale * mean:{digits}}"
    if math.isnan(low):
        return text
    return f"{text} ± {scale * (high - low) / 2:{digits}}"


def rule_caption(title: str, rule: str) -> str:
    """A rule's table title line: the sweep, the rule (the oracle marked as an upper bound), `CONVENTION`."""
    return (
        f"{title} — {rule}"
        + (" (UPPER BOUND: selected on the test split)" if rule == ORACLE else "")
        + f" — {CONVENTION}"
    )


def rules_caption(title: str) -> str:
    """The every-rule table's title line, with `CONVENTION`."""
    return f"{title} — every selection rule (Avg over targets) — {CONVENTION}"


def rule_heading(rule: str, early_stopping: bool) -> str:
    text = f"selection rule `{rule}`: {SELECTION_RULES[rule]}"
    if rule != "last":
        text += "; round: " + ("the best validation round (early stopping)" if early_stopping else "the final rounds")
    return text


def layout(summary: pd.DataFrame) -> pd.DataFrame:
    """Methods x (experiment, target, Avg), "mean ± half-width of the 95% interval" strings."""
    columns = list(dict.fromkeys(zip(summary["experiment"], summary["target"])))
    several = summary["experiment"].nunique() > 1
    lookup = {(r.experiment, r.target, r.method): r for r in summary.itertuples()}
    body = {}
    for method in dict.fromkeys(summary["method"]):
        row = lookup.get
        body[method] = [
            format_interval(r.mean, r.ci_low, r.ci_high, r.metric) if (r := row((e, t, method))) else "–"
            for e, t in columns
        ]
    header = [f"{e} {t}" if several else str(t) for e, t in columns]
    return pd.DataFrame.from_dict(body, orient="index", columns=header)


def notes(frame: pd.DataFrame, rule: str, early_stopping: bool, summary: pd.DataFrame) -> list[str]:
    """What was selected from, and what the numbers are."""
    trials = frame.groupby(["experiment", "method", "target"])["trial"].nunique()
    draws = frame.groupby(["experiment", "method"])["draw"].nunique()
    lines = [
        f"Each value: the mean over trials of the selected draw's target test metric, ± the half-width of its 95% "
        f"t-interval; Avg: per trial the mean over targets, then over trials. Trials per cell: {trials.min()}"
        + (f"-{trials.max()}" if trials.max() != trials.min() else "")
        + "; draws per method: "
        + ", ".join(f"{method} {count}" for (_, method), count in draws.items())
        + ".",
    ]
    lines.append(search_note(frame))
    holdout, folds = int(frame["target_validation"].max()), int(frame["target_folds"].max())
    if folds > 1:
        lines.append(
            f"Target validation: {folds}-fold over the labelled target samples (each fold's cell trains on the rest)."
        )
    elif holdout:
        lines.append(
            f"Target validation: {holdout} labelled target samples per cell, never trained on (under every rule)."
        )
    if rule == ORACLE:
        lines.append(
            "ORACLE: selected by the target's test metric itself. An upper bound on what any selection rule "
            "can reach, never a result to report as a method's performance."
        )
    lines.append("Rule: " + rule_heading(rule, early_stopping) + ".")
    return lines


def search_note(frame: pd.DataFrame) -> str:
    """Which search ran: every trial its own draws, or draws shared by the trials."""
    if (frame["scope"] == "trial").any():
        return (
            "Search: each trial drew its own settings (trial-level search, DomainBed's), so the interval over "
            "trials includes the search's luck."
        )
    return (
        "Search: the trials shared their draws, so the interval over trials is seed noise alone; the search "
        "interval shows the search's luck."
    )


def search_layout(summary: pd.DataFrame, intervals: pd.DataFrame) -> pd.DataFrame:
    """Methods x (experiment, target, Avg): the bootstrap-over-draws interval, "low – high"
    (`fdabench.report.sweep_search`)."""
    merged = summary.merge(intervals, on=["experiment", "method", "target"], how="left")
    columns = list(dict.fromkeys(zip(summary["experiment"], summary["target"])))
    several = summary["experiment"].nunique() > 1
    lookup = {(r.experiment, r.target, r.method): r for r in merged.itertuples()}
    body = {}
    for method in dict.fromkeys(summary["method"]):
        cells = []
        for experiment, target in columns:
            r = lookup.get((experiment, target, method))
            if r is None or math.isnan(r.search_low):
                cells.append("–")
                continue
            scale = 100 if r.metric in PERCENT_METRICS else 1
            digits = ".2f" if scale == 100 else ".4g"
            cells.append(f"{scale * r.search_low:{digits}} – {scale * r.search_high:{digits}}")
        body[method] = cells
    header = [f"{e} {t}" if several else str(t) for e, t in columns]
    return pd.DataFrame.from_dict(body, orient="index", columns=header)


def significance_table(tests: pd.DataFrame, ranks: pd.Series, metric: str) -> pd.DataFrame:
    """The paired tests (with the Bayesian comparison where `tests` holds it, `bayesian_tests`) and average ranks
    as display strings, one row per method (the reference's row: its rank)."""
    scale = 100 if metric in PERCENT_METRICS else 1
    bayesian = "p_better" in tests
    rows = {}
    for method, rank in ranks.items():
        row = tests[tests["method"] == method]
        if row.empty:
            rows[method] = ["(reference)", "", "", *([""] if bayesian else []), f"{rank:.2f}"]
            continue
        r = row.iloc[0]
        difference = f"{scale * r.mean_difference:+.2f}" if scale == 100 else f"{r.mean_difference:+.4g}"
        if not math.isnan(r.difference_ci_low):
            difference += f" [{scale * r.difference_ci_low:+.2f}, {scale * r.difference_ci_high:+.2f}]"
        posterior = [" / ".join(_probability(p) for p in (r.p_better, r.p_equivalent, r.p_worse))] if bayesian else []
        rows[method] = [difference, _p(r.wilcoxon_p), _p(r.holm_p), *posterior, f"{rank:.2f}"]
    columns = ["difference vs reference [95% CI]", "Wilcoxon p", "Holm p"]
    if bayesian:
        columns.append(f"P(better / equivalent / worse), ROPE ±{tests['rope'].iloc[0]:g}")
    columns.append("average rank")
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns)


def _probability(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.2f}"


def _p(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.3g}"


def rule_markdown(
    rule: str,
    title: str,
    frame: pd.DataFrame,
    summary: pd.DataFrame,
    tests: pd.DataFrame,
    ranks: pd.Series,
    friedman: float,
    early_stopping: bool,
    figure: str | None = None,
    search: pd.DataFrame | None = None,
    chosen: tuple[pd.DataFrame, pd.DataFrame] | None = None,
    warnings: list[str] = (),
    curves: str | None = None,
) -> str:
    """One rule's page: the table, its warnings and notes, the search interval (`search`: the bootstrap over
    draws), the chosen settings (`chosen`: per trial, and the per-method summary) and their learning curves, the
    paired and Bayesian tests and ranks, the Friedman test, the CD diagram."""
    metric = summary["metric"].iloc[0]
    reference = tests["reference"].iloc[0] if len(tests) else "–"
    heading = f"### {rule_caption(title, rule)}"
    lines = [heading, "", _markdown(layout(summary), "Method"), ""]
    lines += [f"- **Warning.** {warning}" for warning in warnings]
    lines += [f"- {note}" for note in notes(frame, rule, early_stopping, summary)]
    if search is not None:
        lines += [
            "",
            "#### Search interval: 95% bootstrap over draws (trials held fixed)",
            "",
            _markdown(search_layout(summary, search), "Method"),
            "",
            "- Each (method, target, trial)'s draws resampled with replacement and the rule applied again (percentile "
            "intervals of scipy's bootstrap): how far the value moves with the luck of the search alone.",
        ]
    if chosen is not None:
        per_trial, per_method = chosen
        lines += ["", "#### Chosen settings", "", _markdown(per_trial, "Method, target"), ""]
        if len(per_method):
            lines += [_markdown(per_method, "Method"), ""]
            lines += ["- The values of the selected draws; per method the median and range over targets and trials."]
        if curves:
            lines += ["", f"![learning curves of the selected draws]({curves})"]
    blocks_count = tests["n_pairs"].max() if len(tests) else 0
    lines += [
        "",
        f"#### Against `{reference}`, paired over (target, trial) blocks ({blocks_count}), and average ranks",
        "",
        _markdown(significance_table(tests, ranks, metric), "Method"),
        "",
        "- Difference: method − reference in the table's unit (positive: "
        + ("better" if summary.empty or _higher(frame) else "worse")
        + "). Wilcoxon signed-rank test over the blocks; Holm's adjustment over the methods."
        + (
            " P(better / equivalent / worse): baycomp's Bayesian signed-rank test over the same blocks, the "
            "posterior probability that the method beats the reference by more than the ROPE, is within it, or "
            "trails by more than it."
            if "p_better" in tests
            else ""
        ),
        "- Average rank: 1 is best, within each (target, trial) block; Friedman test over the blocks: p = "
        + _p(friedman)
        + (
            ". The critical-difference diagram joins methods the Nemenyi test does not tell apart (α = 0.05)."
            if figure
            else "."
        ),
    ]
    if figure:
        lines += ["", f"![critical-difference diagram]({figure})"]
    return "\n".join(lines) + "\n"


def _higher(frame: pd.DataFrame) -> bool:
    return bool(frame["higher_is_better"].iloc[0])


def _markdown(frame: pd.DataFrame, index_name: str) -> str:
    header = "| " + " | ".join([index_name, *frame.columns]) + " |"
    rule = "|" + "|".join(["---"] + [":---:"] * len(frame.columns)) + "|"
    rows = ["| " + " | ".join([str(index), *map(str, values)]) + " |" for index, values in frame.iterrows()]
    return "\n".join([header, rule, *rows])


def rules_summary(summaries: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Methods x rules: the Avg of each experiment under each rule ("mean ± half-width"), and per rule the winner."""
    rows = []
    for rule, summary in summaries.items():
        for row in summary[summary["target"] == AVERAGE].itertuples():
            rows.append(
                {
                    "rule": rule,
                    "experiment": row.experiment,
                    "method": row.method,
                    "metric": row.metric,
                    "mean": row.mean,
                    "ci_low": row.ci_low,
                    "ci_high": row.ci_high,
                    "n_trials": row.n_trials,
                }
            )
    return pd.DataFrame(rows)


def winners(tidy: pd.DataFrame, higher_is_better: bool) -> dict[tuple[str, str], str]:
    """(experiment, rule) -> the method with the best Avg mean."""
    best = {}
    for (experiment, rule), group in tidy.groupby(["experiment", "rule"], sort=False):
        index = group["mean"].idxmax() if higher_is_better else group["mean"].idxmin()
        best[(experiment, rule)] = group.loc[index, "method"]
    return best


def summary_markdown(tidy: pd.DataFrame, title: str, higher_is_better: bool, search: str = "") -> str:
    """Methods x rules per experiment, each rule's winner in bold, the oracle marked as an upper bound; `search`:
    which search ran (`search_note`)."""
    lines = [f"### {rules_caption(title)}", ""]
    best = winners(tidy, higher_is_better)
    for experiment, part in tidy.groupby("experiment", sort=False):
        rules = list(dict.fromkeys(part["rule"]))
        header = [f"{rule} (upper bound)" if rule == ORACLE else rule for rule in rules]
        table = {}
        for method in dict.fromkeys(part["method"]):
            cells = []
            for rule in rules:
                row = part[(part["method"] == method) & (part["rule"] == rule)]
                if row.empty:
                    cells.append("–")
                    continue
                r = row.iloc[0]
                text = format_interval(r["mean"], r["ci_low"], r["ci_high"], r["metric"])
                cells.append(f"**{text}**" if best[(experiment, rule)] == method else text)
            table[method] = cells
        lines += [
            f"#### {experiment}",
            "",
            _markdown(pd.DataFrame.from_dict(table, orient="index", columns=header), "Method"),
            "",
        ]
        lines.append("- Winner per rule: " + "; ".join(f"{rule}: {best[(experiment, rule)]}" for rule in rules) + ".")
        lines.append("")
    lines.append(
        "Bold: the best mean under that rule. oracle: selected on the target's test split, an upper bound, "
        "never a result." + (f" {search}" if search else "")
    )
    return "\n".join(lines) + "\n"


def plot_critical_difference(
    ranks: pd.Series,
    nemenyi: pd.DataFrame | None,
    output: str,
    title: str,
    families: Mapping[str, str] | None = None,
) -> None:
    """`draw_critical_difference`, saved as PNG."""
    import matplotlib.pyplot as plt

    figure = draw_critical_difference(ranks, nemenyi, title, families)
    with atomic_path(output) as tmp:
        figure.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    plt.close(figure)


def draw_critical_difference(
    ranks: pd.Series, nemenyi: pd.DataFrame | None, title: str, families: Mapping[str, str] | None = None
):
    """The critical-difference diagram (scikit-posthocs): average ranks on an axis from rank 1 (the best possible)
    to the number of methods (the worst), methods the Nemenyi test does not separate joined by a bar; without the
    test (fewer than 3 methods or 2 blocks), the ranks alone. Each method in its colour in every figure of the suite
    (`fdabench.report.style.method_styles(families)`; black without `families`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import scikit_posthocs

    styles = method_styles(families) if families else {}
    colours = {method: styles[method].colour if method in styles else (0.0, 0.0, 0.0) for method in ranks.index}
    figure, axes = plt.subplots(figsize=(7, 0.45 * len(ranks) + 1.2))
    if nemenyi is not None:
        scikit_posthocs.critical_difference_diagram(ranks, nemenyi, ax=axes, color_palette=colours)
    else:
        axes.scatter(ranks.to_numpy(), range(len(ranks)), color=[colours[method] for method in ranks.index])
        axes.set_yticks(range(len(ranks)), list(ranks.index))
        for label, method in zip(axes.get_yticklabels(), ranks.index, strict=True):
            label.set_color(colours[method])
        axes.set_xlabel("average rank (1 = best)")
    axes.set_xlim(1, max(len(ranks), 2))
    axes.set_title(title, fontsize=10, pad=20)
    return figure


def sweep_families(cells: Iterable[dict[str, Any]]) -> dict[str, str] | None:
    """Each swept method's family as its cells record it (method -> family, in the cells' order); None where a cell
    records none (it ran before cells recorded their family)."""
    families = {}
    for cell in cells:
        config = cell["config"]
        if cell.get("family") is None:
            return None
        families[config.get("sweep", {}).get("method", config["method"])] = cell["family"]
    return families


def read_sweep_cells(paths: Iterable[str]) -> list[dict[str, Any]]:
    """The finished cells of a sweep (`read_cells` refuses anything else, and a cell given twice)."""
    return list(read_cells(paths).values())
