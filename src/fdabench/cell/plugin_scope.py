"""Code fingerprints that follow what a job runs: a plugin enters only the fingerprints of the jobs it reaches.

A job's fingerprint is `fdabench.cell.fingerprint`'s (the fdabench modules its roots reach), plus, where plugins
are installed:
- the modules of a plugin member the job uses (a method, dataset, partitioner or model registered through entry
  points, `fdabench.core.plugins`), found through imports and normalised as fdabench's are, and the fdabench
  modules those import (`fdabench.cell.plugin_fingerprint.external_modules`);
- `plugin:<distribution>` (its version and files, `fdabench.cell.plugin_fingerprint.loaded_distributions`) for the
  distribution of such a member, and for a distribution that changed what the job runs once loaded: a shipped
  function, class, method or constant of a module the fingerprint covers that no longer is what the source says
  (`fdabench.cell.patches`), or a registry name the job uses that no longer gives the member fdabench registered
  (`fdabench.core.shipped_members`). Such a change is put down to the distribution whose file wrote the object
  that now stands there; where no file says (a constant, an object moved from elsewhere), to every installed one.

So installing a plugin that only adds members reruns nothing shipped; one that patches FedDA's `aggregate` reruns
the cells whose fingerprint covers `fdabench.methods.fda`, naming it (`code changed: plugin:<name>`); one that
fails to load and that no job uses enters no fingerprint. Where no plugin is installed (or FDABENCH_PLUGINS=0),
every fingerprint is exactly `fdabench.cell.fingerprint`'s.

Kept apart from `fdabench.cell.fingerprint` and `fdabench.cell.plugin_fingerprint`: both are part of every cell's
fingerprint, so what is written here changes none."""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fdabench.cell import fingerprint
from fdabench.cell.fingerprint import CodeFingerprint, code_fingerprint
from fdabench.cell.patches import Patch, shipped_patches
from fdabench.cell.plugin_fingerprint import external_modules, loaded_distributions
from fdabench.core.plugins import plugin_distributions
from fdabench.core.registry import Registry
from fdabench.core.shipped_members import replaced_names
from fdabench.data import DATASETS, PARTITIONERS
from fdabench.methods import METHODS
from fdabench.models import MODELS

REGISTRIES: dict[str, Registry] = {registry.family: registry for registry in (METHODS, DATASETS, PARTITIONERS, MODELS)}


@functools.cache
def _distribution_files() -> dict[str, frozenset[Path]]:
    """Installed plugin distribution -> its .py files, resolved (none where plugins do not load)."""
    return {name: frozenset(path.resolve() for path in files) for name, (_, files) in plugin_distributions().items()}


@functools.cache
def _patches() -> tuple[Patch, ...]:
    """The shipped code loaded plugins changed (`fdabench.cell.patches`), looked for once per process and only where a
    plugin is installed (a process without one has nothing to look for)."""
    return tuple(shipped_patches()) if _distribution_files() else ()


def owners(path: Path | None) -> set[str]:
    """The installed plugin distributions whose files include `path`."""
    return {name for name, paths in _distribution_files().items() if path is not None and path.resolve() in paths}


def distributions_of(path: Path | None) -> set[str]:
    """The plugin distributions that wrote the file `path`; every installed one where no file, or no plugin's, says."""
    return owners(path) or set(_distribution_files())


def _origin(member: Any) -> Path | None:
    try:
        return Path(inspect.getfile(inspect.unwrap(member))).resolve()
    except (TypeError, OSError):
        return None


def changed_by_plugins(modules: Iterable[str], names: dict[str, str]) -> dict[str, list[str]]:
    """distribution -> what of a job it changed: a patched shipped object of `modules` (`module:name`), or a replaced
    registry entry among `names` (family -> the name the job uses, `family:name`)."""
    modules = set(modules)
    changed: dict[str, list[str]] = {}
    for patch in _patches():
        if patch.module in modules:
            for distribution in distributions_of(patch.origin):
                changed.setdefault(distribution, []).append(f"{patch.module}:{patch.name}")
    for family, name in names.items():
        replaced = replaced_names(REGISTRIES[family])
        if name in replaced:
            for distribution in distributions_of(_origin(replaced[name])):
                changed.setdefault(distribution, []).append(f"{family}:{name}")
    return changed


def job_fingerprint(roots: Iterable[str], names: dict[str, str]) -> CodeFingerprint:
    """The fingerprint of a job of `roots` (dotted module names) that uses the registered `names` (family -> name):
    see the module docstring."""
    roots = list(roots)
    external, internal = external_modules(roots)
    shipped = code_fingerprint([*roots, *internal])
    distributions = {name for path in external.values() for name in owners(path)}
    if _distribution_files():
        distributions |= set(changed_by_plugins(shipped.modules, names))
    if not external and not distributions:
        return code_fingerprint(roots)
    hashes = {record["name"]: record["hash"] for record in loaded_distributions()}
    modules = dict(shipped.modules)
    modules |= {name: fingerprint._module_hash(path) for name, path in external.items()}
    modules |= {f"plugin:{name}": hashes[name] for name in distributions}
    modules = dict(sorted(modules.items()))
    digest = hashlib.sha256("\n".join(f"{name} {h}" for name, h in modules.items()).encode()).hexdigest()[:16]
    return CodeFingerprint(digest, modules)


def _problem_names(config: dict[str, Any]) -> dict[str, str]:
    return {"model": config["train"]["model"], "dataset": config["dataset"], "partitioner": config["partitioner"]}


def cell_code(config: dict[str, Any]) -> CodeFingerprint:
    """The fingerprint a cell records and is compared with (`fdabench.cell.fingerprint.cell_roots`, its method,
    model, dataset and partitioner)."""
    return job_fingerprint(fingerprint.cell_roots(config), {**_problem_names(config), "method": config["algorithm"]})


def prepare_code(dataset: str) -> CodeFingerprint:
    return job_fingerprint(fingerprint.prepare_roots(dataset), {"dataset": dataset})


def partition_code(dataset: str, partitioner: str) -> CodeFingerprint:
    return job_fingerprint(
        fingerprint.partition_roots(dataset, partitioner), {"dataset": dataset, "partitioner": partitioner}
    )


def theory_code(config: dict[str, Any]) -> CodeFingerprint:
    return job_fingerprint(fingerprint.theory_roots(config), _problem_names(config))
