"""The papers' headline claims, checked against the runs of this grid.

Each check reads only the run table and traces built by :func:`reports.runs.read_runs`
and returns a :class:`Claim`: the claim in words, what this grid measured, the criterion
used, and a verdict -- ``held``, ``did not hold``, ``not decided at this budget`` or ``could
not be checked`` (then the summary names the runs that are missing).

Each claim declares its :class:`Scope`: the data size, sampler time and worker count from
which it applies (docs/design.md "Claims and verdicts"). Runs below the scope are still
measured and shown, but only runs within it give "held" or "did not hold"; a grid with none
gets "not decided at this budget" and a summary that names what it would take.

A claim is decided on every *draw* of its data set, not on one: the runs whose data set has
the same name but for its ``seed`` (:func:`draw_of`; ``synth-chang2013``,
``synth-chang2013?seed=1`` and ``synth-chang2013?seed=2`` are three draws of one data set).
Each draw within the scope gets the claim's criterion on its own runs; the claim held when it
held on at least :data:`HOLD_FRACTION` of them (rounded up) and there were at least
:data:`MIN_DRAWS`, so that one lucky or unlucky draw cannot decide it. With fewer draws it is
not decided at this budget, and the summary gives each draw's outcome anyway.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import pandas as pd

from dpmmbench import algorithms
from dpmmbench.datasets import resolve

from .entries import NOT_REPRODUCED, REPRODUCED

HELD, FAILED, UNDECIDED, UNCHECKED = "held", "did not hold", "not decided at this budget", "could not be checked"

#: a verdict needs at least this many draws of the data set within the claim's scope
MIN_DRAWS = 3
#: the claim held when it held on at least this fraction of those draws, rounded up (2 of 3,
#: 3 of 4, 4 of 5): a single draw can neither make it hold nor fail
HOLD_FRACTION = Fraction(2, 3)

#: Chang & Fisher (2013): their samplers, the baselines they report stuck, and their data
CHANG_SUBCLUSTER = ("subc", "subc-supc")
CHANG_BASELINES = ("fsd", "gibbs", "gibbs-supercluster")
CHANG_DATA = "synth-chang2013"
#: a chain is at the plateau when its final log joint is within this fraction of |best| of
#: the best final log joint of any run on the draw
PLATEAU_RTOL = 1e-3
#: Daumé (2007): beam search with the inadmissible heuristic against these samplers
DAUME_SEARCH, DAUME_HEURISTIC = "search", "inadmissible"
DAUME_BASELINES = ("gibbs", "gibbs-splitmerge")
#: Wang & Lin (2017): consolidation samplers against auxiliary variables and sub-clusters
WANG_CONSOLIDATION = ("cons-prog", "cons-pooled", "cons-async", "cons-hung")
WANG_COMPARATORS = ("auxvar", "subc")
#: "orders of magnitude fewer bytes": at least this factor
WANG_FACTOR = 10.0


def draws_needed(n: int) -> int:
    """How many of ``n`` draws within the scope must hold for the claim to hold.

    Parameters
    ----------
    n : int
        Draws of the data set within the claim's scope (a verdict needs :data:`MIN_DRAWS`).

    Returns
    -------
    int
        ``ceil(HOLD_FRACTION * n)``.

    Examples
    --------
    >>> from dpmmbench.reports.claims import draws_needed
    >>> [draws_needed(n) for n in (3, 4, 5, 6)]
    [2, 3, 4, 4]
    """
    return math.ceil(HOLD_FRACTION * n)


#: the draw rule in words, for each claim's criterion
DRAW_RULE = (f"Decided on each draw of the data set (the same data set generated or sampled with another seed) "
             f"within the scope: the claim held when it held on at least {draws_needed(MIN_DRAWS)} of "
             f"{MIN_DRAWS} draws (on n draws, at least {HOLD_FRACTION.numerator}n/{HOLD_FRACTION.denominator}, "
             f"rounded up) and did not hold when it held on fewer; with fewer than {MIN_DRAWS} draws within the "
             f"scope it is not decided. Over several data sets, it held when it held on each one decided.")


def draw_of(dataset: str) -> tuple:
    """The data set that a run's data are a draw of, and the draw's seed.

    Two names are draws of one data set when they differ in their ``seed`` alone; the
    dataset's default seed is a draw too (the name without ``seed``). The name is read by the
    datasets' own parser (:func:`datasets.resolve`).

    Parameters
    ----------
    dataset : str
        A run's dataset name, e.g. ``"synth-wang2017?scale=0.1&seed=2"``.

    Returns
    -------
    data_set : str
        The canonical name with the seed left out (at its default).
    seed : int or None
        The draw's seed; None for a dataset without a ``seed`` parameter (its one draw) and for
        a name this build cannot parse (a plug-in that is not installed: its own data set).

    Examples
    --------
    >>> from dpmmbench.reports.claims import draw_of
    >>> draw_of("synth-chang2013?seed=2"), draw_of("synth-chang2013")
    (('synth-chang2013', 2), ('synth-chang2013', 0))
    >>> draw_of("synth-wang2017?seed=2&scale=0.1")
    ('synth-wang2017?scale=0.1', 2)
    >>> draw_of("digits?pca=50")
    ('digits?pca=50', None)
    """
    try:
        builder, params, canonical = resolve(dataset)
    except ValueError:
        return dataset, None
    seed = next((p for p in builder.parameters if p.name == "seed"), None)
    if seed is None:
        return canonical, None
    return builder.canonical_name({**params, "seed": seed.default}), int(params["seed"])


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
    table: pd.DataFrame | None = None  #: the chains behind the verdict: a row per draw, method and seed
    scope: Scope | None = None  #: where the claim applies
    draws: pd.DataFrame | None = None  #: a row per draw: its outcome and the numbers that decided it


@dataclass
class _Draw:
    """What a claim's criterion made of one draw."""

    dataset: str  #: the runs' dataset name
    held: bool | None  #: None: not counted (the reason is ``why``)
    text: str  #: what was measured there, with the numbers that decide it
    why: str = ""  #: why it was not counted
    numbers: dict = field(default_factory=dict)  #: the deciding numbers, for the draws table
    compared: bool = True  #: False: the claim's samplers did not all run on it
    reason: str = ""  #: the main reason it held or did not, in a few words (the claim's first sentence)

    @property
    def data_set(self) -> str:
        """The data set it is a draw of."""
        return draw_of(self.dataset)[0]

    @property
    def label(self) -> str:
        """Its name within the data set."""
        return _draw_label(self.dataset)


