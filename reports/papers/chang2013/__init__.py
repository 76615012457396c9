"""Chang & Fisher (2013), figure by figure: log joint against time for the sub-cluster samplers
and their baselines (Figures 4 and 5), from ``workflows/config/chang2013.yaml``'s record.

Every entry compares medians over a setting's chains (the config's seeds) of the final log joint, the
final number of clusters and, where the data have labels, the final VI to them. A median chain
is *at the plateau* of a comparison when its final log joint is within
:data:`reports.papers.chang2013.claim.PLATEAU_RTOL` of the best final log joint of any chain in that
comparison (the rule of the suite's own Chang & Fisher claim). Log joints of different data
sets, or of different concentrations, are never compared with each other.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpmmbench.datasets import describe
from ... import figures
from ...claims import Criterion, decide, regime_note
from .claim import CHANG_SCOPE, PLATEAU_RTOL
from ...entries import INCONCLUSIVE, NOT_COMPARABLE, NOT_REPRODUCED, REPRODUCED, Entry
from ...scaling_doc import speedups

TITLE = "Chang & Fisher (2013), Parallel sampling of DP mixture models using sub-cluster splits"
SHORT = "Chang & Fisher 2013"
CONFIG = "workflows/config/chang2013.yaml"
DIFFERENCES = (
    "2 cores, not 16: one chain per core, and only subc shards its data (on 2 Dask workers, run subc-2w); "
    "every chain gets the same sampler-time budget on a data set, 30 s on the synthetic set, 40 s on MNIST and "
    "15 s on each corpus, not the paper's minutes to hours; three chains (seeds) per setting; starts from K = 1 "
    "and K = 50 clusters at α = 1, and from K = 1 at α = 100 on the synthetic set only (the paper's figure gives "
    "its values, its text does not); the synthetic set is regenerated from the paper's recipe (100,000 2-D "
    "points from ten Gaussians drawn from a Normal-inverse-Wishart prior), not the authors' draw; MNIST-10k "
    "(the 10,000 real digits, PCA to 50 dimensions) stands in for MNIST-70k, and two small real corpora, "
    "Wikipedia-7961 and NYT-8447, each subsampled (seed 0) to AP's 2,246 documents, stand in for AP, Enron, "
    "NYTimes and PubMed; FSD has 100 components everywhere. Prior hyper-parameters and data draws differ from "
    "the paper's, so log joints are compared by ordering and relative gap, not by value.")
NOT_ADDRESSED = [
    ("Table 1 (capabilities of MCMC sampling algorithms)",
     "A qualitative table (exact model, splits and merges, intra- and inter-cluster parallelisable, "
     "non-conjugate priors) of design properties, not measurements; in the text copy only the proposed "
     "method's column (all five marked) is legible, the other columns' marks are scrambled."),
    ("Figures 1-3 (graphical models and illustrations of sub-clusters and super-clusters)",
     "Diagrams of the model and of the moves, with nothing measured."),
    ("Figure 5b-e at the paper's sizes (Enron, 39,861 documents; NYTimes, 300,000; PubMed, 8.2 million)",
     "These corpora are not obtainable on this machine; two corpora of about 8,000 documents stand in, which "
     "only speak to the paper's small-corpus (AP) finding."),
    ("Figure 5a at the paper's size (MNIST-70k)",
     "The 10,000-digit MNIST is used; the canonical 70,000-image files work when put in the data folder."),
    ("Figure 5e's FSD with 500 components (PubMed)",
     "PubMed is not run here, and FSD keeps 100 components on every data set."),
]

SYNTH = "synth-chang2013"
#: the config's ``mnist10k?pca=50`` is recorded under its canonical name (50 is the default)
MNIST = "mnist10k"
#: the corpora standing in for the paper's, by base name: a record holds each whole or as a
#: subset (``wikipedia?n=2246``), found under its base name and labelled with its size
CORPORA = {"wikipedia": "Wikipedia", "nyt": "NYT"}
#: run name -> the paper's name, in the paper's order
PAPER_NAMES = {"subc": "SUBC", "subc-supc": "SUBC+SUPC", "subc-supc-approx": "SUBC+SUPC APPROX", "fsd": "FSD",
               "gibbs": "GIBBS", "gibbs-supercluster": "GIBBS+SUPC", "gibbs-sams": "GIBBS+SAMS"}
SUBCLUSTER = ("subc", "subc-supc", "subc-supc-approx")
#: the exact sub-cluster samplers (the paper does not expect the approximate one to converge to
#: the right distribution; the suite's own claim uses these two as well)
EXACT_SUBCLUSTER = ("subc", "subc-supc")
#: "the samplers without split/merge proposals (FSD, GIBBS, GIBBS+SC)"
NO_SPLIT_MERGE = ("fsd", "gibbs", "gibbs-supercluster")
#: "the GIBBS methods" of Figure 5: they marginalise the cluster parameters and weights
GIBBS_METHODS = ("gibbs", "gibbs-supercluster", "gibbs-sams")
#: run-name suffix of each setting of the config
K1, K50, ALPHA100 = "", "-k50", "-alpha100"
START = {K1: "K=1", K50: "K=50", ALPHA100: "K=1"}
PARALLEL = "subc-2w"
#: the paper's Figure 4 third column
PAPER_CORES = 16
#: the inter-cluster parallel samplers the scaling records measure ("an order of magnitude speedup")
MANY_CORE = ("subc", "subc-supc", "fsd")
ORDER = "speed-up needed"
ORDER_OF_MAGNITUDE = 10.0
#: what the speed-ups of Figure 4's third column are relative to, by source
MEASURED, MODELLED = "measured, vs subc on 1 worker", "modelled, vs its modelled 1-worker time"
#: at most this change (nats) of the final VI to the truth counts as "little effect" of α on the
#: clusters: a fifth of the VI of chains at the synthetic set's plateau (about 0.1 nats)
ALPHA_VI_SLACK = 0.02
CHAIN_COLUMNS = ("dataset", "name", "seed", "workers", "iterations", "time_s", "s_per_iteration",
                 "final_log_joint", "final_vi", "final_n_clusters")
#: the plateau threshold's name in the criteria
RTOL = "plateau tolerance (relative)"
VI_SLACK = "VI change allowed (nats)"
#: the paper's regime: chains long enough to converge; the suite's Chang & Fisher claim counts a
#: chain from this many iterations (:data:`reports.papers.chang2013.claim.CHANG_SCOPE`), and a shorter one
#: measures the budget
PAPER_ITERATIONS = CHANG_SCOPE.iterations
PAPER_REGIME = "chains run for minutes to hours"
FIRST_NOTE = ("'first at plateau' is the median over chains of the first sampler time at which a chain's log "
              "joint was within the tolerance of the plateau, read from the thinned traces (a chain may leave it "
              "again).")
TRACE_NOTE = ("Log joints here are not the paper's values (other data draw and priors): compare orderings "
              "and gaps.")


# ---- the chains and their medians ------------------------------------------------------------
def chains(tables) -> pd.DataFrame:
    """One row per finished chain with its run's name in ``name`` (:data:`CHAIN_COLUMNS`).

    ``tables.runs`` is in today's names (:class:`reports.entries.Tables`). Failed chains are
    left out, so a setting with only failed chains counts as missing.
    """
    runs = tables.runs
    if runs is None or runs.empty:
        return pd.DataFrame(columns=list(CHAIN_COLUMNS))
    ok = runs["status"].ne("failed") if "status" in runs else pd.Series(True, index=runs.index)
    ok &= np.isfinite(runs["final_log_joint"].astype(float))
    out = runs.loc[ok]
    for column in CHAIN_COLUMNS:
        if column not in out:
            out = out.assign(**{column: np.nan})
    return out[list(CHAIN_COLUMNS)].reset_index(drop=True)


def medians(data: pd.DataFrame, dataset: str, suffix: str, samplers=tuple(PAPER_NAMES)) -> pd.DataFrame:
    """Medians over the chains of each sampler's run ``sampler + suffix`` on ``dataset`` (one
    worker), indexed by sampler, in the paper's order; samplers without chains are absent."""
    rows = []
    for sampler in samplers:
        mine = data[(data["dataset"] == dataset) & (data["name"] == sampler + suffix) & (data["workers"] == 1)]
        if mine.empty:
            continue
        rows.append({"sampler": sampler, "run": sampler + suffix, "chains": len(mine),
                     "iterations": float(mine["iterations"].median()),
                     "s_per_iteration": float(mine["s_per_iteration"].median()),
                     "log_joint": float(mine["final_log_joint"].median()),
                     "vi": float(mine["final_vi"].median()),
                     "clusters": float(mine["final_n_clusters"].median())})
    columns = ["sampler", "run", "chains", "iterations", "s_per_iteration", "log_joint", "vi", "clusters"]
    return pd.DataFrame(rows, columns=columns).set_index("sampler")


