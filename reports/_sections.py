"""The data of the HTML report's sections (:func:`reports.report.build_report`) but the
datasets' own (:mod:`reports._dataset`).

Each function here turns the run table, its traces and the chains' statistics into plain data
for the page's template (``templates/report.html.j2``): sentences, tables whose cells are
already formatted text (:mod:`reports._format`, :mod:`reports._cells`), figures as PNG data
URIs. Nothing here writes HTML: the template does, and escapes every value it places.
"""
from __future__ import annotations

import math
import os
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd

from dpmmbench import algorithms
from dpmmbench.algorithms.base import column_members
from dpmmbench.algorithms.runner import StopRule

from . import _format as fmt
from . import figures
from ._cells import Cell, Span, cell, figure, frame_table, table
from .entries import NOT_REPRODUCED, REPRODUCED
from .papers import PAPERS
from .reproductions import tables_from_runs
from .runs import communication_table
from .timing import timing_rows, workflow_timing


# ---- the page's opening -------------------------------------------------------------------
def header(runs: pd.DataFrame, datasets: list, order: list) -> dict:
    """What the page's opening paragraph states: the grid and when it ran."""
    starts = sorted(m.get("started_utc") for m in runs["meta"] if m.get("started_utc"))
    return {"runs": len(runs), "datasets": len(datasets), "labels": len(order),
            "seeds": ", ".join(map(str, sorted(set(runs["seed"])))),
            "when": f", runs started {starts[0]} to {starts[-1]} (UTC)" if starts else "",
            "bands": figures.BAND_TEXT.capitalize()}


def answer(screen, order, styles) -> dict:
    """The first screen (:func:`reports.answer.first_screen`): one table, a row per data set
    (the best settled method by log joint and by held-out log predictive, with the runner-up
    and the margin, the settled methods, whether the leaders' chains agree or sit in different
    modes), the small multiples of quality against time and the paragraph "What this run can
    and cannot tell you".

    Returns
    -------
    dict
        ``table`` (a :class:`reports._cells.Table`), ``figure`` (None when no method measured
        a quality), ``text`` (the paragraph).
    """
    from .answer import leaders

    rows = []
    for a in screen.datasets:
        size = " × ".join(part for part in (a.points is not None and f"{a.points:,} points",
                                            a.dims is not None and f"{a.dims} dims") if part)
        chains = f"{a.chains[0]}" if a.chains[0] == a.chains[1] else f"{a.chains[0]}–{a.chains[1]}"
        budget = ((a.budget.describe() if a.budget is not None else fmt.MISSING),
                  Span(f"{chains} chains" if a.rows else "no method at this budget", "sub"))
        rows.append([(a.dataset,) + ((Span(size, "sub"),) if size else ()), budget,
                     _best_cell(a.best.get("final_log_joint"), fmt.nats, "nats"),
                     _best_cell(a.best.get("heldout_lpd"), lambda x: fmt.num(x, 4), "nats / point"),
                     _settled_cell(a.settled), leaders(a)])
    caption = ("Best: the highest median over chains among the methods whose chains settled (no longer "
               "climbing over their last half), with the margin over the next settled one, ≈ where their "
               "5-95 % intervals over chains overlap. Each data set's section gives every method's diagnosis.")
    return {"table": table(["data set", "budget per chain", "best log joint", "best held-out log predictive",
                            "settled", "leaders' chains"], rows, caption=caption, align_numbers=False,
                           cls="board answer"),
            "figure": _answer_figure(screen, order, styles), "text": screen.paragraph}


def answer_figure(screen, order, styles) -> bytes | None:
    """The PNG of the first screen's small multiples of quality against time (one panel per
    data set: the held-out log predictive where points were held out, else the final log
    joint); None when no method measured either."""
    panels = []
    for a in screen.datasets:
        column = "heldout_lpd" if a.stats["heldout_lpd"].notna().any() else "final_log_joint"
        ylabel = ("held-out log predictive (nats / point)" if column == "heldout_lpd"
                  else "final log joint (nats)")
        panels.append((a.dataset, a.stats, column, ylabel))
    return figures.pareto_grid(panels, order, styles)


