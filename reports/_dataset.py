"""The data of a dataset's section of the HTML report: its leaderboard, figures, speed-up
table and scaling model (:func:`dataset`)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import _format as fmt
from . import chains, costmodel, figures
from ._cells import Span, Table, figure, table

#: the speed-up reference (Wang & Lin's "speed-up ratio w.r.t. CGS")
REFERENCE = "gibbs"


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
        Run name of the reference.

    Returns
    -------
    table : pandas.DataFrame or None
        One row per label: ``label, name, workers, seeds, reached, iterations_to_target,
        time_to_target, speedup`` (NaN when no seed reached it); None without reference runs.
    target : float
        The target log joint (NaN without reference runs).
    """
    ref_runs = runs[(runs["name"] == reference) & (runs["workers"] == 1)]
    if ref_runs.empty:
        return None, math.nan
    target = float(ref_runs["best_log_joint"].min())
    hits = []
    for run, chain in frame.groupby("run", sort=False):
        above = chain[chain["log_joint"] >= target]
        hits.append({"run": run, "time": float(above["time_s"].iloc[0]) if len(above) else math.nan,
                     "iteration": float(above["iteration"].iloc[0]) if len(above) else math.nan})
    hits = runs[["run", "label", "name", "workers"]].merge(pd.DataFrame(hits), on="run")
    ref_time = float(hits.loc[hits["run"].isin(ref_runs["run"]), "time"].median())
    rows = []
    for label, group in hits.groupby("label", sort=False):
        reached = group["time"].notna()
        seconds = float(group.loc[reached, "time"].median()) if reached.any() else math.nan
        iterations = float(group.loc[reached, "iteration"].median()) if reached.any() else math.nan
        rows.append({"label": label, "name": group["name"].iloc[0], "workers": int(group["workers"].iloc[0]),
                     "seeds": len(group), "reached": int(reached.sum()), "iterations_to_target": iterations,
                     "time_to_target": seconds, "speedup": ref_time / seconds if seconds > 0 else math.nan})
    return pd.DataFrame(rows), target


def diagnosis_table(stats: pd.DataFrame, labels) -> Table:
    """Every method's chain diagnosis on the data set (:mod:`reports.diagnosis`): what the
    first screen sums up in its ``settled`` column, in full."""
    from .diagnosis import SETTLED

    rows = []
    by_label = stats.set_index("label")
    for label in labels:
        if label not in by_label.index:
            continue
        row = by_label.loc[label]
        settled = row["outcome"] in SETTLED
        rows.append([label, Span(str(row["diagnosis"]), "ok" if settled else "why"), fmt.whole(row["chains"]),
                     fmt.whole(row["iterations_median"]), fmt.num(row["settle_s"], 2)])
    return table(["method", "diagnosis", "chains", "iterations (median)", "time to settle (s, median)"], rows,
                 caption="Settled: a chain's log joint no longer climbs over its last half (docs/design.md \"Chain "
                         "diagnosis\"); a method settled when 3 of 4 of its chains did. Time to settle: after it, "
                         "the chain stays within the range of its last half.", cls="board")


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
    section["diagnosis"] = diagnosis_table(stats, labels)
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
    head = ["run", "chains", "R̂ log joint / clusters", "ESS bulk / tail", "ESS / s", "time to target",
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
    return table(["run", "seeds", "iterations", "sampler time", "time / iteration",
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
           "table": table(["run", "seeds reaching target", "iterations to target", "time to target",
                           f"speed-up w.r.t. {REFERENCE}"], rows), "figure": None}
    reached = found.dropna(subset=["speedup"])
    scaled = reached.groupby("name")["workers"].transform("nunique") > 1
    if scaled.any():
        out["figure"] = figure(figures.speedup_workers_figure(reached[scaled], styles, REFERENCE),
                               "Speed-up against workers",
                               f"Speed-up w.r.t. {REFERENCE} against the number of workers, for algorithms run with "
                               "several worker counts (points only where the target was reached).")
    return out


def _scaling(dataset, frame, runs, order, styles, network) -> dict:
    """The cost model's predicted scaling of the sharded samplers (:mod:`reports.costmodel`):
    figure, fitted parameters, predictions at 1…64 workers; and the per-worker load figure
    of every sharded sampler that reports one (``auxvar``)."""
    scaling = costmodel.scaling(frame, runs, network=network, reference=REFERENCE)
    loads = [n for n in dict.fromkeys(runs["name"]) if _reports_load(frame, runs, n)]
    out = {"empty": not scaling.models and not scaling.notes and not loads, "model": None,
           "notes": list(scaling.notes), "loads": []}
    if scaling.models:
        names = [n for n in _name_order(order, runs) if n in scaling.models]
        colours = {n: _name_style(n, runs, styles)[0] for n in names}
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
                             f"Modelled scaling on {dataset}",
                             f"MODEL, not measurement: lines are the cost model's {what} for 1 to "
                             f"{int(scaling.predictions['workers'].max())} workers on a network of "
                             f"{network.describe()} per message; points are the measured median iteration times on "
                             f"this machine, at the worker counts that ran."),
            "parameters": _scaling_parameters(scaling, names),
            "predictions": _scaling_predictions(scaling, names, with_reference)}
    for name in loads:
        trace = frame[frame["run"].isin(runs.loc[runs["name"] == name, "run"])]
        typical = trace[trace["iteration"] > 0].groupby("workers")["load_imbalance"].median()
        summary = "; ".join(f"{w} worker{'s' if w > 1 else ''}: {v:.3g}" for w, v in typical.items())
        out["loads"].append(figure(
            figures.load_figure(trace), f"Per-worker load of {name} on {dataset}",
            f"Per-worker load of {name}: points swept by each worker in every iteration (top, lowest seed) and "
            f"the imbalance, max / mean load (bottom; median over seeds with the range). Median imbalance over "
            f"iterations and seeds: {summary}. Whole clusters sit on random workers, so a few large clusters "
            f"unbalance the load (Gal & Ghahramani 2014); the slowest worker sets the pace of a synchronous "
            f"iteration."))
    return out


