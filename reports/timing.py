"""Where a workflow's time went: each run's start-up and the share of the run phase spent sampling.

A workflow is worth its wall time when that time is spent in the samplers. From the run table
(:func:`reports.runs.read_runs`: each run's sampler seconds, scoring seconds, its job's wall
time from Snakemake's ``benchmark:`` file and its start-up), :func:`workflow_timing` computes:

- **start-up per run** (median and 90th percentile): the job's wall time minus its sampler
  and scoring time — starting a process, reaching a cluster, loading data, warming up,
  writing the trace. Goal: median at most :data:`STARTUP_GOAL_S`.
- **sampling share**: the core-seconds the samplers used over the core-seconds the run phase
  had,

  .. math:: \\text{share} = \\frac{\\sum_r t_r \\, c_r}{C \\, T}

  where :math:`t_r` is run :math:`r`'s sampler time (``time_s``: ``init`` and every step),
  :math:`c_r` the cores it claims (its workers x threads, what the workflow's ``threads:``
  gives its job), :math:`C` the workflow's cores and :math:`T` the span of the run phase,
  from the first job's start (its end less its wall time) to the last job's end. Idle cores,
  start-up, scoring and Snakemake's own scheduling all count against it. Goal: at least
  :data:`SAMPLING_GOAL`.
- beside it the simpler **sampling share of the jobs**, :math:`\\sum_r t_r / \\sum_r w_r`
  with :math:`w_r` the job's wall time: the fraction of the jobs' own time that was
  sampling, blind to idle cores.

Only runs with a job file (a workflow's runs) are timed; every figure is over them.

>>> import pandas as pd
>>> from dpmmbench.reports.timing import workflow_timing
>>> runs = pd.DataFrame({"time_s": [2.0, 3.0], "score_s": [0.1, 0.1], "heldout_s": [0.0, 0.0],
...                      "job_wall_s": [2.5, 3.5], "startup_s": [0.4, 0.4], "workers": [1, 1],
...                      "meta": [{"finished_utc": "2026-01-01T00:00:02.500+00:00", "threads": 1},
...                               {"finished_utc": "2026-01-01T00:00:03.500+00:00", "threads": 1}]})
>>> t = workflow_timing(runs, cores=2)
>>> t.span_s, t.sampling_share, t.startup_median_s, t.startup_met
(3.5, 0.7142857142857143, 0.4, False)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pandas as pd

from . import _format as fmt

#: the goal for the median start-up per run, in seconds
STARTUP_GOAL_S = 0.3
#: the goal for the sampling share of the run phase's core-seconds
SAMPLING_GOAL = 0.8


@dataclass(frozen=True)
class WorkflowTiming:
    """Where a workflow's run phase spent its time (see the module docstring).

    Attributes
    ----------
    runs : int
        Runs in the run table.
    timed_runs : int
        Runs with a job file, a start-up and a finish time: the runs every other figure is over.
    startup_median_s, startup_p90_s : float
        Median and 90th percentile (linear interpolation) of the runs' start-up, in seconds.
    sampler_s : float
        Total sampler seconds (``init`` and steps).
    scoring_s : float
        Total seconds spent scoring states and held-out points.
    job_wall_s : float
        Total wall seconds of the jobs.
    startup_s : float
        Total start-up seconds.
    span_s : float
        Seconds from the first job's start to the last job's end.
    cores : int
        The workflow's cores :math:`C` (given, or found as :func:`workflow_timing` says).
    clusters : int
        Distinct Dask schedulers the runs reached (1: one cluster served the workflow).
    sampling_share : float
        :math:`\\sum_r t_r c_r / (C T)`.
    job_sampling_share : float
        :math:`\\sum_r t_r / \\sum_r w_r`.
    startup_met, sampling_met : bool or None
        Whether the median start-up is at most :data:`STARTUP_GOAL_S` and the sampling share
        at least :data:`SAMPLING_GOAL`; None without timed runs.
    """

    runs: int
    timed_runs: int
    startup_median_s: float
    startup_p90_s: float
    sampler_s: float
    scoring_s: float
    job_wall_s: float
    startup_s: float
    span_s: float
    cores: int
    clusters: int
    sampling_share: float
    job_sampling_share: float
    startup_met: bool | None
    sampling_met: bool | None


def workflow_timing(runs: pd.DataFrame, cores: int | None = None) -> WorkflowTiming:
    """The timing of a workflow's run phase from its run table.

    Parameters
    ----------
    runs : pandas.DataFrame
        From :func:`reports.runs.read_runs` (``time_s``, ``score_s``, ``heldout_s``,
        ``job_wall_s``, ``startup_s``, ``workers``, ``meta``).
    cores : int, optional
        The workflow's cores (Snakemake's ``--cores``). By default, when one Dask cluster
        served every run, its size (workers x threads per worker, from the runs' metadata);
        when each run had its own, the cores the machine made available to the runs
        (``cores_available``; the largest cluster when that is larger), which is the
        workflow's ``--cores`` when it used the whole machine.

    Returns
    -------
    WorkflowTiming

    Raises
    ------
    ValueError
        ``cores`` is not a positive integer.
    """
    if cores is not None and (isinstance(cores, bool) or not isinstance(cores, (int, np.integer)) or cores < 1):
        raise ValueError(f"cores must be a positive integer or None, got {cores!r}")
    metas = list(runs["meta"])
    finished = pd.Series([_finished(m) for m in metas], index=runs.index, dtype=float)
    timed = runs.assign(finished=finished)
    timed = timed[np.isfinite(timed["startup_s"]) & np.isfinite(timed["finished"])]
    largest = max((_cluster_cores(m.get("dask") or {}) for m in metas), default=0)
    clusters = len({(m.get("dask") or {}).get("scheduler") for m in metas} - {None})
    if cores is None:
        # Several clusters: each was one run's, and the workflow's --cores is in no metadata;
        # the machine's cores are the most the runs could have had (the share is not overstated).
        machine = max((int(m.get("cores_available") or 0) for m in metas), default=0) if clusters > 1 else 0
        cores = max(largest, machine, 1)
    if timed.empty:
        nan = math.nan
        return WorkflowTiming(len(runs), 0, nan, nan, nan, nan, nan, nan, nan, cores, clusters, nan, nan, None, None)
    claimed = np.array([int(w) * int((m.get("threads") or 1)) for w, m in zip(timed["workers"], timed["meta"])])
    start = timed["finished"] - timed["job_wall_s"]
    span = float(timed["finished"].max() - start.min())
    sampler = timed["time_s"].to_numpy(dtype=float)
    startup = timed["startup_s"].to_numpy(dtype=float)
    median, p90 = (float(np.percentile(startup, q)) for q in (50, 90))
    share = float(np.sum(sampler * claimed) / (cores * span)) if span > 0 else math.nan
    job_share = float(sampler.sum() / timed["job_wall_s"].sum()) if timed["job_wall_s"].sum() > 0 else math.nan
    return WorkflowTiming(
        runs=len(runs), timed_runs=len(timed), startup_median_s=median, startup_p90_s=p90,
        sampler_s=float(sampler.sum()), scoring_s=float((timed["score_s"] + timed["heldout_s"]).sum()),
        job_wall_s=float(timed["job_wall_s"].sum()), startup_s=float(startup.sum()), span_s=span, cores=cores,
        clusters=clusters, sampling_share=share, job_sampling_share=job_share,
        startup_met=bool(median <= STARTUP_GOAL_S),
        sampling_met=None if math.isnan(share) else bool(share >= SAMPLING_GOAL))


def timing_rows(timing: WorkflowTiming) -> list[list[str]]:
    """The figures of ``timing`` as text, one ``[figure, value, meaning]`` row each.

    Parameters
    ----------
    timing : WorkflowTiming

    Returns
    -------
    list of list of str
        Rows for a table with the columns figure, value, meaning; the goals say whether
        they are met.

    Examples
    --------
    >>> from dpmmbench.reports.timing import WorkflowTiming, timing_rows
    >>> t = WorkflowTiming(4, 4, 0.2, 0.5, 30.0, 2.0, 40.0, 8.0, 25.0, 2, 1, 0.6, 0.75, True, False)
    >>> timing_rows(t)[1]
    ['start-up per run, median', '0.2 s (goal ≤ 0.3 s: met)', 'job wall time less sampler and scoring time']
    """
    share = f"{_percent(timing.sampling_share)} (goal ≥ {_percent(SAMPLING_GOAL)}: {_met(timing.sampling_met)})"
    return [
        ["runs timed", f"{timing.timed_runs} of {timing.runs}",
         "runs with a Snakemake job file; the figures below are over them"],
        ["start-up per run, median", f"{fmt.secs(timing.startup_median_s)} (goal ≤ {STARTUP_GOAL_S:g} s: "
         f"{_met(timing.startup_met)})", "job wall time less sampler and scoring time"],
        ["start-up per run, 90th percentile", fmt.secs(timing.startup_p90_s), "nine runs in ten start faster"],
        ["sampler time", fmt.secs(timing.sampler_s), "all runs' init and steps"],
        ["scoring time", fmt.secs(timing.scoring_s), "scoring every state and the held-out points, off the clock"],
        ["start-up time", fmt.secs(timing.startup_s), "all runs' start-up"],
        ["job wall time", fmt.secs(timing.job_wall_s), "all jobs' wall time, as Snakemake measured it"],
        ["run phase", fmt.secs(timing.span_s), "from the first job's start to the last job's end"],
        ["cores", str(timing.cores),
         f"the workflow's cores; {timing.clusters} Dask cluster{'s' if timing.clusters != 1 else ''} served the runs"],
        ["sampling share", share, "sampler core-seconds over the run phase's core-seconds (cores × run phase)"],
        ["sampling share of the jobs", _percent(timing.job_sampling_share),
         "sampler time over the jobs' wall time (idle cores not counted)"],
    ]


def _finished(meta: dict) -> float:
    """A run's end (``finished_utc``) in POSIX seconds; NaN where the metadata lacks it."""
    text = meta.get("finished_utc")
    if not text:
        return math.nan
    try:
        return datetime.fromisoformat(text).timestamp()
    except (TypeError, ValueError):
        return math.nan


def _cluster_cores(dask: dict) -> int:
    """Workers x threads of a run's Dask cluster (``meta["dask"]``); where the workers' thread
    counts differ (a list of the distinct counts), the largest for every worker: an upper
    bound, so that the sampling share is not overstated."""
    threads = dask.get("threads_per_worker") or 0
    if isinstance(threads, (list, tuple)):
        threads = max(threads, default=0)
    return int(dask.get("n_workers") or 0) * int(threads)


def _percent(x) -> str:
    """A share in per cent: whole per cents, two significant digits below 10 % (a smoke run's
    share of a few tenths of a per cent is not 0 %)."""
    if x is None or not np.isfinite(x):
        return fmt.MISSING
    return f"{100 * x:.0f} %" if 100 * x >= 10 else f"{100 * x:.2g} %"


def _met(met) -> str:
    return "unknown" if met is None else ("met" if met else "not met")
