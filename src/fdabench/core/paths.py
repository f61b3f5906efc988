"""Where every file of the pipeline lives: one pattern per kind of file, read by the Snakemake rules (as
wildcard patterns) and by Python (filled with `fill`). `{data}` is params.yaml's `data.root`."""

from __future__ import annotations

import os
import re
from typing import Any

RAW = "{data}/raw/{raw}"
PREPARED = "{data}/prepared/{dataset}/{options_hash}"
PARTITION = "{data}/partitions/{suite}/{experiment}/{target}/seed{seed}.json"
CELL = "results/cells/{suite}/{experiment}/{method}/{target}/seed{seed}.json"
THEORY_INIT = "results/initial/{suite}/{experiment}/{target}/seed{seed}.json"
# Tables and figures live in one folder per suite, so suites never overwrite each other's.
TABLE = "results/{suite}/{table}.{ext}"
THEORY_REPORT = "results/{suite}/{check}.{ext}"
PAPER_VS_OURS = "results/{suite}/paper_vs_ours.{ext}"
#: a sweep read with one selection rule (fdabench.report.sweep): the table, its paired tests, its CD diagram
SWEEP_TABLE = "results/{suite}/sweep_{rule}.{ext}"
SWEEP_TESTS = "results/{suite}/sweep_{rule}_tests.csv"
SWEEP_FIGURE = "results/{suite}/figures/sweep_{rule}_cd.png"
#: the settings each rule chose (tidy: per method, target, trial and setting), and the chosen draws' learning curves
SWEEP_CHOSEN = "results/{suite}/sweep_{rule}_chosen.csv"
SWEEP_CURVES = "results/{suite}/figures/sweep_{rule}_curves.png"
#: every rule side by side (methods x rules)
SWEEP_RULES = "results/{suite}/sweep_rules.{ext}"
SWEEP_EXTENSIONS = ("csv", "md", "html")
ROUNDS_FIGURE = "results/{suite}/figures/{experiment}_rounds.png"
BETAS_FIGURE = "results/{suite}/figures/{experiment}_betas.png"
FIGURE = "results/{suite}/figures/{figure}.png"
#: every cell of an experiment with its facts (the report's Cells category)
CELLS_TABLE = "results/{suite}/cells/{experiment}.html"
#: a table at a glance: its final metric per method and target, seeds and published values
TABLE_FIGURE = "results/{suite}/figures/{table}_final.png"
#: every table's per-method means of a suite in one file, for `dvc metrics` (outside results/<suite>/, which
#: DVC tracks as one output)
METRICS = "results/metrics/{suite}.json"
#: the per-round series `dvc plots` draws (fdabench.report.dvc_plots), one CSV per series, outside results/<suite>/
PLOTS_ROUNDS = "results/plots/{suite}/rounds"
PLOTS_BETAS = "results/plots/{suite}/betas"
#: every cell's final metrics and per-round series as DVCLive writes them (fdabench.report.trackers.to_dvclive)
DVCLIVE = "results/dvclive/{suite}"
# The active suite's tables and figures are also reachable without the suite folder (results/table1.csv):
# a relative link into results/<suite>/, re-pointed when the active suite changes (`active_view`).
VIEW = "results/{view}"
#: written before planning when a cell file must rerun although Snakemake considers it done (a training job's
#: input while it exists: a new one, newer than the cell, reruns the cell; `fdabench.jobs.status.heal_workspace`)
RERUN_MARKER = ".snakemake/fdabench-rerun/{suite}/{experiment}/{method}/{target}/seed{seed}"
#: a cell's plan: the configuration and code fingerprint its training job runs with (`fdabench.jobs.cell_plan`)
CELL_PLAN = ".snakemake/fdabench-cells/{suite}/{experiment}/{method}/{target}/seed{seed}.json"
#: folders of results/ that are not suites (a suite of one of these names is refused)
RESERVED_RESULT_FOLDERS = ("cells", "initial", "logs", "figures", "metrics", "plots", "dvclive")
TABLE_EXTENSIONS = ("csv", "md", "json", "html")
THEORY_EXTENSIONS = ("csv", "md", "png")
PAPER_VS_OURS_EXTENSIONS = ("csv", "md", "html")

