# Datasets: fetch the raw files of a registry dataset (downloaded, sha256-verified, written
# atomically into the data folder) and preprocess a configured dataset into an .npz that loads
# without pickle (PCA-50 image sets and subsets, pruned corpora). Both are thin calls of
# `python -m dpmmbench.datasets`. A source that cannot be reached fails only its own jobs, with a
# message saying what to download and where to put it (run with --keep-going to finish the rest).
import os
import re

from dpmmbench.datasets.registry import builders as dataset_builders
from dpmmbench.datasets.registry import resolve as resolve_dataset

# the data folder: config `data_dir`, else $DPMMBENCH_DATA, else data/raw (as the package's cache)
DATA_DIR = str(config.get("data_dir", os.environ.get("DPMMBENCH_DATA", "data/raw")))
# registry datasets whose raw files must be fetched; one manifest ("sha256  file" lines) each
FETCHED_DATASETS = sorted(n for n, b in dataset_builders().items() if b.fetch is not None)
RAW_MANIFEST = os.path.join(DATA_DIR, "manifests", "{source}.sha256")
# config dataset key -> manifest of its raw files ([] for generated or bundled data)
RAW_MANIFESTS = {
    key: [RAW_MANIFEST.format(source=b.name)] if b.fetch is not None else []
    for key, b in ((key, resolve_dataset(name)[0]) for key, name in config["datasets"].items())
}
# config dataset key -> its preprocessed .npz, [] for generated data (cheaper to regenerate):
# the input a rule that reads a configured dataset depends on
PROCESSED_DATASETS = {
    key: [f"data/processed/{key}.npz"] if manifest else [] for key, manifest in RAW_MANIFESTS.items()
}


rule fetch_dataset:
    output:
        RAW_MANIFEST,
    log:
        "logs/fetch/{source}.log",
    wildcard_constraints:
        source="|".join(re.escape(n) for n in FETCHED_DATASETS),
    retries: 2
    # data first: no run of the shared cluster's run phase waits behind a download
    priority: 10
    params:
        python=PYTHON,
        data_dir=lambda wc, output: os.path.dirname(os.path.dirname(output[0])),
    conda:
        SOFTWARE_ENV
    shell:
        "DPMMBENCH_DATA={params.data_dir:q} {params.python} -m dpmmbench.datasets fetch {wildcards.source}"
        " --manifest {output:q} > {log} 2>&1"


rule preprocess_dataset:
    input:
        lambda wc: RAW_MANIFESTS[wc.dataset],
    output:
        "data/processed/{dataset}.npz",
    log:
        "logs/preprocess/{dataset}.log",
    wildcard_constraints:
        dataset="|".join(re.escape(k) for k in config["datasets"]),
    priority: 10
    params:
        python=PYTHON,
        name=lambda wc: config["datasets"][wc.dataset],
        data_dir=DATA_DIR,
    conda:
        SOFTWARE_ENV
    shell:
        "DPMMBENCH_DATA={params.data_dir:q} {params.python} -m dpmmbench.datasets preprocess {params.name:q}"
        " --out {output:q} > {log} 2>&1"


rule prepare_datasets:
    """Fetch and preprocess every configured dataset that needs a download (`snakemake prepare_datasets`)."""
    input:
        [path for paths in PROCESSED_DATASETS.values() for path in paths],
