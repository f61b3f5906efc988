# Shared helpers: validate params.yaml before anything runs and resolve cells, paths and wildcards.

import functools
import os
import re
import shlex
import sys
from functools import cache

from snakemake.exceptions import WorkflowError

from fdabench.core import devices, paths
from fdabench.cell.result import read_cell, report_labels
from fdabench.config import NAME_PATTERN, ParamsError, validate_params
from fdabench.cell.fingerprint import partition_roots, prepare_roots, theory_roots
from fdabench.core.io import canonical_json
from fdabench.cell.plugin_fingerprint import cell_code as cell_code_fingerprint, plugin_aware_fingerprint
from fdabench.jobs.runlock import RunLockedError, hold_run_lock
from fdabench.jobs.status import heal_workspace

try:
    PARAMS = validate_params(config)
except ParamsError as error:
    raise WorkflowError(str(error)) from None

NAME = NAME_PATTERN.strip("^$")
SUITE = PARAMS.suite_name
DATA = PARAMS.data_root


@functools.cache
def _uses_gpu():
    return devices.uses_cuda(PARAMS.device)


def uses_gpu(wildcards):
    """The train rule's `gpu` resource: 1 where cells run on CUDA (fdabench.core.devices.uses_cuda), decided once
    per run and only when a training job is scheduled (device auto asks torch)."""
    return int(_uses_gpu())


# params.yaml `gpus` (fdabench.core.devices): the GPU each cell is pinned to, round-robin in the suite's cell order
CELL_GPUS = PARAMS.cell_gpus()


def _cell_key(wildcards):
    return (wildcards.experiment, wildcards.method, wildcards.target, int(wildcards.seed))


def cell_gpu(wildcards):
    """The GPU a training job runs on (its CUDA_VISIBLE_DEVICES), or devices.UNPINNED."""
    device = CELL_GPUS.get(_cell_key(wildcards))
    return devices.UNPINNED if device is None else str(device)


# gpu_<index>: 1 for the cells pinned to that GPU, so `--resources gpu_0=K gpu_1=K` runs K cells on each at once
GPU_RESOURCES = {
    devices.resource_name(device): (lambda wildcards, device=device: int(CELL_GPUS.get(_cell_key(wildcards)) == device))
    for device in PARAMS.gpus
}


onstart:
    # One run per directory (fdabench.jobs.runlock): the profile turns Snakemake's own lock, which a kill -9
    # leaves stale, off; this one is released whenever its holder exits.
    try:
        hold_run_lock()
    except RunLockedError as error:
        raise WorkflowError(str(error)) from None
    # the device, where jobs run on this machine: before any job is scheduled (a cluster's nodes check their own)
    if PARAMS.device_problem() and not workflow.executor_plugin.common_settings.non_local_exec:
        raise WorkflowError(PARAMS.device_problem())


def _alternatives(names):
    return "|".join(re.escape(name) for name in names) or "(?!)"


# The data of the active suite and of the suites DVC builds (its `prepare` stage prepares them all at once:
# prepared data is shared between suites, so no per-suite stage could own it).
PREPARING = [PARAMS] + [PARAMS.for_suite(name) for name in PARAMS.dvc_suites if name != SUITE]


wildcard_constraints:
    suite=re.escape(SUITE),
    experiment=_alternatives(PARAMS.experiment_names()),
    dataset=_alternatives(sorted({d for p in PREPARING for d in p.datasets_in_suite()})),
    raw=_alternatives(sorted({r for p in PREPARING for r in p.raw_in_suite()})),
    options_hash=r"[0-9a-f]{12}",
    table=_alternatives(PARAMS.tables()),
    check=_alternatives(PARAMS.theory_checks()),
    figure=_alternatives(PARAMS.figures()),
    method=NAME,
    target=NAME,
    seed=r"\d+",


# the suite's methods in table order -> family: fixes each method's colour in every figure of the suite
METHOD_FAMILIES = canonical_json(list(PARAMS.method_families().items()))


def dataset_of(experiment):
    return PARAMS.experiment(experiment)["dataset"]


