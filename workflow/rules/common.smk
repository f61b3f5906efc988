# Shared helpers: params.yaml's answers (validated where worked out, kept between runs), cells, paths and
# wildcards, and the healing of the cells a run executes. Parsing imports neither torch nor the library where the
# plan of an earlier run has the answers (fdabench.jobs.plan_cache), and a dry run opens no cell file and writes
# nothing (fdabench.jobs.heal).

import atexit
import os
import re
import shlex
import sys
from functools import cache
from pathlib import Path

from snakemake.exceptions import WorkflowError

from fdabench.core import devices, paths
from fdabench.core.device_identity import planned_config
from fdabench.cell.reading import read_verified_cell
from fdabench.cell.result import report_labels
from fdabench.core.io import canonical_json
from fdabench.core.errors import ParamsError
from fdabench.core.readers import FileReadError
from fdabench.core.strict_yaml import check_params_files
from fdabench.jobs.cell_plan import plan_digest, write_plan
from fdabench.jobs.heal import heal_cell, heal_link
from fdabench.jobs.plan_cache import PlanCache, PlannedParams, plan_key
from fdabench.jobs.run_settings import cores_problem, file_size_problem
from fdabench.jobs.runlock import RunLockedError, hold_run_lock
from fdabench.report.rst import rst_text


@cache
def validated_params():
    """params.yaml validated as every command validates it (fdabench.jobs.validation): imports the library (and
    torch), so it is called only for an answer the plan does not have; a validation error stops the run before
    anything runs."""
    from fdabench.jobs.validation import validated_params as validate

    try:
        return validate(config)
    except ParamsError as error:
        raise WorkflowError(str(error)) from None


# Snakemake reads its config files keeping the last of a repeated key and expanding every alias: read them again
# strictly first (fdabench.core.strict_yaml: quick, and without the library or torch).
try:
    check_params_files(workflow.configfiles)
except (ParamsError, FileReadError) as error:
    raise WorkflowError(str(error)) from None


# What the workflow asks of params.yaml, through the plan: `PARAMS.tables()` is validated_params().tables(), stored
# by an earlier run with the same configuration, code and environment, or worked out now.
PLAN = PlanCache(plan_key(config))
PARAMS = PlannedParams(PLAN, validated_params)


def executing():
    """Whether this process runs jobs: Snakemake's main process executing the workflow, not a dry run or --touch
    (--lint, --report, --summary and --dag execute nothing: they set no executor)."""
    return workflow.is_main_process and workflow.executor_plugin is not None and not (workflow.dryrun or workflow.touch)


@cache
def _begin_run():
    atexit.register(PLAN.save)
    heal_workspace()


def begin_run():
    """In a run that executes jobs, once, before Snakemake looks at any file: heal the workspace (`heal_workspace`:
    Snakemake lists a folder once and plans from that list, so nothing may be written after it looked), and keep
    the plan for later parses when the run ends (also when Snakemake finds nothing to do; `onstart` keeps it too).
    Every rule a run can start from calls it first (`started`, `rerun_marker`, `view_source`)."""
    if executing():
        _begin_run()


def dangling(path):
    """Whether `path` is a link to a file that is gone (Snakemake cannot plan from one: `begin_run` removes it)."""
    return os.path.islink(path) and not os.path.exists(path)


def started(paths):
    """`paths` as an input function that calls `begin_run` first (for the rules a run starts from). A dry run, which
    removes nothing, leaves out a results/<name> link whose file is gone (the rule that makes the file is planned)."""

    def inputs(wildcards):
        begin_run()
        return [path for path in paths if not dangling(path)]

    return inputs


def _name_pattern():
    from fdabench.config import NAME_PATTERN

    return NAME_PATTERN


NAME = PLAN.get("name_pattern", (), _name_pattern).strip("^$")
SUITE = PARAMS.value("suite_name")
DATA = PARAMS.value("data_root")
DEVICE = PARAMS.value("device")
GPUS = PARAMS.value("gpus")


@cache
def _uses_gpu():
    return devices.uses_cuda(DEVICE)


