"""The data of each section of the HTML report (:func:`reports.report.build_report`).

Each function here turns the run table, its traces and the chains' statistics into plain data
for the page's template (``templates/report.html.j2``): sentences, tables whose cells are
already formatted text (:mod:`reports._format`), figures as PNG data URIs. Nothing here
writes HTML: the template does, and escapes every value it places. A cell that needs more
than text (a grey range, a warning, a link) is a tuple of text and :class:`Span` parts.
"""
from __future__ import annotations

import base64
import math
import os
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd

from dpmmbench import algorithms
from dpmmbench.algorithms.base import column_members

from . import _format as fmt
from . import chains, costmodel, figures

#: the speed-up reference (Wang & Lin's "speed-up ratio w.r.t. CGS")
REFERENCE = "gibbs"
#: a table cell that reads as a number (right-aligned)
_NUMERIC = re.compile(r"^[-+\u2212\u2013]?[\d.,]")


# ---- what the template receives -----------------------------------------------------------
@dataclass(frozen=True)
class Span:
    """A part of a table cell with a class of its own (``range``, ``bad``, ``total``) or,
    with ``href``, a link."""

    text: str
    cls: str = ""
    href: str = ""


@dataclass(frozen=True)
class Cell:
    """One table cell: text and :class:`Span` parts, right-aligned when ``numeric``, with an
    optional tooltip (``title``); ``code``: its one part is an identifier (a column name)."""

    parts: tuple
    numeric: bool = False
    title: str = ""
    code: bool = False


@dataclass(frozen=True)
class Table:
    """A table of :class:`Cell`; ``cls`` names its layout in the style sheet."""

    header: tuple
    rows: tuple
    caption: str = ""
    cls: str = ""


@dataclass(frozen=True)
class Figure:
    """A PNG figure as a data URI, its alternative text and its caption."""

    src: str
    alt: str
    caption: str


def figure(png: bytes, alt: str, caption: str) -> Figure:
    """A :class:`Figure` of the PNG bytes ``png`` (embedded: the page opens offline)."""
    return Figure("data:image/png;base64," + base64.b64encode(png).decode("ascii"), alt, caption)


def _cell(value, align: bool) -> Cell:
    if isinstance(value, Cell):
        return value
    parts = tuple(p if isinstance(p, Span) else str(p) for p in (value if isinstance(value, tuple) else (value,)))
    numeric = align and bool(parts) and isinstance(parts[0], str) and _NUMERIC.match(parts[0]) is not None
    return Cell(parts, numeric)


def table(header, rows, caption: str = "", align_numbers: bool = True, cls: str = "") -> Table:
    """A :class:`Table`; each header or row entry is text, a tuple of text and :class:`Span`
    parts, or a :class:`Cell`. Cells that start with a number are right-aligned unless
    ``align_numbers`` is False."""
    return Table(tuple(_cell(h, False) for h in header),
                 tuple(tuple(_cell(v, align_numbers) for v in row) for row in rows), caption, cls)


def frame_table(df: pd.DataFrame) -> Table:
    """A data frame as a table, its values formatted by :func:`reports._format.cell`."""
    return table(list(df.columns), [[fmt.cell(v) for v in row] for row in df.itertuples(index=False)])


# ---- computed tables ----------------------------------------------------------------------
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
        From :func:`reports.runs.read_runs`, restricted to one dataset.
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


# ---- the page's opening -------------------------------------------------------------------
def header(runs: pd.DataFrame, datasets: list, order: list) -> dict:
    """What the page's opening paragraph states: the grid and when it ran."""
    starts = sorted(m.get("started_utc") for m in runs["meta"] if m.get("started_utc"))
    return {"runs": len(runs), "datasets": len(datasets), "variants": len(order),
            "seeds": ", ".join(map(str, sorted(set(runs["seed"])))),
            "when": f", runs started {starts[0]} to {starts[-1]} (UTC)" if starts else "",
            "bands": figures.BAND_TEXT.capitalize()}


def claims(found) -> list:
    """Each paper's claim, its verdict (and the verdict's style class) and what was measured."""
    out = []
    for claim in found:
        out.append({"paper": claim.paper, "verdict": claim.verdict, "claim": claim.claim,
                    "cls": {"held": "held", "did not hold": "failed",
                            "not decided at this budget": "undecided"}.get(claim.verdict, "unchecked"),
                    "summary": claim.summary, "criterion": claim.criterion or "",
                    "scope": None if claim.scope is None else f"{claim.scope.describe()}: {claim.scope.why}",
                    "table": frame_table(claim.table) if claim.table is not None and not claim.table.empty else None})
    return out


