"""The output of `fdabench bench gpu`: its JSON format (a declared `format` and a JSON Schema, `validate_result`),
the Markdown made from it (`render_markdown`), the block of docs/benchmarks.md that shows the committed run
(`docs_block`, `fill_docs`), and what the run says of `cohort: auto` (`cohort_decisions`)."""

from __future__ import annotations

from typing import Any

import jsonschema

from fdabench.federation.cohort import auto_cohort

FORMAT = "fdabench.bench_gpu/1"
STAGES = ("pytest", "cells", "packing", "steps", "agreement")
STATUSES = ("ok", "failed", "error", "skipped")
#: a cohort must be this much faster (one-by-one seconds over cohort seconds per FDA round), in every measured cell of
#: a model family, for `cohort: auto` to turn it on for that family: less is within run-to-run noise
COHORT_MARGIN = 1.05

_NUMBER = {"type": "number"}
_MAYBE_NUMBER = {"type": ["number", "null"]}
_MAYBE_STRING = {"type": ["string", "null"]}


def _object(required: str, **properties: Any) -> dict[str, Any]:
    """A JSON Schema object with the space-separated `required` keys and these properties' schemas."""
    return {"type": "object", "required": required.split(), "properties": properties}


_MODE = _object(
    "seconds_per_fda_round samples_per_second fl_overhead peak_memory_bytes",
    seconds_per_fda_round=_NUMBER,
    samples_per_second=_NUMBER,
    fl_overhead=_NUMBER,
)
_CELL_SUMMARY = _object(
    "model device repeats cohort speedup faster auto_picks",
    cohort=_object("off on", off=_MODE, on=_MODE),
    speedup=_NUMBER,
    faster={"enum": ["off", "on"]},
)
_LEVEL = _object(
    "K wall_seconds cells_per_hour train_seconds_median peak_memory_bytes peak_memory_bytes_max failed",
    K={"type": "integer", "minimum": 1},
    wall_seconds=_MAYBE_NUMBER,
    cells_per_hour=_MAYBE_NUMBER,
)
_TIMING = _object(
    "model input_shape parameters train_step_seconds eval_batch eval_images_per_second peak_memory_bytes",
    train_step_seconds={"type": "object", "additionalProperties": _NUMBER},
    eval_images_per_second=_NUMBER,
)
_TABLE = _object(
    "table experiments cells models gpu_hours gpu_hours_alternative per_experiment",
    gpu_hours=_MAYBE_NUMBER,
    gpu_hours_alternative=_MAYBE_NUMBER,
)
#: each stage's result, as the Markdown reads it (required of a stage that ran: status ok or failed)
_RESULTS = {
    "pytest": _object(
        "command returncode counts output_tail collect_only",
        returncode={"type": "integer"},
        counts={"type": "object", "additionalProperties": {"type": "integer"}},
    ),
    "cells": _object(
        "suite experiment target seed rounds data cells",
        cells={"type": "object", "additionalProperties": _CELL_SUMMARY},
    ),
    "packing": _object(
        "cell rounds launch levels",
        cell=_object("experiment method"),
        rounds=_object("warmup fda"),
        levels={"type": "array", "items": _LEVEL},
    ),
    "steps": _object(
        "suite timings forecast",
        timings={"type": "array", "items": _TIMING},
        forecast=_object("tables left_out", tables={"type": "array", "items": _TABLE}),
    ),
    "agreement": _object(
        "cell rounds metric device device_final cpu_final difference tolerance agree",
        cell=_object("suite experiment method target seed"),
        agree={"type": "boolean"},
        difference=_NUMBER,
        tolerance=_NUMBER,
    ),
}


def _stage_schema(result: dict[str, Any]) -> dict[str, Any]:
    status_is = lambda *names: {"properties": {"status": {"enum": list(names)}}}
    return {
        "type": "object",
        "required": ["status", "seconds", "allotted_seconds"],
        "properties": {
            "status": {"enum": list(STATUSES)},
            "seconds": {"type": "number", "minimum": 0},
            "allotted_seconds": _NUMBER,
            "reason": {"type": "string"},
            "error": {"type": "string"},
            "result": {"type": "object"},
        },
        "allOf": [
            {"if": status_is("skipped", "failed"), "then": {"required": ["reason"]}},
            {"if": status_is("error"), "then": {"required": ["error", "result"]}},
            {"if": status_is("ok", "failed"), "then": {"required": ["result"], "properties": {"result": result}}},
        ],
    }


SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": [
        "format",
        "dry_run",
        "created",
        "budget_seconds",
        "wall_seconds",
        "environment",
        "stages",
        "cohort_auto",
    ],
    "properties": {
        "format": {"const": FORMAT},
        "dry_run": {"type": "boolean"},
        "created": {"type": "string"},
        "budget_seconds": _NUMBER,
        "wall_seconds": _NUMBER,
        "environment": {
            "type": "object",
            "required": ["device", "device_type", "driver", "torch", "cuda", "python", "commit", "source_hash"],
            "properties": {
                "device": {"type": "string"},
                "device_type": {"enum": ["cpu", "cuda"]},
                "driver": _MAYBE_STRING,
                "commit": _MAYBE_STRING,
                "torch": {"type": "string"},
            },
        },
        "stages": {
            "type": "object",
            "required": list(STAGES),
            "properties": {name: _stage_schema(_RESULTS[name]) for name in STAGES},
            "additionalProperties": False,
        },
        "cohort_auto": {
            "type": "object",
            "required": ["device_type", "rule", "families"],
            "properties": {
                "families": {
                    "additionalProperties": {
                        "type": "object",
                        "required": ["cells", "speedups", "decision", "auto_now", "table_entry"],
                        "properties": {"decision": {"enum": ["on", "off"]}, "auto_now": {"type": "boolean"}},
                    }
                }
            },
        },
    },
}


def schema_problems(payload: Any) -> list[str]:
    """Where `payload` breaks SCHEMA, one line each (path: message), in document order."""
    validator = jsonschema.Draft202012Validator(SCHEMA)
    errors = sorted(validator.iter_errors(payload), key=lambda error: [str(part) for part in error.absolute_path])
    return [f"{'/'.join(map(str, error.absolute_path)) or '(top)'}: {error.message}" for error in errors]


def validate_result(payload: Any) -> dict[str, Any]:
    """`payload` when it is a result of this format (SCHEMA), else a ValueError naming every problem."""
    problems = schema_problems(payload)
    if problems:
        raise ValueError(f"not a {FORMAT} result: " + "; ".join(problems[:10]))
    return payload


# -- cohort: auto ------------------------------------------------------------------------------------------------


