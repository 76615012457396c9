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

import json
import math
import numbers
import os
import platform
import secrets
import subprocess
import sys
import time
from contextlib import contextmanager, suppress
from copy import deepcopy
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

import algorithms
from reports.metrics import log_joint, n_clusters, vi

#: the fixed leading columns of every trace, in order (DESIGN "Traces and runs")
TRACE_COLUMNS = ("algorithm", "dataset", "seed", "workers", "iteration", "time_s", "log_joint",
                 "n_clusters", "vi", "bytes_sent", "bytes_received", "messages")
#: communication columns: a distributed sampler reports them per step in ``state.info``
COMM_COLUMNS = ("bytes_sent", "bytes_received", "messages")
#: trace file formats, by extension
TRACE_FORMATS = (".parquet", ".csv")
#: key of the run metadata (JSON) in the parquet schema metadata
META_KEY = b"dpmmbench"
#: seconds to wait for a Dask scheduler before giving up
SCHEDULER_TIMEOUT = 5.0

_INT_COLUMNS = ("seed", "workers", "iteration", "n_clusters") + COMM_COLUMNS


# ---- the chain ----------------------------------------------------------------------
def run_chain(sampler, X, family, alpha, iterations, truth=None, time_budget=None,
              init_clusters=1, progress=False, labels=None, *, dataset="", workers=1,
              warmup=True) -> pd.DataFrame:
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
    fixed = {"algorithm": sampler.name, "dataset": dataset, "seed": sampler.seed, "workers": workers}

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

    with tqdm(total=iterations, desc=sampler.name, unit="it", file=sys.stderr,
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
        alpha=1.0, init_clusters=1, options=None, progress=False, warmup=True):
    """Run ``algorithm`` on the registered ``dataset`` and return its trace and provenance.

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
        Number of Dask workers (>= 1). The Dask backend is not implemented yet: every run
        computes serially in-process, and ``meta["backend"]`` says so.
    scheduler : str, optional
        Address of an existing Dask scheduler; defaults to ``$DASK_SCHEDULER_ADDRESS``. An
        address that does not answer within :data:`SCHEDULER_TIMEOUT` seconds is an error.
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

    Returns
    -------
    trace : pandas.DataFrame
        See :func:`run_chain`.
    meta : dict
        JSON-serialisable provenance: the run's parameters, the dataset's metadata,
        iterations actually run, backend, package versions, CPU, git commit, command line
        and start time (UTC).

    Raises
    ------
    ValueError, TypeError
        Unknown algorithm, dataset or option, or a bad value.
    ConnectionError
        The scheduler did not answer.
    """
    started = datetime.now(timezone.utc)
    iterations = _check_int("iterations", iterations, low=0)
    seed = _check_int("seed", seed, low=0)
    workers = _check_int("workers", workers, low=1)
    init_clusters = _check_int("init_clusters", init_clusters, low=1)
    time_budget = _check_time_budget(time_budget)
    options = dict(options or {})
    algorithms.get(algorithm)  # an unknown name fails before any data is loaded

    import datasets

    with open_backend(workers, scheduler) as (backend, backend_meta):
        data = datasets.load(dataset)
        sampler = algorithms.make(algorithm, family=data.family, alpha=alpha, seed=seed,
                                  backend=backend, **options)
        warmup_s = warm_up(sampler, data.X, init_clusters) if warmup else None
        trace = run_chain(sampler, data.X, data.family, alpha, iterations, truth=data.labels,
                          time_budget=time_budget, init_clusters=init_clusters, progress=progress,
                          dataset=data.name, workers=workers, warmup=False)

    meta = {
        "algorithm": algorithm,
        "exact": bool(sampler.exact),
        "options": dict(getattr(sampler, "params", options)),
        "options_given": options,
        "dataset": data.name,
        "dataset_meta": data.meta,
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
        "warmup_s": warmup_s,
        "workers": workers,
        **backend_meta,
        "command": list(sys.argv),
        "started_utc": started.isoformat(timespec="seconds"),
        **environment(),
    }
    return trace, meta


@contextmanager
def open_backend(workers, scheduler=None):
    """Set up where a run computes; yield ``(backend, meta)``.

    ``backend`` is what :func:`algorithms.make` receives (``None`` = serial, in-process);
    ``meta`` describes it for the run's provenance. A scheduler (argument or
    ``$DASK_SCHEDULER_ADDRESS``) is contacted first, so an unreachable cluster fails in
    seconds rather than after the data are loaded.

    Parameters
    ----------
    workers : int
        Requested number of Dask workers (>= 1).
    scheduler : str, optional
        Dask scheduler address, e.g. ``"tcp://10.0.0.5:8786"``.

    Raises
    ------
    ValueError
        Malformed address or bad ``workers``.
    ConnectionError
        The scheduler did not answer within :data:`SCHEDULER_TIMEOUT` seconds.
    """
    workers = _check_int("workers", workers, low=1)
    address = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS") or None
    if address is None:
        note = "" if workers == 1 else f" ({workers} workers requested; the Dask backend is not implemented yet)"
        yield None, {"backend": "serial in-process" + note, "scheduler": None}
        return

    client = _connect(address)
    try:
        # The Dask backend (sharded state on workers) will be built from `client` here.
        yield None, {"backend": f"serial in-process (scheduler {address} answered, but the Dask "
                                "backend is not implemented yet)",
                     "scheduler": address}
    finally:
        client.close()


def _connect(address: str):
    if not isinstance(address, str):
        raise TypeError(f"scheduler address must be a string, got {address!r}")
    import distributed
    from distributed.comm import get_address_host_port, parse_address
    from distributed.comm.registry import get_backend

    # Check the address before building a Client: a Client that fails on a malformed address
    # hangs on shutdown and prints a traceback from its destructor.
    try:
        scheme, _ = parse_address(address)
        get_backend(scheme)
        if scheme in ("tcp", "tls", "ws", "wss"):
            get_address_host_port(address)
    except ValueError as exc:
        raise ValueError(f"bad Dask scheduler address {address!r}: {exc}") from None
    try:
        return distributed.Client(address, timeout=SCHEDULER_TIMEOUT, set_as_default=False)
    except OSError as exc:  # distributed reports its connect timeout as a plain OSError
        raise ConnectionError(f"Dask scheduler at {address} did not answer within "
                              f"{SCHEDULER_TIMEOUT:g} s") from exc


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
