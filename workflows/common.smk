# Helpers only (no rules): the run grid is read from the registry and the config, and the
# config is checked against both before any job runs (the JSON schema checks its shape).
import os
import shlex
import sys

from snakemake.settings.types import DeploymentMethod

from dpmmbench import algorithms
from dpmmbench.algorithms.constraints import RUN_DEFAULTS, resolve_options
from dpmmbench.workflows._config import check_algorithms, check_values

#: one trace per run; {algorithm} is a registry name or a variant name
TRACE = "results/traces/{dataset}/{algorithm}/w{workers}/seed{seed}.parquet"

#: every rule's software (relative to this folder); used with --software-deployment-method conda
SOFTWARE_ENV = "envs/dpmmbench.yaml"
if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method:
    #: the interpreter of a job: the one on the PATH of the job's conda env ...
    PYTHON = "python"
    # ... whose env file installs the package from here (see the env file for why not a path)
    os.environ.update(DPMMBENCH_ROOT=workflow.basedir)
else:
    PYTHON = sys.executable  # ... or the one running Snakemake, which has the package installed


def selected_algorithms():
    """Registry names selected by the config's ``algorithms``: "all" (the suite's own samplers;
    peers, which fit some families only, are named, or run as variants on the datasets they
    fit) or a list (its names checked by ``check_config``)."""
    names = config["algorithms"]
    if names == "all":
        return [name for name in algorithms.available() if not algorithms.get(name).external]
    return list(names)


def variants():
    """The config's ``variants``: run name -> {algorithm, options, ...}."""
    return config.get("variants") or {}


def run_spec(name):
    """What the run called ``name`` (a registry name or a variant) is: its registry
    algorithm, options (the algorithm's ``options`` entry, then the variant's), datasets,
    iterations, time budget, alpha and alpha prior (the variant's, else the config's)."""
    variant = variants().get(name, {})
    algorithm = variant.get("algorithm", name)
    return {
        "algorithm": algorithm,
        "options": {**config.get("options", {}).get(algorithm, {}), **variant.get("options", {})},
        "datasets": variant.get("datasets", list(config["datasets"])),
        "iterations": variant.get("iterations", config["iterations"]),
        "time_budget": variant.get("time_budget", config.get("time_budget")),
        "alpha": variant.get("alpha", config.get("alpha", RUN_DEFAULTS["alpha"])),
        "alpha_prior": variant.get("alpha_prior", config.get("alpha_prior", RUN_DEFAULTS["alpha_prior"])),
    }


def worker_counts(name):
    """Worker counts a run is made with. A serial algorithm computes in one task whatever
    the cluster size, so it runs once, with the smallest count; an algorithm that shards
    its data (``supports_backend``) runs with every count of ``dask.workers`` (or of the
    variant's own ``workers``)."""
    counts = variants().get(name, {}).get("workers", config.get("dask", {}).get("workers", RUN_DEFAULTS["workers"]))
    counts = sorted(counts) if isinstance(counts, list) else [counts]
    return counts if algorithms.get(run_spec(name)["algorithm"]).supports_backend else counts[:1]


def run_names():
    """Every algorithm column of the grid: the selected registry names, then the variants."""
    return selected_algorithms() + list(variants())


def trace_paths():
    """Every trace of the grid."""
    return [
        TRACE.format(dataset=dataset, algorithm=name, workers=workers, seed=seed)
        for name in run_names()
        for dataset in run_spec(name)["datasets"]
        for workers in worker_counts(name)
        for seed in config["seeds"]
    ]


def run_threads(wildcards):
    """Cores a run job claims: its embedded cluster's workers x threads, or one core for a
    job that only drives an existing cluster."""
    if config.get("dask", {}).get("scheduler"):
        return 1
    return int(wildcards.workers) * config.get("dask", {}).get("threads", RUN_DEFAULTS["threads"])


def run_args(wildcards, input):
    """The ``dpmmbench run`` arguments of one run, shell-quoted (seed, workers and output
    come from the wildcards; a preprocessed dataset file from the input)."""
    spec = run_spec(wildcards.algorithm)
    dask = config.get("dask", {})
    args = ["--algorithm", spec["algorithm"], "--dataset", config["datasets"][wildcards.dataset],
            "--iterations", spec["iterations"], "--alpha", spec["alpha"],
            "--init-clusters", config.get("init_clusters", RUN_DEFAULTS["init_clusters"]),
            "--threads", dask.get("threads", RUN_DEFAULTS["threads"])]
    for flag, key in (("--test-fraction", "test_fraction"), ("--split-seed", "split_seed"),
                      ("--heldout-draws", "heldout_draws")):
        args += [flag, config.get(key, RUN_DEFAULTS[key])]
    if spec["alpha_prior"] is not None:
        args += ["--alpha-prior", *spec["alpha_prior"]]
    if spec["time_budget"] is not None:
        args += ["--time-budget", spec["time_budget"]]
    if wildcards.algorithm != spec["algorithm"]:
        args += ["--name", wildcards.algorithm]
    if input.data:
        args += ["--data-file", input.data]
    if dask.get("scheduler"):
        args += ["--scheduler", dask["scheduler"]]
    for key, value in spec["options"].items():
        args += ["--option", f"{key}={value}"]
    return " ".join(shlex.quote(str(a)) for a in args)


def target_tolerance_args():
    """``--target-tolerance F`` for ``summarize`` and ``report`` when the config sets
    ``target_tolerance`` (else nothing: the code's default)."""
    if "target_tolerance" not in config:
        return ""
    return f"--target-tolerance {shlex.quote(repr(float(config['target_tolerance'])))}"


def check_config():
    """Stop before any job on what the schema cannot see: unknown algorithm names and
    optional peers that are not installed (``check_algorithms``: one line, naming each
    missing peer and the command that installs it), run parameters outside their declared
    constraints (NaN, infinity, an integral float), dataset names that do not parse or whose
    known size is below init_clusters (``check_values``), unknown option names and bad
    option values (each message names the culprit), variants that clash with a registry
    name or name an unknown dataset key, an empty grid."""
    check_algorithms(config)
    check_values(config)
    known = algorithms.available() + list(algorithms.missing())  # every registry name, installed or not
    for name, variant in variants().items():
        # a peer left out of "all" may be a variant of its own name (e.g. run on some datasets only)
        if name in known and (variant["algorithm"] != name or name in selected_algorithms()):
            raise ValueError(f"config 'variants': {name!r} is a registry algorithm; give the variant another name")
        missing = [d for d in variant.get("datasets", []) if d not in config["datasets"]]
        if missing:
            raise ValueError(f"config 'variants': {name}: unknown dataset key(s) {missing}; "
                             f"the config's datasets are {list(config['datasets'])}")
    names = run_names()
    if not names:
        raise ValueError("config selects no run: 'algorithms' is empty and there are no 'variants'")
    for name in names:
        spec = run_spec(name)
        cls = algorithms.get(spec["algorithm"])
        where = f"config 'variants': {name}" if name in variants() else f"config 'options': {name}"
        try:
            resolve_options(cls.name, cls.options, spec["options"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None


check_config()
