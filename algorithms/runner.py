"""The one chain runner: ``init``, then ``step`` until a stop rule holds, timing only the sampler.

Every chain of the suite runs through :func:`run_sampler`: the run driver's scored traces
(``workflows.driver``), the estimator (:class:`~dpmmbench.algorithms.estimator.DPMM`), the
side-by-side benchmark (``benchmarks.peers``) and the reproduction scripts. So there is one
timing rule: the clock runs around ``init`` and each ``step`` and nowhere else; what a caller
does with each state (score it, keep it, show progress) happens in a callback, off the clock.

A chain stops by its :class:`StopRule`, checked after ``init`` and after every step, in this
order, at the first of:

1. ``"target"``: the predicate ``target(state)`` holds (e.g. NMI >= 0.99 with K = 4);
2. ``"completed"``: ``iterations`` steps have run;
3. ``"time budget"``: the sampler time used so far (``init`` and steps) exceeds
   ``time_budget`` seconds. A step is never interrupted: the one that passes the budget is
   the last.

:func:`warm_up` compiles a sampler's kernels off the clock before a timed chain.

Example
-------
>>> import numpy as np
>>> from dpmmbench import algorithms
>>> from dpmmbench.algorithms.families import NormalKnownCovariance
>>> from dpmmbench.algorithms.runner import run_sampler
>>> X = np.array([[-2.0], [-1.8], [2.1], [2.3]])
>>> s = algorithms.make("gibbs", family=NormalKnownCovariance(0.5, [0.0], 3.0), seed=0)
>>> seen = []
>>> result = run_sampler(s, X, iterations=5, callback=lambda it, state, seconds: seen.append(it))
>>> seen, result.iterations, result.stopped
([0, 1, 2, 3, 4, 5], 5, 'completed')
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from copy import deepcopy
from dataclasses import dataclass, field

from .constraints import RUN_DEFAULTS, check_parameter
from .state import State

#: why a chain stopped (:attr:`ChainResult.stopped`), in the order the rules are checked
STOP_REASONS = ("target", "completed", "time budget")


@dataclass(frozen=True)
class StopRule:
    """When a chain stops (see the module docstring): a value, checked once, when it is built.

    Parameters
    ----------
    iterations : int, optional
        Stop after this many steps (>= 0); None: no limit on the number of steps.
    seconds : float, optional
        Stop before the next step once the sampler time exceeds this many seconds (> 0);
        None: no time limit. A run's ``time_budget``.
    target : callable, optional
        ``target(state) -> bool``; stop at the first state for which it is true. A function,
        so not part of :meth:`to_dict` (a rule with a target does not travel as JSON).

    Raises
    ------
    TypeError, ValueError
        A value outside its constraint (:data:`algorithms.constraints.RUN_PARAMETERS`'s
        ``iterations`` and ``time_budget``; the message names it), a target that is not callable.

    Examples
    --------
    >>> from dpmmbench.algorithms.runner import StopRule
    >>> rule = StopRule(iterations=50, seconds=5)
    >>> rule.to_dict(), rule.describe()
    ({'iterations': 50, 'seconds': 5.0}, '5 s or 50 iterations')
    >>> StopRule.from_dict(rule.to_dict()) == rule
    True
    >>> StopRule.from_meta({"spec": {"stop": rule.to_dict()}}) == rule
    True
    >>> StopRule.from_meta({"time_budget": 5, "iterations_requested": 50}) == rule  # an older trace's
    True
    """

    iterations: int | None = None
    seconds: float | None = None
    # a function: compared by identity would make two equal rules differ, so it is left out
    target: Callable | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.iterations is not None:
            object.__setattr__(self, "iterations", check_parameter("iterations", self.iterations))
        seconds = check_parameter("time_budget", self.seconds)
        object.__setattr__(self, "seconds", None if seconds is None else float(seconds))
        if self.target is not None and not callable(self.target):
            raise TypeError(f"target must be callable or None, got {self.target!r}")

    @property
    def bounded(self) -> bool:
        """Whether the rule can stop a chain at all (a chain needs one)."""
        return self.iterations is not None or self.seconds is not None or self.target is not None

    def to_dict(self) -> dict:
        """``{"iterations": ..., "seconds": ...}``, as JSON holds it; TypeError with a target."""
        if self.target is not None:
            raise TypeError("a stop rule with a target function cannot be written as JSON")
        return {"iterations": self.iterations, "seconds": self.seconds}

    @classmethod
    def from_dict(cls, data: Mapping) -> StopRule:
        """The rule :meth:`to_dict` wrote (checked again as it is built).

        Parameters
        ----------
        data : mapping
            ``iterations`` and ``seconds``, each optional.

        Returns
        -------
        StopRule
        """
        unknown = set(data) - {"iterations", "seconds"}
        if unknown:
            raise ValueError(f"a stop rule has iterations and seconds, got {sorted(unknown)}")
        return cls(iterations=data.get("iterations"), seconds=data.get("seconds"))

    @classmethod
    def from_meta(cls, meta: Mapping) -> StopRule:
        """The rule a run's trace metadata records: its run spec's ``stop``
        (:meth:`workflows.driver.RunSpec.to_dict`), or in a trace written before the metadata
        held the spec, ``iterations_requested`` and ``time_budget``; empty where it says none.

        Parameters
        ----------
        meta : mapping
            A trace's metadata (:func:`reports.traces.read_trace`).

        Returns
        -------
        StopRule
        """
        spec = meta.get("spec")
        stop = spec.get("stop") if isinstance(spec, Mapping) else None
        if isinstance(stop, Mapping):
            return cls.from_dict(stop)
        iterations, seconds = meta.get("iterations_requested"), meta.get("time_budget")
        return cls(iterations=None if iterations is None else int(iterations),
                   seconds=None if seconds is None else float(seconds))

    def describe(self) -> str:
        """The rule in words.

        Examples
        --------
        >>> from dpmmbench.algorithms.runner import StopRule
        >>> StopRule(seconds=5.0, iterations=1200).describe(), StopRule(200).describe()
        ('5 s or 1,200 iterations', '200 iterations')
        >>> StopRule().describe()
        'not recorded'
        """
        said = ([f"{self.seconds:g} s"] if self.seconds is not None else []) + (
            [f"{self.iterations:,} iterations"] if self.iterations is not None else [])
        return " or ".join(said) or "not recorded"


@dataclass(frozen=True)
class ChainResult:
    """What :func:`run_sampler` returns.

    Attributes
    ----------
    state : algorithms.State
        The final state of the chain.
    iterations : int
        Number of ``step`` calls made.
    sampler_s : float
        Sampler seconds by the runner's clock: ``init`` (when the runner called it) and every
        step; never the callback, the target or the warm-up.
    init_s : float
        The part of ``sampler_s`` spent in ``init`` (0 when the chain continued a given state).
    stopped : str
        Why the chain stopped, one of :data:`STOP_REASONS`.
    """

    state: State
    iterations: int
    sampler_s: float
    init_s: float
    stopped: str


def run_sampler(sampler, X=None, *, iterations=None, time_budget=RUN_DEFAULTS["time_budget"], target=None,
                callback=None, init_clusters=RUN_DEFAULTS["init_clusters"], labels=None, start=None,
                clock=time.perf_counter, stop=None) -> ChainResult:
    """Run one chain of ``sampler`` until a stop rule holds (see the module docstring).

    Parameters
    ----------
    sampler : algorithms.Sampler
        A sampler from :func:`algorithms.make` (anything with ``init`` and ``step``).
    X : array_like or scipy.sparse.csr_matrix, optional
        The data; the chain starts with ``sampler.init(X, ...)``, which is timed.
    iterations : int, optional
        Stop after this many steps (>= 0); None: no limit on the number of steps.
    time_budget : float, optional
        Stop before the next step once the sampler time exceeds this many seconds (> 0).
    target : callable, optional
        ``target(state) -> bool``; the chain stops at the first state for which it is true.
        Called after ``callback`` for the same state, off the clock.
    callback : callable, optional
        ``callback(iteration, state, sampler_s)`` for every state: after ``init`` (iteration
        0) and after each step, with the sampler seconds used so far; off the clock. A
        sampler may update its state's arrays in place: copy what must outlive the call.
    init_clusters : int
        Initial clusters, passed to (and checked by) ``sampler.init``.
    labels : array_like of int, optional
        Initial partition, passed to ``sampler.init`` (overrides ``init_clusters``).
    start : algorithms.State, optional
        Continue this state instead of calling ``init`` (give ``X`` or ``start``, not both);
        its ``init`` is then not part of the sampler time.
    clock : callable
        Seconds as a float (default ``time.perf_counter``, wall time; ``time.process_time``
        measures the CPU time of this process).
    stop : StopRule, optional
        The stop rule as one value, checked when it was built (a run's, see
        :class:`workflows.driver.RunSpec`); instead of ``iterations``, ``time_budget`` and
        ``target``, which then build one.

    Returns
    -------
    ChainResult

    Raises
    ------
    TypeError, ValueError
        A bad ``iterations`` or ``time_budget`` (checked against
        :data:`algorithms.constraints.RUN_PARAMETERS`, the message names it), no stop rule at
        all, a ``target``, ``callback`` or ``clock`` that is not callable, both or neither of
        ``X`` and ``start``; before the sampler is called. Bad data or a bad initial partition
        raise from ``sampler.init``.
    """
    if stop is None:
        stop = StopRule(iterations=iterations, seconds=time_budget, target=target)
    elif not isinstance(stop, StopRule):
        raise TypeError(f"stop must be a StopRule or None, got {stop!r}")
    elif (iterations, time_budget, target) != (None, None, None):
        raise TypeError("give the stop rule as stop or as iterations, time_budget and target, not both")
    for what, function in (("callback", callback), ("clock", clock)):
        if function is not None and not callable(function):
            raise TypeError(f"{what} must be callable or None, got {function!r}")
    if clock is None:
        raise TypeError("clock must be callable, got None")
    if not stop.bounded:
        raise ValueError("a chain needs a stop rule: iterations, time_budget or target (all were None)")
    iterations, time_budget, target = stop.iterations, stop.seconds, stop.target
    if (X is None) == (start is None):
        raise TypeError("give X (the chain starts with init) or start (a state to continue), not both or neither")
    if start is not None and labels is not None:
        raise TypeError("labels start a chain with init; a chain that continues start takes none")

    if start is None:
        began = clock()
        state = sampler.init(X, init_clusters=init_clusters, labels=labels)
        init_s = clock() - began
    else:
        state, init_s = start, 0.0
    used, iteration = init_s, 0
    while True:
        if callback is not None:
            callback(iteration, state, used)
        if target is not None and target(state):
            stopped = "target"
            break
        if iterations is not None and iteration >= iterations:
            stopped = "completed"
            break
        if time_budget is not None and used > time_budget:
            stopped = "time budget"
            break
        began = clock()
        state = sampler.step(state)
        used += clock() - began
        iteration += 1
    return ChainResult(state=state, iterations=iteration, sampler_s=used, init_s=init_s, stopped=stopped)


#: points of :func:`warm_up`'s second head for a :attr:`~.base.Sampler.threaded` sampler: enough
#: rows for the parallel variants of its kernels (from ``_numerics.PARALLEL_MIN_WORK`` = 32,768
#: rows x components), which the first head's 200 points never reach. Without it their
#: compilation landed in the first timed step: on a cold cache, Chang & Fisher's 100k set, subc's
#: first step took 4.7 s and fsd's 4.9 s after the 200-point warm-up (8 and 26 ms after)
THREADED_WARMUP_POINTS = 40_000


def warm_up(sampler, X, init_clusters=RUN_DEFAULTS["init_clusters"], n_points=200, steps=2) -> float | None:
    """Run a copy of ``sampler`` for a few steps on the first ``n_points`` points, and a
    threaded sampler (:attr:`~.base.Sampler.threaded`) also on the first
    :data:`THREADED_WARMUP_POINTS`.

    The first call of a numba kernel compiles it (or loads it from the cache), which can
    cost more than hundreds of real iterations; without a warm-up that cost would land in
    the first step's time and distort every time-based comparison. Best effort: if the
    warm-up fails, the timed run meets (and reports) the same problem itself.

    Parameters
    ----------
    sampler : algorithms.Sampler
        Left untouched (a deep copy runs).
    X : array_like or scipy.sparse.csr_matrix
        Validated data; only its first rows are used.
    init_clusters : int
        Initial clusters (capped at the number of points used).
    n_points, steps : int
        Size of the warm-up.

    Returns
    -------
    float or None
        Seconds spent, or None if the warm-up failed.
    """
    start = time.perf_counter()
    try:
        N = sampler.family.n_points(X)
        heads = [min(n_points, N)]
        if sampler.threaded and N > n_points:
            heads.append(min(THREADED_WARMUP_POINTS, N))
        for n in heads:
            copy = deepcopy(sampler)
            run_sampler(copy, X[:n], iterations=steps, init_clusters=min(init_clusters, n))
    except Exception:  # noqa: BLE001 - best effort, see the docstring
        return None
    return time.perf_counter() - start
