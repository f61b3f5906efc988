"""A suite's cells as the runs of an experiment tracker (DVCLive, MLflow, TensorBoard): one run per cell, read from
the cell files alone, which stay the only record of what ran; training never calls an exporter.

Every exporter writes the same `TrackedRun`s:
- name: the cell's place under results/cells/<suite>/, "<experiment>/<method>/<target>/seed<N>";
- identity: suite, experiment, dataset, method, algorithm, target, seed, family and the cell's metric;
- series: per round, numbered from 1 as the figures and DVC plots number them, every metric the rounds record
  (accuracy, auc, mse, loss, and the same with a prefix: global_accuracy, source_val_accuracy, ...) as the cell
  holds it (accuracy as a fraction), and each source's auto-weighting β as "beta/<source>";
- finals: "final/<metric>" for each of the cell's `finals` (the mean over its last `final_rounds` rounds);
- digest: the cell's digest (`fdabench.cell.digest`), which tells an exporter a cell it has written already.

The trackers' libraries are optional extras (pyproject.toml), imported when an exporter runs (`require`)."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from fdabench.cell.digest import payload_digest
from fdabench.cell.reading import read_cells
from fdabench.core.metrics import METRICS

IDENTITY_KEYS = ("suite", "experiment", "dataset", "method", "algorithm", "target", "seed")


@dataclass(frozen=True)
class TrackedRun:
    name: str
    identity: dict[str, Any]
    series: dict[str, list[tuple[int, float]]]
    finals: dict[str, float]
    digest: str

    @property
    def last_round(self) -> int:
        """The last round any series records (0 for none): the step of the final metrics."""
        return max((round_ for points in self.series.values() for round_, _ in points), default=0)


class MissingExtraError(Exception):
    """A tracker's library is not installed."""


def require(module: str, extra: str, command: str) -> ModuleType:
    """Import `module`, or refuse in one line naming the extra of fdabench that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingExtraError(
            f"{command} needs the {extra!r} extra ({error.name or module} is not installed): "
            f"pip install 'fdabench[{extra}]'"
        ) from None


def _is_metric(name: str) -> bool:
    return name in METRICS or any(name.endswith(f"_{metric}") for metric in METRICS)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def round_series(cell: dict[str, Any]) -> dict[str, list[tuple[int, float]]]:
    """Metric name -> (round from 1, value) for every round that records it; β as "beta/<source>"."""
    series: dict[str, list[tuple[int, float]]] = {}
    for record in cell["rounds"]:
        round_ = int(record["round"]) + 1
        for name, value in record.items():
            if _is_metric(name) and _number(value):
                series.setdefault(name, []).append((round_, float(value)))
        for source, beta in zip(cell.get("sources", []), record.get("betas") or []):
            series.setdefault(f"beta/{source}", []).append((round_, float(beta)))
    return series


def tracked_run(cell: dict[str, Any]) -> TrackedRun:
    """One cell as a tracker's run (the module docstring says what each part holds)."""
    identity = {key: cell["cell"][key] for key in IDENTITY_KEYS if key in cell["cell"]}
    identity |= {"family": cell.get("family"), "metric": cell["metric"]}
    name = f"{identity['experiment']}/{identity['method']}/{identity['target']}/seed{identity['seed']}"
    finals = {f"final/{metric}": float(value) for metric, value in cell.get("finals", {}).items()}
    return TrackedRun(
        name=name,
        identity={key: value for key, value in identity.items() if value is not None},
        series=round_series(cell),
        finals=finals or {f"final/{cell['metric']}": float(cell["final"])},
        digest=payload_digest(cell),
    )


def tracked_runs(paths: Iterable[str]) -> list[TrackedRun]:
    """The cells at `paths` as runs, in the order given; every cell is read (and refused if bad) before any is
    returned, so an exporter writes nothing for a bad input."""
    cells = read_cells(paths)
    if not cells:
        raise ValueError("no cells to export")
    return [tracked_run(cell) for cell in cells.values()]
