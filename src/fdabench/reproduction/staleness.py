"""Whether an archived cell's recorded code fingerprint still holds: its record compared with today's, module by
module (`fdabench compare --archive`, `fdabench archive status`). A workspace's cells are judged by the fingerprint's
digest, as Snakemake judges them (a rule parameter); the digest and the modules agree except where a module became
bookkeeping (`fdabench.cell.fingerprint.BOOKKEEPING`), which reruns a workspace's cells once and leaves the archive's
evidence current.

Apart from `fdabench.cell.fingerprint` so that comparing imports neither torch nor the registries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PLUGIN_PREFIX = "plugin:"  # the key of a plugin distribution in a fingerprint's modules (`cell.plugin_fingerprint`)


def code_changes(
    recorded: Any, current: dict[str, Any], equivalent: Callable[[str, str | None, str], bool] | None = None
) -> list[str] | None:
    """The modules whose code differs between a job's recorded fingerprint and `current` (both as
    `CodeFingerprint.to_json` writes them: {fingerprint, modules}): [] where the job is current, None where nothing
    usable was recorded. Every module `current` reaches must have its recorded hash; plugin distributions
    (`plugin:<name>`) must be the same both ways (removing a plugin that a cell ran with is a change); a recorded
    module that `current` no longer reaches is not a change: unchanged code stops reaching a module only when that
    module became bookkeeping (`fdabench.cell.fingerprint.BOOKKEEPING`), and changed code shows in its own hash. A
    module whose recorded hash is `equivalent(module, recorded, today's)` is not a change either
    (`fdabench.reproduction.equivalence.Equivalences.holds`: the same cells, bit for bit, with both codes)."""
    if not isinstance(recorded, dict) or not isinstance(recorded.get("modules"), dict):
        return None
    if recorded.get("fingerprint") == current["fingerprint"]:
        return []
    before, now = recorded["modules"], current["modules"]
    changed = {
        module
        for module, digest in now.items()
        if before.get(module) != digest
        and not (equivalent is not None and equivalent(module, before.get(module), digest))
    }
    changed |= {module for module in before if module.startswith(PLUGIN_PREFIX) and module not in now}
    return sorted(changed)
