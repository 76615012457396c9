"""The HTML comparison report: one self-contained file built from trace files.

::

    from dpmmbench.reports.report import build_report
    build_report(sorted(Path("results/traces").rglob("*.parquet")), "results/report/index.html")

Everything shown is computed from the traces and their run metadata (nothing is typed in):
first the papers' headline claims checked against this run (:mod:`reports.claims`); per
dataset the convergence figures (log joint, VI to the truth, clusters, against iteration
and sampler time), time per iteration and the speed-up table relative to ``gibbs``; then
the cost model's predicted scaling to 1…64 workers (:mod:`reports.costmodel`) and the
per-worker load of samplers that report it; then the communication table, the search
statistics and the environment. Figures are PNG embedded as
base64 and the style sheet is inline, so the file opens offline and can be mailed as is.
The same inputs give the same bytes.
"""
from __future__ import annotations

import base64
import html
import json
import math
import os
import re
from importlib import metadata
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd

from . import chains
from . import claims as claims_mod
from . import costmodel
from . import figures

#: the speed-up reference (Wang & Lin's "speed-up ratio w.r.t. CGS")
REFERENCE = "gibbs"
#: where asv publishes its HTML, relative to the repository root (asv.conf.json "html_dir")
ASV_HTML = Path(".asv") / "html" / "index.html"
#: columns every trace must have to be reported
REQUIRED = ("algorithm", "dataset", "seed", "workers", "iteration", "time_s", "log_joint", "n_clusters", "vi")
#: per-step communication columns (0 = computed in-process)
COMM = ("bytes_sent", "bytes_received", "messages")
#: search-statistics columns (algorithms/search.py, one search per run)
SEARCH_COLUMNS = ("states_generated", "states_pushed", "states_popped", "queue_max")


#: a table cell that reads as a number (right-aligned)
_NUMERIC = re.compile(r"^[-+\u2212\u2013]?[\d.,]")


class _Raw(str):
    """HTML that is already escaped (table cells and fragments)."""


# ---- loading ----------------------------------------------------------------------------
def load_runs(trace_paths):
    """Read trace files into one tidy frame and one row per run.

    Parameters
    ----------
    trace_paths : iterable of str or os.PathLike
        Traces written by ``dpmmbench run`` (.parquet, or .csv with its .meta.json sidecar).

    Returns
    -------
    frame : pandas.DataFrame
        Every trace row, plus ``run`` (index of the run), ``variant`` (the run's name when
        the workflow named a variant, else the algorithm and its non-default options, e.g.
        ``search[beam=10]``) and ``label`` (variant, plus the number of workers when not 1):
        the name a line carries in the figures.
    runs : pandas.DataFrame
        One row per run, in input order: ``run, path, dataset, algorithm`` (registry name),
        ``variant, label, seed, workers, options, meta, iterations, time_s, final_log_joint,
        best_log_joint, final_vi, final_nmi, final_n_clusters, s_per_iteration, search_s``
        (sampler time at which a search finished, NaN for samplers), ``alpha`` (final),
        ``learned_alpha`` (the run had an ``alpha_prior``), ``external`` (a peer's run),
        ``heldout_lpd`` (from the metadata; NaN where absent), ``status`` (from the metadata; empty where absent), the mean per-iteration
        ``bytes_sent, bytes_received, bytes, messages`` and, for searches, the search
        statistics (``states_pushed`` etc.).

    Raises
    ------
    FileNotFoundError
        A trace file does not exist.
    ValueError
        No paths, an empty trace, a trace without a required column, or two traces of the
        same run (same dataset, algorithm variant, seed and workers).
    """
    from .traces import read_trace

    paths = [Path(p) for p in trace_paths]
    if not paths:
        raise ValueError("no trace files to report on")
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
        variant = name if name != algorithm else _variant(algorithm, options)
        label = variant if workers == 1 else f"{variant} ({workers} workers)"
        key = (dataset, label, seed)
        if key in seen:
            raise ValueError(f"traces {seen[key]} and {path} are the same run (dataset {dataset!r}, "
                             f"{label}, seed {seed}); pass only one of them")
        seen[key] = path
        trace = trace.assign(run=i, variant=variant, label=label)
        frames.append(trace)
        heldout = meta.get("heldout_lpd")
        rows.append({"run": i, "path": str(path), "dataset": dataset, "algorithm": algorithm,
                     "variant": variant, "label": label, "seed": seed, "workers": workers,
                     "options": options, "meta": meta, **_run_stats(trace),
                     "learned_alpha": meta.get("alpha_prior") is not None,
                     "heldout_lpd": math.nan if heldout is None else float(heldout),
                     "external": bool(meta.get("external")),
                     "status": meta.get("status") or ""})
    frame = pd.concat(frames, ignore_index=True, sort=False)
    return frame, pd.DataFrame(rows)


def _variant(algorithm: str, options: dict) -> str:
    """The algorithm name plus its options that differ from the registry defaults."""
    try:
        from dpmmbench import algorithms

        defaults = {k: opt.default for k, opt in algorithms.get(algorithm).options.items()}
    except (ValueError, ImportError, AttributeError):
        defaults = dict(options)  # unknown here: the defaults cannot be told apart, show none
    changed = {k: v for k, v in sorted(options.items()) if k in defaults and defaults[k] != v}
    if not changed:
        return algorithm
    return f"{algorithm}[{', '.join(f'{k}={v}' for k, v in changed.items())}]"


def _run_stats(trace: pd.DataFrame) -> dict:
    last = trace.iloc[-1]
    steps = trace[trace["iteration"] > 0]
    step_s = step_times(trace)["step_s"]
    stats = {
        "iterations": int(last["iteration"]), "time_s": float(last["time_s"]),
        "final_log_joint": float(last["log_joint"]), "best_log_joint": float(trace["log_joint"].max()),
        "final_vi": float(last["vi"]), "final_n_clusters": int(last["n_clusters"]),
        "final_nmi": float(last["nmi"]) if "nmi" in trace else math.nan,
        "alpha": float(last["alpha"]) if "alpha" in trace else math.nan,
        "s_per_iteration": float(step_s.median()) if len(step_s) else math.nan,
        "search_s": math.nan,
    }
    if "states_popped" in trace and trace["states_popped"].fillna(0).gt(0).any():
        stats["search_s"] = float(trace.loc[trace["states_popped"].fillna(0) > 0, "time_s"].iloc[-1])
    for col in COMM:
        stats[col] = float(steps[col].mean()) if col in steps and len(steps) else math.nan
    stats["bytes"] = stats["bytes_sent"] + stats["bytes_received"]
    for col in SEARCH_COLUMNS:
        if col in trace:
            values = trace[col].dropna()
            stats[col] = float(values.max() if col == "queue_max" else values.sum()) if len(values) else math.nan
    return stats


