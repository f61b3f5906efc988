"""Methods in a name -> class registry; importing this package registers every built-in method and every
installed plugin method (entry-point group `fdabench.methods`, `fdabench.core.plugins`)."""

from fdabench.core.plugins import load_plugins
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
from fdabench.methods.base import METHODS, Aggregate, Method, RoundInputs, RoundLoopMethod, get_method

load_plugins(METHODS)

__all__ = ["METHODS", "Aggregate", "Method", "RoundInputs", "RoundLoopMethod", "get_method"]