def missing(data: pd.DataFrame, dataset: str, runs) -> list:
    """The run names of ``runs`` with no finished chain on ``dataset``."""
    there = set(data.loc[data["dataset"] == dataset, "name"])
    return [run for run in runs if run not in there]


def plateau(data: pd.DataFrame, dataset: str, runs) -> tuple[float, float, str]:
    """The best final log joint among the chains of ``runs`` on ``dataset``, its tolerance
    (:data:`PLATEAU_RTOL` of its size) and which chain holds it ('run, seed s')."""
    mine = data[(data["dataset"] == dataset) & data["name"].isin(list(runs))]
    if mine.empty:
        return math.nan, math.nan, ""
    best = mine.loc[mine["final_log_joint"].idxmax()]
    level = float(best["final_log_joint"])
    return level, PLATEAU_RTOL * abs(level), f"{best['name']}, seed {int(best['seed'])}"


def time_to(curves: pd.DataFrame, dataset: str, run: str, level: float, workers: int = 1) -> float:
    """Median over chains of the first sampler time at which a chain of ``run`` on ``dataset``
    reached ``level`` (inf for a chain that never did), read from the thinned traces."""
    if curves is None or curves.empty or not math.isfinite(level):
        return math.nan
    mine = curves[(curves["dataset"] == dataset) & (curves["name"] == run) & (curves["workers"] == workers)]
    if mine.empty:
        return math.nan
    firsts = []
    for _, chain in mine.groupby("seed", sort=True):
        chain = chain.sort_values("time_s", kind="stable")
        reached = chain.loc[chain["log_joint"] >= level, "time_s"]
        firsts.append(float(reached.iloc[0]) if len(reached) else math.inf)
    return float(np.median(firsts))


# ---- words and tables ------------------------------------------------------------------------
def _names(runs) -> str:
    runs = [f"{PAPER_NAMES.get(r, r)} ({r})" if r in PAPER_NAMES else r for r in runs]
    if not runs:
        return "none"
    return runs[0] if len(runs) == 1 else ", ".join(runs[:-1]) + " and " + runs[-1]


def _nats(x: float) -> str:
    return f"{x:,.1f}" if math.isfinite(x) else "n/a"


def _seconds(t: float, unit: str = "") -> str:
    """A time to the plateau: seconds, 'not reached' (median chain never got there) or 'no trace'."""
    if math.isnan(t):
        return "no trace"
    return "not reached" if math.isinf(t) else f"{t:.3g}{unit}"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _missing_entry(item: str, paper: str, absent: list, dataset: str, **extra) -> Entry:
    """The entry of a figure whose runs are not in the record."""
    return Entry(item=item, paper=paper,
                 measured=f"Runs missing from this record on {dataset}: {', '.join(absent)}.",
                 verdict=NOT_COMPARABLE,
                 reason=f"The comparison needs these runs on {dataset} and the record has no finished chain of "
                        f"{'it' if len(absent) == 1 else 'them'}.", **extra)


def _setting_rows(stats: pd.DataFrame, label: str, level: float, tol: float, times: dict, with_vi: bool) -> list:
    """Table rows of one setting: each sampler's medians, its gap to the plateau, and when it
    reached it."""
    rows = []
    for sampler, r in stats.iterrows():
        row = {"sampler": PAPER_NAMES[sampler], "setting": label, "chains": int(r["chains"]),
               "iterations": r["iterations"], "final log joint": r["log_joint"],
               "gap to plateau": r["log_joint"] - level, "at plateau": _yes(r["log_joint"] >= level - tol),
               "first at plateau (s)": _seconds(times.get(sampler, math.nan)), "clusters": r["clusters"]}
        if with_vi:
            row["VI"] = r["vi"]
        rows.append(row)
    return rows


# ---- figures ---------------------------------------------------------------------------------
def _legend_label(run: str) -> str:
    """'subc (SUBC)': the legend names the run and the paper's name of its sampler."""
    for suffix in (K50, ALPHA100):
        if suffix and run.endswith(suffix):
            run = run[: -len(suffix)]
    return f"{run} ({PAPER_NAMES[run]})" if run in PAPER_NAMES else run


def _panel_frame(curves: pd.DataFrame, dataset: str, runs, workers: int = 1) -> pd.DataFrame:
    """The thinned traces of ``runs`` on ``dataset`` with their legend labels."""
    if curves is None or curves.empty:
        return pd.DataFrame(columns=["label", "seed", "iteration", "time_s", "log_joint"])
    mine = curves[(curves["dataset"] == dataset) & curves["name"].isin(list(runs)) & (curves["workers"] == workers)]
    return mine.assign(label=mine["name"].map(_legend_label))


def _styles() -> dict:
    labels = [_legend_label(s) for s in PAPER_NAMES] + [f"{PARALLEL} (2 workers)"]
    return figures.palette(labels)