def step_times(frame: pd.DataFrame) -> pd.DataFrame:
    """Sampler seconds of each iteration (rows with ``iteration > 0`` and a ``step_s`` column).

    A search does all its work in its first step and later steps return at once; only steps
    that searched (``states_popped > 0``) are kept for runs that report search statistics.
    """
    key = frame["run"] if "run" in frame else pd.Series(0, index=frame.index)
    steps = frame.assign(step_s=frame["time_s"].groupby(key).diff())
    steps = steps[steps["iteration"] > 0]
    if "states_popped" in steps:
        popped = steps["states_popped"]
        steps = steps[popped.isna() | (popped > 0)]
    return steps.dropna(subset=["step_s"])


def label_order(runs: pd.DataFrame) -> list:
    """Labels in registry order of their algorithm, then by variant and workers."""
    try:
        from dpmmbench import algorithms

        rank = {name: i for i, name in enumerate(algorithms.available())}
    except ImportError:
        rank = {}
    keys = runs.drop_duplicates("label")
    keys = sorted(zip(keys["algorithm"], keys["variant"], keys["workers"], keys["label"]),
                  key=lambda k: (rank.get(k[0], len(rank)), k[0], k[1] != k[0], k[1], k[2]))
    return [k[3] for k in keys]


# ---- tables -----------------------------------------------------------------------------
def speedup_table(frame: pd.DataFrame, runs: pd.DataFrame, reference: str = REFERENCE):
    """Time to reach the reference's log joint level, and the speed-up over the reference.

    The target is the highest log joint that every single-worker ``reference`` chain of the
    dataset reached (the minimum over its seeds of each chain's best). A chain's time to
    target is the sampler time of its first iteration at or above it. Speed-up = median
    time of the reference / median time of the label (over the seeds that reached the
    target), as Wang & Lin's speed-up ratio w.r.t. CGS.

    Parameters
    ----------
    frame, runs : pandas.DataFrame
        From :func:`load_runs`, restricted to one dataset.
    reference : str
        Algorithm name of the reference.

    Returns
    -------
    table : pandas.DataFrame or None
        One row per label: ``label, variant, workers, seeds, reached, iterations_to_target,
        time_to_target, speedup`` (NaN when no seed reached it); None without reference runs.
    target : float
        The target log joint (NaN without reference runs).
    """
    ref_runs = runs[(runs["variant"] == reference) & (runs["workers"] == 1)]
    if ref_runs.empty:
        return None, math.nan
    target = float(ref_runs["best_log_joint"].min())
    hits = []
    for run, chain in frame.groupby("run", sort=False):
        above = chain[chain["log_joint"] >= target]
        hits.append({"run": run, "time": float(above["time_s"].iloc[0]) if len(above) else math.nan,
                     "iteration": float(above["iteration"].iloc[0]) if len(above) else math.nan})
    hits = runs[["run", "label", "variant", "workers"]].merge(pd.DataFrame(hits), on="run")
    ref_time = float(hits.loc[hits["run"].isin(ref_runs["run"]), "time"].median())
    rows = []
    for label, group in hits.groupby("label", sort=False):
        reached = group["time"].notna()
        seconds = float(group.loc[reached, "time"].median()) if reached.any() else math.nan
        iterations = float(group.loc[reached, "iteration"].median()) if reached.any() else math.nan
        rows.append({"label": label, "variant": group["variant"].iloc[0], "workers": int(group["workers"].iloc[0]),
                     "seeds": len(group), "reached": int(reached.sum()), "iterations_to_target": iterations,
                     "time_to_target": seconds, "speedup": ref_time / seconds if seconds > 0 else math.nan})
    return pd.DataFrame(rows), target


def communication_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Bytes and messages per iteration (median over seeds of each chain's mean), for the
    labels of one dataset that communicated at all; Wang & Lin's Table 1 has this shape
    (methods as columns)."""
    talking = runs[runs["bytes"].fillna(0) > 0]
    return talking.groupby("label", sort=False)[["bytes_sent", "bytes_received", "bytes", "messages"]].median()


def search_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per dataset and search variant: the search's options and its statistics
    (median over seeds)."""
    searched = runs[runs["search_s"].notna()]
    rows = []
    for (dataset, label), group in searched.groupby(["dataset", "label"], sort=False):
        opts = group["options"].iloc[0]
        row = {"dataset": dataset, "label": label, "seeds": len(group)}
        row.update({k: opts.get(k, "") for k in ("heuristic", "beam", "order", "prior")})
        for col in SEARCH_COLUMNS + ("search_s", "final_log_joint", "final_n_clusters", "final_vi"):
            row[col] = float(group[col].median()) if col in group else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


# ---- the page ---------------------------------------------------------------------------
def build_report(trace_paths, out_path, config=None, *, asv_html=None,
                 network: costmodel.Network = costmodel.GIGABIT, priors=None,
                 target_tolerance: float = chains.TARGET_TOLERANCE) -> Path:
    """Write the comparison report for ``trace_paths`` to ``out_path`` (atomically).

    Parameters
    ----------
    trace_paths : iterable of str or os.PathLike
        Trace files (see :func:`load_runs`).
    out_path : str or os.PathLike
        The HTML file to write; missing folders are created.
    config : dict, optional
        The workflow configuration, shown in the environment section.
    asv_html : str or os.PathLike, optional
        asv's published ``index.html``, linked when it exists (default: :data:`ASV_HTML`
        under the repository root).
    network : reports.costmodel.Network
        The network the cost model predicts scaling on (default 1 Gbit/s, 0.2 ms per
        message); stated in the report.
    priors : str or os.PathLike, optional
        The prior-sensitivity table (``results/priors.csv``, :mod:`reports.priors`), shown
        in its own section when given.
    target_tolerance : float
        The leaderboard's time to target: the first time a chain's log joint is within this
        fraction of the best any method reached on the dataset (default 0.1 %).

    Returns
    -------
    pathlib.Path
        ``out_path``.

    Raises
    ------
    FileNotFoundError, ValueError
        See :func:`load_runs`; also an ``out_path`` that does not end in .html.
    TypeError
        ``config`` is not a dict.
    """
    from .traces import atomic_write

    out_path = Path(out_path)
    if out_path.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"report path must end in .html, got {str(out_path)!r}")
    if config is not None and not isinstance(config, dict):
        raise TypeError(f"config must be a mapping, got {type(config).__name__}")
    chains.check_tolerance(target_tolerance)
    frame, runs = load_runs(trace_paths)
    stats = chains.chain_statistics(frame, runs, ["dataset", "label"], tolerance=target_tolerance)
    order = label_order(runs)
    styles = figures.palette(order)
    datasets = list(dict.fromkeys(runs["dataset"]))

    body = [_header(runs, datasets, order), _toc(datasets, priors is not None)]
    body.append(_claims_section(claims_mod.check_claims(frame, runs)))
    for i, dataset in enumerate(datasets):
        mask = runs["dataset"] == dataset
        body.append(_dataset_section(i, dataset, frame[frame["dataset"] == dataset], runs[mask], order, styles,
                                     network, stats[stats["dataset"] == dataset], target_tolerance))
    if priors is not None:
        body.append(_priors_section(priors))
    body.append(_peers_section(runs))
    body.append(_communication_section(runs, datasets))
    body.append(_search_section(runs))
    asv_html = Path(asv_html) if asv_html is not None else Path(__file__).resolve().parents[1] / ASV_HTML
    body.append(_environment_section(runs, config, out_path, asv_html))
    page = _PAGE.format(title="dpmmbench comparison report", style=_STYLE, body="\n".join(body))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out_path, lambda f: f.write(page.encode("utf-8")))
    return out_path


