"""Validated params.yaml and its resolution into cells — one (suite, experiment, method, target, seed)
each, with every setting spelled out (merge orders: `fdabench.config.resolve`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from fdabench.config import resolve, sweep
from fdabench.config.checks import non_finite_errors, semantic_errors
from fdabench.config.extends import deep_merge, expand_suites
from fdabench.config.schema import (
    DATA_SETTINGS,
    THEORY_CHECK_SETTINGS,
    TOP_LEVEL_SETTINGS,
    ParamsError,
    params_schema,
    schema_errors,
    violation_messages,
)
from fdabench.config.theory_roles import theory_roles
from fdabench.core import devices, paths
from fdabench.core.errors import did_you_mean
from fdabench.core.families import logs_betas
from fdabench.core.io import content_hash
from fdabench.core.registry import schema_defaults
from fdabench.core.strict_yaml import read_params_file
from fdabench.data import get_dataset, get_partitioner
from fdabench.data.raw import MIRROR_ENVIRONMENT_VARIABLE
from fdabench.methods import METHODS


@dataclass(frozen=True)
class Cell:
    """One training job: its identity and its fully resolved configuration."""

    suite: str
    experiment: str
    method: str
    target: str
    seed: int
    config: dict[str, Any]

    @property
    def path(self) -> str:
        return self._fill(paths.CELL)

    @property
    def log_path(self) -> str:
        """Where its training job's log goes."""
        return self._fill(paths.LOGS["train"])

    @property
    def group_log_path(self) -> str:
        """Where the log of the job that trains its targets together goes (params.yaml `cells_per_job: targets`)."""
        return self._fill(paths.LOGS["train_group"])

    def _fill(self, pattern: str) -> str:
        return paths.fill(
            pattern,
            suite=self.suite,
            experiment=self.experiment,
            method=self.method,
            target=self.target,
            seed=self.seed,
        )


#: what params.yaml's top level and its `data` mean when they leave a setting out (their schema's defaults)
TOP_LEVEL_DEFAULTS = schema_defaults(TOP_LEVEL_SETTINGS)
DATA_DEFAULTS = schema_defaults(DATA_SETTINGS)
THEORY_CHECK_DEFAULTS = schema_defaults(THEORY_CHECK_SETTINGS)


