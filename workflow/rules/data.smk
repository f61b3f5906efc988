# Data: embedded / generated / raw datasets -> prepared arrays -> one partition per (experiment, target, seed).


rule prepare:
    output:
        directory(f"{DATA}/prepared/{{dataset}}"),
    params:
        options=lambda wildcards: canonical_json(PARAMS.dataset_options(wildcards.dataset)),
        mirror=f"--mirror {PARAMS.mirror}" if PARAMS.mirror else "",
    log:
        "results/logs/prepare/{dataset}.log",
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench prepare --dataset {wildcards.dataset} --options {params.options:q} {params.mirror} "
        "--output {output} > {log} 2>&1"


rule partition:
    input:
        prepared=lambda wildcards: PARAMS.prepared_path(dataset_of(wildcards.experiment)),
    output:
        f"{DATA}/partitions/{{suite}}/{{experiment}}/{{target}}/seed{{seed}}.json",
    params:
        options=lambda wildcards: canonical_json(PARAMS.partition_options(wildcards.experiment)),
    log:
        "results/logs/partition/{suite}/{experiment}/{target}/seed{seed}.log",
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench partition --prepared {input.prepared} --target={wildcards.target:q} --seed {wildcards.seed} "
        "--options {params.options:q} --output {output} > {log} 2>&1"
