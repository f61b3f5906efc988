# Report: cells -> tables (tidy CSV, paper-layout Markdown, JSON metrics for DVC) and seaborn figures.


rule table:
    input:
        cells=lambda wildcards: cell_paths(PARAMS.tables()[wildcards.table]["experiments"]),
    output:
        csv="results/{table}.csv",
        md="results/{table}.md",
        json="results/{table}.json",
    params:
        title=lambda wildcards: PARAMS.tables()[wildcards.table].get("title", wildcards.table),
    log:
        "results/logs/tables/{table}.log",
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench table {input.cells:q} --csv {output.csv} --md {output.md} --json {output.json} "
        "--title {params.title:q} > {log} 2>&1"


rule figure_rounds:
    input:
        cells=lambda wildcards: cell_paths([wildcards.experiment]),
    output:
        "results/figures/{experiment}_rounds.png",
    params:
        title=lambda wildcards: f"{SUITE} / {wildcards.experiment}: target test metric per round",
    log:
        "results/logs/figures/{experiment}_rounds.log",
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench figure rounds {input.cells:q} --output {output} --title {params.title:q} > {log} 2>&1"


rule figure_betas:
    input:
        cells=lambda wildcards: auto_cell_paths(wildcards.experiment),
    output:
        "results/figures/{experiment}_betas.png",
    params:
        title=lambda wildcards: f"{SUITE} / {wildcards.experiment}: auto-weighting β per source",
    log:
        "results/logs/figures/{experiment}_betas.log",
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench figure betas {input.cells:q} --output {output} --title {params.title:q} > {log} 2>&1"