def log_joint_figure(grid, share_rows: bool = True) -> tuple[bytes | None, bool]:
    """Log joint against log sampler time, one panel per cell of ``grid``, in this paper's
    legend (:func:`reports.figures.paper_panels`).

    Parameters
    ----------
    grid : list of list of (str, pandas.DataFrame)
        Rows of panels: each a title and its trace rows (``label``, ``seed``, ``iteration``,
        ``time_s``, ``log_joint``).
    share_rows : bool
        Panels of a row share their log joint axis (same data set and concentration).

    Returns
    -------
    png : bytes or None
        None when no panel has a trace.
    cropped : bool
        Whether a log joint axis was cropped to where the chains go.
    """
    styles = _styles()
    return figures.paper_panels(grid, list(styles), styles, share_rows=share_rows)


def _caption(what: str, cropped: bool) -> str:
    text = (f"{what} Log joint against sampler time (log scale), as the paper's panels; "
            f"{figures.BAND_TEXT}; at each time a chain counts with its last completed iteration.")
    if cropped:
        text += " The log joint axes are cropped to where the chains go (the one-cluster start lies below)."
    return text


# ---- Figure 4, first column: initial clusters ------------------------------------------------
def k_init(tables) -> Entry:
    """Figure 4, first column: from one cluster the baselines without split/merge moves stay
    below the plateau while the sub-cluster samplers reach it; from 50 clusters the baselines
    do better."""
    item = "Figure 4, first column (initial clusters K, one core; synthetic data; p. 8)"
    paper = ("\"the samplers without split/merge proposals (FSD, GIBBS, GIBBS+SC) perform very poorly when the "
             "initial number of clusters and the concentration parameter is small\"; \"GIBBS+SC performs even "
             "worse than regular Gibbs sampling\"; SUBC+SUPC \"is comparable to SUBC\"; \"the approximate "
             "sub-cluster method has significant gains when only one initial cluster is used, but performs "
             "approximately the same with more initial clusters\" (Section 6, Figure 4).")
    data = chains(tables)
    runs = [s + suffix for suffix in (K1, K50) for s in PAPER_NAMES]
    needed = [s + suffix for suffix in (K1, K50) for s in EXACT_SUBCLUSTER + NO_SPLIT_MERGE]
    png, cropped = log_joint_figure([[(f"start {START[suffix]}, α = 1", _panel_frame(tables.curves, SYNTH, [
        s + suffix for s in PAPER_NAMES])) for suffix in (K1, K50)]])
    caption = _caption(f"{SYNTH}, α = 1: the seven samplers from one cluster (left) and from 50 (right).", cropped)
    absent = missing(data, SYNTH, needed)
    if absent:
        return _missing_entry(item, paper, absent, SYNTH, figure=png, caption=caption)
    level, tol, holder = plateau(data, SYNTH, runs)
    one, fifty = medians(data, SYNTH, K1), medians(data, SYNTH, K50)
    times = {suffix: {s: time_to(tables.curves, SYNTH, s + suffix, level - tol) for s in stats.index}
             for suffix, stats in ((K1, one), (K50, fifty))}
    subs, bases = one.loc[list(EXACT_SUBCLUSTER), "log_joint"], one.loc[list(NO_SPLIT_MERGE), "log_joint"]
    better = fifty.loc[list(NO_SPLIT_MERGE), "log_joint"] > one.loc[list(NO_SPLIT_MERGE), "log_joint"]

    def holds(t):
        cut = level - t[RTOL] * abs(level)
        return bool((subs >= cut).all() and (bases < cut).all() and better.all())

    at_top, stuck = (subs >= level - tol), (bases < level - tol)
    criterion = Criterion({RTOL: PLATEAU_RTOL}, holds, _plateau_margin(subs, bases, level, tol)
                          + f"; the baselines' smallest gain from K=50 over K=1 is "
                            f"{(fifty.loc[list(NO_SPLIT_MERGE), 'log_joint'] - bases).min():+,.1f} nats (needs > 0).")
    table = pd.DataFrame(_setting_rows(one, "K=1", level, tol, times[K1], True)
                         + _setting_rows(fifty, "K=50", level, tol, times[K50], True))
    measured = (f"Plateau: the best final log joint of any chain of the seven samplers from either start at "
                f"α = 1, "
                f"{_nats(level)} nats ({holder}); a median chain is at it within {PLATEAU_RTOL:g} × |plateau| = "
                f"{_nats(tol)} nats. From K=1, at the plateau: {_names(_at(one, level, tol))}; below: "
                f"{_gaps(one, level, tol)}. From K=50, at the plateau: {_names(_at(fifty, level, tol))}; below: "
                f"{_gaps(fifty, level, tol)}. The baselines without split/merge from K=50 against K=1: "
                + "; ".join(f"{PAPER_NAMES[s]} {fifty.at[s, 'log_joint'] - one.at[s, 'log_joint']:+,.1f} nats"
                            for s in NO_SPLIT_MERGE)
                + ". " + _side_findings(one, fifty, times, tol) + " " + FIRST_NOTE + " " + TRACE_NOTE)
    reason = (f"Criterion: from K=1 the median chains of SUBC and SUBC+SUPC end at the plateau "
              f"({_yes(at_top.all())}) and those of FSD, GIBBS and GIBBS+SUPC end below it ({_yes(stuck.all())}), "
              f"and each of these three ends higher from K=50 than from K=1 ({_yes(better.all())}).")
    return Entry(item, paper, measured, decide(criterion), reason, table=table, figure=png, caption=caption,
                 criterion=criterion, regime=_regime(tables, SYNTH, needed))


def _plateau_margin(subs: pd.Series, bases: pd.Series, level: float, tol: float) -> str:
    """The margin of a plateau criterion: the farthest sub-cluster chain's and the closest
    baseline's gap to the plateau against the tolerance."""
    return (f"tolerance {tol:,.1f} nats ({PLATEAU_RTOL:g} × |plateau|); the farthest sub-cluster sampler "
            f"({PAPER_NAMES[subs.idxmin()]}) ends {level - subs.min():,.1f} nats below the plateau (needs at most the "
            f"tolerance), the closest baseline ({PAPER_NAMES[bases.idxmax()]}) {level - bases.max():,.1f} nats below "
            f"(needs more than the tolerance)")


def _regime(tables, datasets, runs) -> str:
    """Whether a verdict on ``datasets`` was decided far below the paper's regime: the chains'
    sampler budget, and the fewest median iterations of any of ``runs`` there against
    :data:`PAPER_ITERATIONS`."""
    data = chains(tables)
    data = data[data["dataset"].isin([datasets] if isinstance(datasets, str) else list(datasets))]
    mine = data[data["name"].isin(list(runs))]
    if mine.empty:
        return ""
    budget = float(data["time_s"].median())
    fewest = mine.groupby(["dataset", "name"])["iterations"].median()
    (where, run), least = fewest.idxmin(), float(fewest.min())
    note = regime_note(round(budget), PAPER_REGIME, least < PAPER_ITERATIONS)
    if note:
        note += (f" {_names([run])} ran {least:,.0f} iterations (median) on {where}, against the {PAPER_ITERATIONS:,} "
                 "the suite's own Chang & Fisher claim needs.")
    return note


