# Report: cells -> tables (tidy CSV, paper-layout Markdown, JSON metrics for DVC) and seaborn figures.
# Outputs are `update`: a rerun keeps the previous table or figure until the new one is written, and
# Snakemake restores it when the rerun fails (so the results/<name> links never dangle).

from fdabench.report.rst import built_from

# the report's landing page (workflow/report/workflow.rst) names the files the configuration was merged from
REPORT_BUILT_FROM = built_from(
    workflow.configfiles, workflow.overwrite_configfiles, workflow.config_settings.config, os.getcwd()
)


rule table:
    input:
        cells=lambda wildcards: cell_paths(PARAMS.tables()[wildcards.table]["experiments"]),
    output:
        csv=update(pattern("TABLE", ext="csv")),
        md=update(pattern("TABLE", ext="md")),
        json=update(pattern("TABLE", ext="json")),
        html=report(
            update(pattern("TABLE", ext="html")),
            caption="../report/table.rst",
            category="Tables",
            subcategory="{table}",
            labels={"table": "{table}", "view": "table"},
        ),
    params:
        title=table_title,
        caption_title=caption_text(table_title),
        metrics=lambda wildcards: shlex.join(["--metrics", *PARAMS.tables()[wildcards.table]["metrics"]]) if "metrics" in PARAMS.tables()[wildcards.table] else "",
    log:
        log("table"),
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench table {input.cells:q} --csv {output.csv:q} --md {output.md:q} --json {output.json:q} --html {output.html:q} "
        "--title {params.title:q} {params.metrics} > {log:q} 2>&1"


rule figure_rounds:
    input:
        cells=lambda wildcards: cell_paths([wildcards.experiment]),
    output:
        report(
            update(pattern("ROUNDS_FIGURE")),
            caption="../report/rounds.rst",
            category="Figures",
            subcategory="Per round",
            labels={"experiment": "{experiment}", "figure": "target metric per round"},
        ),
    params:
        title=rounds_title,
        caption_title=caption_text(rounds_title),
        methods=METHOD_FAMILIES,
    log:
        log("figure_rounds"),
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench figure rounds {input.cells:q} --output {output:q} --title {params.title:q} --methods {params.methods:q} "
        "> {log:q} 2>&1"


rule figure_table:
    input:
        cells=lambda wildcards: cell_paths(PARAMS.tables()[wildcards.table]["experiments"]),
    output:
        report(
            update(pattern("TABLE_FIGURE")),
            caption="../report/table_figure.rst",
            category="Tables",
            subcategory="{table}",
            labels={"table": "{table}", "view": "at a glance (figure)"},
        ),
    params:
        title=table_title,
        caption_title=caption_text(table_title),
        methods=METHOD_FAMILIES,
    log:
        log("figure_table"),
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench figure final {input.cells:q} --output {output:q} --title {params.title:q} --methods {params.methods:q} "
        "> {log:q} 2>&1"


rule figure_betas:
    input:
        cells=lambda wildcards: auto_cell_paths(wildcards.experiment),
    output:
        report(
            update(pattern("BETAS_FIGURE")),
            caption="../report/betas.rst",
            category="Figures",
            subcategory="Auto-weighting β",
            labels={"experiment": "{experiment}", "figure": "β per source and round"},
        ),
    params:
        title=betas_title,
        caption_title=caption_text(betas_title),
    log:
        log("figure_betas"),
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench figure betas {input.cells:q} --output {output:q} --title {params.title:q} > {log:q} 2>&1"


rule theory_init:
    input:
        prepared=lambda wildcards: prepared_path(wildcards.experiment),
        partition=pattern("PARTITION"),
    output:
        update(pattern("THEORY_INIT")),
    params:
        cell=theory_cell_config,
        code=theory_code,
        beta=lambda wildcards: theory_check_of(wildcards.experiment)[1],
        draws=lambda wildcards: theory_check_of(wildcards.experiment)[2],
    threads: PARAMS.value("threads_per_cell")
    resources:
        runtime=lambda wildcards: experiment_resources(wildcards.experiment)["runtime"],
        mem_mb=lambda wildcards: experiment_resources(wildcards.experiment)["mem_mb"],
    log:
        log("theory_init"),
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench theory init --cell {params.cell:q} --prepared {input.prepared:q} --partition {input.partition:q} "
        "--beta {params.beta} --draws {params.draws} --threads {threads} --output {output:q} > {log:q} 2>&1"


rule theory_report:
    input:
        initial=lambda wildcards: theory_init_paths(wildcards.check),
        cells=lambda wildcards: theory_cell_paths(wildcards.check),
    output:
        csv=update(pattern("THEORY_REPORT", ext="csv")),
        md=update(pattern("THEORY_REPORT", ext="md")),
        png=report(
            update(pattern("THEORY_REPORT", ext="png")),
            caption="../report/theory.rst",
            category="Theory checks",
            labels={"check": "{check}"},
        ),
    params:
        roles=lambda wildcards: canonical_json(PARAMS.theory_roles(wildcards.check)),
        title=theory_title,
        caption_title=caption_text(theory_title),
    log:
        log("theory_report"),
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench theory report --initial {input.initial:q} --cells {input.cells:q} --roles {params.roles:q} "
        "--csv {output.csv:q} --md {output.md:q} --png {output.png:q} --title {params.title:q} > {log:q} 2>&1"


