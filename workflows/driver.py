"""The run driver: one run = (dataset, algorithm, options, seed, workers) -> one tidy trace.

A run is specified by one record, :class:`RunSpec`, checked once when it is built;
:func:`run` runs it on Dask and returns its trace and provenance. The chain itself runs on the
suite's one chain runner (:func:`algorithms.runner.run_sampler`: the loop, the clock, the stop
rules); the driver adds the scoring of every state, off the clock, as the runner's callback
(:func:`run_chain`). Samplers own only ``init`` and ``step`` (as NumPyro's ``MCMC`` driver is
separate from its kernels), so every algorithm is timed and scored the same way, and a new
sampler needs no driver code.

Example
-------
>>> import numpy as np
>>> from dpmmbench import algorithms
>>> from dpmmbench.algorithms.families import NormalKnownCovariance
>>> from dpmmbench.workflows.driver import RunSpec, run_chain
>>> X = np.array([[-2.0], [-1.8], [2.1], [2.3]])
>>> fam = NormalKnownCovariance(0.5, [0.0], 3.0)
>>> s = algorithms.make("gibbs", family=fam, seed=0)
>>> df = run_chain(s, X, iterations=5)
>>> list(df["iteration"])
[0, 1, 2, 3, 4, 5]
>>> RunSpec("gibbs", "synth-chang2013?n=200", 10, seed=3).workers
1
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import sys
import threading
import time
import zipfile
import zlib
from collections import deque
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpmmbench import algorithms
from dpmmbench.algorithms.constraints import RUN_DEFAULTS, RUN_PARAMETERS, check_parameter
from dpmmbench.algorithms.predictive import mean_log_predictive_density
from dpmmbench.algorithms.runner import ChainResult, StopRule, run_sampler, warm_up
from dpmmbench.reports.metrics import StateScorer
from dpmmbench.reports.runs import run_name
from dpmmbench.reports.traces import COMM_COLUMNS, encode_partition, trace_frame

from .errors import Cancelled, DataError, write_to
from .provenance import environment, process_facts


#: seconds between two looks at whether a run was cancelled (its chain's, in a Dask worker)
CANCEL_POLL = 0.2
#: seconds a cancelled chain in a Dask worker is given to reach its next step
CANCEL_GRACE = 30.0


# ---- what a run is asked to do ------------------------------------------------------------
@dataclass(frozen=True)
class RunSpec:
    """The parameters of one run, checked once, when the spec is built.

    The run parameters' defaults and constraints are declared in
    :data:`algorithms.constraints.RUN_PARAMETERS` (``iterations``, ``seed``, ``workers``,
    ``time_budget``, ``alpha``, ``alpha_prior``, ``init_clusters``, ``threads``,
    ``test_fraction``, ``split_seed``, ``heldout_draws``); the values are stored as checked
    (e.g. ``alpha_prior`` as a tuple). The algorithm name is looked up, ``options`` are
    checked by the sampler and ``init_clusters``'s upper bound against the training points
    when :func:`run` runs the spec, before any cluster starts.

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
    alpha_prior : (float, float), optional
        ``(shape, rate)`` of a Gamma prior on ``alpha``, which is then resampled every step
        (None: ``alpha`` fixed).
    init_clusters : int
        Number of initial clusters (between 1 and the number of training points).
    options : dict, optional
        Algorithm options, e.g. ``{"truncation": 50}`` for ``fsd`` (stored as a copy).
    threads : int
        Threads per embedded worker (>= 1), for Dask and for numba/BLAS inside it.
    name : str, optional
        The run's name (its trace's ``name`` column), e.g. a config's variant such as
        ``"search-decreasing"``; default ``algorithm`` with its options that differ from the
        defaults (:func:`reports.runs.run_name`).
    data_file : str or os.PathLike, optional
        ``dataset`` already preprocessed into an ``.npz`` (``python -m dpmmbench.datasets preprocess``,
        the workflow's data rules): read from there instead of being generated or fetched.
    test_fraction : float
        Fraction of the points held out, in [0, 0.5]; 0 holds out nothing (``heldout_lpd``
        is then None).
    split_seed : int
        Seed of the held-out split (>= 0).
    heldout_draws : int
        Number of last states of the chain whose predictive densities are averaged (>= 1);
        fewer when the chain has fewer steps (the initial state when it has none).
    warmup : bool
        Warm the sampler up off the clock first (see :func:`algorithms.runner.warm_up`).

    Raises
    ------
    TypeError, ValueError
        A value outside its constraint; the message names the parameter.
    """

    algorithm: str
    dataset: str
    iterations: int
    _: KW_ONLY
    seed: int = RUN_DEFAULTS["seed"]
    workers: int = RUN_DEFAULTS["workers"]
    scheduler: str | None = None
    time_budget: float | None = RUN_DEFAULTS["time_budget"]
    alpha: float = RUN_DEFAULTS["alpha"]
    alpha_prior: tuple[float, float] | None = RUN_DEFAULTS["alpha_prior"]
    init_clusters: int = RUN_DEFAULTS["init_clusters"]
    # a dict is not hashable: the spec's hash leaves the options out (equal specs still compare them)
    options: dict[str, Any] = field(default_factory=dict, hash=False)
    threads: int = RUN_DEFAULTS["threads"]
    name: str | None = None
    data_file: str | None = None
    test_fraction: float = RUN_DEFAULTS["test_fraction"]
    split_seed: int = RUN_DEFAULTS["split_seed"]
    heldout_draws: int = RUN_DEFAULTS["heldout_draws"]
    warmup: bool = True
    #: when the run's chain stops: after ``iterations`` steps, or once ``time_budget`` seconds
    #: of sampler time are spent (built, and so checked, once, with the spec)
    stop: StopRule = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        stop = StopRule(iterations=self.iterations, seconds=self.time_budget)  # a run always has its steps
        checked = {f.name: check_parameter(f.name, getattr(self, f.name)) for f in fields(self)
                   if f.name in RUN_PARAMETERS and f.name not in ("iterations", "time_budget")}
        checked.update(iterations=stop.iterations, time_budget=stop.seconds, stop=stop)
        for key in ("algorithm", "dataset"):
            checked[key] = _text(key, getattr(self, key))
        checked["name"] = None if self.name is None else _text("name", self.name)
        options = {} if self.options is None else self.options
        if not isinstance(options, Mapping) or not all(isinstance(key, str) for key in options):
            raise TypeError(f"options must be a dict of option names to values or None, got {self.options!r}")
        checked["options"] = dict(options)
        if self.data_file is not None and not isinstance(self.data_file, (str, os.PathLike)):
            raise TypeError(f"data_file must be a path or None, got {self.data_file!r}")
        checked["data_file"] = None if self.data_file is None else os.fspath(self.data_file)
        if not isinstance(self.warmup, (bool, np.bool_)):
            raise TypeError(f"warmup must be True or False, got {self.warmup!r}")
        checked["warmup"] = bool(self.warmup)
        for key, value in checked.items():
            object.__setattr__(self, key, value)

    def to_dict(self) -> dict:
        """The spec as JSON holds it: every field (``alpha_prior`` a list or None), the stop
        rule as ``stop`` (:meth:`algorithms.runner.StopRule.to_dict`) instead of
        ``iterations`` and ``time_budget``. :meth:`from_dict` gives the spec back."""
        data = {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("iterations", "time_budget", "stop")}
        data["alpha_prior"] = None if self.alpha_prior is None else list(self.alpha_prior)
        data["options"] = dict(self.options)
        return {**data, "stop": self.stop.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping) -> RunSpec:
        """The spec :meth:`to_dict` wrote, checked as every spec is built.

        Parameters
        ----------
        data : mapping
            Fields of the spec, with ``stop`` a mapping of ``iterations`` and ``seconds``.

        Returns
        -------
        RunSpec

        Raises
        ------
        TypeError, ValueError
            Unknown keys or bad values (the message names the field).
        """
        data = dict(data)
        stop = data.pop("stop", None)
        if not isinstance(stop, Mapping):
            raise TypeError(f"a run spec's stop must be a mapping of iterations and seconds, got {stop!r}")
        stop = StopRule.from_dict(stop)
        known = {f.name for f in fields(cls) if f.init} - {"iterations", "time_budget"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise TypeError(f"a run spec has no field(s) {unknown}")
        alpha_prior = data.pop("alpha_prior", None)
        return cls(data.pop("algorithm", None), data.pop("dataset", None), stop.iterations,
                   time_budget=stop.seconds, alpha_prior=None if alpha_prior is None else tuple(alpha_prior), **data)

    def to_json(self) -> str:
        """:meth:`to_dict` as a line of JSON (what a workflow job hands to the run service).

        Examples
        --------
        >>> from dpmmbench.workflows.driver import RunSpec
        >>> spec = RunSpec("gibbs", "synth-chang2013?n=200", 10, time_budget=5.0, seed=3)
        >>> RunSpec.from_json(spec.to_json()) == spec
        True
        """
        return json.dumps(self.to_dict(), allow_nan=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        """The spec :meth:`to_json` wrote (see :meth:`from_dict`)."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise TypeError(f"a run spec is a JSON object, got {type(data).__name__}")
        return cls.from_dict(data)


def _text(key, value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{key} must be a non-empty string, got {value!r}")
    return value


# ---- the chain ----------------------------------------------------------------------
def run_chain(sampler, X, iterations, truth=None, time_budget=RUN_DEFAULTS["time_budget"],
              init_clusters=RUN_DEFAULTS["init_clusters"], progress=False, labels=None, *, dataset="",
              workers=RUN_DEFAULTS["workers"], warmup=True, name=None) -> pd.DataFrame:
    """Run ``sampler`` for ``iterations`` steps on ``X`` and return its trace.

    The chain runs on :func:`algorithms.runner.run_sampler`, which times only the sampler's
    ``init`` and ``step`` calls; every state is scored between them, off the clock, with the
    shared scorer of :mod:`reports.metrics`, under the sampler's own ``family`` and the
    state's ``alpha`` (the learned value when the sampler has an ``alpha_prior``; it is
    recorded in the ``alpha`` column).

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
        First run the sampler briefly on a few points, off the clock (see
        :func:`algorithms.runner.warm_up`), so that ``time_s`` does not include numba compilation.
    name : str, optional
        The run's name, the value of the ``name`` column (e.g. a workflow variant such as
        ``"search-decreasing"``); default the sampler's registry name with its options that
        differ from the defaults (:func:`reports.runs.run_name`). The ``algorithm`` column is
        the registry name.

    Returns
    -------
    pandas.DataFrame
        One row per iteration, iteration 0 being the state right after ``init``. Columns
        :data:`~dpmmbench.reports.traces.TRACE_COLUMNS` in that order, then the sampler's own
        per-step columns (``sampler.step_info(state)``, declared by its ``info_columns``) in
        order of first appearance. ``time_s`` is the cumulative sampler time; ``bytes_sent``,
        ``bytes_received`` and ``messages`` are taken from ``state.info`` and are 0 when the
        sampler does not report them (the serial in-process backend sends nothing).

    Raises
    ------
    TypeError, ValueError
        A bad ``iterations``, ``time_budget`` or ``workers`` (checked against
        :data:`algorithms.constraints.RUN_PARAMETERS`), or bad data, truth or initial partition.
    """
    workers = check_parameter("workers", workers)
    X = sampler.family.validate(X)
    truth = _checked_truth(sampler.family, X, truth)
    if warmup:
        warm_up(sampler, X, init_clusters)
    rows = []
    _scored_chain(sampler, X, StopRule(iterations, time_budget), rows, truth=truth, init_clusters=init_clusters,
                  labels=labels, progress=progress, dataset=dataset, workers=workers, name=name)
    return trace_frame(rows)


def _checked_truth(family, X, truth):
    if truth is None:
        return None
    truth = np.asarray(truth)
    if truth.shape != (family.n_points(X),):
        raise ValueError(f"truth has shape {truth.shape} but X has {family.n_points(X)} points")
    return truth


def _scored_chain(sampler, X, stop, rows, draws=None, *, truth=None,
                  init_clusters=RUN_DEFAULTS["init_clusters"], labels=None, progress=False, dataset="",
                  workers=RUN_DEFAULTS["workers"], name=None, timing=None, last=None,
                  cancelled=None) -> ChainResult:
    """The chain of :func:`run_chain` on validated ``X`` (and checked ``truth``), its scoring
    the runner's callback: every state's row is appended to ``rows`` as it is recorded (what a
    failed run leaves), and a copy of its ``(labels, alpha)`` to ``draws`` (a ``deque`` whose
    ``maxlen`` keeps the last few), the initial state only while no step has run. The seconds
    the callback takes (scoring, copies, progress) are added up in ``timing["score_s"]``, also
    when the chain fails. ``last["labels"]`` (a dict given) holds the last state's labels.
    ``cancelled()`` (given) is asked after each state is recorded: true, the callback raises
    :class:`~dpmmbench.workflows.errors.Cancelled`, which ends the chain before its next step."""
    score = StateScorer(X, sampler.family, truth)
    if timing is not None:
        timing.setdefault("score_s", 0.0)
    name = run_name(sampler.name, getattr(sampler, "params", {}), name)  # a duck-typed sampler may have none
    fixed = {"algorithm": sampler.name, "name": name, "dataset": dataset, "seed": sampler.seed, "workers": workers}
    from tqdm.auto import tqdm

    with tqdm(total=stop.iterations, desc=name, unit="it", file=sys.stderr,
              disable=not progress, dynamic_ncols=True) as bar:

        def record(iteration, state, elapsed):
            began = time.perf_counter()
            try:
                _record(iteration, state, elapsed)
            finally:
                if timing is not None:
                    timing["score_s"] += time.perf_counter() - began

        def _record(iteration, state, elapsed):
            # one copy, for the scorer's comparison and the draws: a sampler may update its
            # state's arrays in place
            z = np.array(state.labels, dtype=np.int64, copy=True)
            # scored at the step's own alpha (the learned value when alpha has a prior)
            row = dict(fixed, iteration=iteration, time_s=elapsed, **score(z, state.alpha))
            info = state.info or {}
            row.update({key: int(info.get(key, 0)) for key in COMM_COLUMNS})
            row["alpha"] = float(state.alpha)
            # the sampler's declared per-step columns, NaN where this step did not report one
            row.update((key, value) for key, value in sampler.step_info(state).items() if key not in row)
            rows.append(row)
            if last is not None:
                last["labels"] = z
            if draws is not None:
                if iteration == 1:
                    draws.clear()  # the initial state is no draw of the chain once a step ran
                draws.append((z, row["alpha"]))
            if iteration:
                bar.update(1)
                bar.set_postfix(K=row["n_clusters"], log_joint=f"{row['log_joint']:.6g}", refresh=False)
            if cancelled is not None and cancelled():
                raise Cancelled(f"cancelled after {iteration} iteration(s)")

        return run_sampler(sampler, X, stop=stop, callback=record, init_clusters=init_clusters, labels=labels)


# ---- one run, by names ------------------------------------------------------------------
def run(spec, *, out=None, progress=False, client=None, cache=None, command=None, cancelled=None):
    """Run ``spec`` on Dask; return its trace and provenance.

    The chain runs on the training part of a seeded held-out split of the dataset
    (:func:`datasets.holdout`: the same split for every run with one ``test_fraction`` and
    ``split_seed``); once it has finished, off the clock, the mean log posterior predictive
    density of the held-out points under the chain's last ``heldout_draws`` states is the
    run's ``heldout_lpd`` (see :func:`heldout_lpd`).

    Without ``client``, a run goes through :func:`workflows.cluster.dask_client`: an existing
    cluster (``spec.scheduler`` or ``$DASK_SCHEDULER_ADDRESS``) or an embedded ``LocalCluster`` of
    ``spec.workers`` processes with ``spec.threads`` threads each, shut down at the end. With
    ``client`` (the workflow's run service, :mod:`workflows.service`), it reserves
    ``spec.workers`` workers of that shared cluster for as long as it computes, and leaves the
    cluster running. A serial
    sampler runs as one task in a worker process (the data are scattered to it); a sampler
    that supports a backend (``supports_backend``) runs its master loop here and its shards
    on the workers. Cluster start-up and data transfer are never part of ``time_s``.

    Everything is checked before a cluster starts, in this order: the run parameters (when
    the :class:`RunSpec` was built), the algorithm and scheduler address, before any data are
    loaded; then the data (loaded and checked by their family: any failure is a
    :class:`DataError`), the options (by the sampler, built once) and ``init_clusters``
    against the number of training points.

    Parameters
    ----------
    spec : RunSpec
        What to run.
    out : str or os.PathLike, optional
        Where the caller will write the trace. If the run fails once its chain has started
        (a step raises, a shard's worker keeps failing), the rows recorded so far are written
        there (:func:`~dpmmbench.reports.traces.write_trace`, atomically) with ``status``
        ``"failed"`` and the ``error`` in the metadata, and the error is raised.
    progress : bool
        Show a progress bar on stderr.
    client : workflows.cluster.SharedCluster or distributed.Client, optional
        A cluster shared with other runs, to run on instead of opening one (a plain client
        is shared as it is); never closed by the run. ``spec.scheduler``, when given, must
        be its address.
    cache : RunCache, optional
        Datasets and environment facts shared with other runs of this process (each dataset
        is then loaded once and, on a shared cluster, sent to the workers once).
    command : list of str, optional
        The command line recorded in the metadata (also of a failed run's trace); default
        this process's (the run service records its job's).
    cancelled : callable, optional
        ``cancelled() -> bool``, asked after every state of the chain (off the clock; in a
        worker, a flag it reads at most every :data:`CANCEL_POLL` seconds): once true, the
        chain stops before its next step and the run returns the rows so far with
        ``status`` ``"cancelled"`` (and no held-out score). A chain whose step outlasts
        :data:`CANCEL_GRACE` seconds after that has its task cancelled instead, and
        :class:`~dpmmbench.workflows.errors.Cancelled` is raised.

    Returns
    -------
    trace : pandas.DataFrame
        See :func:`run_chain`.
    meta : dict
        JSON-serialisable provenance: the run's parameters (``algorithm``, its registry name,
        and ``name``, the run's name as its trace records it), the dataset's metadata,
        iterations actually run, backend, the Dask cluster (``dask``: scheduler, dashboard,
        workers, threads, whether it was embedded and shared, start-up seconds; on a shared
        cluster, ``reserved``: the workers the run held) and the worker process the chain ran in
        (``worker``: pid, numba threads and cache use), package versions, CPU, git commit,
        command line, start and finish time (UTC; ``finished_utc`` to the millisecond), ``wall_s``
        and ``score_s``, ``heldout_s`` (seconds spent scoring the states and the held-out points,
        off the sampler's clock); ``status``: ``"completed"``, or ``"stopped: time
        budget"`` when the time budget ended the run early; ``alpha_prior``, ``test_fraction``,
        ``split_seed``, ``spec`` (:meth:`RunSpec.to_dict`, the stop rule in it),
        ``heldout_points`` (the size of the test part; ``n_points`` is the
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

    if not isinstance(spec, RunSpec):
        raise TypeError(f"run takes a RunSpec, got {type(spec).__name__}")
    measured = _Measured(started=datetime.now(timezone.utc), clock=time.perf_counter(),
                         command=list(sys.argv) if command is None else list(command))
    cls = algorithms.get(spec.algorithm)  # an unknown name fails before any data are loaded
    where = cluster.for_run(spec.scheduler, spec.workers, spec.threads, client)  # checked before the data load

    # Data and sampler first: every user error (name, option, value, data) fails before a
    # cluster is started.
    from dpmmbench.datasets import holdout

    if cache is not None:
        data_key, data = cache.data(spec.dataset, spec.data_file)
        measured.environment = cache.environment()
    else:
        data_key, data = None, _load_data(spec.dataset, spec.data_file)
    measured.data = data
    train, test = holdout(data, spec.test_fraction, spec.split_seed)
    # the one build, the one check
    sampler = measured.sampler = cls(data.family, alpha=spec.alpha, seed=spec.seed, alpha_prior=spec.alpha_prior,
                                     **spec.options)
    n_points = data.family.n_points(train.X)
    if spec.init_clusters > n_points:
        raise ValueError(f"init_clusters must be between 1 and N = {n_points} (the training points), "
                         f"got {spec.init_clusters}")
    # the dataset column names the dataset, not its training part: every run on it shares the split
    chain_args = {"truth": train.labels, "progress": progress, "dataset": data.name, "cancelled": cancelled}
    measured.split = {"alpha_prior": None if spec.alpha_prior is None else list(sampler.alpha_prior),
                      "test_fraction": spec.test_fraction, "split_seed": spec.split_seed, "n_points": int(n_points),
                      "heldout_points": 0 if test is None else int(test.family.n_points(test.X)),
                      "heldout_draws": 0, "heldout_lpd": None}

    entered = time.perf_counter()
    try:
        with where.place(spec.workers) as place:
            client, workers = place.client, place.reserved
            measured.dask = dict(cluster.describe(client, shared=place.shared), startup_s=time.perf_counter() - entered)
            if place.shared:
                measured.dask["reserved"] = workers
            if sampler.supports_backend:
                # A sharded sampler: its master loop here, its shards resident on the workers
                # (docs/design.md "Execution model").
                from dpmmbench.algorithms.backends import DaskBackend

                backend = DaskBackend(client, n_workers=spec.workers,
                                      workers=workers if workers is not None and len(workers) == spec.workers else None)
                sampler.attach_backend(backend)
                measured.backend = backend.describe()
                chain = _chain_task(sampler, train.X, spec, chain_args)
            else:
                # A serial sampler: the whole chain is one task in a worker process. The data travel
                # once, as their own piece of data rather than inside the task (a large task graph
                # is slow to ship and Dask warns about it).
                from dpmmbench.algorithms.backends.dask_backend import wait_for_workers

                wait_for_workers(client, 1, why="no worker to run the chain on")  # scatter would wait for ever
                # on a shared cluster, the same parts of a dataset are sent to the workers once
                part = None if data_key is None else (data_key, spec.test_fraction, spec.split_seed)
                X = place.scatter(part, train.X)
                X_test = None if test is None else place.scatter(part and (*part, "test"), test.X)
                # on its reserved worker, or on another one if that worker is lost; the held-out
                # points are scored there too, so that the last states need not travel back
                key = f"chain-{spec.algorithm}-{sampler.seed}-{secrets.token_hex(4)}"
                # the task reads its run's cancellation from a Dask Event (the callable stays here)
                task_args = dict(chain_args, test=X_test, cancelled=None,
                                 cancel_event=None if cancelled is None else f"cancel-{key}")
                future = client.submit(_chain_task, sampler, X, spec, task_args, pure=False, key=key,
                                       workers=workers, allow_other_workers=workers is not None)
                chain = future.result() if cancelled is None else _result(future, cancelled, task_args["cancel_event"])
                measured.backend = "serial: one task in a Dask worker process"
            if chain.error is not None:
                measured.chain = chain
                raise chain.error
            finished = time.perf_counter()
    except Exception as exc:
        if out is not None and measured.chain is not None:
            from dpmmbench.reports.traces import write_trace

            meta = _provenance(spec, measured, status="failed")
            meta["error"] = f"{type(exc).__name__}: {exc}"
            write_trace(measured.chain.trace, out, meta)
        raise
    measured.chain = chain
    measured.dask["shutdown_s"] = time.perf_counter() - finished
    if chain.heldout is not None:  # scored where the chain ran
        lpd, n_draws, seconds = chain.heldout
        measured.split.update(heldout_draws=n_draws, heldout_lpd=lpd, heldout_s=seconds)
    elif test is not None and chain.stopped != "cancelled":
        # here, off the clock: the master loop of a sharded chain ran here and holds its draws
        began = time.perf_counter()
        measured.split.update(heldout_draws=len(chain.draws),
                              heldout_lpd=heldout_lpd(data.family, train.X, chain.draws, test.X))
        measured.split["heldout_s"] = time.perf_counter() - began
    status = chain.stopped if chain.stopped in ("completed", "cancelled") else f"stopped: {chain.stopped}"
    return chain.trace, _provenance(spec, measured, status=status)


def _result(future, cancelled, event):
    """The result of a chain's task that ``cancelled()`` may cancel: once it is true, the Dask
    Event ``event`` tells the chain to stop at its next step, which it is given
    :data:`CANCEL_GRACE` seconds to reach; then the task itself is cancelled."""
    import distributed

    # waited for here, not by future.result(timeout=...): polling that way can fail inside
    # distributed (dask/distributed#8514: a timeout that cancels the wait as the result arrives
    # ends in UnboundLocalError), which failed a workflow run on a loaded machine
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    while not done.wait(CANCEL_POLL):
        if cancelled():
            break
    else:
        return future.result()
    distributed.Event(event, client=future.client).set()
    if done.wait(CANCEL_GRACE):
        return future.result()
    future.cancel(force=True)
    raise Cancelled(f"the chain did not stop within {CANCEL_GRACE:g} s of its cancellation; "
                    "its task was cancelled")


class _Poll:
    """``cancelled()`` of a chain in a Dask worker: whether its run's Dask Event is set, asked
    of the scheduler at most every :data:`CANCEL_POLL` seconds (a step may take a millisecond)."""

    def __init__(self, name):
        import distributed

        self.event, self.asked = distributed.Event(name), time.perf_counter()

    def __call__(self) -> bool:
        now = time.perf_counter()
        if now - self.asked < CANCEL_POLL:
            return False
        self.asked = now
        return self.event.is_set()


def execute(spec, out, *, progress=False, client=None, cache=None, command=None, cancelled=None) -> str:
    """Run ``spec`` (:func:`run`) and write its trace atomically to ``out``: what ``dpmmbench
    run`` and the workflow's run service do with a run request.

    Parameters
    ----------
    spec : RunSpec
    out : pathlib.Path
        Checked by :func:`~dpmmbench.workflows.errors.writable` (``trace=True``); a run that fails once its chain started leaves its
        rows there (see :func:`run`).
    progress, client, cache, command, cancelled
        As for :func:`run`.

    Returns
    -------
    str
        One line: the trace's path, the run and its outcome.

    Raises
    ------
    Cancelled
        ``cancelled()`` became true: nobody waits for the trace, which is not written.
    OutputError
        The trace could not be written.
    """
    from dpmmbench.reports.traces import remove_stale_temporaries, write_trace

    trace, meta = run(spec, out=out, progress=progress, client=client, cache=cache, command=command,
                      cancelled=cancelled)
    if meta["status"] == "cancelled":
        raise Cancelled(f"{out}: cancelled after {meta['iterations']} iteration(s)")
    # Every option was checked: temporaries a killed run left next to the trace can go.
    remove_stale_temporaries(out)
    write_to(out, lambda: write_trace(trace, out, meta))
    last = trace.iloc[-1]
    heldout = "" if meta["heldout_lpd"] is None else f", held-out log predictive {meta['heldout_lpd']:.6g} per point"
    return (f"{out}: {meta['algorithm']} on {meta['dataset']}, {meta['iterations']} iterations in "
            f"{last['time_s']:.3g} s, {last['n_clusters']} clusters, log joint {last['log_joint']:.6g}{heldout}")


@dataclass
class _Chain:
    """What :func:`_chain_task` brings back from where the chain ran: the trace (so far, when the
    chain failed), facts about the process (with the warm-up seconds), the exception that ended
    the chain (None when it finished), the last states' ``(labels, alpha)``, why it stopped
    (:data:`algorithms.runner.STOP_REASONS`; None when it failed) and the seconds spent scoring
    its states (the runner's callback, off the sampler's clock). With held-out points given to
    the task, their score comes back instead of the draws: ``heldout`` is then
    ``(lpd, draws scored, seconds)``."""

    trace: pd.DataFrame
    process: dict
    error: BaseException | None
    draws: list
    stopped: str | None
    score_s: float = 0.0
    heldout: tuple | None = None
    final_partition: dict | None = None  #: :func:`reports.traces.encode_partition` of the last state


@dataclass
class _Measured:
    """What a run has built and measured, filled in as it gets there (the metadata of a run
    that failed is made from what it holds)."""

    started: datetime
    clock: float
    data: Any = None
    sampler: Any = None
    split: dict = field(default_factory=dict)
    dask: dict = field(default_factory=dict)
    backend: str | None = None
    chain: _Chain | None = None
    environment: dict | None = None  #: :func:`provenance.environment`, when a cache holds it
    command: list = field(default_factory=list)  #: the command line of the run


def _provenance(spec, measured, status) -> dict:
    """The metadata of a run (see :func:`run`) from its spec and what it measured, finished
    or not (``status``)."""
    sampler, data, chain = measured.sampler, measured.data, measured.chain
    options = dict(getattr(sampler, "params", spec.options))
    return {
        "algorithm": spec.algorithm,
        "name": run_name(spec.algorithm, options, spec.name),  # as the trace's name column
        "exact": bool(sampler.exact),
        "kind": sampler.kind,  # what its chain is: R-hat and ESS describe samplers only
        # a peer's own prior, truncation, initialisation and tolerances (docs/design.md "Peers")
        "external": bool(sampler.external),
        "peer_settings": sampler.settings() if sampler.external else None,
        "options": options,
        "options_given": dict(spec.options),
        "dataset": data.name,
        "dataset_meta": data.meta,
        "data_file": spec.data_file,
        "family": repr(data.family),
        "seed": sampler.seed,
        "alpha": sampler.alpha,
        **measured.split,
        "init_clusters": spec.init_clusters,
        "spec": spec.to_dict(),  # the request as it was made: its stop rule is read back from here
        "iterations": int(len(chain.trace) - 1),
        "status": status,
        "time_s": float(chain.trace["time_s"].iloc[-1]),
        "warmup": spec.warmup,
        "warmup_s": chain.process.get("warmup_s"),
        "workers": spec.workers,
        "threads": spec.threads,
        "backend": measured.backend,
        "scheduler": measured.dask["scheduler"],
        "dask": measured.dask,
        "worker": {key: value for key, value in chain.process.items() if key != "warmup_s"},
        # where the time outside the sampler went (reports/runs.py: a run's start-up): scoring
        # every state, then the held-out points (0 when nothing was held out or the run failed)
        "score_s": float(chain.score_s),
        "final_partition": chain.final_partition,
        "heldout_s": float(measured.split.get("heldout_s", 0.0)),
        "wall_s": time.perf_counter() - measured.clock,
        "command": measured.command,
        "started_utc": measured.started.isoformat(timespec="seconds"),
        # to the millisecond: a workflow's timing places each job by its end (reports/runs.py)
        "finished_utc": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        **(measured.environment if measured.environment is not None else environment()),
    }


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


class RunCache:
    """What the runs of one long-lived process share (the workflow's run service,
    :mod:`workflows.service`): each dataset loaded and checked once, and the environment facts
    that cannot change while the process lives (package versions, CPU, the git state of the
    code it imported) computed once.

    A dataset read from a data file is keyed by its name and the file's resolved path, size,
    modification time and sha256, so a file written again (a new preprocessing) is read
    again; a dataset generated or fetched by name is keyed by its name. Safe to use from
    several threads: a dataset two runs ask for at once is loaded once.

    Examples
    --------
    >>> from dpmmbench.workflows.driver import RunCache
    >>> cache = RunCache()
    >>> key, ds = cache.data("synth-chang2013?n=100")
    >>> cache.data("synth-chang2013?n=100")[1] is ds
    True
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._data: dict = {}  #: key -> Dataset
        self._loading: dict = {}  #: key -> the lock its loader holds
        self._environment: dict | None = None

    @staticmethod
    def key(dataset: str, data_file=None):
        """The cache key of a run's data (see the class), or None when the data file cannot be
        read (then it is not cached, and loading it says what is wrong)."""
        if data_file is None:
            return (dataset, None)
        path = Path(data_file)
        try:
            stat = path.stat()
            with open(path, "rb") as f:
                digest = hashlib.file_digest(f, "sha256").hexdigest()
        except OSError:
            return None
        return (dataset, str(path.resolve()), stat.st_size, stat.st_mtime_ns, digest)

    def data(self, dataset: str, data_file=None):
        """``(key, data)``: the run's dataset as :func:`run` loads it (the same checks and
        :class:`DataError`), loaded on the first call for its key.

        Parameters
        ----------
        dataset : str
            Dataset name.
        data_file : str or os.PathLike, optional
            Its preprocessed file.

        Returns
        -------
        key : tuple or None
            See :meth:`key`.
        data : datasets.Dataset
            Shared by every run that asks for it: never to be modified.
        """
        key = self.key(dataset, data_file)
        if key is None:
            return None, _load_data(dataset, data_file)
        with self._lock:
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:
            data = self._data.get(key)
            if data is None:
                data = self._data[key] = _load_data(dataset, data_file)
        return key, data

    def environment(self) -> dict:
        """:func:`workflows.provenance.environment`, computed on the first call."""
        with self._lock:
            if self._environment is None:
                self._environment = environment()
            return self._environment


def _chain_task(sampler, X, spec, chain_args) -> _Chain:
    """Warm up and run one chain of ``spec`` where this is called (a Dask worker for serial
    samplers); the rows of a chain that fails once it has started come back too (in
    :class:`_Chain`, with the exception). ``chain_args`` are :func:`_scored_chain`'s ``truth``,
    ``progress`` and ``dataset`` (a dict, not ``**kwargs``: ``Client.submit`` owns keywords
    such as ``workers``), and optionally ``test``: held-out points, scored here on the chain's
    last states once it finished (:func:`heldout_lpd`), which then do not come back."""
    X = sampler.family.validate(X)
    truth = _checked_truth(sampler.family, X, chain_args["truth"])
    cancelled = chain_args.get("cancelled")
    if chain_args.get("cancel_event") is not None:
        cancelled = _Poll(chain_args["cancel_event"])
    warmup_s = warm_up(sampler, X, spec.init_clusters) if spec.warmup else None
    rows, draws, timing, last = [], deque(maxlen=spec.heldout_draws), {}, {}
    try:
        result = _scored_chain(sampler, X, spec.stop, rows, draws, truth=truth,
                               init_clusters=spec.init_clusters, progress=chain_args["progress"],
                               dataset=chain_args["dataset"], workers=spec.workers, name=spec.name,
                               timing=timing, last=last, cancelled=cancelled)
        error, stopped = None, result.stopped
    except Cancelled:  # raised by the callback once a state is recorded: rows hold it
        error, stopped = None, "cancelled"
    except Exception as exc:  # noqa: BLE001 - re-raised by the caller after keeping the rows
        if not rows:
            raise
        error, stopped = exc, None
    draws, heldout, X_test = list(draws), None, chain_args.get("test")
    if stopped == "cancelled":
        draws, X_test = [], None  # nobody waits for its held-out score
    if X_test is not None and error is None:
        began = time.perf_counter()
        lpd = heldout_lpd(sampler.family, X, draws, X_test)
        draws, heldout = [], (lpd, len(draws), time.perf_counter() - began)
    # the final partition, encoded here (kB, not the labels' MB, travel back): the report's VI
    # between the modes that chains settle in (reports/diagnosis.py)
    final = encode_partition(last["labels"]) if "labels" in last else None
    return _Chain(trace=trace_frame(rows), process=dict(process_facts(), warmup_s=warmup_s), error=error,
                  draws=draws, stopped=stopped, score_s=timing.get("score_s", 0.0), heldout=heldout,
                  final_partition=final)


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