def _at(stats: pd.DataFrame, level: float, tol: float) -> list:
    return [s for s in stats.index if stats.at[s, "log_joint"] >= level - tol]


def _gaps(stats: pd.DataFrame, level: float, tol: float) -> str:
    below = [s for s in stats.index if stats.at[s, "log_joint"] < level - tol]
    if not below:
        return "none"
    return ", ".join(f"{PAPER_NAMES[s]} by {_nats(level - stats.at[s, 'log_joint'])}" for s in below)


def _side_findings(one: pd.DataFrame, fifty: pd.DataFrame, times: dict, tol: float) -> str:
    """The paper's further remarks on the first column, each measured (where its runs ran)."""
    said = []
    if {"gibbs", "gibbs-supercluster"} <= set(one.index):
        gap = one.at["gibbs-supercluster", "log_joint"] - one.at["gibbs", "log_joint"]
        said.append(f"GIBBS+SUPC below GIBBS from K=1: {_yes(gap < 0)} ({gap:+,.1f} nats)")
    for label, stats in (("K=1", one), ("K=50", fifty)):
        if {"subc", "subc-supc"} <= set(stats.index):
            gap = stats.at["subc-supc", "log_joint"] - stats.at["subc", "log_joint"]
            said.append(f"SUBC+SUPC within the tolerance of SUBC from {label}: {_yes(abs(gap) <= tol)} "
                        f"({gap:+,.1f} nats)")
    for label, suffix, stats in (("K=1", K1, one), ("K=50", K50, fifty)):
        if {"subc", "subc-supc-approx"} <= set(stats.index):
            approx, subc = times[suffix]["subc-supc-approx"], times[suffix]["subc"]
            said.append(f"first at the plateau from {label}, SUBC+SUPC APPROX against SUBC: "
                        f"{_seconds(approx, ' s')} against {_seconds(subc, ' s')}")
    return ("Also: " + "; ".join(said) + ".") if said else ""


# ---- Figure 4, second column: the concentration ----------------------------------------------
def concentration(tables) -> Entry:
    """Figure 4, second column: α = 1 against α = 100 from one cluster."""
    item = "Figure 4, second column (concentration α, one core; synthetic data; p. 8)"
    paper = ("\"In this high data regime, α should have little effect on the resulting clusters. However, we find "
             "that the samplers without split/merge proposals (FSD, GIBBS, GIBBS+SC) perform very poorly when the "
             "initial number of clusters and the concentration parameter is small\" (Section 6, Figure 4).")
    data = chains(tables)
    needed = [s + suffix for suffix in (K1, ALPHA100) for s in EXACT_SUBCLUSTER + NO_SPLIT_MERGE]
    png, cropped = log_joint_figure([[(f"start K=1, α = {a}", _panel_frame(tables.curves, SYNTH, [
        s + suffix for s in PAPER_NAMES])) for a, suffix in ((1, K1), (100, ALPHA100))]], share_rows=False)
    caption = _caption(f"{SYNTH}, from one cluster: α = 1 (left) and α = 100 (right); the two log joint axes "
                       "differ (the partition prior depends on α).", cropped)
    absent = missing(data, SYNTH, needed)
    if absent:
        return _missing_entry(item, paper, absent, SYNTH, figure=png, caption=caption)
    settings = {}
    for alpha, suffix in ((1, K1), (100, ALPHA100)):
        level, tol, holder = plateau(data, SYNTH, [s + suffix for s in PAPER_NAMES])
        stats = medians(data, SYNTH, suffix)
        times = {s: time_to(tables.curves, SYNTH, s + suffix, level - tol) for s in stats.index}
        settings[alpha] = (stats, level, tol, holder, times)
    (small, lo_level, lo_tol, _, _), (large, hi_level, hi_tol, _, _) = settings[1], settings[100]
    rel = {a: (settings[a][1] - settings[a][0].loc[list(NO_SPLIT_MERGE), "log_joint"]) / abs(settings[a][1])
           for a in settings}
    change = (large.loc[list(EXACT_SUBCLUSTER), "vi"] - small.loc[list(EXACT_SUBCLUSTER), "vi"]).abs()

    def parts(t):
        """The criterion's four conditions at thresholds ``t``."""
        top = all((settings[a][0].loc[list(EXACT_SUBCLUSTER), "log_joint"]
                   >= settings[a][1] - t[RTOL] * abs(settings[a][1])).all() for a in settings)
        low = bool((small.loc[list(NO_SPLIT_MERGE), "log_joint"] < lo_level - t[RTOL] * abs(lo_level)).all())
        # at alpha 100 a baseline at its plateau counts as closer even when it was (nearly) there at 1
        near = bool(((rel[100] < rel[1]) | (rel[100] <= t[RTOL])).all())
        return top, low, near, bool((change <= t[VI_SLACK]).all())

    criterion = Criterion({RTOL: PLATEAU_RTOL, VI_SLACK: ALPHA_VI_SLACK}, lambda t: all(parts(t)),
                          f"at α = 1: {_plateau_margin(small.loc[list(EXACT_SUBCLUSTER), 'log_joint'], small.loc[list(NO_SPLIT_MERGE), 'log_joint'], lo_level, lo_tol)}; "
                          f"the largest change of SUBC's and SUBC+SUPC's VI with α is {change.max():.3g} nats "
                          f"(needs at most {ALPHA_VI_SLACK:g})")
    at_top, stuck, closer, little = parts({RTOL: PLATEAU_RTOL, VI_SLACK: ALPHA_VI_SLACK})
    table = pd.DataFrame([row for a in (1, 100) for row in _setting_rows(
        settings[a][0], f"α={a}", settings[a][1], settings[a][2], settings[a][4], True)])
    measured = (f"Each α against its own plateau (the best final log joint at that α; "
                f"{PLATEAU_RTOL:g} relative tolerance). At α = 1 the plateau is {_nats(lo_level)} nats; at it: "
                f"{_names(_at(small, lo_level, lo_tol))}; below: {_gaps(small, lo_level, lo_tol)}. At α = 100 the "
                f"plateau is {_nats(hi_level)} nats; at it: {_names(_at(large, hi_level, hi_tol))}; below: "
                f"{_gaps(large, hi_level, hi_tol)}. Relative gap to the plateau of FSD, GIBBS and GIBBS+SUPC at α = 1 "
                f"against α = 100: " + "; ".join(f"{PAPER_NAMES[s]} {rel[1][s]:.2g} against {rel[100][s]:.2g}"
                                                 for s in NO_SPLIT_MERGE)
                + ". Final clusters (median) at α = 1 against α = 100: "
                + "; ".join(f"{PAPER_NAMES[s]} {small.at[s, 'clusters']:g} against {large.at[s, 'clusters']:g} "
                            f"(VI {small.at[s, 'vi']:.3g} against {large.at[s, 'vi']:.3g})"
                            for s in PAPER_NAMES if s in small.index and s in large.index) + ". " + FIRST_NOTE)
    reason = (f"Criterion: SUBC and SUBC+SUPC reach their plateau at both α ({_yes(at_top)}); FSD, GIBBS and "
              f"GIBBS+SUPC end below it at α = 1 ({_yes(stuck)}) and each ends relatively closer to it (or at it) at "
              f"α = 100 ({_yes(closer)}); α changes the median final VI to the truth of SUBC and SUBC+SUPC by at "
              f"most {ALPHA_VI_SLACK:g} nats ({_yes(little)}; VI rather than the number of clusters, which counts "
              "tiny clusters as much as real ones).")
    return Entry(item, paper, measured, decide(criterion), reason, table=table, figure=png, caption=caption,
                 criterion=criterion, regime=_regime(tables, SYNTH, needed))


