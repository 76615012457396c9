"""The papers' headline claims, checked against the runs of this grid.

Each check reads only the run table and traces built by :func:`reports.report.load_runs`
and returns a :class:`Claim`: the claim in words, what this grid measured, the criterion
used, and a verdict -- ``held``, ``did not hold`` or ``could not be checked`` (then the
summary names the runs that are missing). Verdicts are about this grid, whose sizes and
budgets are usually far below the papers'.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

HELD, FAILED, UNCHECKED = "held", "did not hold", "could not be checked"

#: Chang & Fisher (2013): their samplers, the baselines they report stuck, and their data
CHANG_SUBCLUSTER = ("subc", "subc-supc")
CHANG_BASELINES = ("fsd", "gibbs", "gibbs-supercluster")
CHANG_DATA = "synth-chang2013"
#: a chain is at the plateau when its final log joint is within this fraction of |best| of
#: the best final log joint of any run on the data set
PLATEAU_RTOL = 1e-3
#: Daumé (2007): beam search with the inadmissible heuristic against these samplers
DAUME_SEARCH, DAUME_HEURISTIC = "search", "inadmissible"
DAUME_BASELINES = ("gibbs", "gibbs-splitmerge")
#: Wang & Lin (2017): consolidation samplers against auxiliary variables and sub-clusters
WANG_CONSOLIDATION = ("cons-prog", "cons-pooled", "cons-async", "cons-hung")
WANG_COMPARATORS = ("auxvar", "subc")
#: "orders of magnitude fewer bytes": at least this factor
WANG_FACTOR = 10.0


@dataclass
class Claim:
    """A paper's headline claim and what this grid made of it."""

    paper: str  #: citation
    claim: str  #: the claim, in words
    verdict: str  #: HELD, FAILED or UNCHECKED
    summary: str  #: what was measured, or which runs are missing
    criterion: str = ""  #: how the verdict was decided
    table: pd.DataFrame | None = None  #: the numbers behind the verdict


def check_claims(frame: pd.DataFrame, runs: pd.DataFrame) -> list:
    """Check the three papers' headline claims.

    Parameters
    ----------
    frame, runs : pandas.DataFrame
        From :func:`reports.report.load_runs`.

    Returns
    -------
    list of Claim
        Chang & Fisher 2013, Daumé 2007, Wang & Lin 2017, from the runs at a fixed alpha
        (the papers' setting; a learned alpha's log joint is at another alpha).
    """
    if "learned_alpha" in runs:
        runs = runs[~runs["learned_alpha"]]
        frame = frame[frame["run"].isin(runs["run"])]
    return [chang2013(runs), daume2007(frame, runs), wang2017(runs)]


# ---- Chang & Fisher 2013 ---------------------------------------------------------------------
def chang2013(runs: pd.DataFrame) -> Claim:
    """Sub-cluster samplers reach the true clusters and the plateau; FSD, Gibbs and
    super-cluster Gibbs stay stuck (their synthetic experiment)."""
    paper = "Chang & Fisher 2013, Parallel sampling of DP mixture models using sub-cluster splits"
    claim = ("On synthetic 2-D Gaussian data started from one cluster, the sub-cluster samplers (subc, subc-supc) "
             "reach the true clusters and the plateau of the log joint, while FSD, collapsed Gibbs and "
             "super-cluster Gibbs stay stuck below it.")
    criterion = (f"Plateau = best final log joint of any run on the data set; a chain is at the plateau when its "
                 f"final log joint is within {PLATEAU_RTOL:g} x |plateau| of it. Held when every sub-cluster "
                 f"sampler's median chain is at the plateau, every baseline's median chain is below it, and every "
                 f"sub-cluster sampler's median final VI to the truth is below every baseline's.")
    data = runs[runs["dataset"].str.startswith(CHANG_DATA) & runs["final_vi"].notna()]
    if data.empty:
        return Claim(paper, claim, UNCHECKED, f"No run on Chang & Fisher's synthetic data ({CHANG_DATA}) with "
                                               "ground truth in this grid.", criterion)
    rows, verdicts, notes = [], [], []
    for dataset, ds_runs in data.groupby("dataset", sort=False):
        plateau = float(ds_runs["final_log_joint"].max())
        leader = ds_runs.loc[ds_runs["final_log_joint"].idxmax()]
        tol = PLATEAU_RTOL * abs(plateau)
        groups = {}
        for role, names in (("sub-cluster", CHANG_SUBCLUSTER), ("baseline", CHANG_BASELINES)):
            for label, g in ds_runs[ds_runs["algorithm"].isin(names)].groupby("label", sort=False):
                final = float(g["final_log_joint"].median())
                at = int((g["final_log_joint"] >= plateau - tol).sum())
                entry = {"dataset": dataset, "algorithm": label, "role": role, "seeds": len(g),
                         "sampler time (s)": float(g["time_s"].median()), "final log joint": final,
                         "gap to plateau": final - plateau, "seeds at plateau": f"{at} / {len(g)}",
                         "final clusters": float(g["final_n_clusters"].median()),
                         "final VI": float(g["final_vi"].median())}
                groups.setdefault(role, []).append(entry)
                rows.append(entry)
        subs, bases = groups.get("sub-cluster", []), groups.get("baseline", [])
        if not subs or not bases:
            continue
        sub_ok = [e["algorithm"] for e in subs if e["final log joint"] >= plateau - tol]
        sub_short = [e["algorithm"] for e in subs if e["final log joint"] < plateau - tol]
        base_reached = [e["algorithm"] for e in bases if e["final log joint"] >= plateau - tol]
        vi_worse = [(s["algorithm"], b["algorithm"]) for s in subs for b in bases if not s["final VI"] < b["final VI"]]
        ok = not sub_short and not base_reached and not vi_worse
        verdicts.append(ok)
        text = f"On {dataset} (plateau {plateau:,.1f} nats, reached by {leader['label']} seed {leader['seed']}): "
        text += (f"{_names(sub_ok)} ended at the plateau" if sub_ok else "no sub-cluster sampler reached the plateau")
        if sub_short:
            text += f"; {_names(sub_short)} ended below it"
        stuck = [e["algorithm"] for e in bases if e["algorithm"] not in base_reached]
        if stuck:
            text += f"; {_names(stuck)} stayed below it"
        if base_reached:
            text += f"; {_names(base_reached)} reached it too"
        if vi_worse:
            text += "; VI not lower for " + ", ".join(f"{s} vs {b}" for s, b in vi_worse)
        notes.append(text + ".")
    missing = _absence([n for n in CHANG_SUBCLUSTER + CHANG_BASELINES if n not in set(data["algorithm"])], runs)
    table = pd.DataFrame(rows) if rows else None
    if not verdicts:
        return Claim(paper, claim, UNCHECKED, f"A sub-cluster sampler and a baseline are both needed on {CHANG_DATA} "
                                               f"data with ground truth. Missing: {missing or 'none'}.", criterion,
                     table)
    summary = " ".join(notes) + (f" Missing from this grid: {missing}." if missing else "")
    return Claim(paper, claim, HELD if all(verdicts) else FAILED, summary, criterion, table)