def _header(runs, datasets, order) -> str:
    starts = sorted(m.get("started_utc") for m in runs["meta"] if m.get("started_utc"))
    when = f", runs started {starts[0]} to {starts[-1]} (UTC)" if starts else ""
    seeds = sorted(set(runs["seed"]))
    return (f"<h1>dpmmbench comparison report</h1>\n<p class='lead'>{len(runs)} runs: "
            f"{len(datasets)} dataset(s) &times; {len(order)} algorithm variant(s) &times; seeds "
            f"{html.escape(', '.join(map(str, seeds)))}{html.escape(when)}. Every number and figure below is "
            f"computed from the run traces. Log joint = log CRP prior of the partition + sum of cluster log "
            f"marginals (nats); VI in nats; times are sampler time (metric evaluation and JIT compilation "
            f"excluded). {html.escape(figures.BAND_TEXT.capitalize())}.</p>")


def _toc(datasets, priors=False) -> str:
    items = ["<li><a href='#claims'>Claims of the papers</a></li>"]
    items += [f"<li><a href='#dataset-{i}'>{html.escape(d)}</a></li>" for i, d in enumerate(datasets)]
    items += ["<li><a href='#priors'>Prior sensitivity</a></li>"] if priors else []
    items += ["<li><a href='#peers'>Peers' settings</a></li>", "<li><a href='#communication'>Communication</a></li>", "<li><a href='#search'>Search statistics</a></li>",
              "<li><a href='#environment'>Environment</a></li>"]
    return f"<nav><ul>{''.join(items)}</ul></nav>"


def _priors_section(path) -> str:
    from . import priors as priors_mod

    table = priors_mod.read_priors(path)
    parts = ["<section id='priors'><h2>Prior sensitivity</h2>", f"<p>{html.escape(priors_mod.DESCRIPTION)}</p>"]
    for dataset, rows in table.groupby("dataset", sort=False):
        png, caption = priors_mod.priors_figure(rows)
        parts += [f"<h3><code>{html.escape(str(dataset))}</code></h3>", f"<p>{html.escape(priors_mod.describe(rows))}</p>",
                  _figure(png, f"Prior sensitivity on {dataset}", caption),
                  _frame_table(priors_mod.summary_table(rows))]
    parts.append("</section>")
    return "\n".join(parts)


def _peers_section(runs) -> str:
    """Every peer's own settings (its prior, truncation, initialisation, tolerances, library
    version) as its runs recorded them, so that a default is never read as a tuned comparison."""
    parts = ["<section id='peers'><h2>Peers' settings</h2>"]
    peers = runs[runs["external"]]
    if peers.empty:
        parts.append("<p class='note'>No peer (another library's method) ran here.</p></section>")
        return "\n".join(parts)
    parts.append("<p>Peers are other libraries' methods run through the same driver and scored by the same "
                 "scorer as the suite's samplers; each runs with its own prior, truncation and initialisation, "
                 "as listed (a value that differs between runs is listed with its number of runs). None is exact: "
                 "the test suite reports their distance to the enumerated posterior but never certifies it.</p>")
    for label, group in peers.groupby("label", sort=False):
        settings = [m.get("peer_settings") or {} for m in group["meta"]]
        keys = list(dict.fromkeys(k for s in settings for k in s))
        rows = [[key, _distinct([s.get(key) for s in settings], len(settings))] for key in keys]
        parts.append(f"<h3><code>{html.escape(str(label))}</code> ({len(group)} runs)</h3>")
        parts.append(_table(["setting", "value"], rows, align_numbers=False) if rows else
                     "<p class='note'>Its runs recorded no settings.</p>")
    parts.append("</section>")
    return "\n".join(parts)


def _claims_section(found) -> str:
    parts = ["<section id='claims'><h2>Claims of the papers</h2>",
             "<p>Each paper's headline claim, what this run measured, and whether it held here. Each claim "
             "applies from a declared data size and budget; runs below it are shown but decide nothing, and "
             "a claim with no run at that scale is not decided at this budget.</p>"]
    for claim in found:
        cls = {"held": "held", "did not hold": "failed", "not decided at this budget": "undecided"}.get(
            claim.verdict, "unchecked")
        parts.append(f"<article class='claim'><h3>{html.escape(claim.paper)} "
                     f"<span class='verdict {cls}'>{html.escape(claim.verdict)}</span></h3>"
                     f"<p class='quote'>{html.escape(claim.claim)}</p>"
                     f"<p><b>Measured.</b> {html.escape(claim.summary)}</p>")
        if claim.criterion:
            parts.append(f"<p class='note'><b>Criterion.</b> {html.escape(claim.criterion)}</p>")
        if claim.scope is not None:
            parts.append(f"<p class='note'><b>Applies from.</b> {html.escape(claim.scope.describe())}: "
                         f"{html.escape(claim.scope.why)}.</p>")
        if claim.table is not None and not claim.table.empty:
            parts.append(_frame_table(claim.table))
        parts.append("</article>")
    parts.append("</section>")
    return "\n".join(parts)