class Params:
    """Validated params.yaml with helpers that resolve experiments, methods and cells of the active suite."""

    def __init__(self, raw: dict[str, Any]):
        self.raw = raw
        self.suite_name: str = raw["suite"]
        self.suite: dict[str, Any] = raw["suites"][self.suite_name]
        settings = {**TOP_LEVEL_DEFAULTS, **raw}
        self.device: str = settings["device"]
        self.threads_per_cell: int = settings["threads_per_cell"]
        self.checkpoint_every: int = settings["checkpoint_every"]
        #: what one training job of the workflow trains: one cell, or a group of cells (`job_groups`)
        self.cells_per_job: str = settings["cells_per_job"]
        #: the CUDA devices training cells are spread over (fdabench.core.devices); empty: not pinned
        self.gpus: list[int] = list(raw.get("gpus") or [])
        #: the suites dvc.yaml builds (default: the active one)
        self.dvc_suites: list[str] = (raw.get("dvc") or {}).get("suites") or [self.suite_name]
        data = {**DATA_DEFAULTS, **(raw.get("data") or {})}
        self.data_root: str = paths.normal_root(data["root"])  # `data`, `./data/` or its absolute path: the same files
        self.mirror: str | None = data["mirror"] or os.environ.get(MIRROR_ENVIRONMENT_VARIABLE) or None
        self.download: bool = bool(data["download"])

    def device_problem(self) -> str | None:
        """Why cells cannot run on this machine's devices (`fdabench.core.devices.problem`), or None."""
        return devices.problem(self.device)

    # -- datasets ---------------------------------------------------------------------------------
    def dataset_options(self, dataset: str, experiment: str | None = None) -> dict[str, Any]:
        return resolve.dataset_options(self.raw, dataset, None if experiment is None else self.experiment(experiment))

    def prepared_key(self, experiment: str) -> tuple[str, str]:
        """(dataset, options hash): experiments with the same dataset options share prepared data."""
        dataset = self.experiment(experiment)["dataset"]
        return dataset, content_hash(self.dataset_options(dataset, experiment))[:12]

    def for_suite(self, name: str) -> Params:
        """The same (validated) parameters with `name` the active suite; an unknown name is refused (ParamsError)."""
        if name not in self.raw["suites"]:
            raise ParamsError(
                f"unknown suite {name!r}; allowed values: {', '.join(self.raw['suites'])}"
                f"{did_you_mean(name, self.raw['suites'])}"
            )
        return Params({**self.raw, "suite": name})

    def prepared_path(self, experiment: str) -> str:
        dataset, key = self.prepared_key(experiment)
        return paths.fill(paths.PREPARED, data=self.data_root, dataset=dataset, options_hash=key)

    def prepared_options(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Every (dataset, options hash) of the suite with its options."""
        return {
            self.prepared_key(e): self.dataset_options(self.experiment(e)["dataset"], e)
            for e in self.experiment_names()
        }

    def raw_paths(self, dataset: str, options: dict[str, Any]) -> list[str]:
        """What `prepare` reads: acquired raw datasets and any outside input files (e.g. a manifest)."""
        source = get_dataset(dataset)
        return [
            paths.fill(paths.RAW, data=self.data_root, raw=raw) for raw in source.raw_datasets
        ] + source.input_files(options)

    def raw_in_suite(self) -> list[str]:
        return sorted({raw for dataset in self.datasets_in_suite() for raw in get_dataset(dataset).raw_datasets})

    def datasets_in_suite(self) -> list[str]:
        return sorted({exp["dataset"] for exp in self.suite["experiments"].values()})

    # -- experiments ------------------------------------------------------------------------------
    def experiment(self, name: str) -> dict[str, Any]:
        return self.suite["experiments"][name]

    def experiment_names(self) -> list[str]:
        return list(self.suite["experiments"])

    def partitioner(self, experiment: str) -> str:
        return resolve.partitioner_name(self.experiment(experiment))

    def partition_options(self, experiment: str) -> dict[str, Any]:
        return resolve.experiment_partition_options(self.experiment(experiment))

    def targets(self, experiment: str) -> list[str]:
        exp = self.experiment(experiment)
        targets = exp.get("targets", "all")
        if targets == "all":
            partitioner = get_partitioner(self.partitioner(experiment))
            return partitioner.target_names(
                get_dataset(exp["dataset"]),
                self.partition_options(experiment),
                self.dataset_options(exp["dataset"], experiment),
            )
        return list(targets)

    def seeds(self, experiment: str) -> list[int]:
        return resolve.experiment_seeds(self.suite, self.experiment(experiment))

    def methods(self, experiment: str) -> list[str]:
        """The method names of the experiment's cells (a sweep's draws and folds spelled out:
        `fdabench.config.resolve.expanded_methods`)."""
        return resolve.expanded_methods(self.raw, self.suite, self.experiment(experiment))

    def resources(self, experiment: str) -> dict[str, int]:
        """Scheduler resources of the experiment's training jobs (`fdabench.config.resolve.resources`)."""
        return resolve.resources(self.suite, self.experiment(experiment))

    def train_settings(self, experiment: str) -> dict[str, Any]:
        return resolve.train_settings(self.suite, self.experiment(experiment))

    # -- methods ----------------------------------------------------------------------------------
    def method_variant(self, name: str, target: str | None = None) -> tuple[str, dict[str, Any]]:
        """(algorithm, complete hyper-parameters) of a method variant or a registered method, outside any
        experiment; a variant's `by_target.<target>` hyper-parameters override the others for that target."""
        return resolve.algorithm_of(self.raw, name), resolve.hparams(self.raw, None, name, target)

    def method_families(self) -> dict[str, str]:
        """method -> family of every method of the suite, in the order its experiments list them (the tables'
        order): what fixes each method's colour in the suite's figures (fdabench.report.style)."""
        methods = dict.fromkeys(m for experiment in self.experiment_names() for m in self.methods(experiment))
        return {method: METHODS.get(resolve.algorithm_of(self.raw, method)).family for method in methods}

    def logs_betas(self, name: str) -> bool:
        """Whether the method variant chooses β automatically (its rounds log betas)."""
        return logs_betas(METHODS.get(resolve.algorithm_of(self.raw, name)).family)

    # -- cells ------------------------------------------------------------------------------------
    def cell_keys(self, experiments: list[str] | None = None) -> Iterator[tuple[str, str, str, int]]:
        """(experiment, method, target, seed) of every cell of `experiments` (default: the suite's), in the suite's
        cell order: the one enumeration of cells."""
        for experiment in experiments or self.experiment_names():
            for method in self.methods(experiment):
                for target in self.targets(experiment):
                    for seed in self.seeds(experiment):
                        yield experiment, method, target, int(seed)

    def cells(self, experiments: list[str] | None = None) -> Iterator[Cell]:
        for key in self.cell_keys(experiments):
            yield self.cell(*key)

    def cell_gpus(self) -> dict[tuple[str, str, str, int], int]:
        """(experiment, method, target, seed) -> the GPU the cell is pinned to (fdabench.core.devices.assign, in the
        suite's cell order); empty without `gpus`."""
        return devices.assign(list(self.cell_keys()), self.gpus) if self.gpus else {}

    def job_groups(self) -> dict[tuple[str, str, int], list[str]]:
        """(experiment, method, seed) -> its targets, in the suite's cell order: the cells one training job trains
        together where `cells_per_job` is `targets` (`fdabench train-group`)."""
        groups: dict[tuple[str, str, int], list[str]] = {}
        for experiment, method, target, seed in self.cell_keys():
            groups.setdefault((experiment, method, seed), []).append(target)
        return groups

    def group_gpus(self) -> dict[tuple[str, str, int], int]:
        """(experiment, method, seed) -> the GPU a group of cells (`job_groups`) is pinned to, round-robin in the
        suite's order as `cell_gpus` pins cells; empty without `gpus`."""
        return devices.assign(list(self.job_groups()), self.gpus) if self.gpus else {}

    def cell(self, experiment: str, method: str, target: str, seed: int) -> Cell:
        exp = self.experiment(experiment)
        base, draw, fold = sweep.parse_name(method) if sweep.RESERVED_NAME.search(method) else (method, None, None)
        config = {
            "suite": self.suite_name,
            "experiment": experiment,
            "dataset": exp["dataset"],
            "method": method,
            "algorithm": resolve.algorithm_of(self.raw, base),
            "hparams": resolve.hparams(self.raw, exp, base, target),
            "target": target,
            "seed": int(seed),
            "dataset_options": self.dataset_options(exp["dataset"], experiment),
            "partitioner": self.partitioner(experiment),
            "partition": self.partition_options(experiment),
            "train": self.train_settings(experiment),
            # as params.yaml gives it, on every machine: where the cell runs decides what it means
            # (fdabench.core.devices.decide), and its result records the device it ran on
            "device": self.device,
            "published": exp.get("published"),
        }
        if draw is not None:
            plan = sweep.settings(self.suite)
            spaces = resolve.method_spaces(self.raw, self.suite, base)
            values = sweep.draw_values(experiment, base, draw, plan, spaces, int(seed))
            sweep.apply_draw(config["hparams"], config["train"], values)
            config["sweep"] = sweep.sweep_record(base, draw, values, plan)
        validation = sweep.validation(self.suite, exp)
        if validation:
            config["validation"] = validation if fold is None else {**validation, "target_fold": fold}
        return Cell(self.suite_name, experiment, method, target, int(seed), config)

    def sweep(self) -> dict[str, Any] | None:
        """The active suite's sweep settings with their defaults (`fdabench.config.sweep.settings`), or None."""
        return sweep.settings(self.suite)

    def tables(self) -> dict[str, dict[str, Any]]:
        return dict(self.suite.get("tables") or {})

    def figures(self) -> dict[str, dict[str, Any]]:
        return dict(self.suite.get("figures") or {})

    def published_experiments(self) -> list[str]:
        return [name for name in self.experiment_names() if self.experiment(name).get("published")]

    def theory_checks(self) -> dict[str, dict[str, Any]]:
        return dict(self.suite.get("theory_checks") or {})

    def theory_roles(self, check: str) -> dict[str, str]:
        """The method variant playing each rule of a theory check."""
        return theory_roles(self.theory_checks()[check])

    def theory_draws(self, check: str) -> int:
        """Monte Carlo draws of a theory check (its schema default unless it sets `draws`)."""
        return int(self.theory_checks()[check].get("draws", THEORY_CHECK_DEFAULTS["draws"]))

    def theory_beta(self, check: str) -> float:
        """β of the FedDA and FedGP roles (validated to be equal)."""
        return float(resolve.hparams(self.raw, None, self.theory_roles(check)["fedda"])["beta"])


