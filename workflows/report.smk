# The HTML comparison report: every trace of the grid in one self-contained file.
import json
import shlex


rule report:
    input:
        traces=trace_paths(),
        summary="results/summary.csv",
        priors=PRIORS_CSV,  # the prior-sensitivity table when the config asks for it (priors.smk)
    output:
        "results/report/index.html",
    log:
        "logs/report.log",
    params:
        python=PYTHON,
        # the effective config (config files + --config overrides), shown in the report
        config=lambda wc: json.dumps(config),
        priors=" ".join(f"--priors {shlex.quote(path)}" for path in PRIORS_CSV),
        tolerance=target_tolerance_args(),
    conda:
        SOFTWARE_ENV
    shell:
        "{params.python} -m dpmmbench.workflows.cli report {input.traces} --config-json {params.config:q}"
        " {params.priors} {params.tolerance} --out {output} > {log} 2>&1"
