# Helpers only (no rules): the run grid is read from the registry and the config, and the
# config is checked against both before any job runs (the JSON schema checks its shape).
import os
import shlex
import sys

from snakemake.exceptions import WorkflowError
from snakemake.settings.types import DeploymentMethod

from dpmmbench import algorithms
from dpmmbench.algorithms.constraints import RUN_DEFAULTS
from dpmmbench.workflows import _config, service
from dpmmbench.workflows.cluster import scheduler_file_address
from dpmmbench.workflows.service_client import SERVICE_VARIABLE

#: one trace per run, in a folder named by its grid column: a registry name or a variants key
#: (the run's name, docs/design.md "Traces and runs", unless the config changes its options)
TRACE = "results/traces/{dataset}/{name}/w{workers}/seed{seed}.parquet"

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
    """Registry names selected by the config's ``algorithms`` (``_config.selected_algorithms``)."""
    return _config.selected_algorithms(config)


def variants():
    """The config's ``variants``: run name -> {algorithm, options, ...}."""
    return _config.variants(config)


def run_column(name, dataset=None):
    """What the grid's column ``name`` is (on ``dataset``: with its time budget; ``_config.run_column``)."""
    return _config.run_column(config, name, dataset)


def worker_counts(name):
    """Worker counts a run is made with. A serial algorithm computes in one task whatever
    the cluster size, so it runs once, with the smallest count; an algorithm that shards
    its data (``supports_backend``) runs with every count of ``dask.workers`` (or of the
    variant's own ``workers``)."""
    counts = variants().get(name, {}).get("workers", config.get("dask", {}).get("workers", RUN_DEFAULTS["workers"]))
    counts = sorted(counts) if isinstance(counts, list) else [counts]
    return counts if algorithms.get(run_column(name)["algorithm"]).supports_backend else counts[:1]


def run_names():
    """Every run name of the grid: the selected registry names, then the variants' keys."""
    return _config.run_names(config)


def trace_paths():
    """Every trace of the grid."""
    return [
        TRACE.format(dataset=dataset, name=name, workers=workers, seed=seed)
        for name in run_names()
        for dataset in run_column(name)["datasets"]
        for workers in worker_counts(name)
        for seed in run_column(name)["seeds"]
    ]


def run_threads(wildcards):
    """Cores a run job claims: the workers x threads it computes on (reserved for it on the
    workflow's cluster, or its own cluster's), or one core for a job that only drives an
    existing cluster."""
    dask = config.get("dask", {})
    if dask.get("scheduler") or dask.get("scheduler_file"):
        return 1
    return int(wildcards.workers) * dask.get("threads", RUN_DEFAULTS["threads"])


def service_workers():
    """Workers of the workflow's one cluster: one per ``threads`` of the cores Snakemake may
    use (so that every core a job claims has a worker to compute on), and at least as many as
    the largest run asks for (a ``-2w`` run on one core gets its two workers)."""
    threads = config.get("dask", {}).get("threads", RUN_DEFAULTS["threads"])
    largest = max((max(worker_counts(name)) for name in run_names()), default=1)
    try:
        cores = workflow.cores
    except WorkflowError:  # no --cores (e.g. a cluster executor): as many as the runs need
        cores = 0
    return max(cores // threads, largest, 1)


def with_run_service():
    """Whether the run jobs go through the workflow's run service. Not under
    ``--software-deployment-method conda`` (the jobs run in the env's own Python), nor with
    ``--no-hooks`` (no ``onstart``: how Snakemake runs a job spawned elsewhere), nor with an
    executor plugin that runs the jobs on other machines (e.g. SLURM): the service's socket
    is only reachable on this one. Those jobs each start a cluster of their own, as a single
    ``dpmmbench run`` does, or join the config's existing cluster."""
    return not (DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
                or workflow.execution_settings.no_hooks or workflow.non_local_exec)


def start_run_service():
    """``onstart``: start the workflow's run service (workflows/service.py, one Dask cluster for
    every run) when the DAG has runs to do and the jobs can reach it (:func:`with_run_service`),
    and point the run jobs at it through ``$DPMMBENCH_SERVICE``."""
    if not with_run_service():
        return
    if not any(job.rule.name == "run_chain" for job in workflow.dag.needrun_jobs()):
        return  # e.g. `snakemake prepare_datasets`, or only the report left to build: no cluster
    dask = config.get("dask", {})
    state = service.start(workers=service_workers(), threads=dask.get("threads", RUN_DEFAULTS["threads"]),
                          scheduler=dask.get("scheduler"), scheduler_file=dask.get("scheduler_file"))
    os.environ[SERVICE_VARIABLE] = state


def stop_run_service():
    """``onsuccess`` and ``onerror``: stop the run service and the cluster it started (an
    interrupted or killed Snakemake calls neither: the service then sees its parent end)."""
    state = os.environ.pop(SERVICE_VARIABLE, None)
    if state:
        service.stop(state)


def job_args(wildcards, input):
    """The run job's arguments but ``--out``, shell-quoted: the module that runs it and the
    run's spec as JSON (``_config.run_spec``, built and checked there; seed and workers come
    from the wildcards, a preprocessed dataset file from the input). Through the run service
    the job is ``workflows/service_client.py``, which hands the spec over as it is; on its own
    (:func:`with_run_service` false) it is ``dpmmbench run --spec``, which runs it on a
    cluster of its own or on the config's existing one."""
    dask = config.get("dask", {})
    scheduler = None
    if not dask.get("scheduler") and dask.get("scheduler_file") and not with_run_service():
        # a job on its own reads no scheduler file: it is given the address the file names
        # (read here, when the job is made: the cluster must be up before such a workflow)
        scheduler = scheduler_file_address(dask["scheduler_file"])
    spec = _config.run_spec(config, wildcards.name, wildcards.dataset, seed=int(wildcards.seed),
                            workers=int(wildcards.workers), data_file=str(input.data) if input.data else None,
                            scheduler=scheduler)
    entry = (["dpmmbench.workflows.service_client"] if with_run_service()
              else ["dpmmbench.workflows.cli", "run", "--no-progress"])
    return " ".join(shlex.quote(a) for a in ["-m", *entry, "--spec", spec.to_json()])


def target_tolerance_args():
    """``--target-tolerance F`` for ``summarize`` and ``report`` when the config sets
    ``target_tolerance`` (else nothing: the code's default)."""
    if "target_tolerance" not in config:
        return ""
    return f"--target-tolerance {shlex.quote(repr(float(config['target_tolerance'])))}"


# Stop before any job on what the schema cannot see (``_config.check_config``: names, values,
# variants, options; each message names the culprit).
_config.check_config(config)
