# Data: raw datasets (mirror or explicit download) -> prepared arrays -> one partition per (experiment,
# target, seed). Embedded datasets need no raw data. The data rules run where Snakemake runs, also with a
# cluster executor (`localrule`): they read the mirror and write the shared data folder.


rule acquire:
    output:
        directory(pattern("RAW")),
    params:
        root=lambda wildcards, output: os.path.dirname(output[0]),
        mirror=quoted_option("--mirror", PARAMS.value("mirror")),
        download="--download" if PARAMS.value("download") else "",
    localrule: True
    log:
        log("acquire"),
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench acquire --raw {wildcards.raw:q} --root {params.root:q} {params.mirror} {params.download} > {log:q} 2>&1"


rule prepare:
    input:
        raw=lambda wildcards: PARAMS.raw_paths(wildcards.dataset, prepared_options(wildcards)),
    output:
        directory(pattern("PREPARED")),
    params:
        options=lambda wildcards: canonical_json(prepared_options(wildcards)),
        code=prepare_code,
        raw_root=lambda wildcards, output: os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(output[0]))), "raw"),
    threads: 2
    resources:
        mem_mb=8000,
        runtime=120,
    localrule: True
    log:
        log("prepare"),
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench prepare --dataset {wildcards.dataset:q} --options {params.options:q} --raw-root {params.raw_root:q} "
        "--output {output:q} --threads {threads} > {log:q} 2>&1"


rule partition:
    input:
        prepared=lambda wildcards: prepared_path(wildcards.experiment),
    output:
        pattern("PARTITION"),
    params:
        partitioner=lambda wildcards: PARAMS.partitioner(wildcards.experiment),
        options=lambda wildcards: canonical_json(PARAMS.partition_options(wildcards.experiment)),
        code=partition_code,
    localrule: True
    log:
        log("partition"),
    conda:
        "../envs/fdabench.yaml"
    shell:
        "fdabench partition --prepared {input.prepared:q} --target={wildcards.target:q} --seed {wildcards.seed} "
        "--partitioner {params.partitioner:q} --options {params.options:q} --output {output:q} > {log:q} 2>&1"
