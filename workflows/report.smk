# The HTML comparison report: every trace of the grid in one self-contained file.
import json


rule report:
    input:
        traces=trace_paths(),
        summary="results/summary.csv",
    output:
        "results/report/index.html",
    log:
        "logs/report.log",
    params:
        python=PYTHON,
        # the effective config (config files + --config overrides), shown in the report
        config=lambda wc: json.dumps(config),
    conda:
        SOFTWARE_ENV
    shell:
        "{params.python} -m dpmmbench.workflows.cli report {input.traces} --config-json {params.config:q}"
        " --out {output} > {log} 2>&1"
