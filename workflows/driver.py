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
>>> s = algorithms.make("gibbs", family=fam, seed=0)
>>> df = run_chain(s, X, iterations=5)
>>> list(df["iteration"])
[0, 1, 2, 3, 4, 5]
"""
from __future__ import annotations

import math
import numbers
import secrets
import sys
import time
import zipfile
import zlib
from collections import deque
from copy import deepcopy
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from dpmmbench import algorithms
from dpmmbench.algorithms.constraints import RUN_DEFAULTS, check_parameter
from dpmmbench.algorithms.predictive import mean_log_predictive_density
from dpmmbench.reports.metrics import log_joint, n_clusters, nmi, vi
from dpmmbench.reports.traces import COMM_COLUMNS, trace_frame

from .provenance import environment, process_facts


# ---- what a run is asked to do ------------------------------------------------------------
@dataclass(frozen=True)
class RunSpec:
    """The loop and cluster parameters of a run, checked once, when the spec is built.

    Their defaults and constraints are declared in
    :data:`algorithms.constraints.RUN_PARAMETERS`; ``alpha`` and ``seed`` are checked by the
    sampler that takes them, ``init_clusters`` by its ``init``.

    Parameters
    ----------
    iterations : int
        Number of sampler steps (>= 0).
    time_budget : float, optional
        Stop before the next step once the cumulative sampler time exceeds this many seconds.
    workers : int
        Number of Dask workers (>= 1).
    threads : int
        Threads per embedded Dask worker (>= 1).
    heldout_draws : int
        Number of last states of the chain kept to score the held-out data (>= 1).

    Raises
    ------
    TypeError, ValueError
        A value outside its constraint; the message names the parameter.
    """

    iterations: int
    time_budget: float | None = RUN_DEFAULTS["time_budget"]
    workers: int = RUN_DEFAULTS["workers"]
    threads: int = RUN_DEFAULTS["threads"]
    heldout_draws: int = RUN_DEFAULTS["heldout_draws"]

    def __post_init__(self):
        for field in fields(self):
            object.__setattr__(self, field.name, check_parameter(field.name, getattr(self, field.name)))


# ---- the chain ----------------------------------------------------------------------
def run_chain(sampler, X, iterations, truth=None, time_budget=RUN_DEFAULTS["time_budget"],
              init_clusters=RUN_DEFAULTS["init_clusters"], progress=False, labels=None, *, dataset="",
              workers=RUN_DEFAULTS["workers"], warmup=True, name=None) -> pd.DataFrame:
    """Run ``sampler`` for ``iterations`` steps on ``X`` and return its trace.

    Only the sampler's ``init`` and ``step`` calls are timed; scoring happens between them,
    off the clock, with the shared scorer of :mod:`reports.metrics`, under the sampler's
    own ``family`` and the state's ``alpha`` (the learned value when the sampler has an
    ``alpha_prior``; it is recorded in the ``alpha`` column).

    Parameters
    ----------
    sampler : algorithms.Sampler
        A sampler from :func:`algorithms.make`.
    X : array_like or scipy.sparse.csr_matrix
        The data, as the sampler's family expects it.
    iterations : int
        Number of ``step`` calls (>= 0).
    truth : array_like of int, optional
        Ground-truth labels; without them the ``vi`` column is NaN.
    time_budget : float, optional
        Stop before the next step once the cumulative sampler time exceeds this many seconds.
    init_clusters : int
        Number of initial clusters, passed to (and checked by) ``sampler.init``.
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
        :data:`~dpmmbench.reports.traces.TRACE_COLUMNS` in that order, then every other numeric key of ``state.info``
        in order of first appearance (NaN where a step did not report it). ``time_s`` is the
        cumulative sampler time; ``bytes_sent``, ``bytes_received`` and ``messages`` are
        taken from ``state.info`` and are 0 when the sampler does not report them (the
        serial in-process backend sends nothing).

    Raises
    ------
    TypeError, ValueError
        A bad ``iterations``, ``time_budget`` or ``workers`` (see :class:`RunSpec`), or bad
        data, truth or initial partition.
    """
    spec = RunSpec(iterations, time_budget=time_budget, workers=workers)
    return _run_chain(sampler, X, spec, truth=truth, init_clusters=init_clusters, progress=progress,
                      labels=labels, dataset=dataset, warmup=warmup, name=name)


def _run_chain(sampler, X, spec, truth=None, init_clusters=RUN_DEFAULTS["init_clusters"], progress=False,
               labels=None, dataset="", warmup=True, name=None, rows=None, draws=None) -> pd.DataFrame:
    """:func:`run_chain` with its loop parameters in an already checked :class:`RunSpec`;
    the rows are appended to ``rows`` as they are recorded (what a failed run leaves), and
    copies of each state's ``(labels, alpha)`` to ``draws`` (a ``deque`` whose ``maxlen`` keeps
    the last few), the initial state only while no step has run."""
    family = sampler.family
    iterations, time_budget = spec.iterations, spec.time_budget
    X = family.validate(X)
    if truth is not None:
        truth = np.asarray(truth)
        if truth.shape != (family.n_points(X),):
            raise ValueError(f"truth has shape {truth.shape} but X has {family.n_points(X)} points")

    if warmup:
        warm_up(sampler, X, init_clusters)

    rows = [] if rows is None else rows
    fixed = {"algorithm": name or sampler.name, "dataset": dataset, "seed": sampler.seed, "workers": spec.workers}

    def record(iteration, state, elapsed):
        z = state.labels
        # scored at the step's own alpha (the learned value when alpha has a prior)
        row = dict(fixed, iteration=iteration, time_s=elapsed,
                   log_joint=log_joint(X, z, family, state.alpha), n_clusters=n_clusters(z),
                   vi=vi(z, truth) if truth is not None else math.nan,
                   nmi=nmi(z, truth) if truth is not None else math.nan)
        info = state.info or {}
        row.update({key: int(info.get(key, 0)) for key in COMM_COLUMNS})
        row["alpha"] = float(state.alpha)
        for key, value in info.items():
            if key not in row and _is_number(value):
                row[key] = int(value) if isinstance(value, (bool, np.bool_)) else value
        rows.append(row)
        if draws is not None:
            if iteration == 1:
                draws.clear()  # the initial state is no draw of the chain once a step ran
            # a copy: a sampler may update its state's arrays in place
            draws.append((np.array(z, dtype=np.int64, copy=True), row["alpha"]))
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

    return trace_frame(rows)


def warm_up(sampler, X, init_clusters=RUN_DEFAULTS["init_clusters"], n_points=200, steps=2):
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


# ---- one run, by names ------------------------------------------------------------------
def run(algorithm, dataset, iterations, seed=RUN_DEFAULTS["seed"], workers=RUN_DEFAULTS["workers"], scheduler=None,
        time_budget=RUN_DEFAULTS["time_budget"], alpha=RUN_DEFAULTS["alpha"],
        init_clusters=RUN_DEFAULTS["init_clusters"], options=None, progress=False, warmup=True,
        threads=RUN_DEFAULTS["threads"], name=None, data_file=None, out=None,
        alpha_prior=RUN_DEFAULTS["alpha_prior"], test_fraction=RUN_DEFAULTS["test_fraction"],
        split_seed=RUN_DEFAULTS["split_seed"], heldout_draws=RUN_DEFAULTS["heldout_draws"]):
    """Run ``algorithm`` on the registered ``dataset`` on Dask; return its trace and provenance.

    The chain runs on the training part of a seeded held-out split of the dataset
    (:func:`datasets.holdout`: the same split for every run with one ``test_fraction`` and
    ``split_seed``); once it has finished, off the clock, the mean log posterior predictive
    density of the held-out points under the chain's last ``heldout_draws`` states is the
    run's ``heldout_lpd`` (see :func:`heldout_lpd`).

    Every run goes through :func:`workflows.cluster.dask_client`: an existing cluster
    (``scheduler`` or ``$DASK_SCHEDULER_ADDRESS``) or an embedded ``LocalCluster`` of
    ``workers`` processes with ``threads`` threads each, shut down at the end. A serial
    sampler runs as one task in a worker process (the data are scattered to it); a sampler
    that supports a backend (``supports_backend``) runs its master loop here and its shards
    on the workers. Cluster start-up and data transfer are never part of ``time_s``.

    Everything is checked before a cluster starts, in this order: the run parameters
    (``iterations``, ``time_budget``, ``workers``, ``threads`` and ``heldout_draws`` in
    :class:`RunSpec`; ``seed``, ``alpha``, ``alpha_prior``, ``test_fraction``, ``split_seed``
    and ``init_clusters``'s lower bound against their declarations),
    the algorithm and scheduler address, before any data are loaded; then the data (loaded
    and checked by their family: any failure is a :class:`DataError`), the options (by the
    sampler, built once) and ``init_clusters`` against the number of training points. Defaults and
    constraints: :data:`algorithms.constraints.RUN_PARAMETERS`.

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
        DP concentration (> 0); its starting value when ``alpha_prior`` is given.
    init_clusters : int
        Number of initial clusters (between 1 and the number of training points).
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
    out : str or os.PathLike, optional
        Where the caller will write the trace. If the run fails once its chain has started
        (a step raises, a shard's worker keeps failing), the rows recorded so far are written
        there (:func:`~dpmmbench.reports.traces.write_trace`, atomically) with ``status``
        ``"failed"`` and the ``error`` in the metadata, and the error is raised.
    alpha_prior : (float, float), optional
        ``(shape, rate)`` of a Gamma prior on ``alpha``, which is then resampled every step
        (None: ``alpha`` fixed).
    test_fraction : float
        Fraction of the points held out, in [0, 0.5]; 0 holds out nothing (``heldout_lpd``
        is then None).
    split_seed : int
        Seed of the held-out split (>= 0).
    heldout_draws : int
        Number of last states of the chain whose predictive densities are averaged (>= 1);
        fewer when the chain has fewer steps (the initial state when it has none).

    Returns
    -------
    trace : pandas.DataFrame
        See :func:`run_chain`.
    meta : dict
        JSON-serialisable provenance: the run's parameters, the dataset's metadata,
        iterations actually run, backend, the Dask cluster (``dask``: scheduler, dashboard,
        workers, threads, start-up seconds) and the worker process the chain ran in
        (``worker``: pid, numba threads and cache use), package versions, CPU, git commit,
        command line and start time (UTC); ``status``: ``"completed"``, or ``"stopped: time
        budget"`` when the time budget ended the run early; ``alpha_prior``, ``test_fraction``,
        ``split_seed``, ``heldout_points`` (the size of the test part; ``n_points`` is the
        training part's), ``heldout_draws`` (the number of states scored) and
        ``heldout_lpd`` (nats per held-out point; None when nothing is held out or the run
        failed).

    Raises
    ------
    DataError
        The dataset or data file cannot be used (a ValueError; see :class:`DataError`).
    ValueError, TypeError
        Unknown algorithm or option, or a bad value.
    ConnectionError
        The scheduler did not answer.
    """
    from . import cluster

    started = datetime.now(timezone.utc)
    clock = time.perf_counter()
    spec = RunSpec(iterations, time_budget=time_budget, workers=workers, threads=threads,
                   heldout_draws=heldout_draws)
    options = dict(options or {})
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    cls = algorithms.get(algorithm)  # an unknown name fails before any data are loaded
    for param, value in (("seed", seed), ("alpha", alpha), ("alpha_prior", alpha_prior),
                         ("test_fraction", test_fraction), ("split_seed", split_seed),
                         ("init_clusters", init_clusters)):
        check_parameter(param, value)  # as the sampler and the split will, but before the data are loaded
    address = cluster.scheduler_address(scheduler)
    if address is not None:
        cluster.check_address(address)
    else:
        cluster.check_embedded(spec.workers, spec.threads)  # before the data are loaded

    # Data and sampler first: every user error (name, option, value, data) fails before a
    # cluster is started.
    from dpmmbench.datasets import holdout

    data = _load_data(dataset, data_file)
    train, test = holdout(data, test_fraction, split_seed)
    # the one build, the one check
    sampler = cls(data.family, alpha=alpha, seed=seed, alpha_prior=alpha_prior, **options)
    n_points = data.family.n_points(train.X)
    if init_clusters > n_points:
        raise ValueError(f"init_clusters must be between 1 and N = {n_points} (the training points), "
                         f"got {init_clusters}")
    # the dataset column names the dataset, not its training part: every run on it shares the split
    chain_args = {"truth": train.labels, "init_clusters": init_clusters, "progress": progress,
                  "dataset": data.name, "name": name}
    split = {"alpha_prior": None if alpha_prior is None else list(sampler.alpha_prior),
             "test_fraction": float(test_fraction), "split_seed": int(split_seed), "n_points": int(n_points),
             "heldout_points": 0 if test is None else int(test.family.n_points(test.X)),
             "heldout_draws": 0, "heldout_lpd": None}

    entered = time.perf_counter()
    partial = {}  #: what a failed run leaves behind, filled as the run gets there
    try:
        with cluster.dask_client(workers=spec.workers, threads=spec.threads, scheduler=address) as client:
            dask_meta = dict(cluster.describe(client), startup_s=time.perf_counter() - entered)
            if sampler.supports_backend:
                # A sharded sampler: its master loop here, its shards resident on the workers
                # (docs/design.md "Execution model").
                from dpmmbench.algorithms.backends import make_backend

                backend = make_backend(spec.workers, client)
                sampler.attach_backend(backend)
                backend_name = backend.describe()
                trace, worker_meta, error, draws = _chain_task(sampler, train.X, spec, warmup, chain_args)
            else:
                # A serial sampler: the whole chain is one task in a worker process. The data travel
                # once, as their own piece of data rather than inside the task (a large task graph
                # is slow to ship and Dask warns about it).
                from dpmmbench.algorithms.backends.dask_backend import wait_for_workers

                wait_for_workers(client, 1, why="no worker to run the chain on")  # scatter would wait for ever
                X = client.scatter(train.X, hash=False)
                future = client.submit(_chain_task, sampler, X, spec, warmup, chain_args, pure=False,
                                       key=f"chain-{algorithm}-{sampler.seed}-{secrets.token_hex(4)}")
                trace, worker_meta, error, draws = future.result()
                backend_name = "serial: one task in a Dask worker process"
            if error is not None:
                partial.update(trace=trace, worker_meta=worker_meta, backend_name=backend_name, dask_meta=dask_meta)
                raise error
            finished = time.perf_counter()
    except Exception as exc:
        if out is not None and partial.get("trace") is not None:
            from dpmmbench.reports.traces import write_trace

            meta = _provenance(algorithm, name, sampler, options, data, data_file, init_clusters, spec, warmup,
                               partial["trace"], partial["worker_meta"], partial["backend_name"],
                               partial["dask_meta"], clock, started, split, status="failed")
            meta["error"] = f"{type(exc).__name__}: {exc}"
            write_trace(partial["trace"], out, meta)
        raise
    dask_meta["shutdown_s"] = time.perf_counter() - finished
    if test is not None:
        # here, off the clock and the cluster: the draws came back with the trace
        split.update(heldout_draws=len(draws), heldout_lpd=heldout_lpd(data.family, train.X, draws, test.X))
    status = "completed" if len(trace) - 1 == spec.iterations else "stopped: time budget"
    meta = _provenance(algorithm, name, sampler, options, data, data_file, init_clusters, spec, warmup, trace,
                       worker_meta, backend_name, dask_meta, clock, started, split, status=status)
    return trace, meta


def _provenance(algorithm, name, sampler, options, data, data_file, init_clusters, spec, warmup, trace, worker_meta,
                backend_name, dask_meta, clock, started, split, status) -> dict:
    """The metadata of a run (see :func:`run`), finished or not (``status``); ``split``: the
    held-out split's keys, ``n_points`` (the training points) and the learned-alpha prior."""
    return {
        "algorithm": algorithm,
        "name": name or algorithm,
        "exact": bool(sampler.exact),
        # a peer's own prior, truncation, initialisation and tolerances (docs/design.md "Peers")
        "external": bool(sampler.external),
        "peer_settings": sampler.settings() if sampler.external else None,
        "options": dict(getattr(sampler, "params", options)),
        "options_given": options,
        "dataset": data.name,
        "dataset_meta": data.meta,
        "data_file": None if data_file is None else str(data_file),
        "family": repr(data.family),
        "seed": sampler.seed,
        "alpha": sampler.alpha,
        **split,
        "init_clusters": init_clusters,
        "iterations_requested": spec.iterations,
        "iterations": int(len(trace) - 1),
        "status": status,
        "time_budget": spec.time_budget,
        "time_s": float(trace["time_s"].iloc[-1]),
        "warmup": bool(warmup),
        "warmup_s": worker_meta.get("warmup_s"),
        "workers": spec.workers,
        "threads": spec.threads,
        "backend": backend_name,
        "scheduler": dask_meta["scheduler"],
        "dask": dask_meta,
        "worker": {key: value for key, value in worker_meta.items() if key != "warmup_s"},
        "wall_s": time.perf_counter() - clock,
        "command": list(sys.argv),
        "started_utc": started.isoformat(timespec="seconds"),
        **environment(),
    }


class DataError(ValueError):
    """A run's data cannot be used: a bad dataset name or parameters, a data file that is
    missing, unreadable, corrupt or of another dataset, data that do not fit in memory or
    that the dataset's family refuses (e.g. NaN)."""


def _load_data(dataset, data_file=None):
    """The dataset of a run, from its name or its preprocessed ``data_file``, checked by its
    family; every failure is a :class:`DataError` naming the dataset."""
    what = f"dataset {dataset!r}" if data_file is None else f"data file {str(data_file)!r}"
    try:
        if data_file is None:
            from dpmmbench import datasets

            data = datasets.load(dataset)
        else:
            from dpmmbench.datasets.store import load_file

            data = load_file(Path(data_file), name=dataset)  # checks that it holds `dataset`
        data.family.validate(data.X)  # bad values fail here, not in a worker
    except MemoryError as exc:
        raise DataError(f"{what} does not fit in memory ({exc})") from exc
    # What a bad name, a missing, truncated or foreign file or bad values make the readers
    # raise; DataUnavailable (a RuntimeError) says what to download and where to put it.
    except (ValueError, TypeError, LookupError, OSError, EOFError, RuntimeError, zipfile.BadZipFile,
            zlib.error) as exc:
        message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
        if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
            message = f"{exc.strerror}: {exc.filename}"
        if not isinstance(exc, (ValueError, TypeError, OSError, RuntimeError)):
            message = f"{type(exc).__name__}: {message}"  # e.g. "BadZipFile: File is not a zip file"
        named = str(dataset if data_file is None else data_file)
        raise DataError(message if named in message or repr(named) in message else f"{what}: {message}") from exc
    return data


def _chain_task(sampler, X, spec, warmup, chain_args):
    """Warm up and run one chain where this is called (a Dask worker for serial samplers);
    return ``(trace, facts about the process, None, draws)``, or, when the chain fails once
    it has started, ``(the trace so far, facts, the exception, draws)``: the rows of a failed
    run come back from a worker too. ``draws`` are the last ``spec.heldout_draws`` states'
    ``(labels, alpha)``. ``chain_args`` are :func:`_run_chain`'s keywords (a dict, not
    ``**kwargs``: ``Client.submit`` owns keywords such as ``workers``)."""
    warmup_s = warm_up(sampler, sampler.family.validate(X), chain_args["init_clusters"]) if warmup else None
    rows, draws = [], deque(maxlen=spec.heldout_draws)
    try:
        trace, error = _run_chain(sampler, X, spec, warmup=False, rows=rows, draws=draws, **chain_args), None
    except Exception as exc:  # noqa: BLE001 - re-raised by the caller after keeping the rows
        if not rows:
            raise
        trace, error = trace_frame(rows), exc
    return trace, dict(process_facts(), warmup_s=warmup_s), error, list(draws)


def heldout_lpd(family, X, draws, X_test) -> float:
    """Mean held-out log predictive density per point of a chain.

    Parameters
    ----------
    family : algorithms.families.Family
        The prior the chain sampled under.
    X : array_like or scipy.sparse.csr_matrix
        The training data the chain ran on.
    draws : sequence of (labels, alpha)
        States of the chain (e.g. its last few); at least one.
    X_test : array_like or scipy.sparse.csr_matrix
        Held-out points, at least one.

    Returns
    -------
    float
        ``mean_m log (1/S) sum_s p(x_m | z_s, alpha_s, X)`` (nats per point), see
        :func:`algorithms.predictive.mean_log_predictive_density`.
    """
    return float(np.mean(mean_log_predictive_density(family, X, draws, X_test)))


# ---- helpers ------------------------------------------------------------------------------------
def _is_number(value) -> bool:
    return isinstance(value, (numbers.Real, np.bool_)) and np.ndim(value) == 0