PREPARED_OPTIONS = {key: options for p in PREPARING for key, options in p.prepared_options().items()}


def prepared_paths():
    """The prepared data of the active suite and of the suites DVC builds."""
    return sorted({p.prepared_path(experiment) for p in PREPARING for experiment in p.experiment_names()})


def prepared_options(wildcards):
    """The dataset options behind data/prepared/<dataset>/<options_hash>."""
    key = (wildcards.dataset, wildcards.options_hash)
    if key not in PREPARED_OPTIONS:
        raise WorkflowError(f"no experiment of suite {SUITE} or dvc.suites prepares {key[0]} with options {key[1]}")
    return PREPARED_OPTIONS[key]


# Input functions, params and resources are evaluated per job, and again for every ready job each time Snakemake
# selects jobs to run (it resets them): each value is worked out once per run.
def cell_paths(experiments):
    return list(_cell_paths(tuple(experiments)))


@cache
def _cell_paths(experiments):
    return tuple(cell.path for cell in PARAMS.cells(list(experiments)))


@cache
def _cell_params(experiment, method, target, seed):
    """(the cell's resolved configuration, its code fingerprint with the module hashes), each as canonical JSON:
    the job records the fingerprint worked out here rather than computing it again."""
    cell = PARAMS.cell(experiment, method, target, seed)
    return canonical_json(cell.config), canonical_json(cell_code_fingerprint(cell.config).to_json())


def cell_config(wildcards):
    return _cell_params(*_cell_key(wildcards))[0]


def cell_code(wildcards):
    """The fingerprint of the code the cell's result depends on (fdabench.cell.fingerprint, plus a plugin's modules:
    fdabench.cell.plugin_fingerprint): a rule parameter, so a change to that code reruns the cell and a change to any
    other code does not; the job is given it (`fdabench train --code`)."""
    return _cell_params(*_cell_key(wildcards))[1]


@cache
def experiment_resources(experiment):
    """params.yaml `resources` of the experiment: what a cluster scheduler is asked for per job."""
    return PARAMS.resources(experiment)


@cache
def prepared_path(experiment):
    return PARAMS.prepared_path(experiment)


def rerun_marker(wildcards):
    """A cell's rerun marker while it exists (fdabench.jobs.status.heal_workspace): a new one reruns the cell."""
    marker = paths.fill(paths.RERUN_MARKER, suite=SUITE, **{k: wildcards[k] for k in ("experiment", "method", "target", "seed")})
    return [marker] if os.path.exists(marker) else []


def cell_labels(wildcards, output):
    """A finished cell's entry in the report (fdabench.cell.result.report_labels)."""
    return report_labels(read_cell(output[0]))


def prepare_code(wildcards):
    return plugin_aware_fingerprint(prepare_roots(wildcards.dataset)).digest


def partition_code(wildcards):
    roots = partition_roots(dataset_of(wildcards.experiment), PARAMS.partitioner(wildcards.experiment))
    return plugin_aware_fingerprint(roots).digest


def pattern(kind, **values):
    """The `fdabench.core.paths` pattern of a kind of file, with the data root (and any `values`) filled in."""
    return paths.fill(getattr(paths, kind), data=DATA, **values)


def suite_pattern(kind, **values):
    """A pattern of the active suite's tables and figures (results/<suite>/...)."""
    return pattern(kind, suite=SUITE, **values)


def log(rule):
    return paths.LOGS[rule]


def table_outputs():
    outputs = [suite_pattern("TABLE", table=table, ext=ext) for table in PARAMS.tables() for ext in paths.TABLE_EXTENSIONS]
    if PARAMS.published_experiments():
        outputs += [suite_pattern("PAPER_VS_OURS", ext=ext) for ext in paths.PAPER_VS_OURS_EXTENSIONS]
    return outputs


def with_views(outputs):
    """`outputs` and their links without the suite folder (results/table1.csv -> demo/table1.csv)."""
    return outputs + [paths.active_view(output, SUITE)[0] for output in outputs]