def uses_gpu(wildcards):
    """The train rule's `gpu` resource: 1 where cells run on CUDA (fdabench.core.devices.uses_cuda), decided once
    per run and only when a training job is scheduled (device auto asks torch)."""
    return int(_uses_gpu())


# params.yaml `gpus` (fdabench.core.devices): the GPU each cell is pinned to, round-robin in the suite's cell order
CELL_GPUS = {
    (experiment, method, target, seed): device
    for experiment, method, target, seed, device in PLAN.get(
        "cell_gpus", (), lambda: [[*key, device] for key, device in validated_params().cell_gpus().items()]
    )
}


def _cell_key(wildcards):
    return (wildcards.experiment, wildcards.method, wildcards.target, int(wildcards.seed))


def cell_gpu(wildcards):
    """The GPU a training job runs on (its CUDA_VISIBLE_DEVICES), or devices.UNPINNED."""
    device = CELL_GPUS.get(_cell_key(wildcards))
    return devices.UNPINNED if device is None else str(device)


# gpu_<index>: 1 for the cells pinned to that GPU, so `--resources gpu_0=K gpu_1=K` runs K cells on each at once
GPU_RESOURCES = {
    devices.resource_name(device): (lambda wildcards, device=device: int(CELL_GPUS.get(_cell_key(wildcards)) == device))
    for device in GPUS
}


onstart:
    # One run per directory (fdabench.jobs.runlock): the profile turns Snakemake's own lock, which a kill -9
    # leaves stale, off; this one is released whenever its holder exits.
    try:
        hold_run_lock()
    except RunLockedError as error:
        raise WorkflowError(str(error)) from None
    # the device, where jobs run on this machine: before any job is scheduled (a cluster's nodes check their own)
    local = not workflow.executor_plugin.common_settings.non_local_exec
    problem = devices.problem(DEVICE) if local else None
    # settings that make the run impossible (fdabench.jobs.run_settings): no core, or a file-size limit below a file
    # Snakemake backs up before rerunning it
    problem = problem or cores_problem(workflow.resource_settings.cores, local) or file_size_problem()
    if problem:
        raise WorkflowError(problem)
    PLAN.save()


onerror:
    # A failed rerun leaves the previous cell file in place (Snakemake restores update() outputs, with a new mtime):
    # heal again, so that the next plan, a dry run included, reruns the stale ones.
    heal_workspace()


def _alternatives(names):
    return "|".join(re.escape(name) for name in names) or "(?!)"


# The data of the active suite and of the suites DVC builds (its `prepare` stage prepares them all at once:
# prepared data is shared between suites, so no per-suite stage could own it).
def _preparing():
    params = validated_params()
    preparing = [params] + [params.for_suite(name) for name in params.dvc_suites if name != params.suite_name]
    return {
        "datasets": sorted({d for p in preparing for d in p.datasets_in_suite()}),
        "raw": sorted({r for p in preparing for r in p.raw_in_suite()}),
        "paths": sorted({p.prepared_path(experiment) for p in preparing for experiment in p.experiment_names()}),
        "options": [[*key, options] for p in preparing for key, options in p.prepared_options().items()],
    }


PREPARING = PLAN.get("preparing", (), _preparing)


wildcard_constraints:
    suite=re.escape(SUITE),
    experiment=_alternatives(PARAMS.experiment_names()),
    dataset=_alternatives(PREPARING["datasets"]),
    raw=_alternatives(PREPARING["raw"]),
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


PREPARED_OPTIONS = {(dataset, key): options for dataset, key, options in PREPARING["options"]}


def prepared_paths():
    """The prepared data of the active suite and of the suites DVC builds."""
    return PREPARING["paths"]


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


def cell_path(experiment, method, target, seed):
    return paths.fill(paths.CELL, suite=SUITE, experiment=experiment, method=method, target=target, seed=seed)


@cache
def _cell_paths(experiments):
    return tuple(cell_path(*key) for key in PARAMS.cell_keys(list(experiments)))