# ---- a dataset ----------------------------------------------------------------------------
def dataset(i: int, name: str, frame: pd.DataFrame, runs: pd.DataFrame, steps: pd.DataFrame, order, styles,
            network: costmodel.Network, stats: pd.DataFrame, tolerance: float) -> dict:
    """The section of one dataset: its leaderboard, figures, tables and scaling model.

    Parameters
    ----------
    i : int
        Position of the dataset (its anchor is ``dataset-{i}``).
    name : str
        The dataset.
    frame, runs : pandas.DataFrame
        Trace rows and runs of this dataset (:func:`reports.runs.read_runs`).
    steps : pandas.DataFrame
        Its step times (:func:`reports.runs.step_times`).
    order, styles
        Every label in the page's order, and each label's colour and dashes.
    network : reports.costmodel.Network
        The network the scaling is modelled on.
    stats : pandas.DataFrame
        :func:`reports.chains.chain_statistics` of this dataset by label.
    tolerance : float
        The relative tolerance of the time to target.
    """
    meta = runs["meta"].iloc[0].get("dataset_meta", {}) or {}
    labels = [label for label in order if label in set(runs["label"])]
    with_truth = bool(frame["vi"].notna().any())
    described = [meta.get("description"), meta.get("source") and f"Source: {meta['source']}",
                 meta.get("substitute") and "A substitute for the papers' data, labelled as such",
                 "Ground truth available: VI is shown" if with_truth else "No ground truth: VI is not shown"]
    section = {"index": i, "name": name,
               "description": " ".join(d if d.endswith((".", "!", "?")) else d + "." for d in described if d)}
    section["leaders"], section["leaderboard"] = leaderboard(stats, labels, tolerance,
                                                             set(runs.loc[runs["external"], "label"]))
    png = figures.pareto_figure(stats, labels, styles)
    section["pareto"] = None if png is None else figure(
        png, f"Quality against time on {name}",
        "Quality against sampler time per chain: one point per method, the median over its chains, with bars "
        "from the 5 % to the 95 % quantile over chains on both axes; the grey staircase joins the methods no "
        "other method beats on both (the Pareto front: the best quality on offer at each time). Up and left "
        "is better.")
    section["overview"] = _overview_table(runs, labels)

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
    section["convergence"] = figure(png, f"Convergence on {name}", caption)

    learned = runs.loc[runs["learned_alpha"], "run"]
    section["alpha"] = None
    if len(learned) and "alpha" in frame:
        section["alpha"] = figure(figures.alpha_figure(frame[frame["run"].isin(learned)], labels, styles),
                                  f"Learned concentration on {name}",
                                  "The concentration α of the runs that learn it (Gamma prior, resampled every "
                                  f"iteration) against iteration, log scale. {figures.BAND_TEXT.capitalize()}.")
    section["step_time"] = None
    if not steps.empty:
        png = figures.step_time_figure(steps.assign(step_s=steps["step_s"].clip(lower=1e-7)), labels, styles)
        section["step_time"] = figure(png, f"Time per iteration on {name}",
                                      "Sampler time of each iteration, all seeds pooled (box: quartiles; whiskers: "
                                      "1.5 IQR). For search, only the step that searched.")
    section["speedup"] = _speedup(frame, runs, labels, styles)
    section["scaling"] = _scaling(name, frame, runs, order, styles, network)
    return section


