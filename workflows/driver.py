"""The run driver: one run = (dataset, algorithm, options, seed, workers) -> one tidy trace.

The driver owns the loop, the clock, the scoring and the provenance; samplers own only
``init`` and ``step`` (as NumPyro's ``MCMC`` driver is separate from its kernels). So every
algorithm is timed and scored the same way, and a new sampler needs no driver code.

Example
-------
>>> import numpy as np, algorithms
>>> from algorithms.families import NormalKnownCovariance
>>> X = np.array([[-2.0], [-1.8], [2.1], [2.3]])
>>> fam = NormalKnownCovariance(0.5, [0.0], 3.0)
>>> s = algorithms.make("gibbs", family=fam, alpha=1.0, seed=0)
>>> df = run_chain(s, X, fam, 1.0, iterations=5)
>>> list(df["iteration"])
[0, 1, 2, 3, 4, 5]
"""
from __future__ import annotations

import glob
import json
import math
import numbers
import os
import platform
import secrets
import subprocess
import sys
import time
from contextlib import suppress
from copy import deepcopy
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

from dpmmbench import algorithms
from dpmmbench.reports.metrics import log_joint, n_clusters, vi

#: the fixed leading columns of every trace, in order (DESIGN "Traces and runs")
TRACE_COLUMNS = ("algorithm", "dataset", "seed", "workers", "iteration", "time_s", "log_joint",
                 "n_clusters", "vi", "bytes_sent", "bytes_received", "messages")
#: communication columns: a distributed sampler reports them per step in ``state.info``
COMM_COLUMNS = ("bytes_sent", "bytes_received", "messages")
#: trace file formats, by extension
TRACE_FORMATS = (".parquet", ".csv")
#: key of the run metadata (JSON) in the parquet schema metadata
META_KEY = b"dpmmbench"

_INT_COLUMNS = ("seed", "workers", "iteration", "n_clusters") + COMM_COLUMNS
#: the import packages of this distribution (their numba kernels are disk-cached)
_PACKAGES = ("algorithms", "datasets", "reports", "workflows")


# ---- the chain ----------------------------------------------------------------------
def run_chain(sampler, X, family, alpha, iterations, truth=None, time_budget=None,
              init_clusters=1, progress=False, labels=None, *, dataset="", workers=1,
              warmup=True, name=None) -> pd.DataFrame:
    """Run ``sampler`` for ``iterations`` steps on ``X`` and return its trace.

    Only the sampler's ``init`` and ``step`` calls are timed; scoring happens between them,
    off the clock, with the shared scorer of :mod:`reports.metrics`.

    Parameters
    ----------
    sampler : algorithms.Sampler
        A sampler from :func:`algorithms.make`.
    X : array_like or scipy.sparse.csr_matrix
        The data, as the sampler's family expects it.
    family : algorithms.families.Family
        The family the partition is scored with (normally ``sampler.family``).
    alpha : float
        DP concentration the partition is scored with (normally ``sampler.alpha``).
    iterations : int
        Number of ``step`` calls (>= 0).
    truth : array_like of int, optional
        Ground-truth labels; without them the ``vi`` column is NaN.
    time_budget : float, optional
        Stop before the next step once the cumulative sampler time exceeds this many seconds.
    init_clusters : int
        Number of initial clusters, passed to ``sampler.init``.
    progress : bool
        Show a tqdm progress bar on stderr.
    labels : array_like of int, optional
        Initial partition, passed to ``sampler.init`` (overrides ``init_clusters``).
    dataset : str
        Value of the ``dataset`` column.
    workers : int
        Value of the ``workers`` column.
    warmup : bool
        First run the sampler briefly on a few points, off the clock (see :func:`warm_up`),
        so that ``time_s`` does not include numba compilation.
    name : str, optional
        Value of the ``algorithm`` column (e.g. a workflow variant such as
        ``"search-decreasing"``); default ``sampler.name``.

    Returns
    -------
    pandas.DataFrame
        One row per iteration, iteration 0 being the state right after ``init``. Columns
        :data:`TRACE_COLUMNS` in that order, then every other numeric key of ``state.info``
        in order of first appearance (NaN where a step did not report it). ``time_s`` is the
        cumulative sampler time; ``bytes_sent``, ``bytes_received`` and ``messages`` are
        taken from ``state.info`` and are 0 when the sampler does not report them (the
        serial in-process backend sends nothing).
    """
    iterations = _check_int("iterations", iterations, low=0)
    time_budget = _check_time_budget(time_budget)
    X = family.validate(X)
    if truth is not None:
        truth = np.asarray(truth)
        if truth.shape != (family.n_points(X),):
            raise ValueError(f"truth has shape {truth.shape} but X has {family.n_points(X)} points")

    if warmup:
        warm_up(sampler, X, init_clusters)

    rows = []
    fixed = {"algorithm": name or sampler.name, "dataset": dataset, "seed": sampler.seed, "workers": workers}

    def record(iteration, state, elapsed):
        z = state.labels
        row = dict(fixed, iteration=iteration, time_s=elapsed,
                   log_joint=log_joint(X, z, family, alpha), n_clusters=n_clusters(z),
                   vi=vi(z, truth) if truth is not None else math.nan)
        info = state.info or {}
        row.update({key: int(info.get(key, 0)) for key in COMM_COLUMNS})
        for key, value in info.items():
            if key not in row and _is_number(value):
                row[key] = int(value) if isinstance(value, (bool, np.bool_)) else value
        rows.append(row)
        return row

    from tqdm.auto import tqdm

    with tqdm(total=iterations, desc=name or sampler.name, unit="it", file=sys.stderr,
              disable=not progress, dynamic_ncols=True) as bar:
        start = time.perf_counter()
        state = sampler.init(X, init_clusters=init_clusters, labels=labels)
        elapsed = time.perf_counter() - start
        record(0, state, elapsed)
        for iteration in range(1, iterations + 1):
            if time_budget is not None and elapsed > time_budget:
                break
            start = time.perf_counter()
            state = sampler.step(state)
            elapsed += time.perf_counter() - start
            row = record(iteration, state, elapsed)
            bar.update(1)
            bar.set_postfix(K=row["n_clusters"], log_joint=f"{row['log_joint']:.6g}", refresh=False)

    return _trace_frame(rows)