def _answer_figure(screen, order, styles):
    png = answer_figure(screen, order, styles)
    return figure(png, "Quality against time at the equal budget, per data set",
                  "Quality against sampler time per chain at each data set's equal budget, one panel per data set: "
                  "the held-out log predictive where points were held out, else the final log joint. One point "
                  "per method, the median over its chains, with bars from the 5 % to the 95 % quantile over "
                  "chains on both axes; the grey staircase joins the methods no other method beats on both (the "
                  "Pareto front). Up and left is better.") if png is not None else None


def _best_cell(found, show, unit) -> tuple:
    """A best settled method, its value and its margin over the settled runner-up."""
    if found is None:
        return (Span("no method settled", "why"),)
    if found.runner_up is None:
        margin = "the only one settled"
    else:
        margin = f"{'≈ +' if found.overlap else '+'}{show(found.margin)} over {found.runner_up}"
    return (Span(found.label, "name"), Span(f"{show(found.value)} {unit}; {margin}", "sub"))


def _settled_cell(labels) -> tuple:
    """The settled methods, at most :data:`reports.answer.SETTLED_SHOWN` of them, then "+ N more"."""
    from .answer import SETTLED_SHOWN as shown

    if not labels:
        return (Span("none", "why"),)
    parts = []
    for i, label in enumerate(labels[:shown]):
        parts += ([", "] if i else []) + [Span(label, "name")]
    more = len(labels) - shown
    return tuple(parts) + ((f" + {more} more",) if more > 0 else ())


def claims(found) -> list:
    """Each paper's claim, its verdict (and the verdict's style class) and what was measured."""
    out = []
    for claim in found:
        out.append({"paper": claim.paper, "verdict": claim.verdict, "claim": claim.claim,
                    "cls": {"held": "held", "did not hold": "failed",
                            "not decided at this budget": "undecided"}.get(claim.verdict, "unchecked"),
                    "summary": claim.summary, "criterion": claim.criterion or "",
                    "scope": None if claim.scope is None else f"{claim.scope.describe()}: {claim.scope.why}",
                    "draws": _claim_table(claim.draws, "Each draw of the data set (the same data set generated "
                                                       "with another seed): its outcome and the numbers that "
                                                       "decided it."),
                    "table": _claim_table(claim.table, "The chains behind it: a row per draw, method and seed.")})
    return out


def reproduction(key: str, frame: pd.DataFrame, runs: pd.DataFrame, claims: list, tolerance: float) -> dict:
    """The paper's figures and tables beside this run (:mod:`reports.reproductions`), in the
    paper's order: the page of a reproduction config opens with them. ``claims`` are the
    report's own (checked once), ``tolerance`` its time-to-target tolerance."""
    paper = PAPERS[key]
    tables = tables_from_runs(frame, runs, record={"paper": key}, claims=claims, tolerance=tolerance)
    cls = {REPRODUCED: "held", NOT_REPRODUCED: "failed"}
    entries = [{"item": e.item, "paper": e.paper, "measured": e.measured, "verdict": e.verdict, "reason": e.reason,
                "cls": cls.get(e.verdict, "unchecked"),
                "table": None if e.table is None or e.table.empty else frame_table(e.table),
                "figure": None if e.figure is None else figure(e.figure, e.item, e.caption)}
               for e in paper.entries(tables)]
    return {"title": paper.TITLE, "differences": paper.DIFFERENCES, "entries": entries,
            "not_addressed": [f"{item}: {why}" for item, why in paper.NOT_ADDRESSED]}


def _claim_table(frame, caption: str):
    """A claim's data frame as a captioned table; None when there is none."""
    return None if frame is None or frame.empty else replace(frame_table(frame), caption=caption)


# ---- the sections after the datasets ------------------------------------------------------
def priors(path) -> dict:
    """The prior-sensitivity table (:mod:`reports.priors`): per dataset a sentence, a figure
    and the summary table."""
    from . import priors as priors_mod

    found = priors_mod.read_priors(path)
    parts = []
    for name, rows in found.groupby("dataset", sort=False):
        png, caption = priors_mod.priors_figure(rows)
        parts.append({"name": str(name), "text": priors_mod.describe(rows),
                      "figure": figure(png, f"Prior sensitivity on {name}", caption),
                      "table": frame_table(priors_mod.summary_table(rows))})
    return {"description": priors_mod.DESCRIPTION, "datasets": parts}


