"""Measured causes of the gaps between published rows and fdabench's runs of their recorded protocol.

Keys: (published table, target, method key). Each entry says what was varied, on which cells, and what it
changed: a cause is recorded here only when a run measured it, never as a guess. `paper_vs_ours` names the
cause beside each of the largest gaps; a gap with no entry reads "no cause measured yet".
"""

from __future__ import annotations

MEASURED_CAUSES: dict[tuple[str, str, str], str] = {}
