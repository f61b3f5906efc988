"""pytest fixtures of the method test kit. In a plugin's tests (conftest.py):

pytest_plugins = ["fdabench.testing.fixtures"]

def test_my_rule_passes_the_kit(method_checks):
    method_checks("fedgp_nofilter")          # fails, naming each failed check, unless all pass
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fdabench.testing.method_checks import CheckResult, check_method, failures, format_results


@pytest.fixture
def method_checks() -> Callable[..., list[CheckResult]]:
    """method_checks(name_or_class, hparams=None): run the kit; fail the test with the report if a check fails."""

    def run(method: Any, hparams: dict[str, Any] | None = None) -> list[CheckResult]:
        results = check_method(method, hparams)
        if failures(results):
            pytest.fail(format_results(getattr(method, "name", method), results), pytrace=False)
        return results

    return run
