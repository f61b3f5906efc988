# Training: one job per (suite, experiment, method, target, seed) cell. The cell's resolved configuration
# is a rule parameter, so editing params.yaml reruns exactly the cells whose configuration changed.


rule train:
    input:
        prepared=lambda wildcards: PARAMS.prepared_path(wildcards.experiment),
        partition=pattern("PARTITION"),
    output:
        pattern("CELL"),
    params:
        cell=cell_config,
    threads: PARAMS.threads_per_cell
    resources:
        gpu=1 if USES_GPU else 0,
    log:
        log("train"),
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench train --cell {params.cell:q} --prepared {input.prepared} --partition {input.partition} "
        "--output {output} --threads {threads} > {log} 2>&1"
