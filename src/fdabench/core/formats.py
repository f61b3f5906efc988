"""The kinds of JSON file fdabench writes and reads, so that a command handed a file of another kind refuses it by
name instead of reading it as its own. A file declares its kind in `format` ("fdabench.<kind>/<version>"); files
written before their kind declared one (partitions, theory-check records) and files that carry none on purpose
(prepared data's header.json, whose hash identifies the data; a table's metrics JSON, read by DVC) are recognised
by their keys."""

from __future__ import annotations

from typing import Any

CELL = "fdabench.cell/1"
CELL_PLAN = "fdabench.cell_plan/1"
PARTITION = "fdabench.partition/1"
THEORY_INIT = "fdabench.theory_init/1"
BENCH_GPU = "fdabench.bench_gpu/1"
CODE_EQUIVALENCES = "fdabench.code_equivalences/1"

#: kind -> (what it is, the command that writes it)
KINDS = {
    "fdabench.cell": ("a cell result", "fdabench train; results/cells/<suite>/..."),
    "fdabench.cell_plan": ("a cell's plan", "snakemake, before it runs the cell; .snakemake/fdabench-cells/..."),
    "fdabench.partition": ("a partition", "fdabench partition; data/partitions/<suite>/..."),
    "fdabench.theory_init": ("a theory check's initial quantities", "fdabench theory init; results/initial/..."),
    "fdabench.bench_gpu": ("a GPU bench result", "fdabench bench gpu"),
    "fdabench.code_equivalences": ("a code-equivalence record", "fdabench archive vouch"),
    "fdabench.prepared": ("prepared data's header", "fdabench prepare; data/prepared/<dataset>/<options>/"),
    "fdabench.table": ("a table's metrics", "fdabench table --json; results/<suite>/<table>.json"),
}

#: keys that identify a kind in files without `format`
_LEGACY_KEYS = {
    "fdabench.partition": {"clients", "content_hash", "target", "seed"},
    "fdabench.theory_init": {"d2", "sigma2", "delta_errors", "target", "seed"},
    "fdabench.prepared": {"name", "task", "domains", "input_shape"},
}


class WrongKindError(ValueError):
    """A file of another kind than the command reads (the message names both and what to pass)."""


def kind_of(payload: Any) -> str | None:
    """The kind ("fdabench.cell", ...) of a JSON payload: its `format` without the version, or the kind its keys
    identify; None when neither says."""
    if isinstance(payload, dict) and isinstance(payload.get("format"), str):
        return payload["format"].rsplit("/", 1)[0]
    if not isinstance(payload, dict):
        return None
    for kind, keys in _LEGACY_KEYS.items():
        if keys <= set(payload):
            return kind
    return "fdabench.table" if payload and _is_metrics_tree(payload) else None


def _is_metrics_tree(node: Any) -> bool:
    """{name: ... {name: {mean, n_seeds[, std]}}}: what `fdabench table --json` and `fdabench metrics` write."""
    if not isinstance(node, dict) or not node:
        return False
    if "mean" in node and "n_seeds" in node:
        return True
    return all(_is_metrics_tree(child) for child in node.values())


def describe(kind: str | None) -> str:
    return KINDS[kind][0] if kind in KINDS else "not a file fdabench wrote (it has no `format` fdabench knows)"


def check_kind(path: str, payload: Any, expected: str) -> None:
    """Refuse `payload` (read from `path`) when it is a known kind other than `expected` (or no kind at all, for a
    kind every such file declares). A file of the expected kind with another version is left to its reader."""
    found = kind_of(payload)
    if found == expected or (found is None and expected == "fdabench.cell"):
        return  # a cell without a format: the cell reader says what is wrong with it
    what, writer = KINDS[expected]
    raise WrongKindError(f"{path} is {describe(found)}, not {what}; pass {what} ({writer})")
