"""A cost model of the sharded samplers: iteration time and speed-up for 1…64 workers.

Only 1 and 2 workers can be measured here; the papers' scaling claims are about tens of
workers on a real network. From what the traces measure per iteration (the seconds each
shard computed, the bytes and messages that crossed the wire, the sampler time of the
step), this module fits, per data set and run name (:func:`reports.runs.run_name`), the model

.. math::

    T(W) = T_\\mathrm{serial} + (C / W + c)\\,\\iota(W) + m(W)\\,\\ell + b(W) / B

of the time of one synchronous iteration on ``W`` workers, where

* ``T_serial`` is the master's share of an iteration: everything that is neither shard
  compute nor transport. Per measured worker count it is *median step time − median compute
  critical path − loopback transport of the median bytes and messages* (the critical path is
  ``compute_max_s`` when the shards ran in parallel, ``compute_s`` when they ran one after
  another on the serial in-process backend; the loopback transport is ``b / B_lo + m ℓ_lo``
  for an assumed loopback network, :data:`LOOPBACK`); averaged over the worker counts, it is
  ``T_serial``. It holds the master's own work (integrating results, global
  moves, consolidation) and whatever the execution layer costs per iteration: on Dask that
  is the scheduling of one task per shard and the round trips through the scheduler, which
  on a small machine is most of it. It is taken as independent of ``W``; the fitted values
  per worker count are kept (:attr:`CostModel.measured`) so a report can show how far that
  holds;
* ``C + c W`` is the total shard compute of an iteration (``compute_s``), fitted as affine
  in ``W`` over the measured worker counts (least squares, both coefficients >= 0): ``C`` is
  the work that divides among the shards, ``c`` a fixed cost every shard pays (reading the
  global state, per-cluster work). One shard computes ``C / W + c``;
* ``ι(W)`` is the load imbalance: the slowest shard over the mean shard,
  ``compute_max_s · W / compute_s``, measured at the largest worker count ``>= 2`` and held
  for every ``W >= 2`` (``ι(1) = 1``). For ``auxvar`` it is real (whole clusters sit on
  random workers, Gal & Ghahramani 2014) and grows with ``W``, so the model is optimistic
  there;
* ``m(W)`` and ``b(W)`` are the messages and bytes (sent + received) per iteration,
  affine in ``W`` (per-shard broadcasts and replies), fitted on the measured counts with a
  slope >= 0 and a value >= 0 at one worker.
  Rows that move between workers (``moved_bytes``, ``auxvar``) are modelled apart: a
  uniformly random new worker keeps a cluster with probability ``1 / W``, so the moved
  bytes are ``M (W − 1) / W``, each counted twice (worker → master → worker);
* ``B`` and ``ℓ`` are the bandwidth and the latency of the modelled network
  (:data:`GIGABIT`: 1 Gbit/s, 0.2 ms). Every message pays the latency once, as if the
  master talked to its workers one at a time: an upper bound when messages overlap. All
  traffic passes through the master's link.

With only one measured worker count, ``c = 0``, ``ι = 1`` and the bytes and messages are
taken as proportional to ``W``. Iteration 0 (initialisation, which ships the data) and
iterations during which a worker was lost are left out.

The speed-up w.r.t. CGS is per iteration: the median time of one ``gibbs`` iteration on the
same data set (one worker) over ``T(W)``. It ignores that algorithms need different numbers
of iterations to converge (the report's time-to-target table accounts for that).

Example
-------
>>> model = fit(trace)                                    # doctest: +SKIP
>>> predict(model, reference_s=0.0015).round(4)           # doctest: +SKIP
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpmmbench import algorithms

#: worker counts the model is evaluated at
MODEL_WORKERS = tuple(range(1, 65))
#: worker counts shown in the report's table
TABLE_WORKERS = (1, 2, 4, 8, 16, 32, 64)
#: columns a trace needs for the model
MODEL_COLUMNS = ("compute_s", "compute_max_s", "bytes_sent", "bytes_received", "messages")


@dataclass(frozen=True)
class Network:
    """A network an iteration is modelled on.

    Attributes
    ----------
    bandwidth : float
        Bytes per second through the master's link (> 0).
    latency : float
        Seconds every message pays (>= 0).
    """

    bandwidth: float
    latency: float

    def __post_init__(self):
        if not self.bandwidth > 0:
            raise ValueError(f"bandwidth must be > 0 bytes/s, got {self.bandwidth}")
        if not self.latency >= 0:
            raise ValueError(f"latency must be >= 0 s, got {self.latency}")

    def transport_s(self, n_bytes, messages):
        """Seconds to move ``n_bytes`` in ``messages`` messages (arrays broadcast)."""
        return np.asarray(messages, dtype=float) * self.latency + np.asarray(n_bytes, dtype=float) / self.bandwidth

    def describe(self) -> str:
        """E.g. ``"1 Gbit/s, 0.2 ms"``."""
        return f"{self.bandwidth * 8 / 1e9:.3g} Gbit/s, {self.latency * 1e3:.3g} ms"


#: the modelled network: Gigabit Ethernet (Wang & Lin's cluster) with 0.2 ms per message
GIGABIT = Network(bandwidth=1e9 / 8, latency=0.2e-3)
#: what the measured runs' transport is assumed to have cost: TCP over loopback (order of
#: magnitude of a kernel round trip and a memory copy; Dask's own overhead is not transport
#: and stays in ``T_serial``)
LOOPBACK = Network(bandwidth=2e9, latency=20e-6)


@dataclass(frozen=True, eq=False)
class CostModel:
    """The fitted model of the runs of one name on one data set (see the module docstring).

    Attributes
    ----------
    serial_s : float
        ``T_serial``, seconds per iteration.
    compute_s : float
        ``C``, shard compute per iteration that divides among the shards (seconds).
    shard_s : float
        ``c``, compute every shard pays per iteration whatever ``W`` (seconds).
    imbalance : float
        ``ι`` for ``W >= 2`` (>= 1).
    bytes_fixed, bytes_per_worker : float
        ``b(W) = bytes_fixed + bytes_per_worker · W`` without moved rows (``bytes_fixed`` may
        be negative, down to ``-bytes_per_worker``).
    moved_bytes : float
        ``M``: bytes of rows that would move if every row changed worker (0 if none move).
    messages_fixed, messages_per_worker : float
        ``m(W) = messages_fixed + messages_per_worker · W``.
    measured : pandas.DataFrame
        One row per measured worker count (see :func:`measure`).
    """

    serial_s: float
    compute_s: float
    shard_s: float
    imbalance: float
    bytes_fixed: float
    bytes_per_worker: float
    moved_bytes: float
    messages_fixed: float
    messages_per_worker: float
    measured: pd.DataFrame

    def bytes(self, workers):
        """Bytes per iteration (sent + received) on ``workers`` workers."""
        w = np.asarray(workers, dtype=float)
        return self.bytes_fixed + self.bytes_per_worker * w + 2 * self.moved_bytes * (w - 1) / w

    def messages(self, workers):
        """Messages per iteration on ``workers`` workers."""
        return self.messages_fixed + self.messages_per_worker * np.asarray(workers, dtype=float)

    def compute_path_s(self, workers, sequential=False):
        """Seconds of shard compute an iteration waits for: the slowest shard when the shards
        run in parallel, all of them when they run one after another (``sequential``)."""
        w = np.asarray(workers, dtype=float)
        if sequential:
            return self.compute_s + self.shard_s * w
        return (self.compute_s / w + self.shard_s) * np.where(w >= 2, self.imbalance, 1.0)

    def iteration_s(self, workers, network=GIGABIT, sequential=False):
        """Modelled seconds of one iteration on ``workers`` workers over ``network``."""
        return (self.serial_s + self.compute_path_s(workers, sequential)
                + network.transport_s(self.bytes(workers), self.messages(workers)))


def measure(trace: pd.DataFrame, loopback: Network = LOOPBACK) -> pd.DataFrame:
    """Per measured worker count, the medians the model is fitted on.

    Parameters
    ----------
    trace : pandas.DataFrame
        Trace rows of the runs of one name on one data set, any number of runs (told apart
        by ``run`` if present, else ``seed`` and ``workers``), with the columns of
        :data:`MODEL_COLUMNS`, ``workers``, ``iteration``, ``time_s`` and optionally
        ``moved_bytes``, ``workers_lost`` and ``sequential`` (bool: the run's shards ran
        one after another; default False).
    loopback : Network
        What the measured transport is assumed to have cost.

    Returns
    -------
    pandas.DataFrame
        One row per worker count, sorted: ``workers, runs, iterations, sequential`` (every
        run of that count had sequential shards), and the medians over iterations (seeds
        pooled) of ``step_s`` (sampler seconds of an iteration), ``compute_s``,
        ``imbalance`` (``compute_max_s · W / compute_s``), ``bytes`` (sent + received),
        ``moved_bytes``, ``other_bytes`` (``bytes − 2 moved_bytes``), ``messages``, and
        ``master_s``: the median step less the median compute critical path and the loopback
        transport of the median bytes and messages (so the parts add up to the median step).
        Empty when no iteration reports ``compute_s``.
    """
    key = ["run"] if "run" in trace else ["seed", "workers"]
    trace = trace.sort_values(key + ["iteration"], kind="stable")
    step = trace["time_s"].groupby([trace[k] for k in key]).diff()
    # eq(True): a missing flag (NaN) means parallel shards, the Dask case
    sequential = trace["sequential"].eq(True) if "sequential" in trace else pd.Series(False, index=trace.index)
    rows = trace.assign(step_s=step, sequential=sequential)
    keep = (rows["iteration"] > 0) & rows["step_s"].notna()
    for col in MODEL_COLUMNS:
        keep &= rows[col].notna() if col in rows else False
    if "workers_lost" in rows:
        keep &= rows["workers_lost"].fillna(0) == 0  # a recovery is not a normal iteration
    rows = rows[keep]
    columns = ["workers", "runs", "iterations", "sequential", "step_s", "compute_s", "imbalance", "bytes",
               "moved_bytes", "other_bytes", "messages", "master_s"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    w = rows["workers"].astype(float)
    n_bytes = rows["bytes_sent"] + rows["bytes_received"]
    moved = rows["moved_bytes"].fillna(0) if "moved_bytes" in rows else pd.Series(0.0, index=rows.index)
    path = rows["compute_s"].where(rows["sequential"], rows["compute_max_s"])
    per_row = pd.DataFrame({
        "workers": rows["workers"].astype(int),
        "run": rows[key].astype(str).agg("/".join, axis=1),
        "sequential": rows["sequential"],
        "step_s": rows["step_s"],
        "compute_s": rows["compute_s"],
        # an iteration whose shards computed nothing measurable says nothing about balance
        "imbalance": (rows["compute_max_s"] * w / rows["compute_s"]).where(rows["compute_s"] > 0),
        "bytes": n_bytes,
        "moved_bytes": moved,
        "other_bytes": n_bytes - 2 * moved,  # moved rows go worker -> master -> worker
        "messages": rows["messages"],
        "path_s": path,
    })
    grouped = per_row.groupby("workers", sort=True)
    out = grouped[["step_s", "compute_s", "imbalance", "bytes", "moved_bytes", "other_bytes", "messages",
                   "path_s"]].median()
    # the master's share from the medians, not the median of per-iteration differences: the
    # model composes medians, and on a busy machine (skewed step times) the two differ by more
    # than the share itself (measured: 1.8 ms composed against 4.0 ms)
    out["master_s"] = out["step_s"] - out.pop("path_s") - loopback.transport_s(out["bytes"], out["messages"])
    out.insert(0, "sequential", grouped["sequential"].all())
    out.insert(0, "iterations", grouped.size())
    out.insert(0, "runs", grouped["run"].nunique())
    return out.reset_index()[columns]


def fit(trace: pd.DataFrame, loopback: Network = LOOPBACK) -> CostModel:
    """Fit the cost model on the runs of one name on one data set.

    Parameters
    ----------
    trace : pandas.DataFrame
        As for :func:`measure`.
    loopback : Network
        What the measured transport is assumed to have cost (subtracted from the step time).

    Returns
    -------
    CostModel

    Raises
    ------
    ValueError
        No iteration reports the model's columns (e.g. a serial sampler, or a trace written
        before the backends reported ``compute_s``).
    """
    m = measure(trace, loopback)
    if m.empty:
        raise ValueError("no iteration reports compute_s, compute_max_s, bytes and messages: nothing to fit")
    return fit_measured(m)


def fit_measured(m: pd.DataFrame) -> CostModel:
    """Fit the cost model on the medians per worker count (the frame :func:`measure` returns,
    or the same columns from another source, e.g. a scaling record's rows)."""
    w = m["workers"].to_numpy(float)
    compute_fixed, compute_per_worker = _affine(w, m["compute_s"].to_numpy(float), single="constant", low=0)
    moving = m[(m["workers"] >= 2) & (m["moved_bytes"] > 0)]
    # moved bytes are M (W - 1) / W: the share of clusters a uniform draw sends elsewhere
    moved = 0.0
    if len(moving):
        moved = float(np.median(moving["moved_bytes"] * moving["workers"] / (moving["workers"] - 1)))
    bytes_fixed, bytes_per_worker = _affine(w, m["other_bytes"].clip(lower=0).to_numpy(float),
                                            single="proportional", low=1)
    messages_fixed, messages_per_worker = _affine(w, m["messages"].to_numpy(float), single="proportional", low=1)
    several = m[m["workers"] >= 2]
    imbalance = float(several.loc[several["workers"].idxmax(), "imbalance"]) if len(several) else 1.0
    if not np.isfinite(imbalance):
        imbalance = 1.0
    # each measured worker count weighs the same, whatever its number of seeds
    serial = max(0.0, float(m["master_s"].mean()))
    return CostModel(serial_s=serial, compute_s=compute_fixed, shard_s=compute_per_worker,
                     imbalance=max(1.0, imbalance), bytes_fixed=bytes_fixed, bytes_per_worker=bytes_per_worker,
                     moved_bytes=moved, messages_fixed=messages_fixed, messages_per_worker=messages_per_worker,
                     measured=m)


def predict(model: CostModel, reference_s: float = math.nan, workers=MODEL_WORKERS,
            network: Network = GIGABIT) -> pd.DataFrame:
    """Modelled iteration time, its parts and the speed-up over the reference.

    Parameters
    ----------
    model : CostModel
    reference_s : float
        Seconds of one iteration of the reference (CGS); NaN gives NaN speed-ups.
    workers : sequence of int
        Worker counts to evaluate.
    network : Network
        The modelled network.

    Returns
    -------
    pandas.DataFrame
        One row per worker count: ``workers, iteration_s, serial_s, compute_s`` (critical
        path), ``transport_s, bytes, messages, speedup`` (``reference_s / iteration_s``).
    """
    w = np.asarray(workers, dtype=int)
    n_bytes, messages = model.bytes(w), model.messages(w)
    out = pd.DataFrame({"workers": w, "serial_s": model.serial_s, "compute_s": model.compute_path_s(w),
                        "transport_s": network.transport_s(n_bytes, messages), "bytes": n_bytes,
                        "messages": messages})
    out.insert(1, "iteration_s", out["serial_s"] + out["compute_s"] + out["transport_s"])
    out["speedup"] = reference_s / out["iteration_s"]
    return out


def in_sample(model: CostModel, loopback: Network = LOOPBACK) -> pd.DataFrame:
    """The model at the measured worker counts, under the measured conditions (loopback
    transport, shards in parallel or one after another as they ran), next to the measured
    median step time: how well the model reproduces what it was fitted on.

    Returns
    -------
    pandas.DataFrame
        ``workers, measured_s, model_s, error`` (relative: model / measured − 1).
    """
    m = model.measured
    modelled = [float(model.iteration_s(w, loopback, sequential=s)) for w, s in zip(m["workers"], m["sequential"])]
    out = pd.DataFrame({"workers": m["workers"].astype(int), "measured_s": m["step_s"].astype(float),
                        "model_s": modelled})
    out["error"] = out["model_s"] / out["measured_s"] - 1
    return out


@dataclass(frozen=True, eq=False)
class Scaling:
    """The cost models of one data set's sharded runs, ready to report.

    Attributes
    ----------
    models : dict
        Run name -> :class:`CostModel`, for every sharded run name whose traces allow a fit.
    reference_s : float
        Median seconds of one iteration of the reference (NaN without reference runs).
    predictions : pandas.DataFrame
        :func:`predict` for every model, with a ``name`` column.
    measured : pandas.DataFrame
        ``name, workers, iteration_s, speedup, sequential``: the measured points (median
        step time over iterations and seeds; ``sequential``: two or more shards ran one after
        another).
    notes : list of str
        What could not be modelled, and the assumptions forced by missing runs.
    """

    models: dict
    reference_s: float
    predictions: pd.DataFrame
    measured: pd.DataFrame
    notes: list


def scaling(frame: pd.DataFrame, runs: pd.DataFrame, network: Network = GIGABIT, loopback: Network = LOOPBACK,
            reference: str = "gibbs", workers=MODEL_WORKERS) -> Scaling:
    """Fit and evaluate the cost model of the runs of every sharded name of one data set.

    Parameters
    ----------
    frame, runs : pandas.DataFrame
        From :func:`reports.runs.read_runs`, restricted to one data set.
    network : Network
        The modelled network.
    loopback : Network
        What the measured transport is assumed to have cost.
    reference : str
        Run name whose single-worker runs give the reference iteration time (CGS).
    workers : sequence of int
        Worker counts to predict.

    Returns
    -------
    Scaling
        Empty ``models`` when the data set has no sharded runs; the notes say why a sharded
        run name has no model.
    """
    ref_runs = runs.loc[(runs["name"] == reference) & (runs["workers"] == 1), "run"]
    ref_steps = _step_s(frame[frame["run"].isin(ref_runs)])
    reference_s = float(ref_steps.median()) if len(ref_steps) else math.nan

    sequential = {int(r): str((meta or {}).get("backend", "")).startswith("serial in-process")
                  for r, meta in zip(runs["run"], runs["meta"])}
    has_compute = set()
    if "compute_s" in frame:
        has_compute = set(frame.loc[(frame["iteration"] > 0) & frame["compute_s"].notna(), "run"])
    models, notes, predicted, measured = {}, [], [], []
    stale, one_by_one = [], []
    for name, group in runs.groupby("name", sort=False):
        usable = group[group["run"].isin(has_compute)]
        if usable.empty:
            if is_sharded(group["algorithm"].iloc[0]):
                stale.append(name)
            continue
        trace = frame[frame["run"].isin(usable["run"])]
        trace = trace.assign(sequential=trace["run"].map(sequential).eq(True))
        try:
            model = fit(trace, loopback)
        except ValueError:
            stale.append(name)
            continue
        models[name] = model
        predicted.append(predict(model, reference_s, workers, network).assign(name=name))
        m = model.measured
        measured.append(pd.DataFrame({"name": name, "workers": m["workers"].astype(int),
                                      "iteration_s": m["step_s"].astype(float), "speedup": reference_s / m["step_s"],
                                      # one shard runs alone either way
                                      "sequential": m["sequential"].astype(bool) & (m["workers"] >= 2)}))
        counts = sorted(int(w) for w in m["workers"])
        if len(counts) == 1:
            imbalance = ", the imbalance as 1" if counts[0] == 1 else ""
            notes.append(f"{name}: measured at {counts[0]} worker(s) only, so the per-shard cost c is taken as "
                         f"0{imbalance} and bytes and messages as proportional to the workers.")
        if (m["sequential"] & (m["workers"] >= 2)).any():  # one shard runs alone anyway
            one_by_one.append(name)
    if stale:
        notes.insert(0, f"No model for {', '.join(stale)}: their traces do not report the per-shard compute time "
                        f"(compute_s; traces written before the backends reported it). Re-run them to model them.")
    if one_by_one:
        notes.append(f"The shards of {', '.join(one_by_one)} ran one after another (serial in-process backend): "
                     f"their measured points with 2 or more workers are not parallel times; the model's curve is.")
    if models and not np.isfinite(reference_s):
        notes.append(f"No single-worker {reference} runs on this data set: iteration times are shown instead of the "
                     f"speed-up w.r.t. {reference}.")
    columns = ["name", "workers", "iteration_s", "speedup", "sequential"]
    return Scaling(models=models, reference_s=reference_s,
                   predictions=pd.concat(predicted, ignore_index=True) if predicted else pd.DataFrame(),
                   measured=pd.concat(measured, ignore_index=True) if measured else pd.DataFrame(columns=columns),
                   notes=notes)


def _step_s(trace: pd.DataFrame) -> pd.Series:
    """Seconds of every iteration after the first (rows sorted per run)."""
    if trace.empty:
        return pd.Series(dtype=float)
    trace = trace.sort_values(["run", "iteration"], kind="stable")
    step = trace["time_s"].groupby(trace["run"]).diff()
    return step[(trace["iteration"] > 0) & step.notna()]


def is_sharded(algorithm: str) -> bool:
    """Whether the registry's ``algorithm`` runs on shards (False if it is unknown here).

    Parameters
    ----------
    algorithm : str
        Registry name.
    """
    try:
        return bool(getattr(algorithms.get(algorithm), "supports_backend", False))
    except (ImportError, ValueError, KeyError):
        return False


def _affine(x: np.ndarray, y: np.ndarray, single: str, low: int) -> tuple[float, float]:
    """``(a, b)`` with ``y ≈ a + b x`` by least squares, ``b >= 0`` and ``a + b low >= 0``.

    A cost that shrinks as workers are added is not a cost (noise on two points), nor is one
    that is negative at ``x = low``: ``low = 0`` for the compute (``a`` is work that divides
    among the shards), ``low = 1`` for bytes and messages, which may grow faster than in
    proportion to the workers (auxvar sends nothing between workers when there is one).
    When a bound binds, that coefficient is fixed at it and the other refitted. With one
    distinct ``x`` the line is not identified: ``single="constant"`` gives ``(mean y, 0)``,
    ``"proportional"`` gives ``(0, mean y / x)``.
    """
    if len(np.unique(x)) < 2:
        return (float(np.mean(y)), 0.0) if single == "constant" else (0.0, float(np.mean(y / x)))
    b, a = np.polyfit(x, y, 1)
    # rounding leaves e.g. 1e-15 where the data say 0 (counts exactly proportional to W)
    tiny = 1e-9 * float(np.abs(y).max(initial=0.0))
    a, b = (0.0 if abs(v) <= tiny else float(v) for v in (a, b))
    if b < 0:
        return float(np.mean(y)), 0.0
    if a + b * low < 0:  # the line through (low, 0)
        slope = float(np.dot(x - low, y) / np.dot(x - low, x - low))
        return -slope * low, slope
    return a, b