# ---- Daumé 2007 ------------------------------------------------------------------------------
def daume2007(frame: pd.DataFrame, runs: pd.DataFrame) -> Claim:
    """Beam search with the inadmissible heuristic reaches a higher log joint than Gibbs and
    Gibbs with split-merge given the same time."""
    paper = "Daumé 2007, Fast search for Dirichlet process mixture models"
    claim = ("Beam search for the MAP partition with the inadmissible heuristic finds a partition of higher log "
             "joint than collapsed Gibbs (and Gibbs with split-merge moves) reach in the same wall time.")
    criterion = ("Each baseline chain is read at the search's finishing time (median over the search's seeds): its "
                 "log joint is that of its last iteration completed by then. Held when the search's median log "
                 "joint is above every baseline's median there. A baseline whose chains all ended before that "
                 "time is inconclusive: it was given less time than the search.")
    search = runs[(runs["algorithm"] == DAUME_SEARCH) & runs["search_s"].notna()]
    search = search[pd.Series([_option(r, "heuristic") == DAUME_HEURISTIC for r in search.itertuples()],
                              index=search.index, dtype=bool)]
    rows, outcomes = [], []
    for (dataset, s_label), s_runs in search.groupby(["dataset", "label"], sort=False):
        at = float(s_runs["search_s"].median())
        value = float(s_runs["final_log_joint"].median())
        rows.append({"dataset": dataset, "algorithm": s_label, "seeds": len(s_runs), "compared at (s)": at,
                     "log joint at that time": value, "chain ran to (s)": float(s_runs["time_s"].median()),
                     "outcome": "(the search)"})
        baselines = runs[(runs["dataset"] == dataset) & runs["algorithm"].isin(DAUME_BASELINES)]
        for label, b_runs in baselines.groupby("label", sort=False):
            values, lengths = [], []
            for run in b_runs["run"]:
                chain = frame[frame["run"] == run].sort_values("iteration")
                done = chain[chain["time_s"] <= at]
                values.append(float((done if len(done) else chain.iloc[:1])["log_joint"].iloc[-1]))
                lengths.append(float(chain["time_s"].iloc[-1]))
            b_value = float(np.median(values))
            if max(lengths) < at:
                outcome, result = f"inconclusive: {label} ran only {max(lengths):.3g} s", None
            elif value > b_value:
                outcome, result = f"{s_label} higher by {value - b_value:,.1f} nats", True
            elif value == b_value:
                outcome, result = "tie: the same log joint (not higher)", False
            else:
                outcome, result = f"{label} higher by {b_value - value:,.1f} nats", False
            outcomes.append((dataset, f"{s_label} vs {label}", result, outcome))
            rows.append({"dataset": dataset, "algorithm": label, "seeds": len(b_runs), "compared at (s)": at,
                         "log joint at that time": b_value, "chain ran to (s)": float(np.median(lengths)),
                         "outcome": outcome})
    table = pd.DataFrame(rows) if rows else None
    conclusive = [o for o in outcomes if o[2] is not None]
    if not conclusive:
        missing = []
        if search.empty:
            why = ("its runs used another heuristic" if DAUME_SEARCH in set(runs["algorithm"])
                   else _absence([DAUME_SEARCH], runs))
            missing.append(f"no {DAUME_SEARCH} run with heuristic={DAUME_HEURISTIC} ({why})")
        elif not outcomes:
            searched = set(runs.loc[runs["dataset"].isin(search["dataset"]), "algorithm"])
            absent = [n for n in DAUME_BASELINES if n not in searched]
            missing.append(f"no {' or '.join(DAUME_BASELINES)} run on the searched data set(s) "
                           f"({_absence(absent, runs, 'ran, but not on the searched data')})")
        else:
            missing.append("every baseline chain ended before the search finished (give them more iterations "
                           "or a time budget)")
        return Claim(paper, claim, UNCHECKED, "; ".join(missing).capitalize() + ".", criterion, table)
    summary = " ".join(f"On {d}, {pair}: {text}." for d, pair, _, text in outcomes)
    verdict = HELD if all(o[2] for o in conclusive) else FAILED
    return Claim(paper, claim, verdict, summary, criterion, table)


