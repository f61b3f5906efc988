"""Where every file of the pipeline lives: one pattern per kind of file, read by the Snakemake rules (as
wildcard patterns) and by Python (filled with `fill`). `{data}` is params.yaml's `data.root`."""

from __future__ import annotations

import re
from typing import Any

RAW = "{data}/raw/{raw}"
PREPARED = "{data}/prepared/{dataset}/{options_hash}"
PARTITION = "{data}/partitions/{suite}/{experiment}/{target}/seed{seed}.json"
CELL = "results/cells/{suite}/{experiment}/{method}/{target}/seed{seed}.json"
THEORY_INIT = "results/theory/{suite}/{experiment}/{target}/seed{seed}.json"
TABLE = "results/{table}.{ext}"
THEORY_REPORT = "results/{check}.{ext}"
PAPER_VS_OURS = "results/paper_vs_ours.{ext}"
ROUNDS_FIGURE = "results/figures/{experiment}_rounds.png"
BETAS_FIGURE = "results/figures/{experiment}_betas.png"
FIGURE = "results/figures/{figure}.png"
TABLE_EXTENSIONS = ("csv", "md", "json")
THEORY_EXTENSIONS = ("csv", "md", "png")
PAPER_VS_OURS_EXTENSIONS = ("csv", "md")

LOGS = {
    "acquire": "results/logs/acquire/{raw}.log",
    "prepare": "results/logs/prepare/{dataset}/{options_hash}.log",
    "partition": "results/logs/partition/{suite}/{experiment}/{target}/seed{seed}.log",
    "train": "results/logs/cells/{suite}/{experiment}/{method}/{target}/seed{seed}.log",
    "theory_init": "results/logs/theory/{suite}/{experiment}/{target}/seed{seed}.log",
    "theory_report": "results/logs/theory/{check}.log",
    "table": "results/logs/tables/{table}.log",
    "paper_vs_ours": "results/logs/tables/paper_vs_ours.log",
    "figure_rounds": "results/logs/figures/{experiment}_rounds.log",
    "figure_betas": "results/logs/figures/{experiment}_betas.log",
    "figure": "results/logs/figures/{figure}.log",
}

_FIELD = re.compile(r"\{(\w+)\}")


def fill(pattern: str, **values: Any) -> str:
    """`pattern` with the given fields filled in; fields not given stay as Snakemake wildcards."""
    return _FIELD.sub(lambda match: str(values[match[1]]) if match[1] in values else match[0], pattern)