def warm_up(sampler, X, init_clusters=1, n_points=200, steps=2):
    """Run a copy of ``sampler`` for a few steps on the first ``n_points`` points.

    The first call of a numba kernel compiles it (or loads it from the cache), which can
    cost more than hundreds of real iterations; without a warm-up that cost would land in
    the first step's ``time_s`` and distort every time-based comparison. Best effort: if the
    warm-up fails, the timed run meets (and reports) the same problem itself.

    Parameters
    ----------
    sampler : algorithms.Sampler
        Left untouched (a deep copy runs).
    X : array_like or scipy.sparse.csr_matrix
        Validated data; only its first rows are used.
    init_clusters : int
        Initial clusters (capped at the number of points used).
    n_points, steps : int
        Size of the warm-up.

    Returns
    -------
    float or None
        Seconds spent, or None if the warm-up failed.
    """
    start = time.perf_counter()
    try:
        copy = deepcopy(sampler)
        head = X[:min(n_points, copy.family.n_points(X))]
        state = copy.init(head, init_clusters=min(init_clusters, copy.family.n_points(head)))
        for _ in range(steps):
            state = copy.step(state)
    except Exception:  # noqa: BLE001 - best effort, see the docstring
        return None
    return time.perf_counter() - start


def _trace_frame(rows) -> pd.DataFrame:
    extra = list(dict.fromkeys(key for row in rows for key in row if key not in TRACE_COLUMNS))
    df = pd.DataFrame.from_records(rows, columns=list(TRACE_COLUMNS) + extra)
    # Fixed dtypes so that every trace of the suite concatenates without surprises.
    df = df.astype({col: "int64" for col in _INT_COLUMNS} | {"time_s": "float64", "log_joint": "float64",
                                                             "vi": "float64"})
    return df