# ---- Figure 4, third column: 16 cores --------------------------------------------------------
def cores(tables) -> Entry:
    """Figure 4, third column: the speed-up on 16 cores, with what two workers measured here."""
    item = f"Figure 4, third column ({PAPER_CORES} cores; synthetic data; p. 8)"
    paper = ("\"The four inter-cluster parallelizable algorithms, SUBC, SUBC+SUPC, SUBC+SUPC APPROX, and FSD exhibit "
             "an order of magnitude speedup, while the the intra-cluster parallelizable algorithm GIBBS+SUPC only "
             "has minor gains\" on 16 cores (Section 6, Figure 4).")
    data = chains(tables)
    mine = data[data["dataset"] == SYNTH]
    serial = mine.loc[(mine["name"] == "subc") & (mine["workers"] == 1), "s_per_iteration"]
    sharded = mine.loc[(mine["name"] == PARALLEL) & (mine["workers"] == 2), "s_per_iteration"]
    frame = pd.concat([_panel_frame(tables.curves, SYNTH, ["subc"]),
                       _panel_frame(tables.curves, SYNTH, [PARALLEL], workers=2).assign(
                           label=f"{PARALLEL} (2 workers)")], ignore_index=True)
    png, cropped = log_joint_figure([[("subc on 1 and on 2 workers, K=1, α = 1", frame)]])
    caption = _caption(f"{SYNTH}: subc on one worker and on two Dask workers (subc-2w), measured.", cropped)
    rows = []
    if len(serial):
        rows.append({"run": "subc", "workers": 1, "s per iteration": float(serial.median()),
                     "speed-up per iteration": 1.0, "source": MEASURED})
    if len(sharded):
        rows.append({"run": PARALLEL, "workers": 2, "s per iteration": float(sharded.median()),
                     "speed-up per iteration": float(serial.median() / sharded.median()) if len(serial)
                     else math.nan, "source": MEASURED})
    modelled = _modelled(tables.scaling)
    rows += modelled
    absent = [name for name, found in (("subc", serial), (PARALLEL, sharded)) if not len(found)]
    if absent:
        measured = f"Runs missing from this record on {SYNTH}: {', '.join(absent)}."
    else:
        ratio = float(serial.median() / sharded.median())
        measured = (f"subc's median sampler time per iteration: {serial.median():.3g} s on one worker, "
                    f"{sharded.median():.3g} s on two Dask workers (subc-2w): a measured speed-up of {ratio:.2f}× "
                    f"per iteration on 2 workers.")
    if modelled:
        m = modelled[-1]
        measured += (f" The suite's cost model (Dask workers on a 1 Gbit/s network, fitted to the measured runs; "
                     f"modelled, not measured) gives {m['run']} {m['s per iteration']:.3g} s per iteration on "
                     f"{PAPER_CORES} workers, {m['speed-up per iteration']:.2f}× its modelled one-worker "
                     f"time.")
    else:
        measured += f" The record holds no modelled iteration time at {PAPER_CORES} workers for subc."
    many, records = many_core(tables.scaling_records, SYNTH, PAPER_CORES)
    lacking = [s for s in MANY_CORE if s not in set(many["algorithm"])] if len(many) else list(MANY_CORE)
    if lacking:
        measured += (f" No many-core scaling record (docs/scaling) holds {_names(lacking)} on {SYNTH} at "
                     f"{PAPER_CORES} cores; the cost model above is a model only.")
        reason = (f"A speed-up verdict rests on measured rows at {PAPER_CORES} cores, and none are recorded for "
                  f"{_names(lacking)}; this machine has 2 cores, so the 2-worker number is given for what it is.")
        return Entry(item, paper, measured, NOT_COMPARABLE, reason, table=pd.DataFrame(rows) if rows else None,
                     figure=png, caption=caption)
    best = many.groupby("algorithm")["speedup"].max()
    rows += [{"run": f"{r.algorithm} ({r.layout})", "workers": PAPER_CORES, "s per iteration": r.seconds,
              "speed-up per iteration": r.speedup,
              "source": f"measured on {r.machine} ({r.cpu}), commit {r.commit}, vs {r.one_core_s:.3g} s on one core"}
             for r in many.itertuples()]

    def holds(t):
        return bool((best[list(MANY_CORE)] >= t[ORDER]).all())

    criterion = Criterion({ORDER: ORDER_OF_MAGNITUDE}, holds,
                          "best measured speed-up per iteration on 16 cores: "
                          + ", ".join(f"{PAPER_NAMES[a]} {best[a]:.3g}×" for a in MANY_CORE)
                          + f" (needs {ORDER_OF_MAGNITUDE:g}× each)")
    measured += (f" Measured on {PAPER_CORES} cores ({records}): the best layout's speed-up per iteration over the "
                 f"same sampler on one core is " + ", ".join(f"{PAPER_NAMES[a]} {best[a]:.3g}×" for a in MANY_CORE)
                 + f" on the {SYNTH} set of 100,000 points. Not in the scaling records: SUBC+SUPC APPROX and "
                   "GIBBS+SUPC (which the paper says gains little).")
    reason = (f"Criterion: SUBC, SUBC+SUPC and FSD each at least {ORDER_OF_MAGNITUDE:g}× faster per iteration on "
              f"{PAPER_CORES} cores than on one (\"an order of magnitude\"), in the best measured layout "
              f"({'met' if holds(criterion.thresholds) else 'not met'}). SUBC+SUPC APPROX and GIBBS+SUPC are not "
              "in the scaling records, so the paper's contrast with GIBBS+SUPC is not tested.")
    return Entry(item, paper, measured, decide(criterion), reason, table=pd.DataFrame(rows), figure=png,
                 caption=caption, criterion=criterion)