def _over_draws(found: list, scope: Scope):
    """The verdict, summary and draws table of a claim from its draws' outcomes; None when no
    draw ran the samplers the claim compares (the caller says what is missing)."""
    if not any(d.compared for d in found):
        return None
    sets = {}
    for d in found:
        sets.setdefault(d.data_set, []).append(d)
    decided, sentences, short_of_draws = [], [], False
    below = [f"On {d.dataset}: {d.text} ({d.why})." for d in found if d.held is None and d.compared]
    others = [f"On {d.dataset}: {d.why}." for d in found if not d.compared]
    for data_set, draws in sets.items():
        counted = [d for d in draws if d.held is not None]
        n, k = len(counted), sum(bool(d.held) for d in counted)
        if not n:
            continue
        outcomes = "; ".join(f"{d.label}: {HELD if d.held else FAILED}, {d.text}" for d in counted)
        if n >= MIN_DRAWS:
            ok = k >= draws_needed(n)
            decided.append(ok)
            sentences.append(f"On {data_set}, held on {k} of {n} draws ({outcomes}): "
                             f"{HELD if ok else FAILED} (needs {draws_needed(n)} of {n}).")
        else:
            short_of_draws = True
            sentences.append(f"On {data_set}, held on {k} of {n} draw{'s' if n > 1 else ''} ({outcomes}): not "
                             f"decided, a verdict needs at least {MIN_DRAWS} draws within the scope"
                             f"{_more_draws(data_set, draws)}.")
    table = pd.DataFrame([{"data set": d.data_set, "draw": d.label,
                           "outcome": (HELD if d.held else FAILED) if d.held is not None else f"not counted: {d.why}",
                           **d.numbers} for d in found])
    rest = (["Not counted:", *below] if below else []) + (["Not compared:", *others] if others else [])
    if decided:
        verdict = HELD if all(decided) else FAILED
        return verdict, " ".join([_headline(verdict, found), *sentences, *rest]), table
    if short_of_draws:
        head = (f"Not decided at this budget: a verdict needs at least {MIN_DRAWS} draws of the data set within the "
                f"claim's scope ({scope.describe()}).")
        return UNDECIDED, " ".join([head, *sentences, *rest]), table
    return UNDECIDED, scope.undecided(below + (["Not compared:", *others] if others else [])), table


