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
- **Names**: a run has two, the same in its trace, in this table, in the files
  (:mod:`reports.summary`), in the reports and in the configs. ``algorithm`` is its registry
  name; ``name`` is the run's name (:func:`run_name`): the workflow's name for a variant
  (a config's ``variants`` key, e.g. ``search-decreasing``), else the registry name with its
  options that differ from the defaults (``search[beam=10]``). Two runs of one algorithm with
  different options are different methods: they are never pooled under the registry name.
  ``label`` is the legend label: name, plus the number of workers when not 1. An older trace
  without a ``name`` column is read as it was written (:func:`reports.traces.trace_names`).
- **alpha** is the final concentration of the trace; the metadata's where the trace has none.
- **Refusals**: a trace without a required column or without rows, and two traces of the same
  run (same dataset, label and seed: counted twice, one chain would weigh double), are
  refused by every reader, not only by the report.
- ``kind`` says what the method's chain is (:attr:`algorithms.base.Sampler.kind`): R-hat and
  ESS describe samplers only (:mod:`reports.chains`). The run's metadata records it; for older
  traces the registry says, where the method is installed.
- **Start-up** (``startup_s``) is what a run's job cost beyond its work: the job's wall time
  as Snakemake measured it (its ``benchmark:`` file, :func:`job_file`, which counts the
  interpreter's start) minus the sampler time and the scoring time (every state's and the
  held-out points', ``score_s`` + ``heldout_s`` in the metadata). It holds the process, the
  cluster, the data, the warm-up and the trace's write. A run outside Snakemake has no job
  file, so NaN; so has a job file that cannot be read or that cannot be this run's (shorter
  than the run's own wall time), and ``timing_note`` says why; reading never fails on it.

>>> from pathlib import Path
>>> from dpmmbench.reports.runs import read_runs
>>> traces = sorted(Path("results/traces").rglob("*.parquet"))  # a workflow's output
>>> frame, runs = read_runs(traces)   # needs a workflow run's traces  # doctest: +SKIP
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

import pandas as pd

from dpmmbench import algorithms

from .traces import COMM_COLUMNS, read_trace, trace_names

#: columns every trace must have to be read
REQUIRED = ("algorithm", "dataset", "seed", "workers", "iteration", "time_s", "log_joint", "n_clusters", "vi")
#: the folder of the workflow's job files (rule ``run_chain``'s ``benchmark:``), beside ``traces/``
JOBS_FOLDER = "jobs"
#: Snakemake writes a job's seconds with two decimals: a job file agrees with a run within this
JOB_WALL_RESOLUTION_S = 0.005


def read_runs(trace_paths):
    """Read trace files into one tidy frame and one row per run.

    Parameters
    ----------
    trace_paths : iterable of str or os.PathLike
        Traces written by ``dpmmbench run`` (.parquet, or .csv with its .meta.json sidecar).

    Returns
    -------
    frame : pandas.DataFrame
        Every trace row in iteration order (``algorithm`` and ``name`` as in ``runs``, also
        for an older trace), plus ``run`` (the run's position in ``trace_paths``) and
        ``label`` (see below): the name a line carries in the figures.
    runs : pandas.DataFrame
        One row per run, in input order: ``run, path, dataset``; ``algorithm`` (registry
        name), ``name`` (the run's name, see the module docstring), ``label`` (the legend
        label: name, plus the number of workers when not 1), ``kind`` (``sampler``,
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
        bytes_received, bytes, messages``; where the time went: ``score_s``, ``heldout_s``
        (seconds spent scoring the states and the held-out points, from the metadata; NaN for
        runs that predate them), ``job_wall_s`` (the job's wall time from its Snakemake job
        file, :func:`job_file`), ``startup_s`` (``job_wall_s - time_s - score_s - heldout_s``,
        see the module docstring) and ``timing_note`` (why either is NaN; empty otherwise).
        An algorithm's own per-step columns stay in ``frame`` (the report's per-step section
        reads them by their declaration).

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
        dataset, seed, workers = str(first["dataset"]), int(first["seed"]), int(first["workers"])
        algorithm, name = trace_names(trace, meta)
        options = dict(meta.get("options") or {})
        name = run_name(algorithm, options, name)
        label = name if workers == 1 else f"{name} ({workers} workers)"
        key = (dataset, label, seed)
        if key in seen:
            raise ValueError(f"traces {seen[key]} and {path} are the same run (dataset {dataset!r}, "
                             f"{label}, seed {seed}); pass only one of them")
        seen[key] = path
        trace = trace.assign(algorithm=algorithm, name=name, run=i, label=label)
        frames.append(trace)
        rows.append({"run": i, "path": str(path), "dataset": dataset, "algorithm": algorithm,
                     "name": name, "label": label, "kind": meta.get("kind") or method_kind(algorithm),
                     "seed": seed, "workers": workers, "options": options, "meta": meta,
                     **_run_stats(trace, meta),
                     "learned_alpha": meta.get("alpha_prior") is not None,
                     "heldout_lpd": _number(meta.get("heldout_lpd")),
                     "external": bool(meta.get("external")),
                     "status": meta.get("status") or "", "git_commit": meta.get("git_commit") or "",
                     "cpu_model": meta.get("cpu_model") or "",
                     **_run_timing(path, meta, float(trace["time_s"].iloc[-1]))})
    frame = pd.concat(frames, ignore_index=True, sort=False)
    return frame, pd.DataFrame(rows)


def run_name(algorithm: str, options: dict, name: str | None = None) -> str:
    """A run's name: ``name`` where it is another than the registry name (a workflow's name
    for a variant), else the registry name plus the options that differ from its defaults.

    Parameters
    ----------
    algorithm : str
        Registry name.
    options : dict
        The run's options (all of them, or only those given).
    name : str, optional
        The name the run was given (e.g. a config's ``variants`` key).

    Returns
    -------
    str
        ``name`` when given and not ``algorithm``; else ``algorithm`` alone when every
        option is at its default or the algorithm is not known here (its defaults cannot be
        told apart then), else ``algorithm[key=value, ...]``.

    Examples
    --------
    >>> from dpmmbench.reports.runs import run_name
    >>> run_name("search", {"beam": 10, "heuristic": "inadmissible"})
    'search[beam=10]'
    >>> run_name("gibbs", {}), run_name("search", {"order": "decreasing"}, "search-decreasing")
    ('gibbs', 'search-decreasing')
    """
    if name and name != algorithm:
        return name
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
    """Labels in registry order of their algorithm, then by name and workers.

    Parameters
    ----------
    runs : pandas.DataFrame
        From :func:`read_runs` (``algorithm``, ``name``, ``workers``, ``label``).

    Returns
    -------
    list of str
        Each label once; algorithms not known here after the registry's.
    """
    rank = {name: i for i, name in enumerate(algorithms.available())}
    keys = runs.drop_duplicates("label")
    keys = sorted(zip(keys["algorithm"], keys["name"], keys["workers"], keys["label"]),
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


def job_file(trace_path) -> Path | None:
    """Where the workflow keeps the Snakemake job file of the run that wrote ``trace_path``.

    Rule ``run_chain`` writes ``results/traces/{dataset}/{name}/w{workers}/seed{seed}.parquet``
    and its ``benchmark:`` file at the same place under ``results/jobs/`` with ``.tsv``. The
    ``traces`` folder is the one four levels up (the workflow's layout), else the nearest
    ancestor of that name.

    Parameters
    ----------
    trace_path : str or os.PathLike

    Returns
    -------
    pathlib.Path or None
        The job file's path (which need not exist); None when the trace is under no
        ``traces`` folder (not a workflow's run).

    Examples
    --------
    >>> from dpmmbench.reports.runs import job_file
    >>> job_file("results/traces/iris/gibbs/w1/seed0.parquet").as_posix()
    'results/jobs/iris/gibbs/w1/seed0.tsv'
    >>> job_file("run.csv") is None
    True
    """
    path = Path(trace_path)
    parents = path.parents
    if len(parents) > 4 and parents[3].name == "traces":
        root = parents[3]
    else:
        root = next((p for p in parents if p.name == "traces"), None)
        if root is None:
            return None
    return root.parent / JOBS_FOLDER / path.relative_to(root).with_suffix(".tsv")


def read_job_wall(path) -> float:
    """The wall time of a job from its Snakemake ``benchmark:`` file.

    The file is Snakemake's tab-separated table whose column ``s`` is the job's wall time
    in seconds (two decimals), one row per execution; with ``repeat()`` the last row is the
    execution whose outputs remain.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    float

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        The file is no such table, or its last ``s`` is not a finite number >= 0 (the
        message says which).
    """
    path = Path(path)
    try:
        rows = list(csv.reader(path.read_text(encoding="utf-8").splitlines(), delimiter="\t"))
    except FileNotFoundError:
        raise
    except (UnicodeDecodeError, OSError, csv.Error) as exc:
        raise ValueError(f"job file {path} is not a Snakemake benchmark table: {exc}") from exc
    if not rows:
        raise ValueError(f"job file {path} is not a Snakemake benchmark table: it is empty")
    header, body = rows[0], rows[1:]
    if "s" not in header:
        raise ValueError(f"job file {path} has no column 's' (columns: {header})")
    if not body:
        raise ValueError(f"job file {path} has no row")
    if any(len(row) != len(header) for row in body):
        raise ValueError(f"job file {path} is not a Snakemake benchmark table: a row's fields do not match "
                         f"its {len(header)} columns")
    text = body[-1][header.index("s")]
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"job file {path} gives {text!r} seconds, not a duration")
    return seconds


def _run_timing(path: Path, meta: dict, time_s: float) -> dict:
    """A run's scoring seconds, its job's wall time and its start-up (see :func:`read_runs`)."""
    score_s, heldout_s = _number(meta.get("score_s")), _number(meta.get("heldout_s"))
    timing = {"score_s": score_s, "heldout_s": heldout_s, "job_wall_s": math.nan, "startup_s": math.nan,
              "timing_note": ""}
    where = job_file(path)
    if where is None:
        timing["timing_note"] = "no job file: a run outside the workflow"
        return timing
    try:
        job_wall = read_job_wall(where)
    except FileNotFoundError:
        timing["timing_note"] = f"no job file {where}"
        return timing
    except ValueError as exc:
        timing["timing_note"] = str(exc)
        return timing
    wall_s = _number(meta.get("wall_s"))
    if job_wall + JOB_WALL_RESOLUTION_S < wall_s:
        timing["timing_note"] = (f"job file {where} gives {job_wall:g} s, less than the run's own wall time "
                                 f"({wall_s:.3f} s): not this run's job (an older one?)")
        return timing
    timing["job_wall_s"] = job_wall
    if math.isnan(score_s) or math.isnan(heldout_s):
        timing["timing_note"] = "the run's metadata has no score_s or heldout_s (it predates them)"
    else:
        timing["startup_s"] = job_wall - time_s - score_s - heldout_s
    return timing


def _number(value) -> float:
    """A metadata number as a float; NaN where it is missing (None)."""
    return math.nan if value is None else float(value)


def communication_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Bytes and messages per iteration (median over seeds of each chain's mean), for the
    labels of one dataset that communicated at all; Wang & Lin's Table 1 has this shape
    (methods as columns)."""
    talking = runs[runs["bytes"].fillna(0) > 0]
    return talking.groupby("label", sort=False)[["bytes_sent", "bytes_received", "bytes", "messages"]].median()
