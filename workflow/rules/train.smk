# Training: one job per (suite, experiment, method, target, seed) cell, named by the cell. The job reads the cell's
# resolved configuration and code fingerprint from its plan file (fdabench.jobs.cell_plan); the plan's digest is a
# rule parameter, so editing params.yaml, or code the cell depends on, reruns exactly the cells affected.


rule train:
    input:
        prepared=lambda wildcards: prepared_path(wildcards.experiment),
        partition=pattern("PARTITION"),
        plan=cell_plan_file,
        rerun=rerun_marker,
    output:
        # per cell in the report: no caption (a caption's links grow with the number of items; thousands of
        # cells would take minutes), its facts as labels instead
        # update: a rerun keeps the finished cell in place until the new one is complete, and Snakemake
        # restores it when the rerun fails (the file records what it was computed with: fdabench.jobs.status)
        report(update(pattern("CELL")), category="Cells", subcategory="{experiment}", labels=cell_labels),
    params:
        cell=cell_name,
        plan=cell_plan_digest,
    threads: PARAMS.value("threads_per_cell")
    resources:
        gpu=uses_gpu,
        # params.yaml `gpus`: the GPU the cell is pinned to (a string: not a counted resource), and one unit of
        # that GPU's own resource gpu_<index>
        cuda_device=cell_gpu,
        **GPU_RESOURCES,
        # a resource, not a parameter: how often a cell saves its state does not change its result, so
        # changing it reruns nothing
        checkpoint_every=PARAMS.value("checkpoint_every"),
        # params.yaml `device`, recorded in the cell's configuration by the job; a resource, so a setting that asks for
        # the device a cell ran on reruns nothing (fdabench.core.device_identity)
        device_setting=DEVICE,
        # per experiment (params.yaml `resources`): what a cluster scheduler is asked for
        runtime=lambda wildcards: experiment_resources(wildcards.experiment)["runtime"],
        mem_mb=lambda wildcards: experiment_resources(wildcards.experiment)["mem_mb"],
    log:
        log("train"),
    conda:
        "../envs/fdabench.yaml"
    shell:
        f"fdabench train --plan {job_pattern('CELL_PLAN')} "
        "--prepared {input.prepared:q} --partition {input.partition:q} "
        "--output {output:q} --threads {threads} --checkpoint-every {resources.checkpoint_every} "
        "--pin-gpu {resources.cuda_device} --device {resources.device_setting} > {log:q} 2>&1"