def peers(runs: pd.DataFrame) -> list:
    """Every peer's own settings (its prior, truncation, initialisation, tolerances, library
    version) as its runs recorded them, so that a default is never read as a tuned comparison:
    per peer label its number of runs and a table (None when its runs recorded none)."""
    out = []
    for label, group in runs[runs["external"]].groupby("label", sort=False):
        settings = [m.get("peer_settings") or {} for m in group["meta"]]
        keys = list(dict.fromkeys(k for s in settings for k in s))
        rows = [[key, fmt.distinct([s.get(key) for s in settings], len(settings))] for key in keys]
        out.append({"label": str(label), "runs": len(group),
                    "table": table(["setting", "value"], rows, align_numbers=False) if rows else None})
    return out


def communication(runs: pd.DataFrame, datasets: list) -> dict:
    """Per dataset whose runs sent bytes, Wang & Lin's Table 1 shape; and the labels that
    computed in-process."""
    tables = []
    for name in datasets:
        found = communication_table(runs[runs["dataset"] == name])
        if found.empty:
            continue
        rows = [["bytes sent (master to workers)"] + [fmt.size(v) for v in found["bytes_sent"]],
                ["bytes received (workers to master)"] + [fmt.size(v) for v in found["bytes_received"]],
                ["bytes, total"] + [fmt.size(v) for v in found["bytes"]],
                ["messages"] + [fmt.num(v, 3) for v in found["messages"]]]
        tables.append({"name": name, "table": table(["per iteration"] + list(found.index), rows,
                                                    caption="Mean per iteration of each chain, median over seeds "
                                                            "(the shape of Wang & Lin 2017, Table 1).")})
    quiet = sorted(set(runs.loc[runs["bytes"].fillna(0) == 0, "label"])) if tables else []
    return {"tables": tables, "quiet": ", ".join(quiet)}


def per_step(frame: pd.DataFrame, runs: pd.DataFrame, order) -> dict:
    """Each algorithm's own per-step columns (:attr:`algorithms.base.Sampler.info_columns`),
    as its traces recorded them.

    Per algorithm that declares columns and ran here, a table with one row per dataset and
    label and one column per declared column found in its traces (an indexed family such as
    ``load_{j}`` is one column), each cell the value at the run's last step above Σ its sum
    over the run's steps (iteration 0, the initialisation, is no step), medians over seeds;
    an indexed family gives the range of these over its indices. The declared meanings are
    the header's tooltips and the table's legend.

    Returns
    -------
    dict
        ``algorithms``: a list of ``{"name", "legend": [(column, meaning)], "table"}``;
        ``silent``: the algorithms that ran and declare no column (or are not known here),
        comma-separated.
    """
    algorithm_of = dict(zip(runs["label"], runs["algorithm"]))
    ran = list(dict.fromkeys(algorithm_of[label] for label in order if label in algorithm_of))
    position = {label: i for i, label in enumerate(order)}
    datasets = list(dict.fromkeys(runs["dataset"]))
    shown, silent = [], []
    for algorithm in ran:
        mine = runs[runs["algorithm"] == algorithm]
        trace = frame[frame["run"].isin(mine["run"])]
        columns = []
        for column, meaning in _declared(algorithm).items():
            members = _members(column, trace)
            if members:
                columns.append((column, meaning, members))
        if not columns:
            silent.append(algorithm)
            continue
        chains_of = {run: chain for run, chain in trace.groupby("run", sort=False)}
        groups = sorted(mine.groupby(["dataset", "label"], sort=False),
                        key=lambda kv: (datasets.index(kv[0][0]), position.get(kv[0][1], len(position))))
        rows = []
        for (dataset_name, label), group in groups:
            runs_here = [chains_of[run] for run in group["run"] if run in chains_of]
            rows.append([dataset_name, label, str(len(runs_here))]
                        + [_step_cell(runs_here, members) for _, _, members in columns])
        head = ["dataset", "method", "runs"] + [Cell((column,), title=meaning, code=True) for column, meaning, _ in columns]
        shown.append({"name": algorithm, "legend": [(column, meaning) for column, meaning, _ in columns],
                      "table": table(head, rows, cls="steps",
                                     caption="Each cell: the value at the run's last step, and Σ its sum over the "
                                             "run's steps; medians over seeds (an indexed family: the range over "
                                             "its indices).")})
    return {"algorithms": shown, "silent": ", ".join(silent)}