def _option(run, key):
    """An option of a run: from its metadata, else the registry default."""
    options = run.options or {}
    if key in options:
        return options[key]
    try:
        from dpmmbench import algorithms

        return algorithms.get(run.algorithm).options[key].default
    except (ValueError, KeyError, ImportError):
        return None


# ---- Wang & Lin 2017 -------------------------------------------------------------------------
def wang2017(runs: pd.DataFrame) -> Claim:
    """Consolidation moves orders of magnitude fewer bytes than auxiliary variables and
    sub-clusters across workers."""
    paper = "Wang & Lin 2017, Scalable distributed inference of DP mixture models (consolidation)"
    claim = ("Across workers, the consolidation samplers (Prog, Pooled, Async, Hung) move orders of magnitude fewer "
             "bytes per iteration than the auxiliary-variable sampler (AV) and sub-clusters (SubC).")
    criterion = (f"Bytes per iteration (sent + received, median over seeds of each chain's mean) of the runs on 2 or "
                 f"more workers, on each data set where both kinds ran so: held when every comparator moves at least "
                 f"{WANG_FACTOR:g}x the bytes of every consolidation sampler.")
    # the claim is about traffic between workers: a 1-worker run's bytes go to its one shard
    # (and auxvar moves no cluster there), so only runs on 2 or more workers are compared
    talking = runs[(runs["bytes"].fillna(0) > 0) & (runs["workers"] >= 2)]
    cons = talking[talking["algorithm"].str.startswith("cons-")]
    comp = talking[talking["algorithm"].map(lambda a: any(a == c or a.startswith(c + "-") for c in WANG_COMPARATORS))]
    rows, verdicts = [], []
    for dataset in dict.fromkeys(talking["dataset"]):
        c_bytes = cons[cons["dataset"] == dataset].groupby("label", sort=False)["bytes"].median()
        o_bytes = comp[comp["dataset"] == dataset].groupby("label", sort=False)["bytes"].median()
        for label, value in list(c_bytes.items()) + list(o_bytes.items()):
            rows.append({"dataset": dataset, "algorithm": label,
                         "kind": "consolidation" if label in c_bytes.index else "comparator",
                         "bytes / iteration": float(value)})
        if len(c_bytes) and len(o_bytes):
            ratio = float(o_bytes.min() / c_bytes.max())
            verdicts.append((dataset, ratio))
    table = pd.DataFrame(rows) if rows else None
    if not verdicts:
        parts = ["No data set has both a consolidation sampler and a comparator that sent bytes across workers."]
        for names, kind in ((WANG_CONSOLIDATION, "Consolidation samplers"), (WANG_COMPARATORS, "Comparators")):
            absent = [n for n in names if n not in set(talking["algorithm"])]
            if absent:
                parts.append(f"{kind}: {_absence(absent, runs, 'ran on one worker only, or sent no bytes')}.")
        return Claim(paper, claim, UNCHECKED, " ".join(parts), criterion, table)
    summary = " ".join(f"On {d}: the least-communicating comparator moves {r:.3g}x the bytes of the most-"
                       f"communicating consolidation sampler." for d, r in verdicts)
    verdict = HELD if all(r >= WANG_FACTOR for _, r in verdicts) else FAILED
    return Claim(paper, claim, verdict, summary, criterion, table)


# ---- helpers ---------------------------------------------------------------------------------
def _names(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _absence(names, runs, ran_but="ran, but not on the data this claim needs") -> str:
    """Why each of ``names`` has no usable run, grouped: 'a, b (not implemented in this build);
    c (registered but not in this grid)'; ``ran_but`` explains a name that did run."""
    try:
        from dpmmbench import algorithms

        registered = set(algorithms.available())
    except ImportError:
        registered = set()
    ran = set(runs["algorithm"])
    groups = {}
    for name in names:
        if name in ran:
            why = ran_but
        elif name in registered:
            why = "registered but not in this grid"
        else:
            why = "not implemented in this build"
        groups.setdefault(why, []).append(name)
    return "; ".join(f"{', '.join(group)} ({why})" for why, group in groups.items())