def _cell_plan(experiment, method, target, seed):
    from fdabench.cell.plugin_scope import cell_code

    config = validated_params().cell(experiment, method, target, seed).config
    return {"config": config, "code": cell_code(config).to_json()}


@cache
def cell_plan(experiment, method, target, seed):
    """{config: the cell's resolved configuration, code: its code fingerprint with the module hashes}: the job
    records the fingerprint worked out here rather than computing it again."""
    key = (experiment, method, target, seed)
    return PLAN.get("cell", key, lambda: _cell_plan(*key))


def cell_plan_path(experiment, method, target, seed):
    return paths.fill(paths.CELL_PLAN, suite=SUITE, experiment=experiment, method=method, target=target, seed=seed)


@cache
def _job_plan(experiment, method, target, seed):
    """(configuration, code fingerprint) the training job runs with, as its plan file holds them
    (fdabench.jobs.cell_plan); the configuration's `device` as planned_config gives it, whatever the setting
    (fdabench.core.device_identity: the setting reaches the job as a resource, and the heal reruns a cell that did not
    run on what it asks for)."""
    plan = cell_plan(experiment, method, target, seed)
    return planned_config(plan["config"]), plan["code"]


def cell_name(wildcards):
    """The cell a training job runs, by name: suite/experiment/method/target/seed<seed>."""
    return f"{SUITE}/{wildcards.experiment}/{wildcards.method}/{wildcards.target}/seed{wildcards.seed}"


@cache
def _plan_digest(key):
    return plan_digest(*_job_plan(*key))


def cell_plan_digest(wildcards):
    """The digest of the cell's plan: its configuration and the fingerprint of the code its result depends on
    (fdabench.cell.fingerprint, plus the plugins it uses or that changed what it runs: fdabench.cell.plugin_scope). A
    rule parameter, so a change to either reruns the cell, a dry run included, and a change to any other code does
    not."""
    return _plan_digest(_cell_key(wildcards))


def cell_plan_file(wildcards):
    """The cell's plan file, which the job reads (`fdabench train --plan`, its path from the job's wildcards): written
    by `heal_workspace` in a run that executes jobs (where a cluster's job waits for it as for any input); a dry run,
    which writes nothing, lists it where an earlier run wrote it."""
    begin_run()
    plan = cell_plan_path(*_cell_key(wildcards))
    return [plan] if os.path.exists(plan) or executing() or not workflow.is_main_process else []


CELLS_PER_JOB = PARAMS.value("cells_per_job")
# params.yaml `gpus`, where a job trains a group of cells: the GPU each group is pinned to, round-robin
GROUP_GPUS = {
    (experiment, method, seed): device
    for experiment, method, seed, device in PLAN.get(
        "group_gpus", (), lambda: [[*key, device] for key, device in validated_params().group_gpus().items()]
    )
}


