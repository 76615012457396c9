# Prior sensitivity (docs/design.md "Default priors"): the config's `priors` block runs as one
# job that writes results/priors.csv, which the report shows. `shell:` + `python -m`, never
# `script:` (as run.smk). Without a `priors` block there is no rule and no section.
import json
import os
import shlex

from dpmmbench.workflows.scripts.prior_sensitivity import check_spec

if config.get("priors"):
    check_spec(config["priors"])  # a bad block stops the workflow before any job

#: the prior-sensitivity table, or nothing when the config has no `priors` block
PRIORS_CSV = ["results/priors.csv"] if config.get("priors") else []
PRIORS_DATASETS = list(((config.get("priors") or {}).get("datasets") or {}).values())
#: raw-data manifests of the downloaded datasets the experiment reads (fetched first)
PRIORS_MANIFESTS = sorted({
    RAW_MANIFEST.format(source=builder.name)
    for builder in (resolve_dataset(entry["dataset"])[0] for entry in PRIORS_DATASETS)
    if builder.fetch is not None
})


if PRIORS_CSV:

    rule prior_sensitivity:
        input:
            PRIORS_MANIFESTS,
        output:
            PRIORS_CSV[0],
        log:
            "logs/priors.log",
        threads: 1
        params:
            python=PYTHON,
            spec=json.dumps(config["priors"]),
            # the data folder, from where the manifests are (DATA_DIR when nothing is fetched)
            data_dir=lambda wc, input: os.path.dirname(os.path.dirname(input[0])) if input else DATA_DIR,
        conda:
            SOFTWARE_ENV
        shell:
            "DPMMBENCH_DATA={params.data_dir:q} NUMBA_NUM_THREADS={threads} OMP_NUM_THREADS={threads}"
            " {params.python} -m dpmmbench.workflows.scripts.prior_sensitivity --config-json {params.spec:q}"
            " --out {output:q} > {log} 2>&1"