# ---- one run, by names ------------------------------------------------------------------
def run(algorithm, dataset, iterations, seed=0, workers=1, scheduler=None, time_budget=None,
        alpha=1.0, init_clusters=1, options=None, progress=False, warmup=True, threads=1, name=None,
        data_file=None):
    """Run ``algorithm`` on the registered ``dataset`` on Dask; return its trace and provenance.

    Every run goes through :func:`workflows.cluster.dask_client`: an existing cluster
    (``scheduler`` or ``$DASK_SCHEDULER_ADDRESS``) or an embedded ``LocalCluster`` of
    ``workers`` processes with ``threads`` threads each, shut down at the end. A serial
    sampler runs as one task in a worker process (the data are scattered to it); a sampler
    that supports a backend (``supports_backend``) runs its master loop here and its shards
    on the workers. Cluster start-up and data transfer are never part of ``time_s``.

    Parameters
    ----------
    algorithm : str
        Registry name (see :func:`algorithms.available`).
    dataset : str
        Dataset name for :func:`datasets.load`, e.g. ``"synth-chang2013?n=2000&seed=3"``.
        The dataset's recommended family is the prior.
    iterations : int
        Number of sampler steps (>= 0).
    seed : int
        Seed of the chain (>= 0).
    workers : int
        Number of Dask workers (>= 1): the size of an embedded cluster, and the number of
        shards of a sharded sampler.
    scheduler : str, optional
        Address of an existing Dask scheduler; defaults to ``$DASK_SCHEDULER_ADDRESS``. An
        address that does not answer within :data:`workflows.cluster.SCHEDULER_TIMEOUT`
        seconds is an error.
    time_budget : float, optional
        Stop once the cumulative sampler time exceeds this many seconds.
    alpha : float
        DP concentration (> 0).
    init_clusters : int
        Number of initial clusters (>= 1).
    options : dict, optional
        Algorithm options, e.g. ``{"truncation": 50}`` for ``fsd``.
    progress : bool
        Show a progress bar on stderr.
    warmup : bool
        Warm the sampler up off the clock first (see :func:`warm_up`).
    threads : int
        Threads per embedded worker (>= 1), for Dask and for numba/BLAS inside it.
    name : str, optional
        Name of the run in the trace's ``algorithm`` column (e.g. a workflow variant such
        as ``"search-decreasing"``); default ``algorithm``.
    data_file : str or os.PathLike, optional
        ``dataset`` already preprocessed into an ``.npz`` (``python -m dpmmbench.datasets preprocess``,
        the workflow's data rules): read from there instead of being generated or fetched.

    Returns
    -------
    trace : pandas.DataFrame
        See :func:`run_chain`.
    meta : dict
        JSON-serialisable provenance: the run's parameters, the dataset's metadata,
        iterations actually run, backend, the Dask cluster (``dask``: scheduler, dashboard,
        workers, threads, start-up seconds) and the worker process the chain ran in
        (``worker``: pid, numba threads and cache use), package versions, CPU, git commit,
        command line and start time (UTC).

    Raises
    ------
    ValueError, TypeError
        Unknown algorithm, dataset or option, or a bad value.
    ConnectionError
        The scheduler did not answer.
    """
    from . import cluster

    started = datetime.now(timezone.utc)
    clock = time.perf_counter()
    iterations = _check_int("iterations", iterations, low=0)
    seed = _check_int("seed", seed, low=0)
    workers = _check_int("workers", workers, low=1)
    threads = _check_int("threads", threads, low=1)
    init_clusters = _check_int("init_clusters", init_clusters, low=1)
    time_budget = _check_time_budget(time_budget)
    options = dict(options or {})
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    cls = algorithms.get(algorithm)  # an unknown name fails before any data are loaded
    address = cluster.scheduler_address(scheduler)
    if address is not None:
        cluster.check_address(address)

    # Data and sampler first: every user error (name, option, value, data file) fails before
    # a cluster is started.
    if data_file is None:
        from dpmmbench import datasets

        data = datasets.load(dataset)
    else:
        from dpmmbench.datasets.store import load_file

        data = load_file(Path(data_file), name=dataset)  # checks that it holds `dataset`
    sampler = algorithms.make(algorithm, family=data.family, alpha=alpha, seed=seed, **options)
    chain_args = {"alpha": alpha, "iterations": iterations, "truth": data.labels, "time_budget": time_budget,
                  "init_clusters": init_clusters, "progress": progress, "dataset": data.name, "workers": workers,
                  "name": name}

    entered = time.perf_counter()
    with cluster.dask_client(workers=workers, threads=threads, scheduler=address) as client:
        dask_meta = dict(cluster.describe(client), startup_s=time.perf_counter() - entered)
        if getattr(cls, "supports_backend", False):
            # A sharded sampler: its master loop here, its shards resident on the workers
            # (DESIGN "Execution model").
            from dpmmbench.algorithms.backends import make_backend

            backend = make_backend(workers, client)
            sampler = algorithms.make(algorithm, family=data.family, alpha=alpha, seed=seed, backend=backend,
                                      **options)
            trace, worker_meta = _chain_task(sampler, data.X, data.family, warmup, chain_args)
            backend_name = backend.describe()
        else:
            # A serial sampler: the whole chain is one task in a worker process. The data travel
            # once, as their own piece of data rather than inside the task (a large task graph
            # is slow to ship and Dask warns about it).
            X = client.scatter(data.X, hash=False)
            future = client.submit(_chain_task, sampler, X, data.family, warmup, chain_args, pure=False,
                                   key=f"chain-{algorithm}-{seed}-{secrets.token_hex(4)}")
            trace, worker_meta = future.result()
            backend_name = "serial: one task in a Dask worker process"
        finished = time.perf_counter()
    dask_meta["shutdown_s"] = time.perf_counter() - finished

    meta = {
        "algorithm": algorithm,
        "name": name or algorithm,
        "exact": bool(sampler.exact),
        "options": dict(getattr(sampler, "params", options)),
        "options_given": options,
        "dataset": data.name,
        "dataset_meta": data.meta,
        "data_file": None if data_file is None else str(data_file),
        "family": repr(data.family),
        "n_points": int(data.family.n_points(data.X)),
        "seed": seed,
        "alpha": alpha,
        "init_clusters": init_clusters,
        "iterations_requested": iterations,
        "iterations": int(len(trace) - 1),
        "time_budget": time_budget,
        "time_s": float(trace["time_s"].iloc[-1]),
        "warmup": bool(warmup),
        "warmup_s": worker_meta.pop("warmup_s"),
        "workers": workers,
        "threads": threads,
        "backend": backend_name,
        "scheduler": dask_meta["scheduler"],
        "dask": dask_meta,
        "worker": worker_meta,
        "wall_s": time.perf_counter() - clock,
        "command": list(sys.argv),
        "started_utc": started.isoformat(timespec="seconds"),
        **environment(),
    }
    return trace, meta