def _reports_load(frame, runs, name) -> bool:
    """Whether the runs named ``name`` are of a sharded sampler whose traces report per-worker loads."""
    group = runs[runs["name"] == name]
    if "load_imbalance" not in frame or not costmodel.is_sharded(group["algorithm"].iloc[0]):
        return False
    return bool(frame.loc[frame["run"].isin(group["run"]), "load_imbalance"].notna().any())


def _name_order(order, runs) -> list:
    """Run names in the order of their first label."""
    name_of = dict(zip(runs["label"], runs["name"]))
    return list(dict.fromkeys(name_of[label] for label in order if label in name_of))


def _name_style(name, runs, styles):
    """The style of a run name: that of its single-worker label, else of its first label."""
    if name in styles:
        return styles[name]
    labels = [label for label in runs.loc[runs["name"] == name, "label"] if label in styles]
    return styles[labels[0]] if labels else ("0.3", "")


def _scaling_parameters(scaling, names) -> Table:
    rows = []
    for name in names:
        model = scaling.models[name]
        check = costmodel.in_sample(model)
        measured = model.measured
        counts = ", ".join(f"{int(w)} ({int(n)} run{'s' if n > 1 else ''})"
                           for w, n in zip(measured["workers"], measured["runs"]))
        moved = f" + 2·{fmt.size(model.moved_bytes)}·(W−1)/W" if model.moved_bytes else ""
        rows.append([name, counts, fmt.ms(model.serial_s),
                     "; ".join(f"{int(w)}: {fmt.ms(v)}" for w, v in zip(measured["workers"], measured["master_s"])),
                     fmt.ms(model.compute_s), fmt.ms(model.shard_s), f"{model.imbalance:.3g}",
                     _affine_text(model.bytes_fixed, model.bytes_per_worker, fmt.size) + moved,
                     _affine_text(model.messages_fixed, model.messages_per_worker, lambda v: f"{v:.3g}"),
                     "; ".join(f"{int(r.workers)}: {fmt.ms(r.measured_s)} / {fmt.ms(r.model_s)} ({r.error:+.0%})"
                               for r in check.itertuples())])
    return table(["run", "measured workers", "T_serial", "T_serial per measured W", "C", "c (per shard)",
                  "imbalance ι (W ≥ 2)", "bytes / iteration b(W)", "messages m(W)",
                  "measured / model at measured W (loopback)"], rows,
                 caption="Fitted parameters of the cost model (times per iteration). The last column is the model "
                         "under the measured conditions next to the measured median step time: how well it "
                         "reproduces what it was fitted on.")


def _scaling_predictions(scaling, names, with_reference) -> Table:
    predicted = scaling.predictions
    shown = [w for w in costmodel.TABLE_WORKERS if w in set(predicted["workers"])]
    value = "speedup" if with_reference else "iteration_s"

    def cell(x):
        return f"{x:.3g}×" if with_reference else fmt.ms(x)

    rows = []
    for name in names:
        curve = predicted[predicted["name"] == name].set_index("workers")
        measured = scaling.measured[scaling.measured["name"] == name]
        best = curve[value].idxmax() if with_reference else curve[value].idxmin()
        rows.append([name, "; ".join(f"{int(w)}: {cell(v)}" for w, v in zip(measured["workers"], measured[value]))]
                    + [cell(curve.loc[w, value]) for w in shown] + [f"{cell(curve.loc[best, value])} at W = {best}"])
    what = f"speed-up per iteration w.r.t. {REFERENCE}" if with_reference else "time per iteration"
    return table(["run", "measured (W: value)"] + [f"W = {w}" for w in shown] + ["best (model)"], rows,
                 caption=f"Model: {what} predicted for W workers on the stated network (a model, not a "
                         f"measurement), next to the measured values.")


def _affine_text(fixed, per_worker, show) -> str:
    """``b·W ± a``, leaving out a zero term."""
    if fixed and per_worker:
        return f"{show(per_worker)}·W {'+' if fixed > 0 else '−'} {show(abs(fixed))}"
    if per_worker:
        return f"{show(per_worker)}·W"
    return show(fixed)
