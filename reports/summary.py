"""The workflow's tables: ``results/summary.csv`` (one row per algorithm, dataset and workers:
statistics over its chains) and ``results/runs.csv`` (one row per run).

Both are views of the run table of :func:`reports.runs.read_runs`, the reader the report uses
too, so the files and the report say the same about the same traces, in the same names: a
run's ``name`` (:func:`reports.runs.run_name`) and its registry name, ``algorithm``. The column
names are stable: scripts and the results page read them (docs/design.md "Summary columns").
Files written before (and the tables of ``docs/reproductions/``) named the run ``algorithm``
and the registry name ``registry``, or the run ``variant``: :func:`current_names` reads them
all.
"""
from __future__ import annotations

import pandas as pd

from .chains import TARGET_TOLERANCE, chain_statistics
from .runs import read_runs

#: columns of the per-run table, in order
RUN_COLUMNS = ("dataset", "name", "algorithm", "seed", "workers", "iterations", "time_s", "s_per_iteration",
               "final_log_joint", "best_log_joint", "final_n_clusters", "final_vi", "final_nmi", "alpha",
               "learned_alpha", "heldout_lpd", "status", "git_commit", "cpu_model", "score_s", "heldout_s",
               "job_wall_s", "startup_s", "timing_note")
#: what a group of chains is: the summary's key columns
GROUP = ("dataset", "name", "workers")


def runs_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The per-run table (``results/runs.csv``).

    Parameters
    ----------
    runs : pandas.DataFrame
        From :func:`reports.runs.read_runs`.

    Returns
    -------
    pandas.DataFrame
        :data:`RUN_COLUMNS`, sorted by dataset, name, workers and seed.
    """
    return runs.sort_values(["dataset", "name", "workers", "seed"]).reset_index(drop=True)[list(RUN_COLUMNS)]


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
        :data:`GROUP` (``dataset``, ``name``, ``workers``), ``algorithm``, then
        the columns of :func:`reports.chains.chain_statistics` (``chains``, ``failed``, medians
        and ``_lo``/``_hi`` bounds over chains, ``rhat_*``, ``ess_*``, ``ess_per_s``,
        ``rhat_note``, ``time_to_target_s``...), the medians over chains of ``iterations``,
        ``s_per_iteration`` and ``startup_s`` (NaN where no chain's job was timed), and ``git_commit``, ``cpu_model`` (their distinct values, joined
        by ``"; "``); sorted by dataset, name and workers.
    """
    group = list(GROUP)
    stats = chain_statistics(frame, runs, group, tolerance=tolerance)
    ok = runs[runs["status"] != "failed"]
    extra = ok.groupby(group)[["iterations", "s_per_iteration", "startup_s"]].median().reset_index()
    facts = runs.groupby(group)[["git_commit", "cpu_model"]].agg(_distinct).reset_index()
    names = runs.groupby(group)["algorithm"].first().reset_index()
    table = (stats.merge(extra, on=group, how="left").merge(facts, on=group, how="left")
             .merge(names, on=group, how="left"))
    table = table[group + ["algorithm"] + [c for c in table.columns if c not in group and c != "algorithm"]]
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


def current_names(table: pd.DataFrame) -> pd.DataFrame:
    """A table of these files, or of a reproduction's record (``curves.csv``,
    ``scaling.csv``), in today's names: ``name`` the run's name, ``algorithm`` its registry name.

    Older files named the run ``algorithm`` with the registry name in ``registry``, or named
    the run ``variant`` (with the registry name in ``algorithm``); the oldest named the run
    ``algorithm`` alone, and its name stands for its registry name too.

    Parameters
    ----------
    table : pandas.DataFrame
        As read from the file.

    Returns
    -------
    pandas.DataFrame
        ``table`` itself when it is in today's names (or names no run), else renamed.

    Examples
    --------
    >>> import pandas as pd
    >>> from dpmmbench.reports.summary import current_names
    >>> old = pd.DataFrame({"dataset": ["d"], "algorithm": ["search[beam=10]"], "registry": ["search"]})
    >>> current_names(old).columns.tolist()
    ['dataset', 'name', 'algorithm']
    >>> current_names(pd.DataFrame({"variant": ["subc"], "workers": [2]})).columns.tolist()
    ['name', 'workers']
    >>> current_names(pd.DataFrame({"algorithm": ["gibbs-200it"], "workers": [1]})).columns.tolist()
    ['name', 'algorithm', 'workers']
    """
    if "name" in table:
        return table
    if "registry" in table:
        return table.rename(columns={"algorithm": "name", "registry": "algorithm"})
    if "variant" in table:
        return table.rename(columns={"variant": "name"})
    if "algorithm" in table:
        table = table.rename(columns={"algorithm": "name"})
        table.insert(table.columns.get_loc("name") + 1, "algorithm", table["name"])
    return table
