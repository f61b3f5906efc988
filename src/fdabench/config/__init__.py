"""params.yaml: its schema (`schema`), the merge order of every setting (`resolve`), the checks beyond the
schema (`checks`), and validated params resolved into cells (`params`)."""

from fdabench.config.extends import deep_merge
from fdabench.config.params import Cell, Params, load_params, validate_params
from fdabench.config.schema import NAME_PATTERN, ParamsError, params_schema

__all__ = [
    "NAME_PATTERN",
    "Cell",
    "Params",
    "ParamsError",
    "deep_merge",
    "load_params",
    "params_schema",
    "validate_params",
]
