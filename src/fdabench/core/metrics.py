"""The metrics a cell records of the target, with their short labels in tables: the one list of metric names (a
round's record, a cell's finals, the tables' `metrics`, params.yaml's schema)."""

METRIC_LABELS = {"accuracy": "ACC", "auc": "AUC", "mse": "MSE", "loss": "loss"}
METRICS = tuple(METRIC_LABELS)
#: the metrics tables and figures show in percent
PERCENT_METRICS = ("accuracy", "auc")