def many_core(records: list, dataset: str, cores: int) -> tuple[pd.DataFrame, str]:
    """The measured speed-ups on ``cores`` cores of the samplers of ``dataset`` in the many-core
    scaling records (:func:`reports.scaling_doc.speedups`: each layout against the same
    sampler on one core of the same record), and the records in words (machine and commit).

    Parameters
    ----------
    records : list of dict
        :func:`reports.scaling_doc.load_records`.
    dataset : str
        The data set's name in the records.
    cores : int
        Workers x threads.

    Returns
    -------
    rows : pandas.DataFrame
        ``algorithm``, ``layout``, ``seconds``, ``speedup``, ``one_core_s``, ``machine``, ``cpu``,
        ``commit``: one row per record and algorithm with a layout of ``cores`` cores.
    where : str
        The records used, e.g. "16-core (Intel(R) Xeon(R) Processor), commit e55098b".
    """
    out, used = [], []
    for record in records:
        table = speedups(record)
        if cores not in table:
            continue
        machine, commit = record["machine"], str(record.get("commit") or "unknown")[:7]
        found = [(r["algorithm"], r[cores], r["one_core_s"]) for _, r in table[table["dataset"] == dataset].iterrows()
                 if isinstance(r[cores], tuple)]
        out += [{"algorithm": algorithm, "layout": layout, "seconds": seconds, "speedup": speedup,
                 "one_core_s": one, "machine": machine["name"], "cpu": machine["cpu"], "commit": commit}
                for algorithm, (seconds, layout, speedup), one in found]
        if found:
            used.append(f"{machine['name']} ({machine['cpu']}), commit {commit}")
    columns = ["algorithm", "layout", "seconds", "speedup", "one_core_s", "machine", "cpu", "commit"]
    return pd.DataFrame(out, columns=columns), "; ".join(used)


def _modelled(scaling: pd.DataFrame) -> list:
    """The cost model's iteration time of subc (its sharded run if modelled, else its serial
    run) at 1 and :data:`PAPER_CORES` workers, as table rows; empty when not in the record."""
    if scaling is None or scaling.empty or "source" not in scaling:
        return []
    rows = scaling[(scaling["dataset"] == SYNTH) & (scaling["source"] == "modelled")]
    for run in (PARALLEL, "subc"):
        curve = rows[rows["name"] == run].set_index("workers")["iteration_s"]
        if 1 in curve.index and PAPER_CORES in curve.index:
            one, many = float(curve.loc[1]), float(curve.loc[PAPER_CORES])
            return [{"run": run, "workers": w, "s per iteration": s, "speed-up per iteration": one / s,
                     "source": MODELLED} for w, s in ((1, one), (PAPER_CORES, many))]
    return []


# ---- Figure 5a: MNIST ------------------------------------------------------------------------
def mnist(tables) -> Entry:
    """Figure 5a: only the sub-cluster samplers agree across the two initialisations, and they
    hold the best sample."""
    item = "Figure 5a (MNIST, two initialisations; p. 8)"
    paper = ("\"in the allotted time, no algorithms besides the proposed methods converge to the same log likelihood "
             "with the two different initializations on the larger datasets. The presented sub-cluster methods "
             "converge faster to a better sample than other algorithms converge to a worse sample.\" (Section 6, "
             "Figure 5a: MNIST, 70,000 images, PCA to 50 dimensions)")
    data = chains(tables)
    needed = [s + suffix for suffix in (K1, K50) for s in EXACT_SUBCLUSTER + NO_SPLIT_MERGE]
    png, cropped = log_joint_figure([[(f"start {START[suffix]}", _panel_frame(tables.curves, MNIST, [
        s + suffix for s in PAPER_NAMES])) for suffix in (K1, K50)]])
    caption = _caption(f"{MNIST} (MNIST-10k, PCA to 50 dimensions), α = 1: from one cluster (left) and from 50 "
                       "(right), on a shared axis.", cropped)
    absent = missing(data, MNIST, needed)
    if absent:
        return _missing_entry(item, paper, absent, MNIST, figure=png, caption=caption)
    one, fifty = medians(data, MNIST, K1), medians(data, MNIST, K50)
    both = [s for s in PAPER_NAMES if s in one.index and s in fifty.index]
    gap = {s: abs(one.at[s, "log_joint"] - fifty.at[s, "log_joint"])
           / max(abs(one.at[s, "log_joint"]), abs(fifty.at[s, "log_joint"])) for s in both}
    agree = {s: gap[s] <= PLATEAU_RTOL for s in both}
    finals = pd.concat([one["log_joint"].rename(lambda s: (s, "K=1")),
                        fifty["log_joint"].rename(lambda s: (s, "K=50"))])
    leader, start = finals.idxmax()
    others = [s for s in both if s not in SUBCLUSTER]
    best_sub = leader in SUBCLUSTER

    def holds(t):
        return (all(gap[s] <= t[RTOL] for s in EXACT_SUBCLUSTER) and not any(gap[s] <= t[RTOL] for s in others)
                and best_sub)

    subs_agree = all(agree[s] for s in EXACT_SUBCLUSTER)
    none_else = not any(agree[s] for s in others)
    closest = min(others, key=lambda s: gap[s]) if others else None
    criterion = Criterion({RTOL: PLATEAU_RTOL}, holds,
                          f"agreement within {PLATEAU_RTOL:g} (relative); the sub-cluster samplers' largest gap between "
                          f"the starts is {max(gap[s] for s in EXACT_SUBCLUSTER):.2g} (needs at most it)"
                          + (f", the other samplers' smallest {gap[closest]:.2g} ({PAPER_NAMES[closest]}; needs more)"
                             if closest else ""))
    table = pd.DataFrame([{"sampler": PAPER_NAMES[s], "final log joint, K=1": one.at[s, "log_joint"],
                           "final log joint, K=50": fifty.at[s, "log_joint"], "relative gap": gap[s],
                           "agree": _yes(agree[s]), "clusters, K=1": one.at[s, "clusters"],
                           "clusters, K=50": fifty.at[s, "clusters"], "VI, K=1": one.at[s, "vi"],
                           "VI, K=50": fifty.at[s, "vi"]} for s in both])
    measured = (f"Median final log joint per sampler from K=1 and from K=50; the two initialisations agree when they "
                f"differ by at most {PLATEAU_RTOL:g} of the larger's size. Agree: "
                f"{_names([s for s in both if agree[s]])}; "
                f"differ: " + (", ".join(f"{PAPER_NAMES[s]} (relative gap {gap[s]:.2g})" for s in both if not agree[s])
                               or "none")
                + f". The best median final log joint, {_nats(finals.max())} nats, is {PAPER_NAMES[leader]}'s from "
                  f"{start}. " + TRACE_NOTE)
    reason = (f"Criterion: SUBC and SUBC+SUPC each agree across the two initialisations ({_yes(subs_agree)}), no "
              f"sampler other than the sub-cluster ones does ({_yes(none_else)}), and a sub-cluster sampler holds the "
              f"best median final log joint ({_yes(best_sub)}). MNIST-10k is seven times smaller than the paper's "
              "MNIST-70k.")
    return Entry(item, paper, measured, decide(criterion), reason, table=table, figure=png, caption=caption,
                 criterion=criterion, regime=_regime(tables, MNIST, needed))