def _dataset_section(i, dataset, frame, runs, order, styles, network, stats, tolerance) -> str:
    meta = runs["meta"].iloc[0].get("dataset_meta", {}) or {}
    labels = [label for label in order if label in set(runs["label"])]
    with_truth = bool(frame["vi"].notna().any())
    parts = [f"<section id='dataset-{i}'><h2>Dataset <code>{html.escape(dataset)}</code></h2>"]
    described = [meta.get("description"), meta.get("source") and f"Source: {meta['source']}",
                 meta.get("substitute") and "A substitute for the papers' data, labelled as such",
                 "Ground truth available: VI is shown" if with_truth else "No ground truth: VI is not shown"]
    text = " ".join(d if d.endswith((".", "!", "?")) else d + "." for d in described if d)
    parts.append(f"<p>{html.escape(text)}</p>")

    parts.append(_leaderboard(stats, labels, tolerance, set(runs.loc[runs["external"], "label"])))
    png = figures.pareto_figure(stats, labels, styles)
    if png is not None:
        parts.append(_figure(png, f"Quality against time on {dataset}",
                             "Quality against sampler time per chain: one point per method, the median over its "
                             "chains, with bars from the 5 % to the 95 % quantile over chains on both axes; the "
                             "grey staircase joins the methods no other method beats on both (the Pareto front: "
                             "the best quality on offer at each time). Up and left is better."))
    parts.append(_overview_table(runs, labels))
    png, cropped = figures.convergence_figure(frame, labels, styles, with_truth)
    rows = "log joint, VI to the truth and number of clusters" if with_truth else "log joint and number of clusters"
    caption = (f"{rows} against iteration (left) and sampler time (right). {figures.BAND_TEXT.capitalize()}; "
               "at each time a chain counts with the state of its last completed iteration (its final state "
               "once it has finished).")
    if runs["learned_alpha"].any():
        caption += " A run that learns α is scored at its current α."
    if cropped:
        caption += (" The log joint axes are cropped to where the chains go: the one-cluster start and the "
                    f"lowest {figures.CROP_QUANTILE:.0%} of the later values lie below.")
    parts.append(_figure(png, f"Convergence on {dataset}", caption))

    learned = runs.loc[runs["learned_alpha"], "run"]
    if len(learned) and "alpha" in frame:
        parts.append(_figure(figures.alpha_figure(frame[frame["run"].isin(learned)], labels, styles),
                             f"Learned concentration on {dataset}",
                             "The concentration α of the runs that learn it (Gamma prior, resampled every "
                             f"iteration) against iteration, log scale. {figures.BAND_TEXT.capitalize()}."))

    steps = step_times(frame)
    if not steps.empty:
        png = figures.step_time_figure(steps.assign(step_s=steps["step_s"].clip(lower=1e-7)), labels, styles)
        parts.append(_figure(png, f"Time per iteration on {dataset}",
                             "Sampler time of each iteration, all seeds pooled (box: quartiles; whiskers: 1.5 IQR). "
                             "For search, only the step that searched."))

    # a learned alpha's log joint is scored at its own alpha: no common target with the others
    fixed = runs[~runs["learned_alpha"]]
    table, target = speedup_table(frame[frame["run"].isin(fixed["run"])], fixed)
    parts.append(f"<h3>Speed-up w.r.t. {REFERENCE}</h3>")
    if table is None:
        parts.append(f"<p class='note'>No single-worker <code>{REFERENCE}</code> runs on this dataset: the speed-up "
                     "ratio needs them as the reference.</p>")
    else:
        parts.append(f"<p>Target: log joint &ge; {_lj(target)} nats, the highest level every {REFERENCE} chain "
                     f"reached. Time to target: sampler time of the first iteration at or above it (median over the "
                     f"seeds that reached it). Speed-up = {REFERENCE}'s time / the algorithm's time."
                     + (" Runs that learn α are left out: their log joint is at another α." if len(fixed) < len(runs)
                        else "") + "</p>")
        parts.append(_speedup_html(table, labels))
        reached = table.dropna(subset=["speedup"])
        scaled = reached.groupby("variant")["workers"].transform("nunique") > 1
        if scaled.any():
            parts.append(_figure(figures.speedup_workers_figure(reached[scaled], styles, REFERENCE),
                                 "Speed-up against workers",
                                 f"Speed-up w.r.t. {REFERENCE} against the number of workers, for algorithms run with "
                                 "several worker counts (points only where the target was reached)."))
    parts.append(_scaling_part(dataset, frame, runs, order, styles, network))
    parts.append("</section>")
    return "\n".join(parts)