def leaderboard(stats: pd.DataFrame, labels, tolerance: float, peers=frozenset()) -> tuple[str, Table]:
    """Per method of one dataset: convergence, efficiency and quality over its chains
    (:func:`reports.chains.chain_statistics`), fastest to the target first, and a sentence
    that names the leaders; the ``peers`` labels link to their settings.

    Returns
    -------
    (sentence, table) : tuple of (str, Table)
    """
    rows_in = stats.set_index("label").loc[[label for label in labels if label in set(stats["label"])]]
    # fastest to the target first (never reached, or not comparable, last), then the better predictive
    ranked = rows_in.assign(_t=rows_in["time_to_target_s"].fillna(math.inf),
                            _h=-rows_in["heldout_lpd"].fillna(-math.inf)).sort_values(["_t", "_h"], kind="stable")
    with_truth = bool(stats["final_nmi"].notna().any() or stats["final_vi"].notna().any())
    rows = []
    for label, r in ranked.iterrows():
        rhat, ess, per_s = _diagnostics_cells(r)
        if r["learned_alpha"] or math.isnan(r["target_log_joint"]):
            target = "– (learns α)" if r["learned_alpha"] else "–"
        elif r["reached"] == 0:
            target = (Span("not reached", "bad"), " ", Span(f"(0 of {r['chains']})", "count"))
        else:
            target = (*_interval(r, "time_to_target_s", fmt.secs), " ",
                      Span(f"({r['reached']} of {r['chains']})", "count"))
        row = [(label, " ", Span("(peer)", "peer", "#peers")) if label in peers else label,
               f"{r['chains']}" + (f" ({r['failed']} failed)" if r["failed"] else ""), rhat, ess, per_s,
               target, _interval(r, "heldout_lpd", lambda x: fmt.num(x, 4))]
        if with_truth:
            row += [_interval(r, "final_nmi", lambda x: fmt.num(x, 3)), _interval(r, "final_vi", lambda x: fmt.num(x, 3))]
        row += [_interval(r, "final_n_clusters", fmt.whole), _interval(r, "time_s", fmt.secs)]
        rows.append(row)
    head = ["algorithm", "chains", "R̂ log joint / clusters", "ESS bulk / tail", "ESS / s", "time to target",
            "held-out log predictive"]
    head += ["NMI", "VI (nats)"] if with_truth else []
    head += ["final clusters", "sampler time"]
    target = ranked["target_log_joint"].dropna()
    target_text = (f"the first sampler time at which a chain's log joint is at or above {fmt.nats(target.iloc[0])} "
                   f"nats, within {100 * tolerance:.3g} % of the best log joint any method reached on this dataset"
                   if len(target) else "not measured (no method with a fixed α ran here)")
    caption = (f"Leaderboard: medians over chains with the 5 % and 95 % quantiles over chains in brackets, fastest "
               f"to the target first. Time to target: {target_text} (then, in parentheses, how many chains got "
               f"there); runs that learn α score their log joint at "
               f"another α and are not timed. R̂: rank-normalised split R̂ over chains and ESS: bulk and tail "
               f"effective sample size (arviz-stats) of the log joint and the number of clusters, quantities that do "
               f"not depend on how clusters are labelled, on each chain's second half (chains cut to the shortest, "
               f"at least the last {chains.MIN_DRAWS} steps); R̂ above {chains.RHAT_THRESHOLD} marks a method as not "
               f"converged; R̂ needs two chains and ESS a quantity that moves (– otherwise). R̂ and ESS are "
               f"statistics of samplers: for an optimiser or variational inference they are n/a, with the reason. "
               f"ESS / s: bulk ESS of "
               f"the log joint per second of sampler time, summed over the chains up to their last draw. Held-out "
               f"log predictive in nats per point (higher is better), VI in nats.")
    return _leaders(ranked), table(head, rows, caption=caption, cls="board")


def _diagnostics_cells(r) -> tuple:
    """The R-hat, ESS and ESS-per-second cells of a leaderboard row: n/a with the reason for
    a method that is no sampler, else the numbers, with the verdict when R-hat has one."""
    verdict, bad = chains.convergence_verdict(r)
    if verdict in chains.NOT_A_SAMPLER.values():
        return ("n/a ", Span(verdict.removeprefix("n/a: "), "why")), "n/a", "n/a"
    rhat = f"{fmt.num(r['rhat_log_joint'], 4)} / {fmt.num(r['rhat_n_clusters'], 4)}"
    if verdict:
        rhat = (rhat + " ", Span(verdict, "bad" if bad else "why"))
    return (rhat, f"{fmt.whole(r['ess_bulk_log_joint'])} / {fmt.whole(r['ess_tail_log_joint'])}",
            fmt.num(r["ess_per_s"], 3))


