"""Runs -> an MLflow tracking store: one MLflow run per cell, in the experiment named by its suite (or one given),
with its identity as params, its name and digest as tags, its series as metrics per step (the round) and its final
metrics at the last round. A cell whose digest the experiment holds already is skipped, so exporting a suite again
adds only the cells that are new or were rerun (a rerun cell's earlier run stays, with the earlier digest).
Written with `mlflow.MlflowClient` (the `mlflow` extra: MLflow's client and its SQLite store) to the store at
`tracking_uri`; None is MLflow's own default ($MLFLOW_TRACKING_URI, else a SQLite store, mlflow.db, in the current
folder; MLflow 3 refuses its older ./mlruns folder store unless MLFLOW_ALLOW_FILE_STORE=true)."""

from __future__ import annotations

import re
import time

from fdabench.report.trackers import TrackedRun, require

EXTRA = "mlflow"
DIGEST_TAG = "fdabench.digest"
CELL_TAG = "fdabench.cell"
#: MLflow's limit on the metrics of one `log_batch` call
BATCH_METRICS = 1000
#: what MLflow refuses in a metric's name (a source named "+90": beta/+90 is logged as beta/_90)
NOT_IN_NAMES = re.compile(r"[^\w\-. :/]")


def write_mlflow(runs: list[TrackedRun], tracking_uri: str | None, experiment: str | None = None) -> tuple[int, int]:
    """Log `runs` to the store; (runs written, runs skipped as already there)."""
    mlflow = require("mlflow", EXTRA, "fdabench export mlflow")
    from mlflow.entities import Metric, Param
    from mlflow.exceptions import MlflowException
    from sqlalchemy.exc import SQLAlchemyError  # what a SQLite store that is no database raises

    try:
        client = mlflow.MlflowClient(tracking_uri=tracking_uri)
        experiments = {
            name: _experiment(client, name) for name in {experiment or run.identity["suite"] for run in runs}
        }
    except (MlflowException, SQLAlchemyError) as error:
        where = tracking_uri or mlflow.get_tracking_uri()
        raise ValueError(f"{where}: not a usable MLflow tracking store ({str(error).splitlines()[0]})") from None
    written = skipped = 0
    now_ms = int(time.time() * 1000)
    for run in runs:
        experiment_id, digests = experiments[experiment or run.identity["suite"]]
        if run.digest in digests:
            skipped += 1
            continue
        metrics = [
            Metric(NOT_IN_NAMES.sub("_", name), value, now_ms, round_)
            for name, points in run.series.items()
            for round_, value in points
        ]
        metrics += [
            Metric(NOT_IN_NAMES.sub("_", name), value, now_ms, run.last_round) for name, value in run.finals.items()
        ]
        params = [Param(key, str(value)) for key, value in run.identity.items()]
        created = client.create_run(experiment_id, run_name=run.name, tags={CELL_TAG: run.name, DIGEST_TAG: run.digest})
        run_id = created.info.run_id
        try:
            client.log_batch(run_id, metrics=metrics[:BATCH_METRICS], params=params)
            for start in range(BATCH_METRICS, len(metrics), BATCH_METRICS):
                client.log_batch(run_id, metrics=metrics[start : start + BATCH_METRICS])
        except BaseException:
            client.delete_run(run_id)  # no half-logged run carries the cell's digest
            raise
        client.set_terminated(run_id)
        digests.add(run.digest)
        written += 1
    return written, skipped


def _experiment(client, name: str) -> tuple[str, set[str]]:
    """The id of the experiment `name` (created if new) and the cell digests its runs carry."""
    found = client.get_experiment_by_name(name)
    experiment_id = found.experiment_id if found is not None else client.create_experiment(name)
    digests: set[str] = set()
    token = None
    while True:
        page = client.search_runs([experiment_id], page_token=token)
        digests |= {run.data.tags[DIGEST_TAG] for run in page if DIGEST_TAG in run.data.tags}
        token = page.token
        if not token:
            return experiment_id, digests