def cohort_decisions(stages: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per model family measured by the cells stage: each cell's cohort speed-up, the decision (on when every
    cell's cohort is at least COHORT_MARGIN faster, else off), what `cohort: auto` does there now, and the entry
    of federation.cohort.AUTO_COHORT_BY_MODEL that records the decision."""
    cells = stages.get("cells") or {}
    summaries = (cells.get("result") or {}).get("cells") or {}
    device_type = next((summary["device"].split(":")[0] for summary in summaries.values()), None)
    families: dict[str, dict[str, Any]] = {}
    for method, summary in summaries.items():
        family = families.setdefault(summary["model"], {"cells": [], "speedups": []})
        family["cells"].append(method)
        family["speedups"].append(summary["speedup"])
    for model, family in families.items():
        on = all(speedup >= COHORT_MARGIN for speedup in family["speedups"])
        family.update(
            decision="on" if on else "off",
            auto_now=auto_cohort(device_type, model),
            table_entry=f'("{device_type}", "{model}"): {on},',
        )
    return {
        "device_type": device_type,
        "rule": f"on where every measured cell of the family ran at least {COHORT_MARGIN}x faster as a cohort",
        "from_stage_status": cells.get("status"),
        "families": families,
    }


def auto_table_mismatches(result: dict[str, Any] | None, by_model: dict[tuple[str, str], bool], default: dict) -> list:
    """How `cohort: auto` (AUTO_COHORT_BY_MODEL `by_model` over AUTO_COHORT `default`) departs from a committed GPU
    run's decisions; with no run (None, or a dry run), it must not turn cohorts on for CUDA anywhere."""
    if result is None or result["dry_run"]:
        wrong = [key for key, on in by_model.items() if key[0] == "cuda" and on]
        return [f"{key}: on without a committed GPU measurement" for key in wrong] + (
            ["AUTO_COHORT['cuda'] is on without a committed GPU measurement"] if default.get("cuda") else []
        )
    decisions = result["cohort_auto"]
    device_type = decisions["device_type"]
    problems = []
    for model, family in decisions["families"].items():
        now = by_model.get((device_type, model), default.get(device_type, False))
        if now != (family["decision"] == "on"):
            problems.append(
                f"({device_type!r}, {model!r}): auto is {now}, the measurement decided {family['decision']}"
            )
    return problems


# -- Markdown --------------------------------------------------------------------------------------------------------

#: each section's table columns (the renderer's, and the empty block's description of the format)
COLUMNS = {
    "Stages": ("stage", "status", "seconds", "note"),
    "FMNIST cells, one by one and as cohorts": (
        "cell",
        "mode",
        "s per FDA round (median)",
        "samples/s",
        "FL overhead",
        "peak memory",
    ),
    "cohort: auto": (
        "model",
        "cells",
        "cohort speed-up",
        "auto now",
        "measured decision",
        "AUTO_COHORT_BY_MODEL entry",
    ),
    "Packing K cells on one device": (
        "K",
        "wall s",
        "cells/hour",
        "training s per cell (median)",
        "peak memory per process (max)",
        "nvidia-smi max used",
    ),
    "Training steps": ("model", "input", "parameters", "s per step (batch)", "evaluation images/s", "peak memory"),
    "Predicted GPU-hours per published table": (
        "table",
        "experiments",
        "cells",
        "models",
        "GPU-hours as configured",
        "GPU-hours with ResNet-50",
    ),
    "GPU vs CPU: one small cell end to end": (
        "cell",
        "rounds",
        "device final",
        "CPU final",
        "difference",
        "tolerance",
        "agree",
    ),
}


def render_markdown(result: dict[str, Any], level: int = 1) -> str:
    """The result as Markdown: a title (at heading `level`) with the machine and the code, then one section per
    stage (a level deeper)."""
    env, stages = result["environment"], result["stages"]
    h = "#" * (level + 1)
    kind = "CPU dry run (toy sizes; its numbers measure nothing)" if result["dry_run"] else "GPU run"
    commit = env.get("commit") or "unknown (no git; set FDABENCH_COMMIT)"
    if env.get("uncommitted_changes"):
        commit += " with uncommitted changes"
    lines = [
        f"{'#' * level} `fdabench bench gpu`: {env['device']}",
        "",
        "| | |",
        "|---|---|",
        f"| run | {kind}, {result['created']}, {result['wall_seconds']:.0f} s of a "
        f"{result['budget_seconds']:.0f} s budget |",
        f"| device | {env['device']} ({env['device_type']}{_device_extra(env)}) |",
        f"| driver | {env.get('driver') or '–'} |",
        f"| torch | {env['torch']} (CUDA {env.get('cuda') or '–'}), Python {env['python']} |",
        f"| commit | {commit}; source hash {env['source_hash']} |",
        "",
    ]
    lines += _section(
        h,
        "Stages",
        [[name, stages[name]["status"], f"{stages[name]['seconds']:.1f}", _note(stages[name])] for name in STAGES],
    )
    lines += _pytest_lines(stages["pytest"])
    lines += _cells_lines(h, stages["cells"], result["cohort_auto"])
    lines += _packing_lines(h, stages["packing"])
    lines += _steps_lines(h, stages["steps"])
    lines += _agreement_lines(h, stages["agreement"])
    return "\n".join(lines).rstrip() + "\n"


def _device_extra(env: dict[str, Any]) -> str:
    extra = ""
    if env.get("multiprocessors"):
        extra += f", {env['multiprocessors']} multiprocessors"
    if env.get("device_memory_bytes"):
        extra += f", {_bytes(env['device_memory_bytes'])}"
    return extra


def _note(stage: dict[str, Any]) -> str:
    note = stage.get("reason") or stage.get("error") or (stage.get("result") or {}).get("stopped") or ""
    return note.replace("|", "/").replace("\n", " ")


def _section(h: str, title: str, rows: list[list[Any]], intro: str = "") -> list[str]:
    columns = COLUMNS[title]
    lines = [f"{h} {title}", ""] + ([intro, ""] if intro else [])
    lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(value) for value in row) + " |" for row in rows]
    return [*lines, ""]