def _chain_task(sampler, X, family, warmup, chain_args):
    """Warm up and run one chain where this is called (a Dask worker for serial samplers);
    return ``(trace, facts about the process)``. ``chain_args`` are :func:`run_chain`'s
    keywords (a dict, not ``**kwargs``: ``Client.submit`` owns keywords such as ``workers``)."""
    warmup_s = warm_up(sampler, family.validate(X), chain_args["init_clusters"]) if warmup else None
    trace = run_chain(sampler, X, family, warmup=False, **chain_args)
    return trace, dict(_process_facts(), warmup_s=warmup_s)


def _process_facts() -> dict:
    """The process a chain ran in: Dask worker address, pid, numba threads, and how many of
    the package's disk-cached numba kernels were loaded from the cache (``hits``) or had to
    be compiled (``misses``); kernels compiled without the disk cache are not counted."""
    import gc

    import numba
    from numba.core.dispatcher import Dispatcher

    try:
        from distributed import get_worker

        address = get_worker().address
    except (ImportError, ValueError):  # not in a Dask worker (the master of a sharded run)
        address = None
    hits = misses = 0
    # Kernels built by factories live in closures and caches, not only as module globals.
    for obj in gc.get_objects():
        if (isinstance(obj, Dispatcher) and obj.stats.cache_path is not None
                and obj.py_func.__module__.split(".")[0] in _PACKAGES):
            hits += sum(obj.stats.cache_hits.values())
            misses += sum(obj.stats.cache_misses.values())
    return {"address": address, "pid": os.getpid(), "numba_threads": numba.get_num_threads(),
            "numba_cache_hits": hits, "numba_cache_misses": misses}