class TrainingGroup:
    """The training jobs of one experiment where params.yaml `cells_per_job` is `targets`: one job per (method,
    seed), whose cells are the experiment's targets (in its target order); each input, output and log is a list
    with one entry per cell, each worked out as the one-cell rule `train` works it out."""

    def __init__(self, experiment, rule):
        self.experiment, self.rule = experiment, rule
        self.targets = PARAMS.targets(experiment)
        cells = dict(suite=SUITE, experiment=experiment)
        self.prepared = prepared_path(experiment)
        self.partitions = [pattern("PARTITION", target=target, **cells) for target in self.targets]
        self.outputs = [pattern("CELL", target=target, **cells) for target in self.targets]
        self.logs = dict(
            cells=[paths.fill(log("train"), target=target, **cells) for target in self.targets],
            job=paths.fill(log("train_group"), **cells),
        )

    def keys(self, wildcards):
        return [(self.experiment, wildcards.method, target, int(wildcards.seed)) for target in self.targets]

    def plan_files(self, wildcards):
        """The cells' plan files (`cell_plan_file`)."""
        begin_run()
        plans = [cell_plan_path(*key) for key in self.keys(wildcards)]
        return [plan for plan in plans if os.path.exists(plan) or executing() or not workflow.is_main_process]

    def plan_paths(self, wildcards):
        return [cell_plan_path(*key) for key in self.keys(wildcards)]

    def rerun_markers(self, wildcards):
        """The cells' rerun markers that exist (`rerun_marker`)."""
        begin_run()
        return [marker for marker in (marker_path(*key) for key in self.keys(wildcards)) if os.path.exists(marker)]

    def cell_names(self, wildcards):
        return [f"{SUITE}/{experiment}/{method}/{target}/seed{seed}" for experiment, method, target, seed in self.keys(wildcards)]

    def plan_digests(self, wildcards):
        return [_plan_digest(key) for key in self.keys(wildcards)]

    def labels(self, index):
        return lambda wildcards, output: report_labels(read_verified_cell(output[index]))

    def _gpu(self, wildcards):
        return GROUP_GPUS.get((self.experiment, wildcards.method, int(wildcards.seed)))

    def gpu(self, wildcards):
        device = self._gpu(wildcards)
        return devices.UNPINNED if device is None else str(device)

    @property
    def gpu_resources(self):
        return {
            devices.resource_name(device): (lambda wildcards, device=device: int(self._gpu(wildcards) == device))
            for device in GPUS
        }

    def runtime(self, wildcards):
        return experiment_resources(self.experiment)["runtime"] * len(self.targets)

    def mem_mb(self, wildcards):
        return experiment_resources(self.experiment)["mem_mb"]


RULE_NAME_UNSAFE = re.compile(r"\W")


def training_groups():
    """The `TrainingGroup` of each experiment of the suite, each with a rule name of its own (train_<experiment>)."""
    groups, names = [], set()
    for index, experiment in enumerate(PARAMS.experiment_names()):
        name = f"train_{RULE_NAME_UNSAFE.sub('_', experiment)}"
        name = name if name not in names and name != "train_group" else f"{name}_{index}"
        names.add(name)
        groups.append(TrainingGroup(experiment, name))
    return groups


@cache
def experiment_resources(experiment):
    """params.yaml `resources` of the experiment: what a cluster scheduler is asked for per job."""
    return PARAMS.resources(experiment)


@cache
def prepared_path(experiment):
    return PARAMS.prepared_path(experiment)


def marker_path(experiment, method, target, seed):
    return paths.fill(paths.RERUN_MARKER, suite=SUITE, experiment=experiment, method=method, target=target, seed=seed)


def heal_workspace():
    """Write every cell's plan file where it changed (fdabench.jobs.cell_plan), check every cell file of the suite
    against its plan and give a stale one a new rerun marker, and remove links to results that are gone
    (fdabench.jobs.heal): in a run that executes jobs only (`begin_run`, `onerror`)."""
    changes = []
    for key in PARAMS.cell_keys():
        plan = cell_plan(*key)
        write_plan(Path(cell_plan_path(*key)), *_job_plan(*key))
        code = lambda plan=plan: plan["code"]
        changes.append(heal_cell(Path(cell_path(*key)), Path(marker_path(*key)), plan["config"], code, cell_path(*key)))
    changes += [heal_link(Path(link), link) for link in view_links()]
    for change in filter(None, changes):
        print(f"fdabench: {change}", file=sys.stderr)


def rerun_marker(wildcards):
    """A cell's rerun marker while it exists: a new one reruns the cell. A run that executes jobs has checked the
    cell's file by then (`begin_run`); a dry run does not open it."""
    begin_run()
    marker = marker_path(*_cell_key(wildcards))
    return [marker] if os.path.exists(marker) else []


def cell_labels(wildcards, output):
    """A finished cell's entry in the report (fdabench.cell.result.report_labels); a cell edited since its job wrote
    it is refused by name (fdabench.cell.reading), never shown."""
    return report_labels(read_verified_cell(output[0]))


def _code_digest(kind, *args):
    """The code fingerprint of a prepare, partition or theory-init job (fdabench.cell.plugin_scope's `<kind>_code`:
    the plugins it uses or that changed what it runs included)."""
    from fdabench.cell import plugin_scope

    return getattr(plugin_scope, f"{kind}_code")(*args).digest