def _done(name: str, stage: dict[str, Any]) -> dict[str, Any] | None:
    """The stage's result where there is one to show: when it ran (ok or failed), or what a stage that raised had
    measured, where that is complete enough (its own schema holds)."""
    result = stage.get("result")
    if not result or stage["status"] == "skipped":
        return None
    return result if stage["status"] != "error" or _complete(name, result) else None


def _complete(name: str, result: dict[str, Any]) -> bool:
    return jsonschema.Draft202012Validator(_RESULTS[name]).is_valid(result)


def _pytest_lines(stage: dict[str, Any]) -> list[str]:
    result = _done("pytest", stage)
    if result is None or "counts" not in result:
        return []
    counts = ", ".join(f"{number} {word}" for word, number in result["counts"].items()) or "no summary"
    what = "collected only (dry run)" if result["collect_only"] else "ran"
    return [f"CUDA tests (`pytest -m gpu`, {what}): {counts}; exit status {result['returncode']}.", ""]


def _cells_lines(h: str, stage: dict[str, Any], cohort: dict[str, Any]) -> list[str]:
    result = _done("cells", stage)
    if result is None or not result.get("cells"):
        return []
    rows = []
    for method, summary in result["cells"].items():
        for mode, label in (("off", "one by one"), ("on", "as cohorts")):
            numbers = summary["cohort"][mode]
            rows.append(
                [
                    f"`{method}`",
                    label,
                    f"{_num(numbers['seconds_per_fda_round'])} ({_count(summary['repeats'], 'run')})",
                    f"{numbers['samples_per_second']:,.0f}",
                    f"{numbers['fl_overhead']:.2f}×",
                    _bytes(numbers["peak_memory_bytes"]),
                ]
            )
    intro = (
        f"`{result['suite']}` `{result['experiment']}` target `{result['target']}` seed {result['seed']}, "
        f"{_count(result['rounds'], 'timed FDA round')} per run after one warm-up round. {result['data']}."
    )
    lines = _section(h, "FMNIST cells, one by one and as cohorts", rows, intro)
    families = [
        [
            f"`{model}`",
            ", ".join(f"`{cell}`" for cell in family["cells"]),
            ", ".join(f"{speedup:.2f}×" for speedup in family["speedups"]),
            "on" if family["auto_now"] else "off",
            family["decision"],
            f"`{family['table_entry']}`",
        ]
        for model, family in cohort["families"].items()
    ]
    return lines + _section(h, "cohort: auto", families, f"Rule: {cohort['rule']}.")


def _packing_lines(h: str, stage: dict[str, Any]) -> list[str]:
    result = _done("packing", stage)
    if result is None or not result.get("levels"):
        return []
    rows = []
    for level in result["levels"]:
        smi = level.get("nvidia_smi") or {}
        used = smi.get("used_mib_max")
        rows.append(
            [
                level["K"],
                _num(level["wall_seconds"]),
                _num(level["cells_per_hour"]),
                _num(level.get("train_seconds_median")),
                _bytes(level["peak_memory_bytes_max"]),
                "–" if used is None else f"{used:,} MiB",
            ]
        )
    cell = result["cell"]
    intro = (
        f"K processes at once, each one `{cell['experiment']}` `{cell['method']}` cell ({result['rounds']['warmup']} "
        f"warm-up and {_count(result['rounds']['fda'], 'FDA round')}), started as `{result['launch']}`; wall time "
        "from the first start to the last exit, start-up included."
    )
    return _section(h, "Packing K cells on one device", rows, intro)