def _leaders(ranked) -> str:
    """One sentence naming the leaders of a dataset's leaderboard, from its numbers."""
    said = []
    flagged = [chains.convergence_verdict(r)[1] for _, r in ranked.iterrows()]
    timed = ranked[np.isfinite(ranked["time_to_target_s"])]
    if len(timed):
        label, r = next(timed.iterrows())
        said.append(f"fastest to the target: {label} (median {fmt.secs(r['time_to_target_s'])} over its chains, "
                    f"{r['reached']} of {r['chains']} reached it"
                    + ("; not converged by R̂" if chains.convergence_verdict(r)[1] else "") + ")")
    else:
        said.append("no method's median chain reached the target")
    heldout = ranked["heldout_lpd"].dropna()
    if len(heldout):
        label = heldout.idxmax()
        said.append(f"best held-out log predictive: {label} ({fmt.num(heldout.max(), 4)} nats per point)")
    efficient = ranked.loc[[not f for f in flagged], "ess_per_s"].dropna()
    if len(efficient):
        said.append(f"most effective samples per second among the methods not marked as unconverged: "
                    f"{efficient.idxmax()} ({fmt.num(efficient.max(), 3)} per s)")
    text = "; ".join(said)
    return text[0].upper() + text[1:] + "."


def _interval(row, column, show) -> tuple:
    """``median [lo, hi]`` of a summary column as cell parts; ``inf`` reads "not reached"."""
    def text(x):
        return "not reached" if x == math.inf else show(x)

    median, lo, hi = row[column], row[f"{column}_lo"], row[f"{column}_hi"]
    if median is None or math.isnan(median):
        return (fmt.MISSING,)
    if lo == hi == median:
        return (text(median),)
    return (f"{text(median)} ", Span(f"[{text(lo)}, {text(hi)}]", "range"))


def _overview_table(runs, labels) -> Table:
    rows = []
    for label in labels:
        g = runs[runs["label"] == label]
        final = g["final_log_joint"]
        rows.append([label, str(len(g)), fmt.whole(g["iterations"].median()), fmt.secs(g["time_s"].median()),
                     fmt.secs(g["s_per_iteration"].median()),
                     (f"{fmt.nats(final.median())} ", Span(f"[{fmt.nats(final.min())}, {fmt.nats(final.max())}]", "range")),
                     fmt.whole(g["final_n_clusters"].median()), fmt.num(g["final_vi"].median(), 3),
                     fmt.num(g["heldout_lpd"].median(), 4),
                     fmt.num(g["alpha"].median(), 3) + (" (learned)" if g["learned_alpha"].any() else "")])
    return table(["algorithm", "seeds", "iterations", "sampler time", "time / iteration",
                  "final log joint (nats) median [min, max]", "final clusters", "final VI (nats)",
                  "held-out log predictive (nats / point)", "final α"],
                 rows, caption="Where the chains ended (medians over seeds). Held-out log predictive: the "
                               "mean log posterior predictive density of the points held out of the chains "
                               "(one seeded split per dataset), averaged over each chain's last states; "
                               "higher is better.")


def _speedup(frame, runs, labels, styles) -> dict | None:
    """Time to the reference's level and the speed-up over it; None without reference runs."""
    # a learned alpha's log joint is scored at its own alpha: no common target with the others
    fixed = runs[~runs["learned_alpha"]]
    found, target = speedup_table(frame[frame["run"].isin(fixed["run"])], fixed)
    if found is None:
        return None
    rows = []
    for label in labels:
        row = found[found["label"] == label]
        if row.empty:
            continue
        r = row.iloc[0]
        if r["reached"] == 0:
            rows.append([label, f"0 / {r['seeds']}", "not reached", "not reached", (Span("not reached", "bad"),)])
            continue
        partial = "" if r["reached"] == r["seeds"] else f" (from {r['reached']} of {r['seeds']} seeds)"
        rows.append([label, f"{r['reached']} / {r['seeds']}", fmt.whole(r["iterations_to_target"]),
                     fmt.secs(r["time_to_target"]), f"{r['speedup']:.3g}×{partial}"])
    out = {"target": fmt.nats(target), "learned_left_out": len(fixed) < len(runs),
           "table": table(["algorithm", "seeds reaching target", "iterations to target", "time to target",
                           f"speed-up w.r.t. {REFERENCE}"], rows), "figure": None}
    reached = found.dropna(subset=["speedup"])
    scaled = reached.groupby("variant")["workers"].transform("nunique") > 1
    if scaled.any():
        out["figure"] = figure(figures.speedup_workers_figure(reached[scaled], styles, REFERENCE),
                               "Speed-up against workers",
                               f"Speed-up w.r.t. {REFERENCE} against the number of workers, for algorithms run with "
                               "several worker counts (points only where the target was reached).")
    return out


