"""The papers' headline claims, checked against the runs of this grid.

Each check reads only the run table and traces built by :func:`reports.runs.read_runs`
and returns a :class:`Claim`: the claim in words, what this grid measured, the criterion
used, and a verdict -- ``held``, ``did not hold``, ``not decided at this budget`` or ``could
not be checked`` (then the summary names the runs that are missing).

Each claim declares its :class:`Scope`: the data size, sampler time and worker count from
which it applies (docs/design.md "Claims and verdicts"). Runs below the scope are still
measured and shown, but only runs within it give "held" or "did not hold"; a grid with none
gets "not decided at this budget" and a summary that names what it would take.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpmmbench import algorithms

HELD, FAILED, UNDECIDED, UNCHECKED = "held", "did not hold", "not decided at this budget", "could not be checked"

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


@dataclass(frozen=True)
class Scope:
    """Where a claim applies: the data size, chain length and worker count from which its
    verdict is about the claim rather than about a budget too small to show it."""

    points: int = 0  #: points of the data set (training and held-out together), at least
    time_s: float = 0.0  #: median sampler time of every compared sampler's chains, at least
    iterations: int = 0  #: median iterations of every compared sampler's chains, at least
    workers: int = 1  #: Dask workers of the compared runs, at least
    why: str = ""  #: why there, in words

    def describe(self) -> str:
        """The requirement in words, e.g. 'at least 100,000 points and 200 iterations per chain'."""
        parts = [f"at least {self.points:,} points" if self.points > 1 else "", self.chain_length(),
                 f"runs on {self.workers} or more workers" if self.workers > 1 else ""]
        return _names([p for p in parts if p]) or "any data and budget"

    def chain_length(self) -> str:
        """The chain length it needs in words ('' when any will do)."""
        return _names([p for p in (f"{self.time_s:g} s of sampler time per chain" if self.time_s > 0 else "",
                                   f"{self.iterations:,} iterations per chain" if self.iterations > 0 else "") if p])

    def long_enough(self, time_s: float, iterations: float) -> bool:
        """Whether a chain of this median sampler time and iteration count is long enough."""
        return time_s >= self.time_s and iterations >= self.iterations

    def shortfall(self, points: float, chains: dict) -> list:
        """What the runs on one data set lack, in words; empty when they are within the scope.

        Parameters
        ----------
        points : float
            The data set's size (NaN when the traces do not record it: then it falls short).
        chains : dict
            Compared label -> (median sampler time in s, median iterations) of its chains.
        """
        short = []
        if self.points > 1 and not points >= self.points:
            have = "an unrecorded number of points" if np.isnan(points) else f"{points:,.0f} points"
            short.append(f"{have} (needs {self.points:,})")
        slow = [f"{label} {time:.3g} s" for label, (time, _) in chains.items() if not time >= self.time_s]
        if slow:
            short.append(f"sampler time {', '.join(slow)} (needs {self.time_s:g} s)")
        few = [f"{label} {n:,.0f}" for label, (_, n) in chains.items() if not n >= self.iterations]
        if few:
            short.append(f"iterations {', '.join(few)} (needs {self.iterations:,})")
        return short

    def undecided(self, notes) -> str:
        """The summary of a claim that no run of the grid was in scope to decide."""
        return (f"Not decided at this budget: the claim applies from {self.describe()} ({self.why}). "
                f"Below that, this grid measured: {' '.join(notes)}")


#: Chang & Fisher: the paper's synthetic set has 100,000 points; from one cluster there, every
#: sub-cluster chain measured here was within 0.1 % of the plateau after at most ~150
#: iterations. Counted in iterations, not seconds: a seeded chain of so many iterations is the
#: same chain on a busy machine and an idle one, so the verdict does not depend on the load
#: (docs/design.md "Claims and verdicts")
CHANG_SCOPE = Scope(points=100_000, iterations=200,
                    why="the paper's synthetic set has 100,000 points, and from one cluster the sub-cluster "
                        "samplers need up to about 150 iterations of splits to reach the plateau there; a shorter "
                        "chain does not count, and counting iterations rather than seconds keeps the verdict "
                        "independent of the machine's speed and load")
#: Daumé: the paper's smallest data set (3,000 MNIST images); the time is the search's own,
#: so a baseline counts only when its chains ran at least as long as the search
DAUME_SCOPE = Scope(points=3_000, why="the paper's smallest data set, 3,000 MNIST images, with baseline chains that "
                                      "run at least as long as the search; on fewer points a Gibbs sweep is so "
                                      "cheap that equal time means many sweeps")
#: Wang & Lin: traffic between workers needs workers; auxvar's traffic grows with the data (it
#: moves clusters with their points), the consolidation samplers' with the clusters only
WANG_SCOPE = Scope(points=12_800, workers=2,
                   why="traffic between workers needs two or more of them, and the auxiliary-variable sampler's "
                       "traffic grows with the data while consolidation's does not: a tenth of the paper's "
                       "synthetic set of 128,000 points at least")


@dataclass
class Claim:
    """A paper's headline claim and what this grid made of it."""

    paper: str  #: citation
    claim: str  #: the claim, in words
    verdict: str  #: HELD, FAILED, UNDECIDED or UNCHECKED
    summary: str  #: what was measured, or which runs are missing
    criterion: str = ""  #: how the verdict was decided
    table: pd.DataFrame | None = None  #: the numbers behind the verdict
    scope: Scope | None = None  #: where the claim applies