def _steps_lines(h: str, stage: dict[str, Any]) -> list[str]:
    result = _done("steps", stage)
    if result is None or not result.get("timings"):
        return []
    rows = [
        [
            f"`{timing['model']}`",
            "×".join(map(str, timing["input_shape"])),
            f"{timing['parameters']:,}",
            ", ".join(f"{seconds * 1000:.3g} ms ({batch})" for batch, seconds in timing["train_step_seconds"].items()),
            f"{timing['eval_images_per_second']:,.0f} (batch {timing['eval_batch']})",
            _bytes(timing["peak_memory_bytes"]),
        ]
        for timing in result["timings"]
    ]
    lines = _section(h, "Training steps", rows, "Generated images, no pretrained weights, the cells' local training.")
    lines += [f"Not timed: {note}\n" for note in result.get("not_timed", [])]
    lines += [
        f"`{timing['model']}` has no deterministic CUDA kernel for training (a training job would stop): timed "
        f"without. {timing['deterministic_error'].splitlines()[0]}\n"
        for timing in result["timings"]
        if timing.get("deterministic_error")
    ]
    if "forecast" not in result:
        return lines
    tables = [
        [
            f"`{row['table']}`",
            ", ".join(row["experiments"]),
            f"{row['cells']:,}",
            ", ".join(row["models"]),
            _num(row["gpu_hours"]),
            _num(row["gpu_hours_alternative"]),
        ]
        for row in result["forecast"]["tables"]
    ]
    intro = (
        f"Cells of the `{result['suite']}` suite × (steps × measured step + evaluated images / measured rate), one "
        "cell at a time on one GPU; every cell counted as a round-loop cell (`fdabench.speed.gpu.forecast`)."
    )
    return lines + _section(h, "Predicted GPU-hours per published table", tables, intro)


def _agreement_lines(h: str, stage: dict[str, Any]) -> list[str]:
    result = _done("agreement", stage)
    if result is None or "agree" not in result:
        return []
    cell = result["cell"]
    row = [
        f"`{cell['suite']}` `{cell['experiment']}` `{cell['method']}` `{cell['target']}` seed {cell['seed']}",
        result["rounds"],
        f"{result['device_final']:.4f} ({result['device']})",
        f"{result['cpu_final']:.4f}",
        f"{result['difference']:.4f}",
        result["tolerance"],
        "yes" if result["agree"] else "no",
    ]
    return _section(h, "GPU vs CPU: one small cell end to end", [row], f"Final {result['metric']}.")


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _num(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _bytes(value: int | None) -> str:
    if value is None:
        return "–"
    return f"{value / 2**30:.2f} GiB" if value >= 2**30 else f"{value / 2**20:,.0f} MiB"


# -- the block of docs/benchmarks.md --------------------------------------------------------------------------------

DOCS_BEGIN = (
    "<!-- gpu-bench: generated by `fdabench bench gpu --from docs/benchmarks/gpu.json --docs docs/benchmarks.md`; "
    "do not edit by hand -->"
)
DOCS_END = "<!-- end of gpu-bench -->"


def docs_block(result: dict[str, Any] | None, level: int = 4) -> str:
    """The committed run rendered (headings from `level`), or, with none, that no GPU number exists and what a
    run's Markdown will hold."""
    if result is not None:
        return render_markdown(result, level)
    lines = [
        "No GPU run has been committed (`docs/benchmarks/gpu.json` does not exist), so no GPU number exists yet. "
        "A run writes the machine (device, driver, torch, commit) and these tables:",
        "",
    ]
    lines += [f"- **{title}**: {', '.join(columns)}" for title, columns in COLUMNS.items()]
    return "\n".join(lines) + "\n"


def fill_docs(page: str, block: str) -> str:
    """`page` with the text between DOCS_BEGIN and DOCS_END replaced by `block`."""
    if DOCS_BEGIN not in page or DOCS_END not in page:
        raise ValueError("the page has no gpu-bench block (its begin and end markers)")
    before, rest = page.split(DOCS_BEGIN, 1)
    _, after = rest.split(DOCS_END, 1)
    return f"{before}{DOCS_BEGIN}\n{block.rstrip()}\n{DOCS_END}{after}"