def _scaling_part(dataset, frame, runs, order, styles, network) -> str:
    """The cost model's predicted scaling of the sharded samplers (:mod:`reports.costmodel`):
    figure, fitted parameters, predictions at 1…64 workers; and the per-worker load figure
    of every sharded sampler that reports one (``auxvar``)."""
    scaling = costmodel.scaling(frame, runs, network=network, reference=REFERENCE)
    parts = ["<h3>Scaling (model)</h3>"]
    loads = [v for v in dict.fromkeys(runs["variant"]) if _reports_load(frame, runs, v)]
    if not scaling.models and not scaling.notes and not loads:
        parts.append("<p class='note'>No sharded algorithm ran on this dataset: there is no scaling to model.</p>")
        return "\n".join(parts)
    if scaling.models:
        parts.append(_scaling_text(scaling, network))
        variants = [v for v in _variant_order(order, runs) if v in scaling.models]
        colours = {v: _variant_style(v, runs, styles)[0] for v in variants}
        with_reference = bool(np.isfinite(scaling.reference_s))
        model_label = f"model ({network.describe()})"
        what = f"speed-up per iteration w.r.t. {REFERENCE}" if with_reference else "time per iteration"
        parts.append(_figure(figures.scaling_figure(scaling.predictions, scaling.measured, colours, model_label,
                                                    REFERENCE if with_reference else None),
                             f"Modelled scaling on {dataset}",
                             f"MODEL, not measurement: lines are the cost model's {what} for 1 to "
                             f"{int(scaling.predictions['workers'].max())} workers on a network of "
                             f"{network.describe()} per message; points are the measured median iteration times on "
                             f"this machine, at the worker counts that ran."))
        parts.append(_scaling_parameters(scaling, variants))
        parts.append(_scaling_predictions(scaling, variants, with_reference))
    for note in scaling.notes:
        parts.append(f"<p class='note'>{html.escape(note)}</p>")
    for variant in loads:
        trace = frame[frame["run"].isin(runs.loc[runs["variant"] == variant, "run"])]
        typical = trace[trace["iteration"] > 0].groupby("workers")["load_imbalance"].median()
        summary = "; ".join(f"{w} worker{'s' if w > 1 else ''}: {v:.3g}" for w, v in typical.items())
        parts.append(_figure(figures.load_figure(trace), f"Per-worker load of {variant} on {dataset}",
                             f"Per-worker load of {variant}: points swept by each worker in every iteration (top, "
                             f"lowest seed) and the imbalance, max / mean load (bottom; median over seeds with the "
                             f"range). Median imbalance over iterations and seeds: {summary}. Whole clusters sit "
                             f"on random workers, so a few large clusters unbalance the load (Gal & Ghahramani "
                             f"2014); the slowest worker sets the pace of a synchronous iteration."))
    return "\n".join(parts)


def _reports_load(frame, runs, variant) -> bool:
    """Whether ``variant`` is a sharded sampler whose traces report per-worker loads."""
    group = runs[runs["variant"] == variant]
    if "load_imbalance" not in frame or not costmodel.is_sharded(group["algorithm"].iloc[0]):
        return False
    return bool(frame.loc[frame["run"].isin(group["run"]), "load_imbalance"].notna().any())


def _variant_order(order, runs) -> list:
    """Variants in the order of their first label."""
    variant_of = dict(zip(runs["label"], runs["variant"]))
    return list(dict.fromkeys(variant_of[label] for label in order if label in variant_of))


def _variant_style(variant, runs, styles):
    """The style of a variant: that of its single-worker label, else of its first label."""
    if variant in styles:
        return styles[variant]
    labels = [label for label in runs.loc[runs["variant"] == variant, "label"] if label in styles]
    return styles[labels[0]] if labels else ("0.3", "")


def _scaling_text(scaling, network) -> str:
    serial = [m.serial_s for m in scaling.models.values()]
    compute = [m.compute_s + m.shard_s for m in scaling.models.values()]
    reference = (f"Speed-up = the median time of one single-worker {REFERENCE} iteration "
                 f"({_ms(scaling.reference_s)}) / <i>T</i>(<i>W</i>): per iteration, so unlike the time-to-target "
                 f"table above it ignores that algorithms need different numbers of iterations."
                 if np.isfinite(scaling.reference_s) else "")
    return (f"<p><b>This is a model, not a measurement.</b> Only the worker counts that ran here are measured; "
            f"from them a cost model predicts the time of one synchronous iteration on <i>W</i> = 1…64 workers "
            f"connected by a network of {html.escape(network.describe())} per message:</p>"
            f"<p><i>T</i>(<i>W</i>) = <i>T</i><sub>serial</sub> + (<i>C</i>/<i>W</i> + <i>c</i>)"
            f"&middot;&iota;(<i>W</i>)"
            f" + <i>m</i>(<i>W</i>)&middot;latency + <i>b</i>(<i>W</i>)/bandwidth.</p>"
            f"<p>Fitted per algorithm on its measured runs (iteration 0, which ships the data, and iterations that "
            f"lost a worker left out; medians over iterations and seeds): <i>C</i> + <i>c</i>&middot;<i>W</i> is the "
            f"shard compute per iteration (<code>compute_s</code>, affine in <i>W</i>: <i>c</i> is what every shard "
            f"pays whatever <i>W</i>); &iota; is the slowest shard over the mean shard "
            f"(<code>compute_max_s</code>&middot;<i>W</i>/<code>compute_s</code>) at the largest measured <i>W</i> "
            f"&ge; 2, held for every <i>W</i> &ge; 2; bytes <i>b</i>(<i>W</i>) and messages <i>m</i>(<i>W</i>) are "
            f"affine in <i>W</i>, fitted on the measured counts (rows that move between workers, as in auxvar, "
            f"as a share (<i>W</i>&minus;1)/<i>W</i> "
            f"of the data, counted twice); every message pays the latency once (an upper bound when messages "
            f"overlap). <i>T</i><sub>serial</sub> is the master's share: measured step time &minus; compute critical "
            f"path (slowest shard; all shards when they ran one after another) &minus; an assumed loopback transport "
            f"({html.escape(costmodel.LOOPBACK.describe())}), averaged over the measured worker counts. It holds the "
            f"master's own work and the execution layer's overhead per iteration (on Dask: scheduling a task per "
            f"shard and its round trips), and is taken as independent of <i>W</i> (the table shows it per measured "
            f"<i>W</i>: how far that holds). Fitted here: "
            f"<i>T</i><sub>serial</sub> {_ms(min(serial))} to {_ms(max(serial))} against shard compute "
            f"<i>C</i> + <i>c</i> of {_ms(min(compute))} to {_ms(max(compute))} per iteration. {reference}</p>")


def _scaling_parameters(scaling, variants) -> str:
    rows = []
    for variant in variants:
        model = scaling.models[variant]
        check = costmodel.in_sample(model)
        measured = model.measured
        counts = ", ".join(f"{int(w)} ({int(n)} run{'s' if n > 1 else ''})"
                           for w, n in zip(measured["workers"], measured["runs"]))
        rows.append([variant, counts,
                     _ms(model.serial_s),
                     "; ".join(f"{int(w)}: {_ms(v)}" for w, v in zip(measured["workers"], measured["master_s"])),
                     _ms(model.compute_s), _ms(model.shard_s), f"{model.imbalance:.3g}",
                     _Raw(_affine_text(model.bytes_fixed, model.bytes_per_worker, _bytes)
                          + (f" + 2&middot;{_bytes(model.moved_bytes)}&middot;(W&minus;1)/W" if model.moved_bytes
                             else "")),
                     _Raw(_affine_text(model.messages_fixed, model.messages_per_worker, lambda v: f"{v:.3g}")),
                     "; ".join(f"{int(r.workers)}: {_ms(r.measured_s)} / {_ms(r.model_s)} ({r.error:+.0%})"
                               for r in check.itertuples())])
    return _table(["algorithm", "measured workers", "T_serial", "T_serial per measured W", "C", "c (per shard)",
                   "imbalance ι (W ≥ 2)", "bytes / iteration b(W)", "messages m(W)",
                   "measured / model at measured W (loopback)"], rows,
                  caption="Fitted parameters of the cost model (times per iteration). The last column is the model "
                          "under the measured conditions next to the measured median step time: how well it "
                          "reproduces what it was fitted on.")