def prepare_code(wildcards):
    return PLAN.get("prepare_code", (wildcards.dataset,), lambda: _code_digest("prepare", wildcards.dataset))


def partition_code(wildcards):
    dataset, partitioner = dataset_of(wildcards.experiment), PARAMS.partitioner(wildcards.experiment)
    return PLAN.get("partition_code", (dataset, partitioner), lambda: _code_digest("partition", dataset, partitioner))


def pattern(kind, **values):
    """The `fdabench.core.paths` pattern of a kind of file, with the data root (and any `values`) filled in."""
    return paths.fill(getattr(paths, kind), data=DATA, **values)


def job_pattern(kind):
    """The `fdabench.core.paths` pattern of a kind of file as a shell command fills it from its job's wildcards (the
    names are letters, digits and _ . + -: nothing to quote)."""
    return re.sub(r"\{(\w+)\}", r"{wildcards.\1}", getattr(paths, kind))


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
    return [cell_path(*key) for key in PARAMS.cell_keys([experiment]) if key[1] in methods]


def dvc_outputs():
    """The files DVC reads: the metrics file, the `dvc plots` folders and the DVCLive folder."""
    return [suite_pattern("METRICS"), suite_pattern("PLOTS_ROUNDS"), suite_pattern("PLOTS_BETAS"), suite_pattern("DVCLIVE")]


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


def _theory_cell(wildcards):
    """The FedDA role's cell of the target and seed (any method would do: the model and seed are shared)."""
    method = PARAMS.theory_roles(theory_check_of(wildcards.experiment)[0])["fedda"]
    return cell_plan(wildcards.experiment, method, wildcards.target, int(wildcards.seed))["config"]


def theory_cell_config(wildcards):
    """The experiment's settings for the target and seed."""
    return canonical_json(_theory_cell(wildcards))


def theory_code(wildcards):
    config = _theory_cell(wildcards)
    return PLAN.get("theory_code", (config,), lambda: _code_digest("theory", config))


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
    return [cell_path(*key) for key in PARAMS.cell_keys([experiment]) if key[1] in methods]


def theory_outputs():
    return [suite_pattern("THEORY_REPORT", check=check, ext=ext) for check in PARAMS.theory_checks() for ext in paths.THEORY_EXTENSIONS]


VIEWS = {
    paths.active_view(output, SUITE)[0][len("results/"):]: output
    for output in table_outputs() + figure_outputs() + theory_outputs()
}


def view_links():
    """The links results/<name> of the active suite's tables and figures."""
    return [paths.active_view(output, SUITE)[0] for output in table_outputs() + figure_outputs() + theory_outputs()]


def view_source(wildcards):
    """The file the link results/<view> points at (a run that executes jobs has healed the links by then)."""
    begin_run()
    link = paths.fill(paths.VIEW, view=wildcards.view)
    if dangling(link):
        raise WorkflowError(
            f"{link} links to a file that is gone; a dry run changes nothing: run the same command without -n, which "
            "removes the link and makes the file and the link again"
        )
    return VIEWS[wildcards.view]


def quoted_option(option, value):
    """`option value` with the value quoted for the shell, or nothing when the value is unset."""
    return f"{option} {shlex.quote(str(value))}" if value else ""


# The report rules' titles: passed to the CLI as they are (--title), and to the report's captions as literal text


def table_title(wildcards):
    return PARAMS.tables()[wildcards.table].get("title", wildcards.table)


def rounds_title(wildcards):
    return f"{SUITE} / {wildcards.experiment}: target test metric per round"


def betas_title(wildcards):
    return f"{SUITE} / {wildcards.experiment}: auto-weighting β per source"


def theory_title(wildcards):
    return PARAMS.theory_checks()[wildcards.check].get("title", wildcards.check)


def figure_title(wildcards):
    return PARAMS.figures()[wildcards.figure].get("title", wildcards.figure)


def caption_text(title):
    """A rule's title as its report caption shows it (params caption_title): literal text, never markup
    (fdabench.report.rst)."""
    return lambda wildcards: rst_text(title(wildcards))