def auto_cell_paths(experiment):
    """Cells of the experiment's methods that log auto-weighting betas."""
    methods = [m for m in PARAMS.methods(experiment) if PARAMS.logs_betas(m)]
    return [cell.path for cell in PARAMS.cells([experiment]) if cell.method in methods]


def dvc_outputs():
    """The files DVC reads: the metrics file and the `dvc plots` folders."""
    return [suite_pattern("METRICS"), suite_pattern("PLOTS_ROUNDS"), suite_pattern("PLOTS_BETAS")]


def figure_outputs():
    outputs = [suite_pattern("TABLE_FIGURE", table=table) for table in PARAMS.tables()]
    # a sweep's per-round curves (draws x methods) are read by its selection rules, not drawn
    drawn = [] if PARAMS.sweep() else PARAMS.experiment_names()
    outputs += [suite_pattern("ROUNDS_FIGURE", experiment=experiment) for experiment in drawn]
    outputs += [suite_pattern("BETAS_FIGURE", experiment=experiment) for experiment in drawn if auto_cell_paths(experiment)]
    outputs += [suite_pattern("FIGURE", figure=figure) for figure in PARAMS.figures()]
    return outputs


def sweep_outputs():
    """The active suite's sweep tables, tests and diagrams (fdabench.core.paths.sweep_outputs); none without a sweep."""
    plan = PARAMS.sweep()
    return [] if plan is None else paths.sweep_outputs(SUITE, plan["rules"])


def cells_table_outputs():
    return [suite_pattern("CELLS_TABLE", experiment=experiment) for experiment in PARAMS.experiment_names()]


def theory_check_of(experiment):
    """(check name, beta, draws) of the theory check that uses `experiment`."""
    for name, check in PARAMS.theory_checks().items():
        if check["experiment"] == experiment:
            return name, PARAMS.theory_beta(name), PARAMS.theory_draws(name)
    raise WorkflowError(f"no theory check uses experiment {experiment!r}")


def theory_cell_config(wildcards):
    """The experiment's settings for the target and seed (any method: the model and seed are shared)."""
    method = PARAMS.theory_roles(theory_check_of(wildcards.experiment)[0])["fedda"]
    return canonical_json(PARAMS.cell(wildcards.experiment, method, wildcards.target, int(wildcards.seed)).config)


def theory_code(wildcards):
    method = PARAMS.theory_roles(theory_check_of(wildcards.experiment)[0])["fedda"]
    cell = PARAMS.cell(wildcards.experiment, method, wildcards.target, int(wildcards.seed))
    return plugin_aware_fingerprint(theory_roots(cell.config)).digest


def theory_init_paths(check):
    experiment = PARAMS.theory_checks()[check]["experiment"]
    return [
        paths.fill(paths.THEORY_INIT, suite=SUITE, experiment=experiment, target=target, seed=seed)
        for target in PARAMS.targets(experiment)
        for seed in PARAMS.seeds(experiment)
    ]


def theory_cell_paths(check):
    experiment = PARAMS.theory_checks()[check]["experiment"]
    methods = set(PARAMS.theory_roles(check).values())
    return [cell.path for cell in PARAMS.cells([experiment]) if cell.method in methods]


def theory_outputs():
    return [suite_pattern("THEORY_REPORT", check=check, ext=ext) for check in PARAMS.theory_checks() for ext in paths.THEORY_EXTENSIONS]


VIEWS = {
    paths.active_view(output, SUITE)[0][len("results/"):]: output
    for output in table_outputs() + figure_outputs() + theory_outputs()
}


def view_links():
    """The links results/<name> of the active suite's tables and figures."""
    return [paths.active_view(output, SUITE)[0] for output in table_outputs() + figure_outputs() + theory_outputs()]


def quoted_option(option, value):
    """`option value` with the value quoted for the shell, or nothing when the value is unset."""
    return f"{option} {shlex.quote(str(value))}" if value else ""


# Before Snakemake plans (in the main process only): a cell file that is unreadable, of another format, or
# made with other settings or code reruns, and a link to a missing result is removed (fdabench.jobs.status).
if workflow.is_main_process:
    for change in heal_workspace(PARAMS, view_links()):
        print(f"fdabench: {change}", file=sys.stderr)
