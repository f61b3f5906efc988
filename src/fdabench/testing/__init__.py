"""A test kit for a method of one's own: the properties a round-loop rule declares by its kind, checked on a
small random problem (`fdabench check-method NAME`; pytest: `fdabench.testing.fixtures`; docs/extending.md)."""

from fdabench.testing.method_checks import CHECKS, CheckResult, check_method, failures, format_results

__all__ = ["CHECKS", "CheckResult", "check_method", "failures", "format_results"]