# ---- Figure 5b-e: the corpora ----------------------------------------------------------------
def corpora(tables) -> Entry:
    """Figure 5b-e: on a small corpus the GIBBS methods end slightly ahead of the sub-cluster
    methods."""
    item = "Figure 5b-e (multinomial corpora; small corpora only; p. 8)"
    paper = ("\"On the small, Associated Press dataset, the proposed methods actually perform slightly worse than the "
             "GIBBS methods\" (AP: 2,246 documents, Figure 5b); on the larger Enron, NYTimes and PubMed sets the "
             "sub-cluster methods converge to better samples (Figure 5c-e).")
    data = chains(tables)
    needed = [s + suffix for suffix in (K1, K50) for s in EXACT_SUBCLUSTER + ("gibbs",)]
    sets = _corpora_in(data)
    grid = [[(f"{_corpus_label(c)}, start {START[suffix]}", _panel_frame(tables.curves, c, [
        s + suffix for s in PAPER_NAMES])) for suffix in (K1, K50)] for c in sets]
    png, cropped = log_joint_figure(grid) if grid else (None, False)
    caption = _caption("The corpora (rows), α = 1, from one cluster (left) and from 50 (right); each row on its "
                       "own log joint axis.", cropped)
    present = {c.split("?")[0] for c in sets}
    absent = ([f"every run on {base}" for base in CORPORA if base not in present]
              + [f"{run} on {c}" for c in sets for run in missing(data, c, needed)])
    if absent:
        return Entry(item, paper, "Runs missing from this record: " + ", ".join(absent) + ".", NOT_COMPARABLE,
                     "The comparison needs the sub-cluster samplers and GIBBS on both corpora from both starts.",
                     figure=png, caption=caption)
    rows, verdicts, words, leads = [], [], [], []
    for corpus in sets:
        name = _corpus_label(corpus)
        stats = {START[suffix]: medians(data, corpus, suffix) for suffix in (K1, K50)}
        for start, st in stats.items():
            sub = st.loc[st.index.isin(SUBCLUSTER), "log_joint"]
            gib = st.loc[st.index.isin(GIBBS_METHODS), "log_joint"]
            lead = float(gib.max() - sub.max())
            verdicts.append(lead > 0)
            leads.append((lead, f"{name} from {start}"))
            words.append(f"{name} from {start}: {PAPER_NAMES[gib.idxmax()]} {_nats(gib.max())} against "
                         f"{PAPER_NAMES[sub.idxmax()]} {_nats(sub.max())} nats, the GIBBS methods "
                         f"{'ahead' if lead > 0 else 'behind'} by {abs(lead):,.1f} nats "
                         f"({abs(lead) / abs(sub.max()):.2g} relative)")
        one, fifty = stats["K=1"], stats["K=50"]
        rows += [{"corpus": corpus, "sampler": PAPER_NAMES[s],
                  "final log joint, K=1": one.at[s, "log_joint"] if s in one.index else math.nan,
                  "final log joint, K=50": fifty.at[s, "log_joint"] if s in fifty.index else math.nan,
                  "clusters, K=1": one.at[s, "clusters"] if s in one.index else math.nan,
                  "clusters, K=50": fifty.at[s, "clusters"] if s in fifty.index else math.nan,
                  "iterations, K=1": one.at[s, "iterations"] if s in one.index else math.nan,
                  "iterations, K=50": fifty.at[s, "iterations"] if s in fifty.index else math.nan}
                 for s in PAPER_NAMES if s in one.index or s in fifty.index]
    worst = min(leads)
    criterion = Criterion({}, lambda t: all(verdicts),
                          f"the GIBBS methods' smallest lead is {worst[0]:+,.1f} nats ({worst[1]}; needs > 0)")
    measured = ("Best median final log joint of the GIBBS methods (GIBBS, GIBBS+SUPC, GIBBS+SAMS) against that of the "
                "sub-cluster methods (SUBC, SUBC+SUPC, SUBC+SUPC APPROX), per corpus and start: " + "; ".join(words)
                + f". The corpora here ({', '.join(_corpus_label(c) for c in sets)}) are small, as AP is (2,246 "
                  "documents); none is of Enron's size (39,861) or larger. " + TRACE_NOTE)
    reason = ("Criterion: on every corpus and from each start, the best GIBBS method's median final log joint is "
              f"above the best sub-cluster method's (held in {sum(verdicts)} of {len(verdicts)} comparisons). The "
              "paper's larger-corpus finding is not tested (see below).")
    return Entry(item, paper, measured, decide(criterion), reason, table=pd.DataFrame(rows), figure=png,
                 caption=caption, criterion=criterion,
                 regime=_regime(tables, sets, needed))


# ---- the conclusion: faster than other exact MCMC ---------------------------------------------
#: "orders of magnitude": at least two
ORDERS = "speed-up needed (x)"
ORDERS_FACTOR = 100.0
#: the paper's "other exact MCMC methods": the Gibbs samplers (FSD is a finite approximation)
EXACT_BASELINES = GIBBS_METHODS