def _headline(verdict: str, found: list) -> str:
    """The claim's first sentence: the verdict, on how many of the counted draws it held or did
    not, and the main reason (the most common reason of the draws that agree with the verdict)
    ("Did not hold on 3 of 3 draws: gibbs-200it also reached the plateau.")."""
    counted = [d for d in found if d.held is not None]
    agreeing = [d for d in counted if bool(d.held) == (verdict == HELD)]
    reasons = Counter(d.reason for d in agreeing if d.reason)
    main = f": {reasons.most_common(1)[0][0]}" if reasons else ""
    return f"{verdict[0].upper()}{verdict[1:]} on {len(agreeing)} of {len(counted)} draws{main}."


def _more_draws(data_set: str, draws: list) -> str:
    """How to get the draws a data set lacks, in words (', e.g. name?seed=1 and name?seed=2')."""
    counted = [d for d in draws if d.held is not None]
    seeds = {draw_of(d.dataset)[1] for d in draws}
    if seeds == {None}:
        return " (this data set has no seed: it has one draw, so it cannot decide the claim)"
    builder, params, _ = resolve(data_set)
    missing, seed = [], 0
    while len(missing) < MIN_DRAWS - len(counted):
        if seed not in seeds:
            missing.append(builder.canonical_name({**params, "seed": seed}))
        seed += 1
    return f"; run {len(missing)} more, e.g. {_names(missing)}"


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
        (the papers' setting; a learned alpha's log joint is at another alpha), the one most
        runs share (log joints at two alphas are not comparable: a grid that also varies
        alpha, as Chang & Fisher's Figure 4 does, decides the claims at its main one).
        Chang & Fisher's claim is about chains started from one cluster: it reads only those.
    """
    if "learned_alpha" in runs:
        runs = runs[~runs["learned_alpha"]]
    if len(runs) and "alpha" in runs:
        runs = runs[runs["alpha"] == runs["alpha"].mode().iloc[0]]
    frame = frame[frame["run"].isin(runs["run"])]
    one = (runs["meta"].map(lambda m: (m or {}).get("init_clusters", 1) == 1) if "meta" in runs
           else pd.Series(True, index=runs.index))
    return [chang2013(runs[one]), daume2007(frame, runs), wang2017(runs)]


# ---- the entries' criteria: verdict, margin and sensitivity ------------------------------------
#: a threshold is halved and doubled to see whether the verdict depends on where it was set
SENSITIVITY_FACTORS = (0.5, 2.0)


@dataclass(frozen=True)
class Criterion:
    """A reproduction entry's criterion as a function of its thresholds.

    The entry computes its numbers once; ``holds`` decides from them at any thresholds, so the
    generic code below gives the verdict (:func:`decide`), and whether it flips when a
    threshold is halved or doubled (:func:`sensitivity`).

    Attributes
    ----------
    thresholds : dict
        Threshold in words -> its value (empty for a pure ordering: "A above B").
    holds : callable
        ``holds(thresholds) -> bool`` for a dict of the same keys.
    margin : str
        The deciding numbers against the thresholds, in words (how far from flipping).
    """

    thresholds: dict
    holds: object
    margin: str


def decide(criterion: Criterion) -> str:
    """The entry's verdict from its criterion at its own thresholds.

    Parameters
    ----------
    criterion : Criterion

    Returns
    -------
    str
        :data:`reports.entries.REPRODUCED` or :data:`reports.entries.NOT_REPRODUCED`.
    """
    return REPRODUCED if criterion.holds(dict(criterion.thresholds)) else NOT_REPRODUCED


def sensitivity(criterion: Criterion) -> list:
    """The verdict with each threshold halved and doubled (the others kept).

    Parameters
    ----------
    criterion : Criterion

    Returns
    -------
    list of tuple
        ``(threshold name, factor, value, holds, flips)`` per threshold and factor of
        :data:`SENSITIVITY_FACTORS`; ``flips`` when ``holds`` differs from the verdict at the
        entry's own thresholds.

    Examples
    --------
    >>> from dpmmbench.reports.claims import Criterion, sensitivity
    >>> c = Criterion({"factor": 1.5}, lambda t: 1.31 >= t["factor"], "1.31 against 1.5")
    >>> [(f, holds, flips) for _, f, _, holds, flips in sensitivity(c)]
    [(0.5, True, True), (2.0, False, False)]
    """
    base = bool(criterion.holds(dict(criterion.thresholds)))
    out = []
    for name, value in criterion.thresholds.items():
        for factor in SENSITIVITY_FACTORS:
            moved = {**criterion.thresholds, name: value * factor}
            held = bool(criterion.holds(moved))
            out.append((name, factor, value * factor, held, held != base))
    return out


def flips(criterion) -> bool:
    """Whether halving or doubling any threshold of ``criterion`` (None: no criterion) flips
    the verdict."""
    return criterion is not None and any(row[-1] for row in sensitivity(criterion))


def sensitivity_text(criterion: Criterion) -> str:
    """:func:`sensitivity` in words: 'Halved (x) or doubled (y): the verdict stays' per
    threshold, or which change flips it; a pure ordering says it has no threshold."""
    if not criterion.thresholds:
        return "An ordering with no threshold: halving or doubling cannot move it."
    words = []
    for name, value in criterion.thresholds.items():
        rows = [r for r in sensitivity(criterion) if r[0] == name]
        flipped = [r for r in rows if r[-1]]
        at = " and ".join(f"{_factor_word(r[1])} ({r[2]:.3g})" for r in rows)
        if flipped:
            words.append(f"{name} {value:.3g}: THE VERDICT FLIPS when "
                         + " or ".join(f"{_factor_word(r[1])} ({r[2]:.3g}, "
                                       f"{REPRODUCED if r[3] else NOT_REPRODUCED})" for r in flipped))
        else:
            words.append(f"{name} {value:.3g}: the verdict stays when {at}")
    return "; ".join(words) + "."


def _factor_word(factor: float) -> str:
    return {0.5: "halved", 2.0: "doubled"}.get(factor, f"times {factor:g}")


def regime_note(budget_s: float, paper: str, far_below: bool) -> str:
    """The sentence that says a verdict was decided at a budget far below the paper's regime.

    Parameters
    ----------
    budget_s : float
        Sampler seconds per chain the verdict was decided at.
    paper : str
        The paper's regime in words ("minutes to hours per chain").
    far_below : bool
        Whether the budget is far below it (the entry decides: iterations, not seconds, are
        what the regime is about).

    Returns
    -------
    str
        Empty when not far below.
    """
    if not far_below:
        return ""
    return (f"Decided at {budget_s:g} s of sampler time per chain, far below the paper's regime ({paper}): the "
            f"verdict is about this budget, not yet about the paper's claim.")


# ---- Chang & Fisher 2013 ---------------------------------------------------------------------
def chang2013(runs: pd.DataFrame) -> Claim:
    """Sub-cluster samplers reach the true clusters and the plateau; FSD, Gibbs and
    super-cluster Gibbs stay stuck (their synthetic experiment), on each draw of the data."""
    paper = "Chang & Fisher 2013, Parallel sampling of DP mixture models using sub-cluster splits"
    claim = ("On synthetic 2-D Gaussian data started from one cluster, the sub-cluster samplers (subc, subc-supc) "
             "reach the true clusters and the plateau of the log joint, while FSD, collapsed Gibbs and "
             "super-cluster Gibbs stay stuck below it.")
    criterion = (f"On each draw: plateau = best final log joint of any run on the draw; a chain is at the plateau "
                 f"when its final log joint is within {PLATEAU_RTOL:g} x |plateau| of it. The draw holds when every "
                 f"sub-cluster sampler's median chain is at the plateau, every baseline's median chain is below it, "
                 f"and every sub-cluster sampler's median final VI to the truth is below every baseline's; draws of "
                 f"{CHANG_SCOPE.describe()} count. {DRAW_RULE}")
    data = runs[runs["dataset"].str.startswith(CHANG_DATA) & runs["final_vi"].notna()]
    if data.empty:
        return Claim(paper, claim, UNCHECKED, f"No run on Chang & Fisher's synthetic data ({CHANG_DATA}) with "
                                               "ground truth in this grid.", criterion)
    found, rows = [], []
    for dataset, ds_runs in data.groupby("dataset", sort=False):
        draw, chains = _chang_draw(dataset, ds_runs)
        found.append(draw)
        rows += chains
    missing = _absence([n for n in CHANG_SUBCLUSTER + CHANG_BASELINES if n not in set(data["algorithm"])], runs)
    table = pd.DataFrame(rows) if rows else None
    absent = f" Missing from this grid: {missing}." if missing else ""
    decided = _over_draws(found, CHANG_SCOPE)
    if decided:
        verdict, summary, draws = decided
        return Claim(paper, claim, verdict, summary + absent, criterion, table, CHANG_SCOPE, draws)
    return Claim(paper, claim, UNCHECKED, f"A sub-cluster sampler and a baseline are both needed on {CHANG_DATA} "
                                           f"data with ground truth. Missing: {missing or 'none'}.", criterion, table,
                 CHANG_SCOPE)


def _chang_draw(dataset: str, ds_runs: pd.DataFrame):
    """Chang & Fisher's criterion on the runs of one draw: its :class:`_Draw` and the rows of
    its chains (one per method and seed)."""
    plateau = float(ds_runs["final_log_joint"].max())
    leader = ds_runs.loc[ds_runs["final_log_joint"].idxmax()]
    tol = PLATEAU_RTOL * abs(plateau)
    groups, members = {}, []
    for role, names in (("sub-cluster", CHANG_SUBCLUSTER), ("baseline", CHANG_BASELINES)):
        for label, g in ds_runs[ds_runs["algorithm"].isin(names)].groupby("label", sort=False):
            entry = {"algorithm": label, "role": role, "iterations": _count(g["iterations"].median()),
                     "sampler time (s)": float(g["time_s"].median()),
                     "final log joint": float(g["final_log_joint"].median()),
                     "final VI": float(g["final_vi"].median())}
            groups.setdefault(role, []).append(entry)
            members.append((entry, g))
    subs, bases = groups.get("sub-cluster", []), groups.get("baseline", [])
    head = f"plateau {plateau:,.1f} nats (reached by {leader['label']}, chain seed {leader['seed']}; within {tol:,.1f}): "
    # a chain shorter than the claim's budget does not count; the draw decides when it is large
    # enough and a sub-cluster sampler and a baseline both ran long enough on it
    short = CHANG_SCOPE.shortfall(_points(ds_runs), {})
    for entry in subs + bases:
        entry["decides"] = not short and CHANG_SCOPE.long_enough(entry["sampler time (s)"], entry["iterations"])
    chains = [{"dataset": dataset, "draw": _draw_label(dataset), "algorithm": entry["algorithm"],
               "role": entry["role"], "seed": int(r.seed), "iterations": int(r.iterations),
               "sampler time (s)": float(r.time_s), "final log joint": float(r.final_log_joint),
               "gap to plateau": float(r.final_log_joint) - plateau,
               "at plateau": "yes" if r.final_log_joint >= plateau - tol else "no",
               "final clusters": int(r.final_n_clusters), "final VI": float(r.final_vi), "decides": entry["decides"]}
              for entry, g in members for r in g.itertuples()]
    if not subs or not bases:
        return _Draw(dataset, None, "", f"no {'sub-cluster sampler' if not subs else 'baseline'} ran on it",
                     compared=False), chains
    counted_subs, counted_bases = [e for e in subs if e["decides"]], [e for e in bases if e["decides"]]
    if counted_subs and counted_bases:
        ok, text = _chang_outcome(counted_subs, counted_bases, plateau, tol)
        brief = [e["algorithm"] for e in subs + bases if not e["decides"]]
        if brief:
            text += f" (not counted, shorter than {CHANG_SCOPE.chain_length()}: {_names(brief)})"
        return _Draw(dataset, ok, head + text, numbers=_chang_numbers(counted_subs, counted_bases, plateau, tol),
                     reason=_chang_reason(counted_subs, counted_bases, plateau, tol)), chains
    short = CHANG_SCOPE.shortfall(_points(ds_runs), {e["algorithm"]: (e["sampler time (s)"], e["iterations"])
                                                    for e in subs + bases})
    return _Draw(dataset, None, head + _chang_outcome(subs, bases, plateau, tol)[1],
                 f"below the claim's scale: {'; '.join(short)}",
                 numbers=_chang_numbers(subs, bases, plateau, tol)), chains


def _chang_numbers(subs, bases, plateau, tol) -> dict:
    """The numbers that decide Chang & Fisher's claim on a draw: the plateau, the tolerance,
    the farthest sub-cluster sampler's and the closest baseline's gap, and their VIs."""
    return {"plateau": plateau, "tolerance": tol,
            "sub-cluster gap (worst)": min(e["final log joint"] for e in subs) - plateau,
            "baseline gap (closest)": max(e["final log joint"] for e in bases) - plateau,
            "sub-cluster VI (worst)": max(e["final VI"] for e in subs),
            "baseline VI (best)": min(e["final VI"] for e in bases)}


def _chang_outcome(subs, bases, plateau, tol):
    """Whether Chang & Fisher's claim held among these sub-cluster and baseline entries, and
    what happened, in words, with each median chain's distance to the plateau."""
    def gaps(entries):
        return " and ".join(f"{plateau - e['final log joint']:,.1f}" for e in entries)

    at = [e for e in subs if e["final log joint"] >= plateau - tol]
    short = [e for e in subs if e["final log joint"] < plateau - tol]
    reached = [e for e in bases if e["final log joint"] >= plateau - tol]
    stuck = [e for e in bases if e["final log joint"] < plateau - tol]
    vi_worse = [(s, b) for s in subs for b in bases if not s["final VI"] < b["final VI"]]
    text = (f"{_names(e['algorithm'] for e in at)} ended at the plateau" if at
            else "no sub-cluster sampler reached the plateau")
    if short:
        text += f"; {_names(e['algorithm'] for e in short)} ended below it (by {gaps(short)} nats)"
    if stuck:
        text += f"; {_names(e['algorithm'] for e in stuck)} stayed below it (by {gaps(stuck)} nats)"
    if reached:
        text += f"; {_names(e['algorithm'] for e in reached)} reached it too"
    if vi_worse:
        text += "; VI not lower for " + ", ".join(f"{s['algorithm']} vs {b['algorithm']} ({s['final VI']:.3g} vs "
                                                  f"{b['final VI']:.3g})" for s, b in vi_worse)
    return not short and not reached and not vi_worse, text


def _chang_reason(subs, bases, plateau, tol) -> str:
    """The main reason Chang & Fisher's claim held on a draw or did not, in a few words."""
    reached = [e["algorithm"] for e in bases if e["final log joint"] >= plateau - tol]
    short = [e["algorithm"] for e in subs if e["final log joint"] < plateau - tol]
    if reached:
        return f"{_names(reached)} also reached the plateau"
    if short:
        return f"{_names(short)} ended below the plateau"
    if any(not s["final VI"] < b["final VI"] for s in subs for b in bases):
        return "a sub-cluster sampler's VI to the truth was not lower than a baseline's"
    return "the sub-cluster samplers reached the plateau and no baseline did"


# ---- Daumé 2007 ------------------------------------------------------------------------------
def daume2007(frame: pd.DataFrame, runs: pd.DataFrame) -> Claim:
    """Beam search with the inadmissible heuristic reaches a higher log joint than Gibbs and
    Gibbs with split-merge given the same time, on each draw of the data."""
    paper = "Daumé 2007, Fast search for Dirichlet process mixture models"
    claim = ("Beam search for the MAP partition with the inadmissible heuristic finds a partition of higher log "
             "joint than collapsed Gibbs (and Gibbs with split-merge moves) reach in the same wall time.")
    criterion = ("On each draw, each baseline chain is read at the search's finishing time (median over the search's "
                 "seeds): its log joint is that of its last iteration completed by then; a baseline with a chain that "
                 "had completed no sweep by then is inconclusive (its state is the starting one), and the time each "
                 "baseline needs to pass the search is given. The draw holds when the "
                 "search's median log joint is above every baseline's median there; draws of "
                 f"{DAUME_SCOPE.describe()} count. A baseline whose chains all ended before that time counts only "
                 f"against the claim: when its median final log joint is not below the search's, the search "
                 f"did not find a higher one although it took longer; otherwise it is inconclusive (it was "
                 f"given less time than the search). {DRAW_RULE}")
    search = runs[(runs["algorithm"] == DAUME_SEARCH) & runs["search_s"].notna()]
    search = search[pd.Series([_option(r, "heuristic") == DAUME_HEURISTIC for r in search.itertuples()],
                              index=search.index, dtype=bool)]
    found, rows = [], []
    for dataset, searches in search.groupby("dataset", sort=False):
        draw, chains = _daume_draw(frame, runs[runs["dataset"] == dataset], searches)
        found.append(draw)
        rows += chains
    table = pd.DataFrame(rows) if rows else None
    decided = _over_draws(found, DAUME_SCOPE)
    if decided:
        verdict, summary, draws = decided
        return Claim(paper, claim, verdict, summary, criterion, table, DAUME_SCOPE, draws)
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


def _daume_draw(frame: pd.DataFrame, ds_runs: pd.DataFrame, searches: pd.DataFrame):
    """Daumé's criterion on the runs of one draw (``searches``: its searches with the
    heuristic): its :class:`_Draw` and the rows of its chains (one per method and seed)."""
    dataset = str(ds_runs["dataset"].iloc[0])
    short = DAUME_SCOPE.shortfall(_points(ds_runs), {})
    baselines = ds_runs[ds_runs["algorithm"].isin(DAUME_BASELINES)]
    chains, pairs = [], []  # pairs: (result True/False/None, margin in nats, outcome in words, baseline)
    for s_label, s_runs in searches.groupby("label", sort=False):
        at = float(s_runs["search_s"].median())
        value = float(s_runs["final_log_joint"].median())
        chains += [{"dataset": dataset, "draw": _draw_label(dataset), "algorithm": s_label, "role": "search",
                    "seed": int(r.seed), "compared with": "", "compared at (s)": float(r.search_s),
                    "log joint at that time": float(r.final_log_joint), "chain ran to (s)": float(r.time_s)}
                   for r in s_runs.itertuples()]
        for label, b_runs in baselines.groupby("label", sort=False):
            values, lengths, unswept, passes = [], [], 0, []
            for r in b_runs.itertuples():
                chain = frame[frame["run"] == r.run].sort_values("iteration")
                done = chain[chain["time_s"] <= at]
                # a chain with no completed sweep by then holds its starting state: no evidence
                unswept += int(not (done["iteration"] >= 1).any())
                values.append(float((done if len(done) else chain.iloc[:1])["log_joint"].iloc[-1]))
                lengths.append(float(chain["time_s"].iloc[-1]))
                above = chain.loc[chain["log_joint"] > value, "time_s"]
                passes.append(float(above.iloc[0]) if len(above) else math.inf)
                chains.append({"dataset": dataset, "draw": _draw_label(dataset), "algorithm": label,
                               "role": "baseline", "seed": int(r.seed), "compared with": s_label,
                               "compared at (s)": at, "log joint at that time": values[-1],
                               "chain ran to (s)": lengths[-1]})
            b_value = float(np.median(values))
            passed = float(np.median(passes))
            passed_text = (f"{label} passes the search after {passed:.3g} s" if math.isfinite(passed)
                           else f"{label} never passes the search in its {max(lengths):.3g} s")
            if unswept and max(lengths) >= at:
                pairs.append((None, math.nan, f"{s_label} vs {label} inconclusive: {unswept} of {len(values)} "
                                              f"{label} chains had not completed one sweep at {at:.3g} s ({passed_text})",
                              label))
                continue
            if max(lengths) < at:  # given less time: it can only tell against the claim
                pairs.append((None, math.nan, f"{s_label} vs {label} inconclusive: {label} ran only "
                                              f"{max(lengths):.3g} s, less than the search", label)
                             if b_value < value else
                             (False, value - b_value, f"{s_label} vs {label}: {value:,.1f} at {at:.3g} s vs "
                                                      f"{b_value:,.1f} nats in {max(lengths):.3g} s, {label} "
                                                      "not lower in less time", label))
                continue
            if value > b_value:
                outcome = f"{s_label} higher by {value - b_value:,.1f} nats"
            elif value == b_value:
                outcome = "tie: the same log joint (not higher)"
            else:
                outcome = f"{label} higher by {b_value - value:,.1f} nats"
            pairs.append((value > b_value, value - b_value,
                          f"{s_label} vs {label} at {at:.3g} s: {value:,.1f} vs {b_value:,.1f} nats, {outcome}; "
                          f"{passed_text}", label))
    if baselines.empty:
        return _Draw(dataset, None, "", f"no {' or '.join(DAUME_BASELINES)} ran on it", compared=False), chains
    text = "; ".join(p[2] for p in pairs)
    conclusive = [p for p in pairs if p[0] is not None]
    numbers = {"compared at (s)": float(searches["search_s"].median()),
               "smallest margin (nats)": min((p[1] for p in conclusive), default=math.nan)}
    if short:  # inconclusive or not, the scale it fell short of is named
        return _Draw(dataset, None, text, f"below the claim's scale: {'; '.join(short)}", numbers=numbers), chains
    if not conclusive:
        unswept = any("had not completed one sweep" in p[2] for p in pairs)
        return _Draw(dataset, None, text, "inconclusive: a baseline chain had no completed sweep at the search's "
                                          "finishing time" if unswept else "every baseline ran less time than the "
                                          "search", numbers=numbers), chains
    worst = min(conclusive, key=lambda p: p[1])
    reason = (f"{worst[3]} was {'higher' if worst[1] < 0 else 'as high'} at the search's finishing time"
              if not worst[0]
              else "the search was higher than every baseline at its finishing time")
    return _Draw(dataset, all(p[0] for p in conclusive), text, numbers=numbers, reason=reason), chains


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
    sub-clusters across workers, on each draw of the data."""
    paper = "Wang & Lin 2017, Scalable distributed inference of DP mixture models (consolidation)"
    claim = ("Across workers, the consolidation samplers (Prog, Pooled, Async, Hung) move orders of magnitude fewer "
             "bytes per iteration than the auxiliary-variable sampler (AV) and sub-clusters (SubC).")
    criterion = (f"Bytes per iteration (sent + received, median over seeds of each chain's mean) of the runs on "
                 f"{WANG_SCOPE.workers} or more workers, on each draw of {WANG_SCOPE.describe()} where both kinds "
                 f"ran so: the draw holds when every comparator moves at least {WANG_FACTOR:g}x the bytes of every "
                 f"consolidation sampler. {DRAW_RULE}")
    # the claim is about traffic between workers: a 1-worker run's bytes go to its one shard
    # (and auxvar moves no cluster there), so only runs on enough workers are compared
    kind = runs["algorithm"].map(_wang_kind)
    talking = runs[kind.notna() & (runs["bytes"].fillna(0) > 0) & (runs["workers"] >= WANG_SCOPE.workers)]
    found, rows = [], []
    for dataset in dict.fromkeys(talking["dataset"]):
        here = talking[talking["dataset"] == dataset]
        rows += [{"dataset": dataset, "draw": _draw_label(dataset), "algorithm": r.label,
                  "kind": kind[r.Index], "seed": int(r.seed), "workers": int(r.workers),
                  "bytes / iteration": float(r.bytes)} for r in here.itertuples()]
        c_bytes = here[kind[here.index] == "consolidation"].groupby("label", sort=False)["bytes"].median()
        o_bytes = here[kind[here.index] == "comparator"].groupby("label", sort=False)["bytes"].median()
        if not len(c_bytes) or not len(o_bytes):
            found.append(_Draw(dataset, None, "", f"no {'consolidation sampler' if not len(c_bytes) else 'comparator'}"
                                                  f" ran on it on {WANG_SCOPE.workers} or more workers",
                               compared=False))
            continue
        ratio = float(o_bytes.min() / c_bytes.max())
        text = (f"the least-communicating comparator, {o_bytes.idxmin()} at {o_bytes.min():,.0f} bytes per iteration, "
                f"moves {ratio:.3g}x the bytes of the most-communicating consolidation sampler, {c_bytes.idxmax()} at "
                f"{c_bytes.max():,.0f}")
        numbers = {"least comparator (bytes / iteration)": float(o_bytes.min()),
                   "most consolidation (bytes / iteration)": float(c_bytes.max()), "ratio": ratio}
        short = WANG_SCOPE.shortfall(_points(runs[runs["dataset"] == dataset]), {})
        reason = (f"every comparator moves at least {WANG_FACTOR:g}x the consolidation samplers' bytes"
                  if ratio >= WANG_FACTOR else f"{o_bytes.idxmin()} moves only {ratio:.2g}x the bytes of "
                                               f"{c_bytes.idxmax()}, not {WANG_FACTOR:g}x")
        found.append(_Draw(dataset, None if short else ratio >= WANG_FACTOR, text,
                           f"below the claim's scale: {'; '.join(short)}" if short else "", numbers, reason=reason))
    table = pd.DataFrame(rows) if rows else None
    decided = _over_draws(found, WANG_SCOPE)
    if decided:
        verdict, summary, draws = decided
        return Claim(paper, claim, verdict, summary, criterion, table, WANG_SCOPE, draws)
    few = runs[kind.notna() & (runs["workers"] < WANG_SCOPE.workers)]
    if set(kind[few.index]) == {"consolidation", "comparator"}:
        below = [f"{_names(sorted(set(few['label'])))} ran on fewer than {WANG_SCOPE.workers} workers only."]
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
def _draw_label(dataset: str) -> str:
    """A draw's name within its data set: 'seed=2' (the dataset's own parameter, apart from the
    chains' seeds), or the dataset's name when it has no seed."""
    seed = draw_of(dataset)[1]
    return dataset if seed is None else f"seed={seed}"


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