# ---- provenance ------------------------------------------------------------------------
def environment() -> dict:
    """Where and with what a run ran: package versions, CPU, platform and git commit.

    Returns
    -------
    dict
        Keys ``versions`` (python, numpy, scipy, numba, dask, distributed, pandas, pyarrow;
        None when not installed), ``cpu_model``, ``cores``, ``cores_available``,
        ``platform``, ``hostname``, ``git_commit`` and ``git_dirty`` (None outside a git
        checkout).
    """
    versions = {"python": platform.python_version()}
    for package in ("numpy", "scipy", "numba", "dask", "distributed", "pandas", "pyarrow"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    commit, dirty = _git_state()
    return {
        "versions": versions,
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "cores_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "platform": platform.platform(),
        "hostname": platform.node(),
        "git_commit": commit,
        "git_dirty": dirty,
    }


def _cpu_model():
    with suppress(OSError):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or None


def _git_state():
    repo = Path(__file__).resolve().parent.parent

    def git(*args):
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
    except (OSError, subprocess.SubprocessError):
        return None, None
    try:
        # --no-optional-locks: reading the status must never write to the repository.
        dirty = bool(git("--no-optional-locks", "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        dirty = None
    return commit, dirty


# ---- trace files -------------------------------------------------------------------------
def check_trace_path(path) -> Path:
    """Return ``path`` as a Path if its extension is a trace format, else raise ValueError.

    Parameters
    ----------
    path : str or os.PathLike
        Destination of a trace: ``.parquet`` or ``.csv``.
    """
    path = Path(path)
    if path.suffix.lower() not in TRACE_FORMATS:
        raise ValueError(f"unsupported trace format {path.suffix or '(no extension)'!r} for {str(path)!r}; "
                         f"use one of {', '.join(TRACE_FORMATS)}")
    return path


def write_trace(df, path, meta=None) -> Path:
    """Write a trace and its metadata atomically; return the path written.

    The data go to a temporary file in the destination directory, which is then renamed
    over ``path``: a reader (or Snakemake) never sees a partial trace.

    Parameters
    ----------
    df : pandas.DataFrame
        The trace.
    path : str or os.PathLike
        ``.parquet``: ``meta`` is stored as JSON in the schema metadata under
        :data:`META_KEY`. ``.csv``: ``meta`` goes to the sidecar ``<path>.meta.json``.
        Missing parent directories are created.
    meta : dict, optional
        JSON-serialisable run metadata (numpy scalars and arrays are converted).

    Raises
    ------
    ValueError
        Unsupported extension (raised before anything is written).
    """
    path = check_trace_path(path)
    # Serialise first: metadata that cannot be serialised fails before any file is touched.
    meta_json = json.dumps(meta or {}, default=_json_default, indent=1)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(df, preserve_index=False)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), META_KEY: meta_json.encode()})
        atomic_write(path, lambda f: pq.write_table(table, f))
    else:
        # Sidecar first: whoever sees the trace can rely on its metadata being there.
        atomic_write(_sidecar(path), lambda f: f.write(meta_json.encode()))
        atomic_write(path, lambda f: df.to_csv(f, index=False, encoding="utf-8"))
    return path


def read_trace(path):
    """Read a trace written by :func:`write_trace`.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.parquet`` or ``.csv`` trace.

    Returns
    -------
    trace : pandas.DataFrame
    meta : dict
        The run metadata ({} if none was stored).
    """
    path = check_trace_path(path)
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        raw = (table.schema.metadata or {}).get(META_KEY)
        return table.to_pandas(), json.loads(raw) if raw else {}
    sidecar = _sidecar(path)
    meta = json.loads(sidecar.read_text()) if sidecar.exists() else {}
    # Name columns stay strings: an empty dataset name must not come back as NaN.
    df = pd.read_csv(path, dtype={"algorithm": str, "dataset": str})
    for col in ("algorithm", "dataset"):
        if col in df:
            df[col] = df[col].fillna("")
    return df, meta


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".meta.json")


def atomic_write(path: Path, write):
    """Write ``path`` through a temporary file in the same folder and ``os.replace``:
    readers see the old file or the complete new one, never a partial one.
    ``write(f)`` receives a binary file object."""
    # A fresh name created with O_EXCL and mode 0o666 so the final file gets the usual
    # umask-based permissions (mkstemp would leave it private to the owner).
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def remove_stale_temporaries(path) -> list[Path]:
    """Delete the temporary files :func:`atomic_write` left next to ``path`` when a writer
    was killed mid-write (SIGKILL leaves no chance to clean up); return what was deleted.

    Call it only as the one owner of ``path`` (e.g. the job that produces it): a
    concurrent writer's temporary file would be deleted too.

    Parameters
    ----------
    path : str or os.PathLike
        A file written with :func:`atomic_write` (its CSV sidecar is covered as well).
    """
    path = Path(path)
    if not path.parent.is_dir():
        return []
    removed = []
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        with suppress(FileNotFoundError):
            stale.unlink()
            removed.append(stale)
    return removed


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, (Path, datetime)):
        return str(obj)
    raise TypeError(f"run metadata value {obj!r} of type {type(obj).__name__} is not JSON-serialisable")


# ---- argument checks ----------------------------------------------------------------------
def _is_number(value) -> bool:
    return isinstance(value, (numbers.Real, np.bool_)) and np.ndim(value) == 0


def _check_int(name, value, low):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return int(value)


def _check_time_budget(value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"time_budget must be a number of seconds, got {value!r}")
    if not value > 0:  # also rejects NaN
        raise ValueError(f"time_budget must be > 0 seconds, got {value}")
    return float(value)