#: A check of schema-valid params (suites expanded) beyond the library's own: one readable line per problem. The
#: command line and the workflow add the reproduction package's (`fdabench.jobs.validation`); the library has none.
ParamsCheck = Callable[[dict[str, Any]], list[str]]


def validate_params(raw: Any, checks: Sequence[ParamsCheck] = ()) -> Params:
    """Check params against the schema, every cross-reference and `checks`; raise ParamsError listing all
    problems."""
    if not isinstance(raw, dict):
        raise ParamsError("params must be a mapping (a YAML document with keys suite, suites, ...)")
    raw = expand_suites(raw)
    problems = non_finite_errors(raw) or schema_errors(raw, params_schema())
    if problems:
        raise ParamsError(violation_messages(problems))
    problems = semantic_errors(raw) + [problem for check in checks for problem in check(raw)]
    if problems:
        raise ParamsError(violation_messages(problems))
    return Params(raw)


def load_params(
    path: str | os.PathLike = "params.yaml",
    overrides: dict[str, Any] | None = None,
    layers: Sequence[str | os.PathLike] = (),
    suite: str | None = None,
    checks: Sequence[ParamsCheck] = (),
) -> Params:
    """Read a params file, merge the params files `layers` over it in order (as `snakemake --configfile`
    does: e.g. a suite of one's own in a file of its own), then `overrides` (nested keys), make `suite` the
    active suite if given, and validate (with `checks` besides the library's)."""
    raw = _read_yaml(path)
    for layer in layers:
        raw = deep_merge(raw, _read_yaml(layer))
    if overrides:
        raw = deep_merge(raw, overrides)
    if suite is not None:
        raw = {**raw, "suite": suite}
    return validate_params(raw, checks)


def _read_yaml(path: str | os.PathLike) -> Any:
    """A params file's data, read strictly: repeated keys and unbounded aliases are refused
    (`fdabench.core.strict_yaml`)."""
    return read_params_file(path)