def _scaling_predictions(scaling, variants, with_reference) -> str:
    table = scaling.predictions
    shown = [w for w in costmodel.TABLE_WORKERS if w in set(table["workers"])]
    value = "speedup" if with_reference else "iteration_s"

    def cell(x):
        return f"{x:.3g}×" if with_reference else _ms(x)

    rows = []
    for variant in variants:
        curve = table[table["variant"] == variant].set_index("workers")
        measured = scaling.measured[scaling.measured["variant"] == variant]
        best = curve[value].idxmax() if with_reference else curve[value].idxmin()
        rows.append([variant, "; ".join(f"{int(w)}: {cell(v)}" for w, v in zip(measured["workers"], measured[value]))]
                    + [cell(curve.loc[w, value]) for w in shown] + [f"{cell(curve.loc[best, value])} at W = {best}"])
    what = f"speed-up per iteration w.r.t. {REFERENCE}" if with_reference else "time per iteration"
    return _table(["algorithm", "measured (W: value)"] + [f"W = {w}" for w in shown] + ["best (model)"], rows,
                  caption=f"Model: {what} predicted for W workers on the stated network (a model, not a "
                          f"measurement), next to the measured values.")


def _affine_text(fixed, per_worker, fmt) -> str:
    """``b·W ± a`` as HTML (``fmt`` must return HTML-safe text), leaving out a zero term."""
    if fixed and per_worker:
        return f"{fmt(per_worker)}&middot;W {'+' if fixed > 0 else '&minus;'} {fmt(abs(fixed))}"
    if per_worker:
        return f"{fmt(per_worker)}&middot;W"
    return fmt(fixed)


def _leaderboard(stats, labels, tolerance, peers=frozenset()) -> str:
    """Per method of one dataset: convergence, efficiency and quality over its chains
    (:func:`reports.chains.chain_statistics`), fastest to the target first, with a sentence
    that names the leaders; the ``peers`` labels link to their settings."""
    rows_in = stats.set_index("label").loc[[label for label in labels if label in set(stats["label"])]]
    # fastest to the target first (never reached, or not comparable, last), then the better predictive
    ranked = rows_in.assign(_t=rows_in["time_to_target_s"].fillna(math.inf),
                            _h=-rows_in["heldout_lpd"].fillna(-math.inf)).sort_values(["_t", "_h"], kind="stable")
    with_truth = bool(stats["final_nmi"].notna().any() or stats["final_vi"].notna().any())
    rows = []
    for label, r in ranked.iterrows():
        chains_text = f"{r['chains']}" + (f" ({r['failed']} failed)" if r["failed"] else "")
        rhat = f"{_num(r['rhat_log_joint'], 4)} / {_num(r['rhat_n_clusters'], 4)}"
        if chains.not_converged(r["rhat_log_joint"], r["rhat_n_clusters"]):
            rhat = _Raw(f"{html.escape(rhat)} <span class='bad'>not converged</span>")
        if r["learned_alpha"] or math.isnan(r["target_log_joint"]):
            target = "– (learns α)" if r["learned_alpha"] else "–"
        elif r["reached"] == 0:
            target = _Raw(f"<span class='bad'>not reached</span> (0 of {r['chains']})")
        else:
            target = _Raw(f"{_interval(r, 'time_to_target_s', _secs)} ({r['reached']} of {r['chains']})")
        name = (_Raw(f"{html.escape(label)} <a class='peer' href='#peers'>(peer)</a>") if label in peers
                else label)
        row = [name, chains_text, rhat,
               f"{_int(r['ess_bulk_log_joint'])} / {_int(r['ess_tail_log_joint'])}", _num(r["ess_per_s"], 3),
               target, _Raw(_interval(r, "heldout_lpd", lambda x: _num(x, 4)))]
        if with_truth:
            row += [_Raw(_interval(r, "final_nmi", lambda x: _num(x, 3))),
                    _Raw(_interval(r, "final_vi", lambda x: _num(x, 3)))]
        row += [_Raw(_interval(r, "final_n_clusters", _int)), _Raw(_interval(r, "time_s", _secs))]
        rows.append(row)
    header = ["algorithm", "chains", "R̂ log joint / clusters", "ESS bulk / tail", "ESS / s", "time to target",
              "held-out log predictive"]
    header += ["NMI", "VI (nats)"] if with_truth else []
    header += ["final clusters", "sampler time"]
    target = ranked["target_log_joint"].dropna()
    target_text = (f"the first sampler time at which a chain's log joint is at or above {_lj(target.iloc[0])} nats, "
                   f"within {100 * tolerance:.3g} % of the best log joint any method reached on this dataset"
                   if len(target) else "not measured (no method with a fixed α ran here)")
    caption = (f"Leaderboard: medians over chains with the 5 % and 95 % quantiles over chains in brackets, fastest "
               f"to the target first. Time to target: {target_text} (then, in parentheses, how many chains got "
               f"there); runs that learn α score their log joint at "
               f"another α and are not timed. R̂: rank-normalised split R̂ over chains and ESS: bulk and tail "
               f"effective sample size (arviz-stats) of the log joint and the number of clusters, quantities that do "
               f"not depend on how clusters are labelled, on each chain's second half (chains cut to the shortest, "
               f"at least the last {chains.MIN_DRAWS} steps); R̂ above {chains.RHAT_THRESHOLD} marks a method as not "
               f"converged; R̂ needs two chains and ESS a quantity that moves (– otherwise). ESS / s: bulk ESS of "
               f"the log joint per second of sampler time, summed over the chains up to their last draw. Held-out "
               f"log predictive in nats per point (higher is better), VI in nats.")
    return ("<h3>Which method?</h3>" + f"<p class='lead'>{html.escape(_leaders(ranked))}</p>"
            + _table(header, rows, caption=caption))