LOGS = {
    "acquire": "results/logs/acquire/{raw}.log",
    "prepare": "results/logs/prepare/{dataset}/{options_hash}.log",
    "partition": "results/logs/partition/{suite}/{experiment}/{target}/seed{seed}.log",
    "train": "results/logs/cells/{suite}/{experiment}/{method}/{target}/seed{seed}.log",
    # a job that trains several cells (params.yaml cells_per_job): its own output; each cell logs to "train" too
    "train_group": "results/logs/groups/{suite}/{experiment}/{method}/seed{seed}.log",
    "theory_init": "results/logs/theory/{suite}/{experiment}/{target}/seed{seed}.log",
    "theory_report": "results/logs/theory/{suite}/{check}.log",
    "table": "results/logs/tables/{suite}/{table}.log",
    "paper_vs_ours": "results/logs/tables/{suite}/paper_vs_ours.log",
    "sweep": "results/logs/tables/{suite}/sweep.log",
    "metrics": "results/logs/tables/{suite}/metrics.log",
    "dvc_plots": "results/logs/tables/{suite}/dvc_plots.log",
    "dvclive": "results/logs/tables/{suite}/dvclive.log",
    "figure_rounds": "results/logs/figures/{suite}/{experiment}_rounds.log",
    "figure_betas": "results/logs/figures/{suite}/{experiment}_betas.log",
    "figure": "results/logs/figures/{suite}/{figure}.log",
    "figure_table": "results/logs/figures/{suite}/{table}_final.log",
    "cells_table": "results/logs/tables/{suite}/cells_{experiment}.log",
    "view": "results/logs/views/{view}.log",
}

_FIELD = re.compile(r"\{(\w+)\}")


def fill(pattern: str, **values: Any) -> str:
    """`pattern` with the given fields filled in; fields not given stay as Snakemake wildcards."""
    return _FIELD.sub(lambda match: str(values[match[1]]) if match[1] in values else match[0], pattern)


def normal_root(root: str) -> str:
    """One spelling of a folder such as `data.root`, so that equivalent spellings name the same files (and rerun
    nothing): relative to the working directory where the folder lies inside it (`data`, `./data/` and the absolute
    path of ./data are all `data`), absolute otherwise; without `.`, `..` or repeated and trailing slashes. Links are
    not followed (a link's target may change)."""
    absolute = os.path.abspath(root)
    relative = os.path.relpath(absolute)
    return absolute if relative == os.pardir or relative.startswith(os.pardir + os.sep) else relative


def sweep_outputs(suite: str, rules: list[str]) -> list[str]:
    """Every file `fdabench sweep` writes for a suite read with `rules`."""
    outputs = []
    for rule in rules:
        outputs += [fill(SWEEP_TABLE, suite=suite, rule=rule, ext=ext) for ext in SWEEP_EXTENSIONS]
        outputs += [fill(SWEEP_TESTS, suite=suite, rule=rule), fill(SWEEP_FIGURE, suite=suite, rule=rule)]
        outputs += [fill(SWEEP_CHOSEN, suite=suite, rule=rule), fill(SWEEP_CURVES, suite=suite, rule=rule)]
    return outputs + [fill(SWEEP_RULES, suite=suite, ext=ext) for ext in SWEEP_EXTENSIONS]


def active_view(path: str, suite: str) -> tuple[str, str]:
    """(view path, link target relative to the view's folder) of a suite's table or figure path: e.g.
    results/demo/figures/a.png -> (results/figures/a.png, ../demo/figures/a.png)."""
    prefix = f"results/{suite}/"
    if not path.startswith(prefix):
        raise ValueError(f"{path} is not a result of suite {suite}")
    inside = path[len(prefix) :]
    depth = inside.count("/")
    return "results/" + inside, "../" * depth + f"{suite}/{inside}"
