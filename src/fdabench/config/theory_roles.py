"""The rules the synthetic theory check of the FedGP paper compares (appendix B, Figure 5): with β fixed and
with β auto-weighted, each against the target-only and source-only extremes; which method variant plays each."""

from __future__ import annotations

from typing import Any

FIXED_RULES = ("target_only", "source_only", "fedda", "fedgp")
AUTO_RULES = ("target_only", "source_only", "fedda_auto", "fedgp_auto")
ROLES = tuple(dict.fromkeys(FIXED_RULES + AUTO_RULES))  # every role a theory check assigns a method to
#: Monte Carlo draws for σ² at initialisation unless a theory check sets `draws` (params.yaml schema default)
DEFAULT_DRAWS = 100


def theory_roles(check: dict[str, Any]) -> dict[str, str]:
    """The method variant playing each rule of a theory check (default: the rule's own name)."""
    return {role: role for role in ROLES} | check.get("roles", {})
