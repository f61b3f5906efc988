# fdabench workflow: data -> partitions -> training jobs (a cell, or a group of targets, a job) -> tables and figures.
# Usage: snakemake --cores 8 results/table1.csv     (or `snakemake --cores 8` for every table and figure)
# Tables and figures are written to results/<suite>/; results/<name> links to the active suite's.

from snakemake.utils import min_version

min_version("8.10")


configfile: "params.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/report.smk"


# The rules a run starts from: `started` (workflow/rules/common.smk) heals the workspace first where jobs will run.
rule all:
    default_target: True
    input:
        started(
            with_views(table_outputs() + figure_outputs() + theory_outputs())
            + cells_table_outputs()
            + dvc_outputs()
            + sweep_outputs()
        ),


# DVC's stages: the data of every suite in dvc.suites; a suite's report without the results/<name> links
rule prepared:
    input:
        started(prepared_paths()),


rule report:
    input:
        started(table_outputs() + figure_outputs() + theory_outputs() + cells_table_outputs() + dvc_outputs() + sweep_outputs()),


rule cells:
    input:
        started(cell_paths(PARAMS.experiment_names())),


rule tables:
    input:
        started(with_views(table_outputs()) + dvc_outputs()),


rule figures:
    input:
        started(with_views(figure_outputs())),


rule theory:
    input:
        started(with_views(theory_outputs())),
