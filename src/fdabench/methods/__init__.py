"""Methods in a name -> class registry; importing this package registers every built-in method."""

from fdabench.methods import auto, baselines, dadil, fda, federated, kd3a, personalised, weak  # noqa: F401
from fdabench.methods.base import METHODS, Aggregate, Method, RoundInputs, RoundLoopMethod, get_method

__all__ = ["METHODS", "Aggregate", "Method", "RoundInputs", "RoundLoopMethod", "get_method"]
