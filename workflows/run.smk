wildcard_constraints:
    dataset=r"[A-Za-z0-9_.-]+",
    name=r"[a-z0-9-]+",
    workers=r"\d+",
    seed=r"\d+",


# One Dask cluster for the whole workflow (docs/design.md "Dask clusters"): before the first
# job, the run service (workflows/service.py) starts it, sized from --cores and the config's
# dask block, or connects to dask.scheduler / dask.scheduler_file (an existing cluster, never
# stopped); it stops on success and on failure here, and by itself when Snakemake is gone
# (Ctrl-C and a kill call neither hook).
onstart:
    start_run_service()


onsuccess:
    stop_run_service()


onerror:
    stop_run_service()


# One run per job. The job hands the run's spec, built from the config (workflows/_config.py
# `run_spec`), as JSON to the run service ($DPMMBENCH_SERVICE) through
# workflows/service_client.py, which imports only the standard library; the service runs it on
# workers reserved for it while it computes, which is why the job still claims workers x
# threads cores (a -2w run takes both of two cores and runs alone). Without the service
# (--no-hooks, conda) the job is `dpmmbench run --spec`, which starts a cluster of its own. Its
# trace records `dpmmbench run --spec JSON --out PATH` either way. `shell:` + `python -m`,
# never `script:` (see docs/design.md "Dask clusters": spawned Dask workers re-import a
# `script:` file without its `snakemake` object). The benchmark file is Snakemake's own
# measure of the job's wall time.
rule run_chain:
    input:
        # a downloaded dataset is fetched and preprocessed once (workflows/data.smk)
        data=lambda wc: PROCESSED_DATASETS[wc.dataset],
    output:
        TRACE,
    log:
        "logs/run/{dataset}/{name}/w{workers}/seed{seed}.log",
    benchmark:
        "results/jobs/{dataset}/{name}/w{workers}/seed{seed}.tsv"
    threads: run_threads
    # runs on several workers first, while every core is free: later, one waits for a second
    # core to come free while the first idles (data jobs have priority 10)
    priority: lambda wc: 20 if int(wc.workers) > 1 else 0
    params:
        args=job_args,
        python=PYTHON,
    conda:
        SOFTWARE_ENV
    shell:
        "{params.python} {params.args} --out {output} > {log} 2>&1"


# Statistics over the chains of each (dataset, run name, workers), and one row per run beside
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