rule figure_final:
    input:
        cells=lambda wildcards: cell_paths(PARAMS.figures()[wildcards.figure]["experiments"]),
    output:
        report(
            update(pattern("FIGURE")),
            caption="../report/sweep.rst",
            category="Figures",
            subcategory="Sweeps",
            labels={"figure": "{figure}"},
        ),
    params:
        kind=lambda wildcards: PARAMS.figures()[wildcards.figure]["kind"],
        title=figure_title,
        caption_title=caption_text(figure_title),
        methods=METHOD_FAMILIES,
    log:
        log("figure"),
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench figure {params.kind:q} {input.cells:q} --output {output:q} --title {params.title:q} "
        "--methods {params.methods:q} > {log:q} 2>&1"


rule metrics:
    input:
        tables=lambda wildcards: [suite_pattern("TABLE", table=table, ext="json") for table in PARAMS.tables()],
    output:
        update(pattern("METRICS")),
    log:
        log("metrics"),
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench metrics {input.tables:q} --output {output:q} > {log:q} 2>&1"


rule cells_table:
    input:
        cells=lambda wildcards: cell_paths([wildcards.experiment]),
    output:
        report(
            update(pattern("CELLS_TABLE")),
            caption="../report/cells_table.rst",
            category="Cells",
            subcategory="{experiment} · table",
            labels={"cell": "all cells of {experiment}"},
        ),
    params:
        title=lambda wildcards: f"{SUITE} / {wildcards.experiment}: every cell",
    log:
        log("cells_table"),
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench cells-table {input.cells:q} --html {output:q} --title {params.title:q} > {log:q} 2>&1"


rule dvc_plots:
    input:
        cells=cell_paths(PARAMS.experiment_names()),
    output:
        rounds=directory(pattern("PLOTS_ROUNDS")),
        betas=directory(pattern("PLOTS_BETAS")),
    log:
        log("dvc_plots"),
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench plots {input.cells:q} --rounds {output.rounds:q} --betas {output.betas:q} > {log:q} 2>&1"


# each cell's final metrics and per-round series as DVCLive writes them, for `dvc exp show` and `dvc plots show`
rule dvclive:
    input:
        cells=cell_paths(PARAMS.experiment_names()),
    output:
        directory(pattern("DVCLIVE")),
    log:
        log("dvclive"),
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench export dvclive {input.cells:q} --output {output:q} > {log:q} 2>&1"


# every table's cells: the published rows are compared, and every method is ranked over the suite's tables
rule paper_vs_ours:
    input:
        cells=lambda wildcards: cell_paths(
            list(
                dict.fromkeys(
                    PARAMS.published_experiments()
                    + [exp for spec in PARAMS.tables().values() for exp in spec["experiments"]]
                )
            )
        ),
    output:
        csv=update(pattern("PAPER_VS_OURS", ext="csv")),
        md=update(pattern("PAPER_VS_OURS", ext="md")),
        html=report(update(pattern("PAPER_VS_OURS", ext="html")), caption="../report/paper_vs_ours.rst", category="Paper vs ours"),
    log:
        log("paper_vs_ours"),
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench compare {input.cells:q} --csv {output.csv:q} --md {output.md:q} --html {output.html:q} > {log:q} 2>&1"


# A sweep read with each selection rule (fdabench.report.sweep): tables with both intervals, chosen settings, warnings,
# paired and Bayesian tests, average ranks and diagrams, and every rule side by side; from the sweep's cells alone.
if PARAMS.sweep():

    rule sweep:
        input:
            cells=lambda wildcards: cell_paths(PARAMS.experiment_names()),
        output:
            [
                report(update(path), caption="../report/sweep_rule.rst", category="Sweep", labels={"file": os.path.basename(path)})
                if path.endswith((".html", ".png"))
                else update(path)
                for path in sweep_outputs()
            ],
        params:
            rules=shlex.join(PARAMS.sweep()["rules"]),
            reference=quoted_option("--reference", PARAMS.sweep().get("reference")),
            early_stopping="--early-stopping" if PARAMS.sweep()["early_stopping"] else "",
            suite=SUITE,
            rope=PARAMS.sweep()["rope"],
            min_validation=PARAMS.sweep()["min_validation"],
        log:
            paths.fill(log("sweep"), suite=SUITE),
        conda:
            "../envs/fdabench.yaml"
        shell:
            "fdabench sweep {input.cells:q} --suite {params.suite:q} --rules {params.rules} {params.reference} "
            "{params.early_stopping} --rope {params.rope} --min-validation {params.min_validation} > {log:q} 2>&1"


wildcard_constraints:
    view=_alternatives(VIEWS),


# results/<name> links to results/<suite>/<name> of the active suite: the suite is a parameter, so switching
# suites re-points the links (each suite's own files are never overwritten).
rule view:
    input:
        view_source,
    output:
        paths.VIEW,
    params:
        suite=SUITE,
        target=lambda wildcards: paths.active_view(VIEWS[wildcards.view], SUITE)[1],
    localrule: True
    log:
        log("view"),
    conda:
        "../envs/fdabench.yaml"
    shell:
        "ln -sfn {params.target:q} {output:q} > {log:q} 2>&1"