def check_claims(frame: pd.DataFrame, runs: pd.DataFrame) -> list:
    """Check the three papers' headline claims.

    Parameters
    ----------
    frame, runs : pandas.DataFrame
        From :func:`reports.runs.read_runs`.

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
                 f"sub-cluster sampler's median final VI to the truth is below every baseline's, on every data set "
                 f"of {CHANG_SCOPE.describe()}.")
    data = runs[runs["dataset"].str.startswith(CHANG_DATA) & runs["final_vi"].notna()]
    if data.empty:
        return Claim(paper, claim, UNCHECKED, f"No run on Chang & Fisher's synthetic data ({CHANG_DATA}) with "
                                               "ground truth in this grid.", criterion)
    rows, verdicts, notes, below = [], [], [], []
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
                         "iterations": _count(g["iterations"].median()),
                         "sampler time (s)": float(g["time_s"].median()), "final log joint": final,
                         "gap to plateau": final - plateau, "seeds at plateau": f"{at} / {len(g)}",
                         "final clusters": float(g["final_n_clusters"].median()),
                         "final VI": float(g["final_vi"].median())}
                groups.setdefault(role, []).append(entry)
                rows.append(entry)
        subs, bases = groups.get("sub-cluster", []), groups.get("baseline", [])
        if not subs or not bases:
            continue
        # a chain shorter than the claim's budget does not count; the data set decides when
        # it is large enough and a sub-cluster sampler and a baseline both ran long enough
        points = _points(ds_runs)
        short = CHANG_SCOPE.shortfall(points, {})
        for entry in subs + bases:
            entry["decides"] = not short and CHANG_SCOPE.long_enough(entry["sampler time (s)"], entry["iterations"])
        counted_subs, counted_bases = [e for e in subs if e["decides"]], [e for e in bases if e["decides"]]
        head = f"On {dataset} (plateau {plateau:,.1f} nats, reached by {leader['label']} seed {leader['seed']}): "
        if counted_subs and counted_bases:
            ok, text = _chang_outcome(counted_subs, counted_bases, plateau, tol)
            brief = [e["algorithm"] for e in subs + bases if not e["decides"]]
            if brief:
                text += f" (not counted, shorter than {CHANG_SCOPE.chain_length()}: {_names(brief)})"
            verdicts.append(ok)
            notes.append(head + text + ".")
        else:
            short = CHANG_SCOPE.shortfall(points, {e["algorithm"]: (e["sampler time (s)"], e["iterations"])
                                                   for e in subs + bases})
            below.append(f"{head}{_chang_outcome(subs, bases, plateau, tol)[1]} (below the claim's scale: "
                         f"{'; '.join(short)}).")
    missing = _absence([n for n in CHANG_SUBCLUSTER + CHANG_BASELINES if n not in set(data["algorithm"])], runs)
    table = pd.DataFrame(rows) if rows else None
    absent = f" Missing from this grid: {missing}." if missing else ""
    if verdicts:
        summary = " ".join(notes + (["Not counted:", *below] if below else [])) + absent
        return Claim(paper, claim, HELD if all(verdicts) else FAILED, summary, criterion, table, CHANG_SCOPE)
    if below:
        return Claim(paper, claim, UNDECIDED, CHANG_SCOPE.undecided(below) + absent, criterion, table, CHANG_SCOPE)
    return Claim(paper, claim, UNCHECKED, f"A sub-cluster sampler and a baseline are both needed on {CHANG_DATA} "
                                           f"data with ground truth. Missing: {missing or 'none'}.", criterion, table,
                 CHANG_SCOPE)


def _chang_outcome(subs, bases, plateau, tol):
    """Whether Chang & Fisher's claim held among these sub-cluster and baseline entries, and
    what happened, in words."""
    sub_ok = [e["algorithm"] for e in subs if e["final log joint"] >= plateau - tol]
    sub_short = [e["algorithm"] for e in subs if e["final log joint"] < plateau - tol]
    base_reached = [e["algorithm"] for e in bases if e["final log joint"] >= plateau - tol]
    vi_worse = [(s["algorithm"], b["algorithm"]) for s in subs for b in bases if not s["final VI"] < b["final VI"]]
    text = f"{_names(sub_ok)} ended at the plateau" if sub_ok else "no sub-cluster sampler reached the plateau"
    if sub_short:
        text += f"; {_names(sub_short)} ended below it"
    stuck = [e["algorithm"] for e in bases if e["algorithm"] not in base_reached]
    if stuck:
        text += f"; {_names(stuck)} stayed below it"
    if base_reached:
        text += f"; {_names(base_reached)} reached it too"
    if vi_worse:
        text += "; VI not lower for " + ", ".join(f"{s} vs {b}" for s, b in vi_worse)
    return not sub_short and not base_reached and not vi_worse, text


# ---- Daumé 2007 ------------------------------------------------------------------------------
def daume2007(frame: pd.DataFrame, runs: pd.DataFrame) -> Claim:
    """Beam search with the inadmissible heuristic reaches a higher log joint than Gibbs and
    Gibbs with split-merge given the same time."""
    paper = "Daumé 2007, Fast search for Dirichlet process mixture models"
    claim = ("Beam search for the MAP partition with the inadmissible heuristic finds a partition of higher log "
             "joint than collapsed Gibbs (and Gibbs with split-merge moves) reach in the same wall time.")
    criterion = ("Each baseline chain is read at the search's finishing time (median over the search's seeds): its "
                 "log joint is that of its last iteration completed by then. Held when the search's median log "
                 "joint is above every baseline's median there, on every data set of "
                 f"{DAUME_SCOPE.describe()}. A baseline whose chains all ended before that time is inconclusive: "
                 "it was given less time than the search.")
    search = runs[(runs["algorithm"] == DAUME_SEARCH) & runs["search_s"].notna()]
    search = search[pd.Series([_option(r, "heuristic") == DAUME_HEURISTIC for r in search.itertuples()],
                              index=search.index, dtype=bool)]
    rows, outcomes = [], []
    for (dataset, s_label), s_runs in search.groupby(["dataset", "label"], sort=False):
        at = float(s_runs["search_s"].median())
        value = float(s_runs["final_log_joint"].median())
        short = DAUME_SCOPE.shortfall(_points(runs[runs["dataset"] == dataset]), {})
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
                outcome, result = f"inconclusive: {label} ran only {max(lengths):.3g} s, less than the search", None
            elif value > b_value:
                outcome, result = f"{s_label} higher by {value - b_value:,.1f} nats", True
            elif value == b_value:
                outcome, result = "tie: the same log joint (not higher)", False
            else:
                outcome, result = f"{label} higher by {b_value - value:,.1f} nats", False
            if short:  # inconclusive or not, the scale it fell short of is named
                outcome, result = f"{outcome} (below the claim's scale: {'; '.join(short)})", None
            outcomes.append((dataset, f"{s_label} vs {label}", result, outcome))
            rows.append({"dataset": dataset, "algorithm": label, "seeds": len(b_runs), "compared at (s)": at,
                         "log joint at that time": b_value, "chain ran to (s)": float(np.median(lengths)),
                         "outcome": outcome})
    table = pd.DataFrame(rows) if rows else None
    measured = [f"On {d}, {pair}: {text}." for d, pair, _, text in outcomes]
    conclusive = [o for o in outcomes if o[2] is not None]
    if conclusive:
        verdict = HELD if all(o[2] for o in conclusive) else FAILED
        return Claim(paper, claim, verdict, " ".join(measured), criterion, table, DAUME_SCOPE)
    if outcomes:
        return Claim(paper, claim, UNDECIDED, DAUME_SCOPE.undecided(measured), criterion, table, DAUME_SCOPE)
    if search.empty:
        why = ("its runs used another heuristic" if DAUME_SEARCH in set(runs["algorithm"])
               else _absence([DAUME_SEARCH], runs))
        missing = f"no {DAUME_SEARCH} run with heuristic={DAUME_HEURISTIC} ({why})"
    else:
        searched = set(runs.loc[runs["dataset"].isin(search["dataset"]), "algorithm"])
        absent = [n for n in DAUME_BASELINES if n not in searched]
        missing = (f"no {' or '.join(DAUME_BASELINES)} run on the searched data set(s) "
                   f"({_absence(absent, runs, 'ran, but not on the searched data')})")
    return Claim(paper, claim, UNCHECKED, missing.capitalize() + ".", criterion, table, DAUME_SCOPE)


def _option(run, key):
    """An option of a run: from its metadata, else the registry default."""
    options = run.options or {}
    if key in options:
        return options[key]
    try:
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
    criterion = (f"Bytes per iteration (sent + received, median over seeds of each chain's mean) of the runs on "
                 f"{WANG_SCOPE.workers} or more workers, on each data set of {WANG_SCOPE.describe()} where both kinds "
                 f"ran so: held when every comparator moves at least {WANG_FACTOR:g}x the bytes of every "
                 f"consolidation sampler.")
    # the claim is about traffic between workers: a 1-worker run's bytes go to its one shard
    # (and auxvar moves no cluster there), so only runs on enough workers are compared
    kind = runs["algorithm"].map(_wang_kind)
    talking = runs[kind.notna() & (runs["bytes"].fillna(0) > 0) & (runs["workers"] >= WANG_SCOPE.workers)]
    rows, verdicts, below = [], [], []
    for dataset in dict.fromkeys(talking["dataset"]):
        here = talking[talking["dataset"] == dataset]
        c_bytes = here[kind[here.index] == "consolidation"].groupby("label", sort=False)["bytes"].median()
        o_bytes = here[kind[here.index] == "comparator"].groupby("label", sort=False)["bytes"].median()
        for label, value in list(c_bytes.items()) + list(o_bytes.items()):
            rows.append({"dataset": dataset, "algorithm": label,
                         "kind": "consolidation" if label in c_bytes.index else "comparator",
                         "bytes / iteration": float(value)})
        if len(c_bytes) and len(o_bytes):
            ratio = float(o_bytes.min() / c_bytes.max())
            text = (f"On {dataset}: the least-communicating comparator moves {ratio:.3g}x the bytes of the most-"
                    f"communicating consolidation sampler")
            short = WANG_SCOPE.shortfall(_points(runs[runs["dataset"] == dataset]), {})
            if short:
                below.append(f"{text} (below the claim's scale: {'; '.join(short)}).")
            else:
                verdicts.append((text + ".", ratio))
    table = pd.DataFrame(rows) if rows else None
    if verdicts:
        summary = " ".join([t for t, _ in verdicts] + (["Not counted:", *below] if below else []))
        verdict = HELD if all(r >= WANG_FACTOR for _, r in verdicts) else FAILED
        return Claim(paper, claim, verdict, summary, criterion, table, WANG_SCOPE)
    few = runs[kind.notna() & (runs["workers"] < WANG_SCOPE.workers)]
    if not below and set(kind[few.index]) == {"consolidation", "comparator"}:
        below.append(f"{_names(sorted(set(few['label'])))} ran on fewer than {WANG_SCOPE.workers} workers only.")
    if below:
        return Claim(paper, claim, UNDECIDED, WANG_SCOPE.undecided(below), criterion, table, WANG_SCOPE)
    parts = ["No data set has both a consolidation sampler and a comparator that sent bytes across workers."]
    for names, kind_name in ((WANG_CONSOLIDATION, "Consolidation samplers"), (WANG_COMPARATORS, "Comparators")):
        absent = [n for n in names if n not in set(talking["algorithm"])]
        if absent:
            parts.append(f"{kind_name}: {_absence(absent, runs, 'ran on one worker only, or sent no bytes')}.")
    return Claim(paper, claim, UNCHECKED, " ".join(parts), criterion, table, WANG_SCOPE)


def _wang_kind(algorithm: str):
    """'consolidation', 'comparator' or None: the role of a registry name in Wang & Lin's claim."""
    if algorithm.startswith("cons-"):
        return "consolidation"
    if any(algorithm == c or algorithm.startswith(c + "-") for c in WANG_COMPARATORS):
        return "comparator"
    return None


# ---- helpers ---------------------------------------------------------------------------------
def _points(runs: pd.DataFrame) -> float:
    """The size of the runs' data set (training plus held-out points) from their metadata;
    NaN when the traces do not record it."""
    sizes = [float(m["n_points"]) + float(m.get("heldout_points") or 0)
             for m in (runs["meta"] if "meta" in runs else []) if isinstance(m, dict) and m.get("n_points")]
    return max(sizes) if sizes else float("nan")


def _count(x) -> float | int:
    """A median count: an int when it is whole (so that tables show 200, not 200.0)."""
    return int(x) if float(x).is_integer() else float(x)


def _names(names) -> str:
    names = list(names)
    if not names:
        return ""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _absence(names, runs, ran_but="ran, but not on the data this claim needs") -> str:
    """Why each of ``names`` has no usable run, grouped: 'a, b (not implemented in this build);
    c (registered but not in this grid)'; ``ran_but`` explains a name that did run."""
    registered = set(algorithms.available())
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