def _scaling(name, frame, runs, order, styles, network) -> dict:
    """The cost model's predicted scaling of the sharded samplers (:mod:`reports.costmodel`):
    figure, fitted parameters, predictions at 1…64 workers; and the per-worker load figure
    of every sharded sampler that reports one (``auxvar``)."""
    scaling = costmodel.scaling(frame, runs, network=network, reference=REFERENCE)
    loads = [v for v in dict.fromkeys(runs["variant"]) if _reports_load(frame, runs, v)]
    out = {"empty": not scaling.models and not scaling.notes and not loads, "model": None,
           "notes": list(scaling.notes), "loads": []}
    if scaling.models:
        variants = [v for v in _variant_order(order, runs) if v in scaling.models]
        colours = {v: _variant_style(v, runs, styles)[0] for v in variants}
        with_reference = bool(np.isfinite(scaling.reference_s))
        what = f"speed-up per iteration w.r.t. {REFERENCE}" if with_reference else "time per iteration"
        serial = [m.serial_s for m in scaling.models.values()]
        compute = [m.compute_s + m.shard_s for m in scaling.models.values()]
        out["model"] = {
            "network": network.describe(), "loopback": costmodel.LOOPBACK.describe(),
            "reference_ms": fmt.ms(scaling.reference_s) if with_reference else None,
            "serial": (fmt.ms(min(serial)), fmt.ms(max(serial))), "compute": (fmt.ms(min(compute)), fmt.ms(max(compute))),
            "figure": figure(figures.scaling_figure(scaling.predictions, scaling.measured, colours,
                                                    f"model ({network.describe()})",
                                                    REFERENCE if with_reference else None),
                             f"Modelled scaling on {name}",
                             f"MODEL, not measurement: lines are the cost model's {what} for 1 to "
                             f"{int(scaling.predictions['workers'].max())} workers on a network of "
                             f"{network.describe()} per message; points are the measured median iteration times on "
                             f"this machine, at the worker counts that ran."),
            "parameters": _scaling_parameters(scaling, variants),
            "predictions": _scaling_predictions(scaling, variants, with_reference)}
    for variant in loads:
        trace = frame[frame["run"].isin(runs.loc[runs["variant"] == variant, "run"])]
        typical = trace[trace["iteration"] > 0].groupby("workers")["load_imbalance"].median()
        summary = "; ".join(f"{w} worker{'s' if w > 1 else ''}: {v:.3g}" for w, v in typical.items())
        out["loads"].append(figure(
            figures.load_figure(trace), f"Per-worker load of {variant} on {name}",
            f"Per-worker load of {variant}: points swept by each worker in every iteration (top, lowest seed) and "
            f"the imbalance, max / mean load (bottom; median over seeds with the range). Median imbalance over "
            f"iterations and seeds: {summary}. Whole clusters sit on random workers, so a few large clusters "
            f"unbalance the load (Gal & Ghahramani 2014); the slowest worker sets the pace of a synchronous "
            f"iteration."))
    return out


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


def _scaling_parameters(scaling, variants) -> Table:
    rows = []
    for variant in variants:
        model = scaling.models[variant]
        check = costmodel.in_sample(model)
        measured = model.measured
        counts = ", ".join(f"{int(w)} ({int(n)} run{'s' if n > 1 else ''})"
                           for w, n in zip(measured["workers"], measured["runs"]))
        moved = f" + 2·{fmt.size(model.moved_bytes)}·(W−1)/W" if model.moved_bytes else ""
        rows.append([variant, counts, fmt.ms(model.serial_s),
                     "; ".join(f"{int(w)}: {fmt.ms(v)}" for w, v in zip(measured["workers"], measured["master_s"])),
                     fmt.ms(model.compute_s), fmt.ms(model.shard_s), f"{model.imbalance:.3g}",
                     _affine_text(model.bytes_fixed, model.bytes_per_worker, fmt.size) + moved,
                     _affine_text(model.messages_fixed, model.messages_per_worker, lambda v: f"{v:.3g}"),
                     "; ".join(f"{int(r.workers)}: {fmt.ms(r.measured_s)} / {fmt.ms(r.model_s)} ({r.error:+.0%})"
                               for r in check.itertuples())])
    return table(["algorithm", "measured workers", "T_serial", "T_serial per measured W", "C", "c (per shard)",
                  "imbalance ι (W ≥ 2)", "bytes / iteration b(W)", "messages m(W)",
                  "measured / model at measured W (loopback)"], rows,
                 caption="Fitted parameters of the cost model (times per iteration). The last column is the model "
                         "under the measured conditions next to the measured median step time: how well it "
                         "reproduces what it was fitted on.")


