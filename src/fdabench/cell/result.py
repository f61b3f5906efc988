"""The cell result file: the only thing tables and figures read.

Keys (format "fdabench.cell/1"):
  format, status ("complete"), cell {suite, experiment, dataset, method, algorithm, target, seed},
  config (the fully resolved configuration), metric ("accuracy" | "mse"), higher_is_better,
  final (mean of `metric` over the last `final_rounds` rounds), finals (the same mean for every metric
  the rounds record: accuracy, auc (two classes), mse, loss), final_rounds,
  rounds [{round, phase (`fdabench.federation.records.PHASES`), <metric>, loss, bytes_uplink, bytes_downlink,
          seconds, ... method-specific logs such as betas and estimates}],
  bytes {uplink_total, downlink_total, per_round_mean}, model_size (parameters), sources (source
  client names, the order of per-source logs such as betas),
  model {name, options (the model factory's keyword arguments, its defaults included)},
  wall_seconds, train_seconds, train_cpu_seconds (CPU time of the training process: on a shared machine
  the wall-clock seconds also count the waits for a core; in a group of cells, `fdabench train-group`, the wall
  clock runs while the other cells run too, and the CPU time is the cell's own turns and its share of what the
  group computed for it, `fdabench.federation.client.cpu_seconds`), device, threads, partition_hash,
  versions {fdabench, torch, python}, code {fingerprint, modules {module: hash}} (the code the result
  depends on, `fdabench.cell.plugin_scope`: a plugin the cell uses or that patched its code as `plugin:<name>`; tables
  refuse cells whose shared modules differ, `check_same_code`), plugins [{name, version, hash}] (the plugin
  distributions loaded where it ran, `fdabench.cell.plugin_fingerprint.loaded_distributions`; [] for none),
  uses_unlabelled_target (training read the target's unlabelled training inputs, e.g. KD3A; tables mark it),
  family (the method's family, `fdabench.core.families`: figures group and colour by it),
  digest ("sha256:..." of the rest, added as the file is written: `fdabench.cell.digest`; readers refuse a cell whose
  digest does not match, `fdabench.cell.reading`, and `fdabench status` calls it edited).
Phases: the names of `fdabench.federation.records.PHASES`, each with what its rounds are ("warmup" and "fda" of
the round loop; "finetune", "encoder" and "dictionary" registered by Finetune_Offline and FedDaDiL, and any a plugin
method registers). Personalised methods also log
global_<metric> and global_loss (the global model), the cell's metric being the target's personalised model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fdabench.core import formats
from fdabench.core.io import read_json
from fdabench.core.metrics import METRICS

FORMAT = formats.CELL
CELL_KEYS = ("suite", "experiment", "dataset", "method", "algorithm", "target", "seed")
#: what the training job adds about how the cell ran
RUN_KEYS = frozenset(
    {
        "model",
        "wall_seconds",
        "train_seconds",
        "train_cpu_seconds",
        "device",
        "cuda_visible_devices",
        "threads",
        "partition_hash",
        "code",
        "plugins",
        "uses_unlabelled_target",
        "family",
        "versions",
    }
)


class IncompleteCellError(ValueError):
    pass


def cell_result(
    config: dict[str, Any], history: dict[str, Any], final_rounds: int, run: dict[str, Any]
) -> dict[str, Any]:
    """The whole cell result (the keys above): the headline numbers from the per-round `history`, and `run`, what
    the job knows of how it ran (model, seconds, device, threads, partition_hash, code, uses_unlabelled_target,
    family, versions, cuda_visible_devices)."""
    unknown = set(run) - RUN_KEYS
    if unknown:
        raise ValueError(f"not cell result keys: {', '.join(sorted(unknown))}")
    rounds = history["rounds"]
    metric = history["metric"]
    tail = rounds[-final_rounds:]
    last = [record[metric] for record in tail]
    finals = {name: sum(r[name] for r in tail) / len(tail) for name in METRICS if all(name in r for r in tail)}
    uplink = sum(record["bytes_uplink"] for record in rounds)
    downlink = sum(record["bytes_downlink"] for record in rounds)
    return {
        "format": FORMAT,
        "status": "complete",
        "cell": {key: config[key] for key in CELL_KEYS},
        "config": config,
        "metric": metric,
        "higher_is_better": metric != "mse",
        "final": sum(last) / len(last),
        "finals": finals,
        "final_rounds": len(last),
        "rounds": rounds,
        "bytes": {
            "uplink_total": uplink,
            "downlink_total": downlink,
            "per_round_mean": (uplink + downlink) / len(rounds),
        },
        "model_size": history["model_size"],
        "sources": history.get("sources", []),
        **run,
    }


def read_cell(path: str | Path) -> dict[str, Any]:
    """Read a finished cell; refuse anything that is not a complete cell of this format."""
    try:
        payload = read_json(path)
    except (OSError, ValueError) as error:
        raise IncompleteCellError(f"{path}: not a readable cell result ({error})") from None
    formats.check_kind(str(path), payload, "fdabench.cell")  # a partition, a table, ...: named as what it is
    if not isinstance(payload, dict) or payload.get("format") != FORMAT or payload.get("status") != "complete":
        raise IncompleteCellError(f"{path}: not a complete {FORMAT} result; rerun its training job")
    return payload


class MixedCodeError(ValueError):
    """Cells meant to be compared ran with different versions of code they share."""


def check_same_code(cells: dict[str, dict[str, Any]]) -> None:
    """Refuse cells (path -> result) whose recorded code fingerprints disagree on a module they share, e.g. a
    table of fedgp cells run before and after a change to the round loop. Cells without a `code` block
    (written before fingerprints were recorded) are not compared."""
    seen: dict[str, tuple[str, str]] = {}  # module -> (hash, first path with it)
    for path, cell in cells.items():
        for module, digest in cell.get("code", {}).get("modules", {}).items():
            first = seen.setdefault(module, (digest, path))
            if first[0] != digest:
                raise MixedCodeError(
                    f"{first[1]} and {path} ran with different code of {module} ({first[0]} vs {digest}): run "
                    "`fdabench status` and rerun the stale cells (snakemake reruns them), or pass --allow-mixed-code "
                    "to tabulate them anyway"
                )


def report_labels(cell: dict[str, Any]) -> dict[str, str]:
    """A finished cell as the Snakemake report lists it: one label, "method · target · seed N". (One label on
    purpose: the report shows a second label with two equally frequent values, such as two seeds, as a toggle
    that breaks when the other labels differ per seed. The cell's facts are in the experiment's cells table.)"""
    return {"cell": f"{cell['cell']['method']} · {cell['cell']['target']} · seed {cell['cell']['seed']}"}


def facts_row(cell: dict[str, Any]) -> dict[str, Any]:
    """What the cells table shows of one finished cell: identity, final metric, where and how long it ran, its
    code fingerprint and versions."""
    config = cell["config"]
    return {
        "method": config["method"],
        "target": config["target"],
        "seed": config["seed"],
        "final": f"{cell['final']:.4g} {cell['metric']}",
        "device": f"{cell.get('device', '?')} × {cell.get('threads', '?')} threads",
        "seconds": f"{cell.get('wall_seconds', float('nan')):.1f}",
        "code": cell.get("code", {}).get("fingerprint", "?")[:12],
        "versions": ", ".join(f"{name} {version}" for name, version in cell.get("versions", {}).items()),
    }
