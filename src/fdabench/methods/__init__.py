"""Methods in a name -> class registry; importing this package registers every built-in method and every
installed plugin method (entry-point group `fdabench.methods`, `fdabench.core.plugins`)."""

from fdabench.core.plugins import load_plugins
from fdabench.core.shipped_members import record_shipped
from fdabench.methods import (  # noqa: F401
    adversarial,
    auto,
    baselines,
    comda,
    dadil,
    fda,
    fedbn,
    federated,
    kd3a,
    personalised,
    scaffold,
    weak,
)
from fdabench.methods.base import (
    METHODS,
    Aggregate,
    LocalContext,
    Method,
    Objective,
    Phase,
    Requires,
    Roles,
    RoundInputs,
    RoundLoopMethod,
    default_phases,
    get_method,
)

record_shipped(METHODS)  # before plugins: what a plugin replaces is found (fdabench.cell.plugin_scope)
load_plugins(METHODS)

__all__ = [
    "METHODS",
    "Aggregate",
    "LocalContext",
    "Method",
    "Objective",
    "Phase",
    "Requires",
    "Roles",
    "RoundInputs",
    "RoundLoopMethod",
    "default_phases",
    "get_method",
]
