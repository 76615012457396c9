"""One row per run: where each chain ended and how fast it got there."""
from __future__ import annotations

from pathlib import Path

import pandas as pd


def summarize(paths) -> pd.DataFrame:
    """Summarise trace files (one row per run, sorted by dataset, algorithm, seed).

    Parameters
    ----------
    paths : iterable of str or Path
        Trace files written by ``dpmmbench run`` (.parquet or .csv).

    Returns
    -------
    pandas.DataFrame
        ``dataset, algorithm, seed, workers, iterations, time_s, s_per_iteration,
        final_log_joint, best_log_joint, final_n_clusters, final_vi, alpha, heldout_lpd,
        status, git_commit, cpu_model``: ``alpha`` is the final concentration (the learned
        value when the run had an ``alpha_prior``), ``heldout_lpd`` the mean held-out log
        predictive density per point (NaN when nothing was held out, the run failed or the
        trace predates it); the last three from the run's metadata (``status`` is
        ``completed``, ``stopped: time budget`` or ``failed``; empty where a trace has none).
    """
    from .traces import read_trace

    rows = []
    for path in paths:
        trace, meta = read_trace(Path(path))
        last = trace.iloc[-1]
        iters = int(last["iteration"])
        rows.append({
            "dataset": last["dataset"], "algorithm": last["algorithm"], "seed": int(last["seed"]),
            "workers": int(last["workers"]), "iterations": iters, "time_s": float(last["time_s"]),
            "s_per_iteration": float(trace["time_s"].diff().iloc[1:].median()) if iters else float("nan"),
            "final_log_joint": float(last["log_joint"]), "best_log_joint": float(trace["log_joint"].max()),
            "final_n_clusters": int(last["n_clusters"]), "final_vi": float(last["vi"]),
            "alpha": float(last["alpha"]) if "alpha" in trace else _number(meta.get("alpha")),
            "heldout_lpd": _number(meta.get("heldout_lpd")),
            "status": meta.get("status") or "", "git_commit": meta.get("git_commit") or "", "cpu_model": meta.get("cpu_model") or "",
        })
    if not rows:
        raise ValueError("no trace files to summarise")
    return pd.DataFrame(rows).sort_values(["dataset", "algorithm", "seed"]).reset_index(drop=True)


def _number(value) -> float:
    """A metadata number as a float; NaN where it is missing (None)."""
    return float("nan") if value is None else float(value)