def _leaders(ranked) -> str:
    """One sentence naming the leaders of a dataset's leaderboard, from its numbers."""
    said = []
    timed = ranked[np.isfinite(ranked["time_to_target_s"])]
    if len(timed):
        label, r = next(timed.iterrows())
        said.append(f"fastest to the target: {label} (median {_secs(r['time_to_target_s'])} over its chains, "
                    f"{r['reached']} of {r['chains']} reached it"
                    + ("; not converged by R̂" if chains.not_converged(r["rhat_log_joint"], r["rhat_n_clusters"])
                       else "") + ")")
    else:
        said.append("no method's median chain reached the target")
    heldout = ranked["heldout_lpd"].dropna()
    if len(heldout):
        label = heldout.idxmax()
        said.append(f"best held-out log predictive: {label} ({_num(heldout.max(), 4)} nats per point)")
    converging = [not chains.not_converged(a, b) for a, b in zip(ranked["rhat_log_joint"], ranked["rhat_n_clusters"])]
    efficient = ranked.loc[converging, "ess_per_s"].dropna()
    if len(efficient):
        said.append(f"most effective samples per second among the methods not marked as unconverged: "
                    f"{efficient.idxmax()} ({_num(efficient.max(), 3)} per s)")
    text = "; ".join(said)
    return text[0].upper() + text[1:] + "."


def _interval(row, column, fmt) -> str:
    """``median [lo, hi]`` of a summary column as HTML; ``inf`` reads "not reached"."""
    def show(x):
        return "not reached" if x == math.inf else html.escape(fmt(x))

    median, lo, hi = row[column], row[f"{column}_lo"], row[f"{column}_hi"]
    if median is None or math.isnan(median):
        return "–"
    if lo == hi == median:
        return show(median)
    return f"{show(median)} <span class='range'>[{show(lo)}, {show(hi)}]</span>"


def _overview_table(runs, labels) -> str:
    rows = []
    for label in labels:
        g = runs[runs["label"] == label]
        rows.append([label, str(len(g)), _int(g["iterations"].median()), _secs(g["time_s"].median()),
                     _secs(g["s_per_iteration"].median()),
                     _Raw(f"{_lj(g['final_log_joint'].median())} <span class='range'>[{_lj(g['final_log_joint'].min())}, "
                          f"{_lj(g['final_log_joint'].max())}]</span>"),
                     _int(g["final_n_clusters"].median()), _num(g["final_vi"].median(), 3),
                     _num(g["heldout_lpd"].median(), 4),
                     _num(g["alpha"].median(), 3) + (" (learned)" if g["learned_alpha"].any() else "")])
    return _table(["algorithm", "seeds", "iterations", "sampler time", "time / iteration",
                   "final log joint (nats) median [min, max]", "final clusters", "final VI (nats)",
                   "held-out log predictive (nats / point)", "final α"],
                  rows, caption="Where the chains ended (medians over seeds). Held-out log predictive: the "
                                "mean log posterior predictive density of the points held out of the chains "
                                "(one seeded split per dataset), averaged over each chain's last states; "
                                "higher is better.")


def _speedup_html(table, labels) -> str:
    rows = []
    for label in labels:
        row = table[table["label"] == label]
        if row.empty:
            continue
        r = row.iloc[0]
        if r["reached"] == 0:
            rows.append([label, f"0 / {r['seeds']}", "not reached", "not reached", _Raw("<span class='bad'>not reached</span>")])
            continue
        partial = "" if r["reached"] == r["seeds"] else f" (from {r['reached']} of {r['seeds']} seeds)"
        rows.append([label, f"{r['reached']} / {r['seeds']}", _int(r["iterations_to_target"]),
                     _secs(r["time_to_target"]), f"{r['speedup']:.3g}×{partial}"])
    return _table(["algorithm", "seeds reaching target", "iterations to target", "time to target",
                   f"speed-up w.r.t. {REFERENCE}"], rows)


def _communication_section(runs, datasets) -> str:
    parts = ["<section id='communication'><h2>Communication per iteration</h2>"]
    tables = []
    for dataset in datasets:
        table = communication_table(runs[runs["dataset"] == dataset])
        if table.empty:
            continue
        header = ["per iteration"] + list(table.index)
        rows = [["bytes sent (master to workers)"] + [_bytes(v) for v in table["bytes_sent"]],
                ["bytes received (workers to master)"] + [_bytes(v) for v in table["bytes_received"]],
                ["bytes, total"] + [_bytes(v) for v in table["bytes"]],
                ["messages"] + [_num(v, 3) for v in table["messages"]]]
        tables.append(f"<h3><code>{html.escape(dataset)}</code></h3>"
                      + _table(header, rows, caption="Mean per iteration of each chain, median over seeds "
                                                     "(the shape of Wang & Lin 2017, Table 1)."))
    if tables:
        parts += tables
        quiet = sorted(set(runs.loc[runs["bytes"].fillna(0) == 0, "label"]))
        if quiet:
            parts.append(f"<p class='note'>Computed in-process, nothing sent: {html.escape(', '.join(quiet))}.</p>")
    else:
        parts.append("<p class='note'>No run sent any bytes: every algorithm in this grid computed in-process "
                     "(serial backend or one worker), so there is no communication to compare.</p>")
    parts.append("</section>")
    return "\n".join(parts)


def _search_section(runs) -> str:
    parts = ["<section id='search'><h2>Search statistics</h2>"]
    table = search_table(runs)
    if table.empty:
        parts.append("<p class='note'>No search runs in this grid.</p>")
    else:
        rows = [[r["dataset"], str(r["heuristic"]), str(r["beam"]), str(r["order"]), str(r["prior"]),
                 str(r["seeds"]), _int(r["states_pushed"]), _int(r["states_popped"]), _int(r["states_generated"]),
                 _int(r["queue_max"]), _secs(r["search_s"]), _lj(r["final_log_joint"]), _int(r["final_n_clusters"]),
                 _num(r["final_vi"], 3)] for _, r in table.iterrows()]
        parts.append(_table(["dataset", "heuristic", "beam", "order", "prior", "seeds", "states pushed",
                             "states popped", "states generated", "queue high-water", "search time", "log joint (nats)",
                             "clusters", "VI (nats)"], rows,
                            caption="One search per run (medians over seeds). States pushed = children that entered "
                                    "the queue (Daumé's '# of enqueued points')."))
    parts.append("</section>")
    return "\n".join(parts)


