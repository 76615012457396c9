"""The verdict machinery of the papers' claims: headline claims over draws of a data set, and
the criteria of the reproduction entries (margin and sensitivity).

Each paper's headline claim lives with the paper (``reports/papers/<paper>/claim.py``;
:func:`reports.papers.check_claims` runs them); it reads only the run table and traces built by
:func:`reports.runs.read_runs` and returns a :class:`Claim`: the claim in words, what this grid measured, the criterion
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
    if builder.seed_used is not None and not builder.seed_used(params):  # the same data whatever the seed
        return builder.canonical_name({**params, "seed": seed.default}), None
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
        return and_list([p for p in parts if p]) or "any data and budget"

    def chain_length(self) -> str:
        """The chain length it needs in words ('' when any will do)."""
        return and_list([p for p in (f"{self.time_s:g} s of sampler time per chain" if self.time_s > 0 else "",
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
class Draw:
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
        return draw_label(self.dataset)


def over_draws(found: list, scope: Scope):
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
    return f"; run {len(missing)} more, e.g. {and_list(missing)}"


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


# ---- helpers ---------------------------------------------------------------------------------
def draw_label(dataset: str) -> str:
    """A draw's name within its data set: 'seed=2' (the dataset's own parameter, apart from the
    chains' seeds), or the dataset's name when it has no seed."""
    seed = draw_of(dataset)[1]
    return dataset if seed is None else f"seed={seed}"


def points_of(runs: pd.DataFrame) -> float:
    """The size of the runs' data set (training plus held-out points) from their metadata;
    NaN when the traces do not record it."""
    sizes = [float(m["n_points"]) + float(m.get("heldout_points") or 0)
             for m in (runs["meta"] if "meta" in runs else []) if isinstance(m, dict) and m.get("n_points")]
    return max(sizes) if sizes else float("nan")


def median_count(x) -> float | int:
    """A median count: an int when it is whole (so that tables show 200, not 200.0)."""
    return int(x) if float(x).is_integer() else float(x)


def and_list(names) -> str:
    names = list(names)
    if not names:
        return ""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def absence(names, runs, ran_but="ran, but not on the data this claim needs") -> str:
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
