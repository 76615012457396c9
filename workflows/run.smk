wildcard_constraints:
    dataset=r"[A-Za-z0-9_.-]+",
    algorithm=r"[a-z0-9-]+",
    workers=r"\d+",
    seed=r"\d+",


# One run per job. The job reaches Dask through workflows/cluster.py: the config's
# dask.scheduler (or $DASK_SCHEDULER_ADDRESS), else a LocalCluster of its own, which is why
# it claims workers x threads cores. `shell:` + `python -m`, never `script:` (see
# docs/design.md "Dask clusters": spawned Dask workers re-import a `script:` file without its `snakemake` object).
rule run_chain:
    input:
        # a downloaded dataset is fetched and preprocessed once (workflows/data.smk)
        data=lambda wc: PROCESSED_DATASETS[wc.dataset],
    output:
        TRACE,
    log:
        "logs/run/{dataset}/{algorithm}/w{workers}/seed{seed}.log",
    threads: run_threads
    params:
        args=run_args,
        python=PYTHON,
    conda:
        SOFTWARE_ENV
    shell:
        "{params.python} -m dpmmbench.workflows.cli run {params.args} --seed {wildcards.seed}"
        " --workers {wildcards.workers} --no-progress --out {output} > {log} 2>&1"


# Statistics over the chains of each (dataset, algorithm, workers), and one row per run beside
# them (docs/design.md "Summary columns").
rule summary:
    input:
        trace_paths(),
    output:
        summary="results/summary.csv",
        runs="results/runs.csv",
    log:
        "logs/summary.log",
    params:
        python=PYTHON,
        tolerance=target_tolerance_args(),
    conda:
        SOFTWARE_ENV
    shell:
        "{params.python} -m dpmmbench.workflows.cli summarize {input} --out {output.summary}"
        " --runs {output.runs} {params.tolerance} > {log} 2>&1"