def faster_than_exact(tables) -> Entry:
    """The conclusion: SUBC reaches the plateau orders of magnitude sooner than the other exact
    MCMC samplers, on every data set and start of the record."""
    item = "Section 7, p. 8 (conclusion: speed against other exact MCMC methods)"
    paper = ("\"Results on both synthetic and real data demonstrate that the speed of the sampler is orders of "
             "magnitude faster than other exact MCMC methods.\" (Section 7)")
    data = chains(tables)
    data_sets = [SYNTH, MNIST, *_corpora_in(data)]
    needed = [s + suffix for s in ("subc", *EXACT_BASELINES) for suffix in (K1, K50)]
    absent = [f"{run} on {d}" for d in data_sets for run in missing(data, d, needed)]
    if absent:
        return Entry(item, paper, "Runs missing from this record: " + ", ".join(absent) + ".", NOT_COMPARABLE,
                     "The comparison needs SUBC and the GIBBS samplers on every data set from both starts.")
    if tables.curves is None or tables.curves.empty:
        return Entry(item, paper, "This record holds no traces (curves.csv): no time to the plateau can be read.",
                     NOT_COMPARABLE, "The comparison needs every chain's log joint against time.")
    rows, ratios = [], []
    for dataset in data_sets:
        level, tol, _ = plateau(data, dataset, [s + sfx for s in PAPER_NAMES for sfx in (K1, K50)])
        budget = float(data.loc[data["dataset"] == dataset, "time_s"].median())
        for suffix in (K1, K50):
            t_subc = time_to(tables.curves, dataset, "subc" + suffix, level - tol)
            for base in EXACT_BASELINES:
                t = time_to(tables.curves, dataset, base + suffix, level - tol)
                ratio, kind = _speed_ratio(t_subc, t, budget)
                if kind:
                    ratios.append((ratio, kind, f"{PAPER_NAMES[base]} on {dataset} from {START[suffix]}"))
                rows.append({"data set": dataset, "start": START[suffix], "sampler": PAPER_NAMES[base],
                             "SUBC at plateau (s)": t_subc, "sampler at plateau (s)": t,
                             "times SUBC's": f"{'' if kind == '=' else kind + ' '}{ratio:,.2g}" if kind else "neither"})

    def holds(t):
        return bool(ratios) and all(r >= t[ORDERS] for r, _, _ in ratios)

    def refuted(t):
        # a measured ratio, or an upper bound, below the factor; a lower bound below it cannot refute
        return any(r < t[ORDERS] for r, kind, _ in ratios if kind != "≥")

    shortest = min(ratios, key=lambda r: r[0]) if ratios else (math.nan, "", "none")
    criterion = Criterion({ORDERS: ORDERS_FACTOR}, holds,
                          f"the smallest ratio is {'' if shortest[1] == '=' else shortest[1] + ' '}{shortest[0]:,.2g} "
                          f"({shortest[2]}; needs ≥ {ORDERS_FACTOR:g})")
    verdict = decide(criterion)
    if verdict == NOT_REPRODUCED and not refuted(dict(criterion.thresholds)):
        verdict = INCONCLUSIVE
    counts = {k: sum(1 for _, kind, _ in ratios if kind == k) for k in ("=", "≥", "≤")}
    measured = (f"Per data set and start, the median first sampler time at which a chain reached the plateau (the "
                f"best final log joint of any chain there, less {PLATEAU_RTOL:g} × |plateau|), for SUBC and for each "
                f"GIBBS sampler, and the ratio; a sampler that never reached it is credited with the whole budget: a "
                f"lower bound ('≥') where only the GIBBS sampler never got there, an upper bound ('≤') where only SUBC "
                f"never did, no ratio where neither did. {counts['=']} ratios measured, {counts['≥']} lower and "
                f"{counts['≤']} upper bounds. "
                + FIRST_NOTE + " " + TRACE_NOTE)
    reason = (f"Criterion: every GIBBS sampler (the paper's other exact MCMC methods; FSD is a finite "
              f"approximation) needs at least {ORDERS_FACTOR:g} times SUBC's time to the plateau, on every data set "
              f"and start; where only budget-bound ratios fall short the record cannot decide ({INCONCLUSIVE}).")
    return Entry(item, paper, measured, verdict, reason, table=pd.DataFrame(rows), criterion=criterion,
                 regime=_regime(tables, [SYNTH, MNIST], needed))


# ---- AP: about 20 clusters of about 100 documents ---------------------------------------------
AP, AP_CLUSTERS = "ap", 20
#: "approximately 20": within this factor of it, either way
AP_FACTOR, AP_WITHIN = "factor allowed", 2.0


def ap_clusters(tables) -> Entry:
    """Section 6: on AP the samplers infer about 20 clusters of about 100 documents."""
    item = "Section 6, p. 8 (Associated Press: clusters inferred)"
    paper = ("\"Approximately 20 clusters are inferred for this dataset, resulting in approximately 100 observations "
             "for each cluster.\" (Section 6, AP: 2,246 documents, 10,473 words)")
    data = chains(tables)
    on = [d for d in data["dataset"].unique() if d == AP or d.startswith(AP + "?")]
    pool = on or _corpora_in(data)
    rows = []
    for dataset in pool:
        docs = describe(dataset)["n"]
        for suffix in (K1, K50):
            st = medians(data, dataset, suffix, SUBCLUSTER + GIBBS_METHODS)
            rows += [{"data set": dataset, "start": START[suffix], "sampler": PAPER_NAMES[s],
                      "clusters": st.at[s, "clusters"], "documents per cluster": docs / st.at[s, "clusters"]}
                     for s in st.index]
    table = pd.DataFrame(rows)
    words = "; ".join(f"{d}: clusters {table.loc[table['data set'] == d, 'clusters'].min():,.0f}-"
                      f"{table.loc[table['data set'] == d, 'clusters'].max():,.0f}" for d in pool) or "no corpus chains"
    if not on:
        return Entry(item, paper, f"AP is not at hand here (a user-supplied file, docs/datasets.md). On the corpora of "
                     f"this record, median final clusters per sampler and start: {words}.", NOT_COMPARABLE,
                     "The count is a property of AP's documents: another corpus of the same size says nothing of it. "
                     "With AP in the data folder, add `ap: \"ap\"` to the config's data sets and this entry decides.",
                     table=table)
    ks = table["clusters"].astype(float)

    def holds(t):
        return bool(len(ks)) and bool(((ks >= AP_CLUSTERS / t[AP_FACTOR]) & (ks <= AP_CLUSTERS * t[AP_FACTOR])).all())

    criterion = Criterion({AP_FACTOR: AP_WITHIN}, holds, f"median final clusters {ks.min():,.0f}-{ks.max():,.0f} "
                          f"(needs within the factor of {AP_CLUSTERS})")
    return Entry(item, paper, f"Median final clusters per sampler and start on AP: {words}.", decide(criterion),
                 f"Criterion: every sampler's median final cluster count within a factor of {AP_WITHIN:g} of {AP_CLUSTERS}.",
                 table=table, criterion=criterion)


def _speed_ratio(t_subc: float, t: float, budget: float) -> tuple[float, str]:
    """How many times SUBC's time to the plateau another sampler needed, and what the number
    is: ``"="`` measured, ``"≥"`` a lower bound (only SUBC got there: the other is credited
    with the whole ``budget``), ``"≤"`` an upper bound (only the other got there), ``""`` no
    ratio (neither did)."""
    if math.isfinite(t_subc) and math.isfinite(t):
        return t / t_subc, "="
    if math.isfinite(t_subc):
        return budget / t_subc, "≥"
    if math.isfinite(t):
        return t / budget, "≤"
    return math.nan, ""


def _corpora_in(data: pd.DataFrame) -> list:
    """The data sets of ``data`` on a corpus of :data:`CORPORA` (whole or a subset), in
    :data:`CORPORA`'s order."""
    present = sorted(data["dataset"].unique())
    return [d for base in CORPORA for d in present if d.split("?")[0] == base]


def _corpus_label(dataset: str) -> str:
    """``Wikipedia (2,246 documents)``: the corpus and the size of the record's draw of it."""
    return f"{CORPORA[dataset.split('?')[0]]} ({describe(dataset)['n']:,} documents)"


def entries(tables) -> list:
    """The paper's Figures 4 and 5 beside this suite's record, in the paper's order.

    Parameters
    ----------
    tables : reports.reproductions.Tables
        The record of ``workflows/config/chang2013.yaml``.

    Returns
    -------
    list of reports.entries.Entry
    """
    from . import checks  # the claims measured on their own (checks.json), after the figures

    return [k_init(tables), concentration(tables), cores(tables), mnist(tables), corpora(tables),
            ap_clusters(tables), faster_than_exact(tables), *checks.entries(tables)]
