"""What the chains of a method did on a data set, in one word: did they settle, do they agree,
or did they settle in different modes (docs/design.md "Chain diagnosis").

R̂ across chains asks whether the chains sample one distribution. On DPMM posteriors the
chains of a good sampler often *settle*, each on a plateau of the log joint, in different
modes that they do not leave within any budget this suite can give (subc on MNIST-10k:
R̂ 1.84-2.15 at 10x the default budget). R̂ alone then says "not converged" of a chain that
stopped climbing and of one that is still far from its plateau alike. This module tells them
apart, per chain first, then per method:

**Per chain** (:func:`chain_state`), on the log joint of its steps (iteration 0, the initial
state, is no step):

- ``short``: fewer than :data:`MIN_ITERATIONS` steps: too few to tell;
- ``stuck``: the log joint did not move over the chain's last half;
- ``settled``: it stopped climbing: the least-squares slope of the log joint on the step over
  its last half is not above zero by more than :data:`TREND_Z` standard errors, the standard
  error allowing for the chain's autocorrelation (the residuals' effective sample size,
  arviz-stats' ``ess(method="mean")``). This is the documented equivalent of "split R̂ of the
  last half's pieces <= 1.05" that the design suggests: that R̂ flags a stationary AR(1) chain
  (phi 0.5, 200 steps) as moving one time in three, as it was built to compare chains, not to
  test one; the trend test flags it about one time in a hundred (tests/test_diagnosis.py). The
  test is one-sided: a DPMM chain at its plateau wanders down and back (a split that a later
  merge undoes) over stretches as long as a budget's last half, and a two-sided test called 5
  of 14 samplers on Wang & Lin's set "moving" for such a dip; a chain drifting down has
  stopped climbing;
- ``climbing``: otherwise: its log joint still rises (its slope over the last half, nats per
  second of sampler time, says how fast).

Its *plateau* is the median log joint over its last half; its *final band* the range of its
last half; the *time to settle* is the sampler time after which the chain stays in its final
band.

**Per method** (:func:`diagnose`), from its chains (:data:`OUTCOMES`):

- ``n/a``: an optimiser or variational method (:data:`NOT_SAMPLERS`): it
  stops at an optimum or a fixed point by design;
- ``too slow``: its chains completed fewer than :data:`MIN_ITERATIONS` iterations (median):
  at this budget nothing can be said of them, and the method is not ranked;
- ``agree``: at least :data:`SETTLED_SHARE` of its chains settled (3 of 4) and R̂ across the
  settled chains (their last halves) is at most the threshold: what used to be "converged";
- ``modes``: they settled, but R̂ across them exceeds the threshold: they sit in different
  modes; the spread of their plateaus (nats) and the variation of information between their
  final partitions (nats, median over pairs; :func:`reports.traces.decode_partition`) say how
  different the modes are;
- ``settled``: one chain only, settled (nothing to agree with);
- ``stuck``: at least half its chains stuck;
- ``climbing``: otherwise; the median slope of the chains that did not settle is given.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from itertools import combinations

import numpy as np

#: R-hat across chains above which they do not agree (a method is then not converged): the
#: project's convergence goal (docs/design.md "Summary columns"). Vehtari et al. (2021) ask
#: 1.01 before trusting posterior summaries; the R-hat itself is in every table, for a reader
#: who wants that bar. (reports.chains uses it from here.)
RHAT_THRESHOLD = 1.05
#: :attr:`algorithms.base.Sampler.kind` of the methods that are no samplers: their chains stop
#: at an optimum or a fixed point by design, and the diagnosis is n/a
NOT_SAMPLERS = ("optimiser", "variational")

#: fewest steps a chain needs to be diagnosed; a method whose chains complete fewer (median
#: over chains) is "too slow at this budget" and not ranked
MIN_ITERATIONS = 20
#: a chain has stopped climbing when the trend of its last half is not above 0 by more than
#: this many standard errors
TREND_Z = 3.0
#: share of a method's chains that must settle for the method to have settled (3 of 4)
SETTLED_SHARE = 0.75
#: the outcomes of a method whose chains settled: the methods that are ranked
SETTLED = ("agree", "modes", "settled")
#: a method's outcomes, in the order the report counts them, with their words
OUTCOMES = {"agree": "chains agree", "modes": "settled in different modes", "settled": "settled (one chain)",
            "climbing": "still climbing", "stuck": "stuck", "too slow": "too slow at this budget", "n/a": "n/a"}


@dataclass(frozen=True)
class ChainState:
    """One chain's diagnosis (see the module docstring).

    ``state`` is ``short``, ``stuck``, ``settled`` or ``climbing``; ``z`` the trend of its
    last half in standard errors (NaN when short or stuck); ``slope`` nats per second over the last
    half (least squares on sampler time; NaN when short); ``plateau`` the median log joint over
    the last half; ``settle_s`` the sampler time after which it stays in its final band (NaN
    unless settled); ``steps`` the number of steps.
    """

    state: str
    z: float
    slope: float
    plateau: float
    settle_s: float
    steps: int


def chain_state(log_joint, time_s) -> ChainState:
    """Whether one chain settled, is stuck or still climbing (see the module docstring).

    Parameters
    ----------
    log_joint : array_like of float
        The log joint of the chain's steps, in order (without the initial state).
    time_s : array_like of float
        Cumulative sampler seconds at each step (same length).

    Returns
    -------
    ChainState

    Raises
    ------
    ValueError
        When the two differ in length or ``log_joint`` holds a NaN or an infinity.

    Examples
    --------
    >>> import numpy as np
    >>> from dpmmbench.reports.diagnosis import chain_state
    >>> t = np.arange(1.0, 101.0)
    >>> chain_state(np.full(100, -5.0), t).state
    'stuck'
    >>> chain_state(-1000.0 + 2.0 * t, t).state
    'climbing'
    """
    y = np.asarray(log_joint, dtype=float)
    t = np.asarray(time_s, dtype=float)
    if y.shape != t.shape or y.ndim != 1:
        raise ValueError(f"log joint and times must be 1-D and of one length, got {y.shape} and {t.shape}")
    if not np.isfinite(y).all():
        raise ValueError("a chain's log joint must be finite at every step to be diagnosed")
    steps = len(y)
    if steps < MIN_ITERATIONS:
        return ChainState("short", math.nan, math.nan, math.nan, math.nan, steps)
    start = steps // 2  # the last half, the middle step included when the count is odd
    last, when = y[start:], t[start:]
    plateau = float(np.median(last))
    slope = _slope(when, last)
    if not np.ptp(last):
        return ChainState("stuck", math.nan, slope, plateau, math.nan, steps)
    z = _trend_z(last)
    if not z <= TREND_Z:
        return ChainState("climbing", z, slope, plateau, math.nan, steps)
    low, high = last.min(), last.max()
    outside = np.flatnonzero((y < low) | (y > high))
    # the first step after the last one outside the final band (none outside: the first step)
    settle = float(t[outside[-1] + 1]) if len(outside) else float(t[0])
    return ChainState("settled", z, slope, plateau, settle, steps)


def _slope(t, y) -> float:
    """Least-squares slope of ``y`` on ``t`` (NaN when ``t`` does not vary)."""
    dt = t - t.mean()
    denominator = float(dt @ dt)
    return float(dt @ (y - y.mean()) / denominator) if denominator > 0 else math.nan


def _trend_z(values: np.ndarray) -> float:
    """The least-squares slope of ``values`` on the step, in standard errors that allow for
    autocorrelation: the residuals' variance over their effective sample size (arviz-stats'
    ESS of the mean), not over the number of draws."""
    from arviz_stats.base import array_stats

    n = len(values)
    step = np.arange(n) - (n - 1) / 2
    slope = float(step @ (values - values.mean()) / (step @ step))
    residuals = values - values.mean() - slope * step
    if not residuals.any():
        return 0.0 if slope == 0 else math.copysign(math.inf, slope)  # a straight line, no noise
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        ess = float(array_stats.ess(residuals[None, :], method="mean", chain_axis=0, draw_axis=1))
    ess = min(max(ess, 1.0), float(n)) if math.isfinite(ess) else 1.0
    error = math.sqrt(float(residuals @ residuals) / (n - 2) / float(step @ step) * n / ess)
    return slope / error


@dataclass(frozen=True)
class Diagnosis:
    """A method's diagnosis on a data set, from its chains (see the module docstring).

    ``outcome`` is a key of :data:`OUTCOMES`; ``chains`` the chains diagnosed, ``settled``
    and ``stuck`` how many of them settled and stuck; ``iterations`` the median number of
    steps; ``rhat`` R̂ across the settled chains (NaN with fewer than two); ``spread`` the
    range of the settled chains' plateaus (nats); ``vi`` the median VI between the settled
    chains' final partitions (nats; NaN where the partitions are not recorded); ``slope`` the
    median slope of the chains that did not settle (nats per second); ``settle_s`` the median
    time to settle of the settled chains.
    """

    outcome: str
    chains: int
    settled: int
    stuck: int
    iterations: float
    rhat: float
    spread: float
    vi: float
    slope: float
    settle_s: float

    def describe(self) -> str:
        """The outcome in a few words, with the number that goes with it.

        Examples
        --------
        >>> from dpmmbench.reports.diagnosis import Diagnosis
        >>> nan = float("nan")
        >>> Diagnosis("modes", 4, 4, 0, 120, 1.8, 412.0, 0.31, nan, 2.0).describe()
        'settled in different modes (4 of 4 chains; plateaus 412 nats apart, VI 0.31)'
        >>> Diagnosis("too slow", 4, 0, 0, 6, nan, nan, nan, nan, nan).describe()
        'too slow at this budget (6 iterations)'
        >>> Diagnosis("climbing", 4, 1, 0, 80, nan, nan, nan, 35.5, nan).describe()
        'still climbing (+35.5 nats/s; 1 of 4 chains settled)'
        """
        words = OUTCOMES[self.outcome]
        if self.outcome == "too slow":
            return f"{words} ({self.iterations:,.0f} iterations)"
        if self.outcome == "agree":
            return f"{words} ({self.settled} of {self.chains} chains settled; R̂ {self.rhat:.3f})"
        if self.outcome == "modes":
            vi = "" if math.isnan(self.vi) else f", VI {self.vi:.2g}"
            return f"{words} ({self.settled} of {self.chains} chains; plateaus {self.spread:,.0f} nats apart{vi})"
        if self.outcome == "climbing":
            slope = "" if math.isnan(self.slope) else f"{self.slope:+,.3g} nats/s; "
            return f"{words} ({slope}{self.settled} of {self.chains} chains settled)"
        if self.outcome == "stuck":
            return f"{words} ({self.stuck} of {self.chains} chains did not move)"
        return words

    @property
    def is_settled(self) -> bool:
        """The method settled: its chains agree, sit in different modes, or its one chain settled."""
        return self.outcome in SETTLED


def diagnose(chains, kind: str = "sampler", partitions=None) -> Diagnosis:
    """A method's diagnosis from its chains (see the module docstring).

    Parameters
    ----------
    chains : sequence of (log_joint, time_s)
        Per chain, the log joint and cumulative sampler seconds of its steps (no initial state).
    kind : str
        The method's :attr:`algorithms.base.Sampler.kind`; an optimiser or variational method
        is ``n/a``.
    partitions : sequence of (array of int or None), optional
        Per chain, its final partition (labels), for the VI between modes.

    Returns
    -------
    Diagnosis
    """
    nan = math.nan
    counts = [len(np.asarray(lj)) for lj, _ in chains]
    iterations = float(np.median(counts)) if counts else 0.0
    if kind in NOT_SAMPLERS:
        return Diagnosis("n/a", len(counts), 0, 0, iterations, nan, nan, nan, nan, nan)
    if not counts or iterations < MIN_ITERATIONS:
        return Diagnosis("too slow", len(counts), 0, 0, iterations, nan, nan, nan, nan, nan)
    states = [chain_state(lj, t) for lj, t in chains]
    settled = [i for i, s in enumerate(states) if s.state == "settled"]
    stuck = sum(s.state == "stuck" for s in states)
    moving = [s.slope for s in states if s.state != "settled" and math.isfinite(s.slope)]
    slope = float(np.median(moving)) if moving else nan
    if len(settled) < math.ceil(SETTLED_SHARE * len(states)):
        outcome = "stuck" if 2 * stuck >= len(states) else "climbing"
        return Diagnosis(outcome, len(states), len(settled), stuck, iterations, nan, nan, nan, slope, nan)
    settle_s = float(np.median([states[i].settle_s for i in settled]))
    if len(settled) == 1:
        return Diagnosis("settled", len(states), 1, stuck, iterations, nan, 0.0, nan, slope, settle_s)
    plateaus = [states[i].plateau for i in settled]
    rhat = _across(np.asarray(chains[i][0], dtype=float) for i in settled)
    vi = _modes_vi([partitions[i] for i in settled] if partitions is not None else [])
    outcome = "agree" if rhat <= RHAT_THRESHOLD else "modes"
    return Diagnosis(outcome, len(states), len(settled), stuck, iterations, rhat,
                     float(max(plateaus) - min(plateaus)), vi, slope, settle_s)


def _across(logs) -> float:
    """R̂ across chains of their last halves, cut to the shortest (rank-normalised split R̂)."""
    from arviz_stats.base import array_stats

    halves = [y[len(y) // 2:] for y in logs]
    size = min(len(h) for h in halves)
    values = np.array([h[len(h) - size:] for h in halves])
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        rhat = float(array_stats.rhat(values, method="rank", chain_axis=0, draw_axis=1))
    return math.inf if math.isnan(rhat) else rhat  # settled chains flat at different levels disagree


def _modes_vi(partitions) -> float:
    """Median VI (nats) over pairs of the final partitions given (NaN with fewer than two)."""
    from .metrics import vi

    known = [p for p in partitions if p is not None]
    pairs = [vi(a, b) for a, b in combinations(known, 2) if len(a) == len(b)]
    return float(np.median(pairs)) if pairs else math.nan
