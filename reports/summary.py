"""The workflow's tables: ``results/summary.csv`` (one row per algorithm, dataset and workers:
statistics over its chains) and ``results/runs.csv`` (one row per run).

Both are views of the run table of :func:`reports.runs.read_runs`, the reader the report uses
too, so the files and the report say the same about the same traces. In the files a run's
name is its ``variant`` (the name a user sees), in the column ``algorithm``, with the registry
name beside it in ``registry`` (:data:`FILE_NAMES`). The column names are stable: scripts and
the results page read them (docs/design.md "Summary columns").
"""
from __future__ import annotations

import pandas as pd

from .chains import TARGET_TOLERANCE, chain_statistics
from .runs import read_runs

#: columns of the per-run table, in order
RUN_COLUMNS = ("dataset", "algorithm", "registry", "seed", "workers", "iterations", "time_s", "s_per_iteration",
               "final_log_joint", "best_log_joint", "final_n_clusters", "final_vi", "final_nmi", "alpha",
               "learned_alpha", "heldout_lpd", "status", "git_commit", "cpu_model", "score_s", "heldout_s",
               "job_wall_s", "startup_s", "timing_note")
#: what a group of chains is: the summary's key columns (as the files name them)
GROUP = ("dataset", "algorithm", "workers")
#: run-table column -> its name in the files: the variant is what the files call the algorithm
FILE_NAMES = {"algorithm": "registry", "variant": "algorithm"}


def runs_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The per-run table (``results/runs.csv``).

    Parameters
    ----------
    runs : pandas.DataFrame
        From :func:`reports.runs.read_runs`.

    Returns
    -------
    pandas.DataFrame
        :data:`RUN_COLUMNS` (named as in the files, :data:`FILE_NAMES`), sorted by dataset,
        algorithm, workers and seed.
    """
    table = _as_files(runs)
    return table.sort_values(["dataset", "algorithm", "workers", "seed"]).reset_index(drop=True)[list(RUN_COLUMNS)]


def summary_table(frame: pd.DataFrame, runs: pd.DataFrame, tolerance: float = TARGET_TOLERANCE) -> pd.DataFrame:
    """One row per (dataset, algorithm, workers): statistics over its chains.

    Parameters
    ----------
    frame, runs : pandas.DataFrame
        From :func:`reports.runs.read_runs`.
    tolerance : float
        Relative tolerance of the time to target (default 0.1 %).

    Returns
    -------
    pandas.DataFrame
        :data:`GROUP` (``algorithm`` being the variant, :data:`FILE_NAMES`), ``registry``, then
        the columns of :func:`reports.chains.chain_statistics` (``chains``, ``failed``, medians
        and ``_lo``/``_hi`` bounds over chains, ``rhat_*``, ``ess_*``, ``ess_per_s``,
        ``rhat_note``, ``time_to_target_s``...), the medians over chains of ``iterations``,
        ``s_per_iteration`` and ``startup_s`` (NaN where no chain's job was timed), and ``git_commit``, ``cpu_model`` (their distinct values, joined
        by ``"; "``); sorted by dataset, algorithm and workers.
    """
    runs = _as_files(runs)
    group = list(GROUP)
    stats = chain_statistics(frame, runs, group, tolerance=tolerance)
    ok = runs[runs["status"] != "failed"]
    extra = ok.groupby(group)[["iterations", "s_per_iteration", "startup_s"]].median().reset_index()
    facts = runs.groupby(group)[["git_commit", "cpu_model"]].agg(_distinct).reset_index()
    names = runs.groupby(group)["registry"].first().reset_index()
    table = (stats.merge(extra, on=group, how="left").merge(facts, on=group, how="left")
             .merge(names, on=group, how="left"))
    table = table[group + ["registry"] + [c for c in table.columns if c not in group and c != "registry"]]
    return table.sort_values(group).reset_index(drop=True)


def summarize(paths, tolerance: float = TARGET_TOLERANCE) -> pd.DataFrame:
    """The summary (:func:`summary_table`) of trace files.

    Parameters
    ----------
    paths : iterable of str or Path
        Trace files written by ``dpmmbench run``.
    tolerance : float
        Relative tolerance of the time to target.

    Returns
    -------
    pandas.DataFrame
        See :func:`summary_table`.
    """
    frame, runs = read_runs(paths)
    return summary_table(frame, runs, tolerance)


def _distinct(values) -> str:
    return "; ".join(sorted({str(v) for v in values if isinstance(v, str) and v}))


def _as_files(runs: pd.DataFrame) -> pd.DataFrame:
    """The run table with the files' column names (:data:`FILE_NAMES`)."""
    return runs.rename(columns=FILE_NAMES)