def _declared(algorithm: str) -> dict:
    """The per-step columns the registry's ``algorithm`` declares; none when it is not known here."""
    try:
        return dict(algorithms.get(algorithm).info_columns)
    except (ValueError, ImportError, AttributeError):
        return {}


def _members(column: str, trace: pd.DataFrame) -> list:
    """The trace columns that hold the declared ``column`` (several for an indexed family,
    in index order; :func:`algorithms.base.column_members`), those with a value only."""
    return [name for name in column_members(column, trace.columns) if trace[name].notna().any()]


def _step_cell(runs_here, members) -> Cell:
    """Last value and Σ total over the steps, medians over runs; ranges over an indexed
    family's members."""
    last, total = [], []
    for member in members:
        lasts, totals = [], []
        for chain in runs_here:
            if member not in chain:
                continue
            values = chain.loc[chain["iteration"] > 0, member]
            lasts.append(float(chain[member].iloc[-1]))
            totals.append(float(values.sum()) if values.notna().any() else math.nan)
        last.append(float(np.nanmedian(lasts)) if np.isfinite(lasts).any() else math.nan)
        total.append(float(np.nanmedian(totals)) if np.isfinite(totals).any() else math.nan)
    return cell((_spread(last), Span(f"Σ {_spread(total)}", "total")), True)


def _spread(values) -> str:
    """One value, or the range of several (NaN left out)."""
    known = [v for v in values if np.isfinite(v)]
    if not known:
        return fmt.MISSING
    lo, hi = min(known), max(known)
    return fmt.count(lo) if lo == hi else f"{fmt.count(lo)}–{fmt.count(hi)}"


def _timing(runs: pd.DataFrame):
    """Where the run phase's time went (:mod:`reports.timing`), as a table."""
    return table(["figure", "value", "meaning"], timing_rows(workflow_timing(runs)), align_numbers=False,
                 caption="From each run's job file (Snakemake's own measure of the job's wall time, the "
                         "interpreter's start included) and its metadata. A run's start-up is its job's wall time "
                         "less its sampler and scoring time; the sampling share weighs each run's sampler time by "
                         "the cores it claims (docs/design.md \"Where the time goes\").")


def environment(runs: pd.DataFrame, config, out_path: Path, asv: Path) -> dict:
    """Versions, machine and run settings from the run metadata; where the run phase's time went
    (``timing``); the workflow configuration; a relative link to asv's published results when
    they exist."""
    metas = list(runs["meta"])
    rows, versions = [], {}
    for m in metas:
        for package, version in (m.get("versions") or {}).items():
            versions.setdefault(package, []).append(version)
    for package, found in versions.items():
        rows.append([package, fmt.distinct(found, len(metas))])
    for key, name in (("cpu_model", "CPU"), ("cores", "cores"), ("cores_available", "cores available"),
                      ("platform", "platform"), ("backend", "backend"), ("threads", "threads per worker"),
                      ("git_commit", "git commit"),
                      ("git_dirty", "uncommitted changes"), ("alpha", "alpha"), ("init_clusters", "initial clusters")):
        rows.append([name, fmt.distinct([m.get(key) for m in metas], len(metas))])
    rows.append(["time budget (s)", fmt.distinct([StopRule.from_meta(m).seconds for m in metas], len(metas))])
    for package in ("matplotlib", "seaborn", "jinja2"):
        try:
            rows.append([f"{package} (this report)", metadata.version(package)])
        except metadata.PackageNotFoundError:
            pass
    text = None
    if config is not None:
        import yaml

        text = yaml.safe_dump(config, sort_keys=False, default_flow_style=False, allow_unicode=True)
    # Relative, so the link survives moving the repository (and names no machine path).
    href = (quote(Path(os.path.relpath(asv.resolve(), out_path.resolve().parent)).as_posix())
            if asv.is_file() else None)
    return {"table": table(["", "value"], rows, align_numbers=False,
                           caption="From the run metadata stored with each trace; a value that differs between "
                                   "runs is listed with its number of runs."),
            "timing": _timing(runs), "config": text, "asv": href}