def _scaling_predictions(scaling, variants, with_reference) -> Table:
    predicted = scaling.predictions
    shown = [w for w in costmodel.TABLE_WORKERS if w in set(predicted["workers"])]
    value = "speedup" if with_reference else "iteration_s"

    def cell(x):
        return f"{x:.3g}×" if with_reference else fmt.ms(x)

    rows = []
    for variant in variants:
        curve = predicted[predicted["variant"] == variant].set_index("workers")
        measured = scaling.measured[scaling.measured["variant"] == variant]
        best = curve[value].idxmax() if with_reference else curve[value].idxmin()
        rows.append([variant, "; ".join(f"{int(w)}: {cell(v)}" for w, v in zip(measured["workers"], measured[value]))]
                    + [cell(curve.loc[w, value]) for w in shown] + [f"{cell(curve.loc[best, value])} at W = {best}"])
    what = f"speed-up per iteration w.r.t. {REFERENCE}" if with_reference else "time per iteration"
    return table(["algorithm", "measured (W: value)"] + [f"W = {w}" for w in shown] + ["best (model)"], rows,
                 caption=f"Model: {what} predicted for W workers on the stated network (a model, not a "
                         f"measurement), next to the measured values.")


def _affine_text(fixed, per_worker, show) -> str:
    """``b·W ± a``, leaving out a zero term."""
    if fixed and per_worker:
        return f"{show(per_worker)}·W {'+' if fixed > 0 else '−'} {show(abs(fixed))}"
    if per_worker:
        return f"{show(per_worker)}·W"
    return show(fixed)


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
    names = list(dict.fromkeys(algorithm_of[label] for label in order if label in algorithm_of))
    position = {label: i for i, label in enumerate(order)}
    datasets = list(dict.fromkeys(runs["dataset"]))
    shown, silent = [], []
    for name in names:
        mine = runs[runs["algorithm"] == name]
        trace = frame[frame["run"].isin(mine["run"])]
        columns = []
        for column, meaning in _declared(name).items():
            members = _members(column, trace)
            if members:
                columns.append((column, meaning, members))
        if not columns:
            silent.append(name)
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
        shown.append({"name": name, "legend": [(column, meaning) for column, meaning, _ in columns],
                      "table": table(head, rows, cls="steps",
                                     caption="Each cell: the value at the run's last step, and Σ its sum over the "
                                             "run's steps; medians over seeds (an indexed family: the range over "
                                             "its indices).")})
    return {"algorithms": shown, "silent": ", ".join(silent)}


def _declared(name: str) -> dict:
    """The per-step columns ``name`` declares; none when it is not known here."""
    try:
        return dict(algorithms.get(name).info_columns)
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
    return _cell((_spread(last), Span(f"Σ {_spread(total)}", "total")), True)


def _spread(values) -> str:
    """One value, or the range of several (NaN left out)."""
    known = [v for v in values if np.isfinite(v)]
    if not known:
        return fmt.MISSING
    lo, hi = min(known), max(known)
    return fmt.count(lo) if lo == hi else f"{fmt.count(lo)}–{fmt.count(hi)}"


def environment(runs: pd.DataFrame, config, out_path: Path, asv: Path) -> dict:
    """Versions, machine and run settings from the run metadata; the workflow configuration;
    a relative link to asv's published results when they exist."""
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
                      ("git_dirty", "uncommitted changes"), ("alpha", "alpha"), ("init_clusters", "initial clusters"),
                      ("time_budget", "time budget (s)")):
        rows.append([name, fmt.distinct([m.get(key) for m in metas], len(metas))])
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
            "config": text, "asv": href}
