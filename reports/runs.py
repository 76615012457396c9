"""The run table: trace files read into one tidy frame and one row per run.

Every reader of results starts here: ``dpmmbench summarize`` (:mod:`reports.summary`, which
writes ``results/summary.csv`` and ``results/runs.csv``), the HTML report
(:mod:`reports.report`), the papers' claims (:mod:`reports.claims`) and the cost model
(:mod:`reports.costmodel`). Each derived column has one definition, here, so that the files
and the report cannot say different things about the same traces. Where the two readers
this module replaces disagreed, the choice and its reason:

- **Seconds per step** (``s_per_iteration``) is the median of the steps' own times
  (:func:`step_times`: the differences of ``time_s`` between consecutive iterations, the
  initialisation excluded). A search does all its work in its first step and its later steps
  return at once, so only the step that searched counts for it: a median over every step
  would report the search as taking no time.
- **Names**: ``algorithm`` is the registry name (from the run's metadata), ``variant`` the
  name a user sees — the workflow's name for a variant where the trace carries one (e.g.
  ``search-decreasing``), else the registry name with its options that differ from the
  defaults (``search[beam=10]``) — and ``label`` the variant with its number of workers when
  not 1. Two runs of one algorithm with different options are different methods: they are
  never pooled under the registry name. The files name the variant ``algorithm`` and the
  registry name ``registry`` beside it (:mod:`reports.summary`).
- **alpha** is the final concentration of the trace; the metadata's where the trace has none.
- **Refusals**: a trace without a required column or without rows, and two traces of the same
  run (same dataset, label and seed: counted twice, one chain would weigh double), are
  refused by every reader, not only by the report.
- ``kind`` says what the method's chain is (:attr:`algorithms.base.Sampler.kind`): R-hat and
  ESS describe samplers only (:mod:`reports.chains`). The run's metadata records it; for older
  traces the registry says, where the method is installed.

>>> from pathlib import Path
>>> from dpmmbench.reports.runs import read_runs
>>> traces = sorted(Path("results/traces").rglob("*.parquet"))  # a workflow's output
>>> frame, runs = read_runs(traces)   # needs a workflow run's traces  # doctest: +SKIP
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from dpmmbench import algorithms

from .traces import COMM_COLUMNS, read_trace

#: columns every trace must have to be read
REQUIRED = ("algorithm", "dataset", "seed", "workers", "iteration", "time_s", "log_joint", "n_clusters", "vi")


def read_runs(trace_paths):
    """Read trace files into one tidy frame and one row per run.

    Parameters
    ----------
    trace_paths : iterable of str or os.PathLike
        Traces written by ``dpmmbench run`` (.parquet, or .csv with its .meta.json sidecar).

    Returns
    -------
    frame : pandas.DataFrame
        Every trace row in iteration order, plus ``run`` (the run's position in
        ``trace_paths``), ``variant`` and ``label`` (see below): the name a line carries in
        the figures.
    runs : pandas.DataFrame
        One row per run, in input order: ``run, path, dataset``; ``algorithm`` (registry
        name), ``variant`` (the name a user sees, see the module docstring), ``label``
        (variant, plus the number of workers when not 1), ``kind`` (``sampler``,
        ``optimiser``, ``variational``; empty when the method is not known here), ``seed,
        workers, options`` (the run's resolved options), ``meta`` (its metadata);
        ``iterations`` (the last iteration), ``time_s`` (sampler seconds at the end),
        ``s_per_iteration`` (median of :func:`step_times`), ``final_log_joint``,
        ``best_log_joint``, ``final_vi``, ``final_nmi`` (NaN without ground truth or for a
        trace that predates the column), ``final_n_clusters``, ``alpha`` (final),
        ``learned_alpha`` (the run had an ``alpha_prior``), ``heldout_lpd`` (mean held-out log
        predictive density per point; NaN where nothing was held out), ``external`` (a peer's
        run), ``status`` (``completed``, ``stopped: time budget`` or ``failed``), ``git_commit``
        and ``cpu_model`` (from the metadata; empty where absent), ``search_s`` (sampler time
        at which a search finished, NaN for samplers) and the mean per-step ``bytes_sent,
        bytes_received, bytes, messages``. An algorithm's own per-step columns stay in
        ``frame`` (the report's per-step section reads them by their declaration).

    Raises
    ------
    FileNotFoundError
        A trace file does not exist.
    ValueError
        No paths, an empty trace, a trace without a required column, or two traces of the
        same run (same dataset, label and seed).
    """
    paths = [Path(p) for p in trace_paths]
    if not paths:
        raise ValueError("no trace files to read")
    frames, rows, seen = [], [], {}
    for i, path in enumerate(paths):
        if not path.is_file():
            raise FileNotFoundError(f"trace file not found: {path}")
        trace, meta = read_trace(path)
        missing = [c for c in REQUIRED if c not in trace.columns]
        if missing:
            raise ValueError(f"trace {path} lacks column(s) {missing}; is it a dpmmbench trace?")
        if trace.empty:
            raise ValueError(f"trace {path} has no rows")
        trace = trace.sort_values("iteration", kind="stable").reset_index(drop=True)
        first = trace.iloc[0]
        # The trace's algorithm column may hold a workflow's name for a variant (e.g.
        # "search-decreasing"); the registry name is then in the metadata.
        name, dataset = str(first["algorithm"]), str(first["dataset"])
        algorithm = str(meta.get("algorithm") or name)
        seed, workers = int(first["seed"]), int(first["workers"])
        options = dict(meta.get("options") or {})
        variant = name if name != algorithm else variant_name(algorithm, options)
        label = variant if workers == 1 else f"{variant} ({workers} workers)"
        key = (dataset, label, seed)
        if key in seen:
            raise ValueError(f"traces {seen[key]} and {path} are the same run (dataset {dataset!r}, "
                             f"{label}, seed {seed}); pass only one of them")
        seen[key] = path
        trace = trace.assign(run=i, variant=variant, label=label)
        frames.append(trace)
        rows.append({"run": i, "path": str(path), "dataset": dataset, "algorithm": algorithm,
                     "variant": variant, "label": label, "kind": meta.get("kind") or method_kind(algorithm),
                     "seed": seed, "workers": workers, "options": options, "meta": meta,
                     **_run_stats(trace, meta),
                     "learned_alpha": meta.get("alpha_prior") is not None,
                     "heldout_lpd": _number(meta.get("heldout_lpd")),
                     "external": bool(meta.get("external")),
                     "status": meta.get("status") or "", "git_commit": meta.get("git_commit") or "",
                     "cpu_model": meta.get("cpu_model") or ""})
    frame = pd.concat(frames, ignore_index=True, sort=False)
    return frame, pd.DataFrame(rows)


def variant_name(algorithm: str, options: dict) -> str:
    """The algorithm's registry name plus its options that differ from the registry defaults.

    Parameters
    ----------
    algorithm : str
        Registry name.
    options : dict
        The run's options (all of them, or only those given).

    Returns
    -------
    str
        ``algorithm`` alone when every option is at its default or the algorithm is not known
        here (its defaults cannot be told apart then), else ``algorithm[key=value, ...]``.

    Examples
    --------
    >>> from dpmmbench.reports.runs import variant_name
    >>> variant_name("search", {"beam": 10, "heuristic": "inadmissible"})
    'search[beam=10]'
    >>> variant_name("gibbs", {})
    'gibbs'
    """
    try:
        defaults = {k: opt.default for k, opt in algorithms.get(algorithm).options.items()}
    except (ValueError, ImportError, AttributeError):
        defaults = dict(options)  # unknown here: the defaults cannot be told apart, show none
    changed = {k: v for k, v in sorted(options.items()) if k in defaults and defaults[k] != v}
    if not changed:
        return algorithm
    return f"{algorithm}[{', '.join(f'{k}={v}' for k, v in changed.items())}]"


def method_kind(algorithm: str) -> str:
    """What the registered ``algorithm``'s chain is (:attr:`algorithms.base.Sampler.kind`).

    Returns
    -------
    str
        ``"sampler"``, ``"optimiser"`` or ``"variational"``; ``""`` when the algorithm is not
        known here (a peer whose library is not installed, a plug-in that is not).

    Examples
    --------
    >>> from dpmmbench.reports.runs import method_kind
    >>> method_kind("gibbs"), method_kind("search"), method_kind("no-such-method")
    ('sampler', 'optimiser', '')
    """
    try:
        return str(algorithms.get(algorithm).kind)
    except (ValueError, ImportError, AttributeError):
        return ""


def step_times(frame: pd.DataFrame) -> pd.DataFrame:
    """Sampler seconds of each step: the rows with ``iteration > 0`` and a ``step_s`` column.

    ``step_s`` is the difference of ``time_s`` to the previous row of the same run, so the
    initialisation (iteration 0) is never a step. A search does all its work in its first
    step and later steps return at once; only steps that searched (``states_popped > 0``) are
    kept for runs that report search statistics.

    Parameters
    ----------
    frame : pandas.DataFrame
        Trace rows in iteration order within each run (``run`` column; one run without it).

    Returns
    -------
    pandas.DataFrame
        The kept rows of ``frame`` with ``step_s``.
    """
    key = frame["run"] if "run" in frame else pd.Series(0, index=frame.index)
    steps = frame.assign(step_s=frame["time_s"].groupby(key).diff())
    steps = steps[steps["iteration"] > 0]
    if "states_popped" in steps:
        popped = steps["states_popped"]
        steps = steps[popped.isna() | (popped > 0)]
    return steps.dropna(subset=["step_s"])


def label_order(runs: pd.DataFrame) -> list:
    """Labels in registry order of their algorithm, then by variant and workers.

    Parameters
    ----------
    runs : pandas.DataFrame
        From :func:`read_runs` (``algorithm``, ``variant``, ``workers``, ``label``).

    Returns
    -------
    list of str
        Each label once; algorithms not known here after the registry's.
    """
    rank = {name: i for i, name in enumerate(algorithms.available())}
    keys = runs.drop_duplicates("label")
    keys = sorted(zip(keys["algorithm"], keys["variant"], keys["workers"], keys["label"]),
                  key=lambda k: (rank.get(k[0], len(rank)), k[0], k[1] != k[0], k[1], k[2]))
    return [k[3] for k in keys]


def _run_stats(trace: pd.DataFrame, meta: dict) -> dict:
    """Where one run ended and what its steps cost (see :func:`read_runs`)."""
    last = trace.iloc[-1]
    steps = trace[trace["iteration"] > 0]
    step_s = step_times(trace)["step_s"]
    alpha = float(last["alpha"]) if "alpha" in trace else math.nan
    stats = {
        "iterations": int(last["iteration"]), "time_s": float(last["time_s"]),
        "s_per_iteration": float(step_s.median()) if len(step_s) else math.nan,
        "final_log_joint": float(last["log_joint"]), "best_log_joint": float(trace["log_joint"].max()),
        "final_vi": float(last["vi"]), "final_nmi": float(last["nmi"]) if "nmi" in trace else math.nan,
        "final_n_clusters": int(last["n_clusters"]),
        "alpha": alpha if not math.isnan(alpha) else _number(meta.get("alpha")),
        "search_s": math.nan,
    }
    if "states_popped" in trace and trace["states_popped"].fillna(0).gt(0).any():
        stats["search_s"] = float(trace.loc[trace["states_popped"].fillna(0) > 0, "time_s"].iloc[-1])
    for col in COMM_COLUMNS:
        stats[col] = float(steps[col].mean()) if col in steps and len(steps) else math.nan
    stats["bytes"] = stats["bytes_sent"] + stats["bytes_received"]
    return stats


def _number(value) -> float:
    """A metadata number as a float; NaN where it is missing (None)."""
    return math.nan if value is None else float(value)
