# fdabench workflow: data -> partitions -> one training job per cell -> tables and figures.
# Usage: snakemake --cores 8 results/table1.csv     (or `snakemake --cores 8` for every table and figure)

from snakemake.utils import min_version

min_version("8.10")


configfile: "params.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        table_outputs(),
        figure_outputs(),
        theory_outputs(),


rule cells:
    input:
        cell_paths(PARAMS.experiment_names()),


rule tables:
    input:
        table_outputs(),


rule figures:
    input:
        figure_outputs(),


rule theory:
    input:
        theory_outputs(),
