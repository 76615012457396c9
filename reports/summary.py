"""The workflow's tables: ``results/summary.csv`` (one row per algorithm, dataset and workers:
statistics over its chains) and ``results/runs.csv`` (one row per run).

The column names are stable: scripts and the results page read them (docs/design.md
"Summary columns").
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .chains import TARGET_TOLERANCE, chain_statistics

#: columns of the per-run table, in order
RUN_COLUMNS = ("dataset", "algorithm", "seed", "workers", "iterations", "time_s", "s_per_iteration",
               "final_log_joint", "best_log_joint", "final_n_clusters", "final_vi", "final_nmi", "alpha",
               "learned_alpha", "heldout_lpd", "status", "git_commit", "cpu_model")
#: what a group of chains is: the summary's key columns
GROUP = ("dataset", "algorithm", "workers")


def read_runs(paths):
    """Read trace files into the tidy rows of every run and one row per run.

    Parameters
    ----------
    paths : iterable of str or Path
        Trace files written by ``dpmmbench run`` (.parquet or .csv).

    Returns
    -------
    frame : pandas.DataFrame
        Every trace row, plus ``run`` (the run's position in ``paths``).
    runs : pandas.DataFrame
        ``run`` and the :data:`RUN_COLUMNS`, in input order: ``algorithm`` is the trace's name
        (a workflow variant's name where it has one), ``alpha`` the final concentration (the
        learned value when the run had an ``alpha_prior``, then ``learned_alpha`` is True),
        ``final_nmi`` NaN without ground truth or for a trace that predates the column,
        ``heldout_lpd`` the mean held-out log predictive density per point (NaN when nothing
        was held out, the run failed or the trace predates it); ``status``, ``git_commit``
        and ``cpu_model`` from the run's metadata (``status`` is ``completed``, ``stopped:
        time budget`` or ``failed``; empty where a trace has none).

    Raises
    ------
    ValueError
        No paths, or a trace without rows.
    """
    from .traces import read_trace

    frames, rows = [], []
    for run, path in enumerate(paths):
        trace, meta = read_trace(Path(path))
        if trace.empty:
            raise ValueError(f"trace {path} has no rows")
        trace = trace.sort_values("iteration", kind="stable").reset_index(drop=True)
        last = trace.iloc[-1]
        iters = int(last["iteration"])
        rows.append({
            "run": run, "dataset": last["dataset"], "algorithm": last["algorithm"], "seed": int(last["seed"]),
            "workers": int(last["workers"]), "iterations": iters, "time_s": float(last["time_s"]),
            "s_per_iteration": float(trace["time_s"].diff().iloc[1:].median()) if iters else float("nan"),
            "final_log_joint": float(last["log_joint"]), "best_log_joint": float(trace["log_joint"].max()),
            "final_n_clusters": int(last["n_clusters"]), "final_vi": float(last["vi"]),
            "final_nmi": float(last["nmi"]) if "nmi" in trace else float("nan"),
            "alpha": float(last["alpha"]) if "alpha" in trace else _number(meta.get("alpha")),
            "learned_alpha": meta.get("alpha_prior") is not None,
            "heldout_lpd": _number(meta.get("heldout_lpd")),
            "status": meta.get("status") or "", "git_commit": meta.get("git_commit") or "", "cpu_model": meta.get("cpu_model") or "",
        })
        frames.append(trace.assign(run=run))
    if not rows:
        raise ValueError("no trace files to summarise")
    return pd.concat(frames, ignore_index=True, sort=False), pd.DataFrame(rows)


def runs_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The per-run table (``results/runs.csv``): :data:`RUN_COLUMNS`, sorted by dataset,
    algorithm, workers and seed."""
    return runs.sort_values(["dataset", "algorithm", "workers", "seed"]).reset_index(drop=True)[list(RUN_COLUMNS)]


def summary_table(frame: pd.DataFrame, runs: pd.DataFrame, tolerance: float = TARGET_TOLERANCE) -> pd.DataFrame:
    """One row per (dataset, algorithm, workers): statistics over its chains.

    Parameters
    ----------
    frame, runs : pandas.DataFrame
        From :func:`read_runs`.
    tolerance : float
        Relative tolerance of the time to target (default 0.1 %).

    Returns
    -------
    pandas.DataFrame
        :data:`GROUP`, then the columns of :func:`reports.chains.chain_statistics` (``chains``,
        ``failed``, medians and ``_lo``/``_hi`` bounds over chains, ``rhat_*``, ``ess_*``,
        ``ess_per_s``, ``time_to_target_s``...), the medians over chains of ``iterations`` and
        ``s_per_iteration``, and ``git_commit``, ``cpu_model`` (their distinct values, joined
        by ``"; "``); sorted by dataset, algorithm and workers.
    """
    stats = chain_statistics(frame, runs, list(GROUP), tolerance=tolerance)
    ok = runs[runs["status"] != "failed"]
    extra = ok.groupby(list(GROUP))[["iterations", "s_per_iteration"]].median().reset_index()
    facts = runs.groupby(list(GROUP))[["git_commit", "cpu_model"]].agg(_distinct).reset_index()
    table = stats.merge(extra, on=list(GROUP), how="left").merge(facts, on=list(GROUP), how="left")
    return table.sort_values(list(GROUP)).reset_index(drop=True)


def summarize(paths, tolerance: float = TARGET_TOLERANCE) -> pd.DataFrame:
    """The summary (:func:`summary_table`) of trace files.

    Parameters
    ----------
    paths : iterable of str or Path
        Trace files written by ``dpmmbench run``.
    tolerance : float
        Relative tolerance of the time to target.
    """
    frame, runs = read_runs(paths)
    return summary_table(frame, runs, tolerance)


def _distinct(values) -> str:
    return "; ".join(sorted({str(v) for v in values if isinstance(v, str) and v}))


def _number(value) -> float:
    """A metadata number as a float; NaN where it is missing (None)."""
    return float("nan") if value is None else float(value)