def _environment_section(runs, config, out_path, asv) -> str:
    metas = list(runs["meta"])
    parts = ["<section id='environment'><h2>Environment</h2>"]
    rows = []
    versions = {}
    for m in metas:
        for package, version in (m.get("versions") or {}).items():
            versions.setdefault(package, []).append(version)
    for package, found in versions.items():
        rows.append([package, _distinct(found, len(metas))])
    for key, name in (("cpu_model", "CPU"), ("cores", "cores"), ("cores_available", "cores available"),
                      ("platform", "platform"), ("backend", "backend"), ("threads", "threads per worker"),
                      ("git_commit", "git commit"),
                      ("git_dirty", "uncommitted changes"), ("alpha", "alpha"), ("init_clusters", "initial clusters"),
                      ("time_budget", "time budget (s)")):
        rows.append([name, _distinct([m.get(key) for m in metas], len(metas))])
    for package in ("matplotlib", "seaborn"):
        try:
            rows.append([f"{package} (this report)", metadata.version(package)])
        except metadata.PackageNotFoundError:
            pass
    parts.append(_table(["", "value"], rows, align_numbers=False,
                        caption="From the run metadata stored with each trace; a value that differs between runs "
                                "is listed with its number of runs."))
    if config is not None:
        import yaml

        text = yaml.safe_dump(config, sort_keys=False, default_flow_style=False, allow_unicode=True)
        parts.append(f"<h3>Configuration</h3><pre>{html.escape(text)}</pre>")
    if asv.is_file():
        # Relative, so the link survives moving the repository (and names no machine path).
        href = quote(Path(os.path.relpath(asv.resolve(), out_path.resolve().parent)).as_posix())
        parts.append(f"<p>Kernel benchmarks (asv): <a href='{html.escape(href)}'>asv results</a>.</p>")
    else:
        parts.append("<p class='note'>No asv results published in this checkout (<code>asv run</code>, then "
                     "<code>asv publish</code>; see the README) — the report links them when present.</p>")
    parts.append("</section>")
    return "\n".join(parts)


def _distinct(values, total, shown=4) -> str:
    """The values' distinct forms; when they differ, each with its count, most common first
    (at most ``shown`` of them: per-run values such as ports must not flood the table)."""
    counts = {}
    for v in values:
        key = "not recorded" if v is None else v if isinstance(v, str) else json.dumps(v)
        counts[key] = counts.get(key, 0) + 1
    if len(counts) == 1:
        return next(iter(counts))
    common = sorted(counts.items(), key=lambda kv: -kv[1])
    text = "; ".join(f"{k} ({n} of {total})" for k, n in common[:shown])
    if len(common) > shown:
        text += f"; and {len(common) - shown} other values"
    return text


def _figure(png: bytes, alt: str, caption: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (f"<figure><img src='data:image/png;base64,{data}' alt='{html.escape(alt)}'>"
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _table(header, rows, caption=None, align_numbers=True) -> str:
    def cell(tag, value):
        text = value if isinstance(value, _Raw) else html.escape(str(value))
        numeric = align_numbers and tag == "td" and _NUMERIC.match(text)
        return f"<{tag} class='n'>{text}</{tag}>" if numeric else f"<{tag}>{text}</{tag}>"

    head = "".join(cell("th", h) for h in header)
    body = "".join("<tr>" + "".join(cell("td", v) for v in row) + "</tr>" for row in rows)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<div class='scroll'><table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def _frame_table(df: pd.DataFrame) -> str:
    return _table(list(df.columns), [[_cell(v) for v in row] for row in df.itertuples(index=False)])


def _cell(value) -> str:
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return "–"
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value)


def _num(x, digits) -> str:
    return "–" if x is None or not np.isfinite(x) else f"{x:.{digits}g}"


def _int(x) -> str:
    return "–" if x is None or not np.isfinite(x) else f"{x:,.0f}"


def _lj(x) -> str:
    return "–" if x is None or not np.isfinite(x) else f"{x:,.1f}"


def _secs(x) -> str:
    return "–" if x is None or not np.isfinite(x) else f"{x:.3g} s"


def _ms(x) -> str:
    return "–" if x is None or not np.isfinite(x) else f"{x * 1e3:.3g} ms"


def _bytes(x) -> str:
    if x is None or not np.isfinite(x):
        return "–"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if x >= size:
            return f"{x / size:.3g} {unit}"
    return f"{x:.0f} B"


_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;margin:0 auto;
max-width:1200px;padding:1rem 2rem 3rem;color:#1d232a;line-height:1.45}
h1{margin-bottom:.2rem}h2{border-bottom:2px solid #d0d7de;padding-bottom:.2rem;margin-top:2.5rem}
nav ul{display:flex;flex-wrap:wrap;gap:.4rem 1.2rem;padding:0;list-style:none}
table{border-collapse:collapse;margin:.6rem 0 1rem;font-size:.9rem}
caption{caption-side:bottom;text-align:left;font-size:.85rem;color:#57606a;padding-top:.3rem}
th,td{border:1px solid #d0d7de;padding:.25rem .55rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.scroll{overflow-x:auto}.range{color:#57606a;font-size:.85em}
figure{margin:1rem 0}figure img{max-width:100%;height:auto;display:block}
figcaption{font-size:.88rem;color:#57606a;margin-top:.3rem}
.lead{font-size:1.02rem}.note{color:#57606a}.bad{color:#a40e26}
.claim{border:1px solid #d0d7de;border-radius:6px;padding:.2rem 1rem .6rem;margin:1rem 0}
.quote{font-style:italic}
.verdict{font-size:.8rem;padding:.1rem .5rem;border-radius:1rem;margin-left:.5rem;vertical-align:middle;color:#fff}
.verdict.held{background:#1a7f37}.verdict.failed{background:#cf222e}.verdict.unchecked{background:#6e7781}.verdict.undecided{background:#9a6700}
pre{background:#f6f8fa;padding:.6rem;overflow-x:auto;font-size:.85rem}
"""

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
{body}
</body>
</html>
"""
