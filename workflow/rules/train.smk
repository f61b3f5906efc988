# Training: one job per cell (params.yaml `cells_per_job: cell`), or one job per (suite, experiment, method, seed)
# that trains the experiment's targets together in one process (`cells_per_job: targets`, fdabench train-group).
# Either way each cell is its own output, with its own plan, rerun marker and log: the job reads each cell's
# resolved configuration and code fingerprint from its plan file (fdabench.jobs.cell_plan), and the plans' digests
# are rule parameters, so editing params.yaml, or code a cell depends on, reruns exactly the jobs of the cells
# affected; a group job then trains only its cells that are not finished with today's plan and code.


if CELLS_PER_JOB == "cell":

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
            # params.yaml `device`, recorded in the cell's configuration by the job; a resource, so a setting that
            # asks for the device a cell ran on reruns nothing (fdabench.core.device_identity)
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


else:
    # One rule per experiment (its targets fix the outputs), the method and seed as wildcards: the same resources
    # and files as `train` above, one entry per cell (the cells in the experiment's target order).
    for group in training_groups():

        rule:
            name:
                group.rule
            input:
                prepared=group.prepared,
                partition=group.partitions,
                plan=group.plan_files,
                rerun=group.rerun_markers,
            output:
                [
                    report(update(path), category="Cells", subcategory=group.experiment, labels=group.labels(index))
                    for index, path in enumerate(group.outputs)
                ],
            params:
                cells=group.cell_names,
                plans=group.plan_digests,
                plan_files=group.plan_paths,
            threads: PARAMS.value("threads_per_cell")
            resources:
                gpu=uses_gpu,
                cuda_device=group.gpu,
                **group.gpu_resources,
                checkpoint_every=PARAMS.value("checkpoint_every"),
                device_setting=DEVICE,
                # a job trains len(targets) cells one after the other: the scheduler is asked for their time
                runtime=group.runtime,
                mem_mb=group.mem_mb,
            log:
                **group.logs,
            conda:
                "../envs/fdabench.yaml"
            shell:
                "fdabench train-group --plan {params.plan_files:q} --prepared {input.prepared:q} "
                "--partition {input.partition:q} --output {output:q} --log {log.cells:q} --threads {threads} "
                "--checkpoint-every {resources.checkpoint_every} --pin-gpu {resources.cuda_device} "
                "--device {resources.device_setting} > {log.job:q} 2>&1"
