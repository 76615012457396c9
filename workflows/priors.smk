# Prior sensitivity (docs/design.md "Default priors"): the config's `priors` block runs as one
# job that writes results/priors.csv, which the report shows. `shell:` + `python -m`, never
# `script:` (as run.smk). Without a `priors` block there is no rule and no section.
import json
import shlex

from dpmmbench.workflows.scripts.prior_sensitivity import check_spec

#: the prior-sensitivity table, or nothing when the config has no `priors` block
PRIORS_CSV = ["results/priors.csv"] if config.get("priors") else []


def priors_manifests():
    """Raw-data manifests of the downloaded datasets the experiment reads (fetched first)."""
    builders = (resolve_dataset(entry["dataset"])[0] for entry in config["priors"]["datasets"].values())
    return sorted({RAW_MANIFEST.format(source=b.name) for b in builders if b.fetch is not None})


if PRIORS_CSV:
    check_spec(config["priors"])  # a bad block stops the workflow before any job

    rule prior_sensitivity:
        input:
            priors_manifests(),
        output:
            PRIORS_CSV[0],
        log:
            "logs/priors.log",
        threads: 1
        params:
            python=PYTHON,
            spec=json.dumps(config["priors"]),
            data_dir=DATA_DIR,
        conda:
            SOFTWARE_ENV
        shell:
            "DPMMBENCH_DATA={params.data_dir:q} NUMBA_NUM_THREADS={threads} OMP_NUM_THREADS={threads}"
            " {params.python} -m dpmmbench.workflows.scripts.prior_sensitivity --config-json {params.spec:q}"
            " --out {output:q} > {log} 2>&1"
