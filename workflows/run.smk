wildcard_constraints:
    dataset=r"[A-Za-z0-9_.-]+",
    algorithm=r"[a-z0-9-]+",
    seed=r"\d+",


rule run_chain:
    output:
        "results/traces/{dataset}/{algorithm}/seed{seed}.parquet",
    log:
        "logs/run/{dataset}/{algorithm}/seed{seed}.log",
    params:
        dataset=lambda wc: config["datasets"][wc.dataset],
        options=option_args,
        budget=lambda wc: f"--time-budget {config['time_budget']}" if "time_budget" in config else "",
    threads: 1
    shell:
        "{PYTHON} -m workflows.cli run --algorithm {wildcards.algorithm} --dataset '{params.dataset}'"
        " --iterations {config[iterations]} --seed {wildcards.seed} --alpha {config[alpha]}"
        " --init-clusters {config[init_clusters]} {params.budget} {params.options}"
        " --no-progress --out {output} > {log} 2>&1"


rule summary:
    input:
        trace_paths(),
    output:
        "results/summary.csv",
    log:
        "logs/summary.log",
    shell:
        "{PYTHON} -m workflows.cli summarize {input} --out {output} > {log} 2>&1"
