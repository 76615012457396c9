"""A*/beam search for the MAP partition of a DP mixture (Daumé 2007; docs/algorithms.md §7), registry name
``search``.

The data are put in a fixed order; a search state assigns the first i points, and its
children put point i + 1 into one of its K clusters or a new one. States are ranked by
``f = data + log p_max + h`` (log probabilities, higher is better): ``data`` is the log
marginal likelihood of the assigned points (grown by one predictive per child), ``p_max``
the largest prior probability of any completion and ``h`` a heuristic for the points still
to come. The first complete partition popped is returned. With an admissible ``h`` and an
unbounded queue this is A* and the result is the exact MAP; a finite beam or the
inadmissible heuristic trade that guarantee for speed.

It is an optimiser, not a sampler (``exact = False``): ``step`` runs the whole search (later
steps return the same state), and the result can initialise any sampler::

    s = algorithms.make("search", family=fam, alpha=1.0, beam=100)
    start = s.step(s.init(X)).labels
    gibbs = algorithms.make("gibbs", family=fam, alpha=1.0)
    state = gibbs.init(X, labels=start)

Priors (``prior``): the DP's EPPF (default; its ``p_max`` has a closed form, docs/algorithms.md §7.2) or
the Ewens sampling formula that Daumé's reference code scores partitions with. For the ESF
the reference computes ``p_max`` greedily, which is not an upper bound (below the true
completion maximum in 240 of 2,310 small configurations checked, by up to 0.58 nats), so A*
could return a non-MAP partition; here it is the exact maximum (a dynamic programme over final
cluster sizes) up to :data:`ESF_EXACT_MAX_N` points and an O(N) upper bound beyond. Both are
upper bounds, so A* stays exact; only the bound's tightness, not the objective, differs from
the reference.

The compiled loop and the data structures are described in :mod:`algorithms._search_kernels`.
"""
from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from . import _dispatch as dispatch
from . import _search_kernels as sk
from .base import Sampler
from .collapsed import prior_predictive
from .concentration import posterior_mode
from .constraints import RUN_DEFAULTS, Interval, OneOf, Option, check_parameter
from .partitions import canonical, cluster_sizes, compact, log_crp_prior
from .state import State

HEURISTICS = ("trivial", "admissible", "inadmissible")
ORDERS = ("given", "random", "increasing", "decreasing")
PRIORS = ("eppf", "esf")

#: up to this many points the ESF completion maximum is computed exactly (O(K N^2 log N) per
#: child); beyond, an O(N) upper bound is used. Both are upper bounds, so A* stays exact.
ESF_EXACT_MAX_N = 24
#: the ESF new-cluster table is exact up to this many points (O(T^2 log T) once)
ESF_TABLE_LIMIT = 4096


def log_esf_prior(labels, alpha: float) -> float:
    """log of the Ewens sampling formula (Antoniak 1974) of the partition's size counts.

    ``log N! - log alpha^(N) + sum_s [m_s log(alpha / s) - log m_s!]``, where ``m_s`` is the
    number of clusters of size s: the prior of Daumé's reference search code (docs/algorithms.md §0.2, §7.2).
    It equals the EPPF times the number of partitions with the same size counts.

    Parameters
    ----------
    labels : array_like of int
        Cluster of every point.
    alpha : float
        DP concentration.
    """
    sizes = cluster_sizes(labels)
    multiplicities = np.bincount(sizes)
    N = int(sizes.sum())
    return float(log_crp_prior(labels, alpha) + gammaln(N + 1) - gammaln(sizes + 1).sum()
                 - gammaln(multiplicities + 1).sum())


def log_prior(labels, alpha: float, prior: str = "eppf") -> float:
    """Log prior of a partition under ``prior`` ("eppf": the DP's CRP; "esf": Ewens)."""
    if prior == "eppf":
        return log_crp_prior(labels, alpha)
    if prior == "esf":
        return log_esf_prior(labels, alpha)
    raise ValueError(f"prior must be one of {list(PRIORS)}, got {prior!r}")


def log_posterior_score(X, labels, family, alpha: float, prior: str = "eppf") -> float:
    """The search objective: log prior (``prior``) + sum over clusters of log m(x_C).

    With ``prior="eppf"`` this is :func:`reports.metrics.log_joint`.
    """
    z, K = compact(labels)
    return log_prior(z, alpha, prior) + float(family.log_marginal_stats(family.stats(X, z, K)).sum())


@dataclass
class SearchResult:
    """Outcome of :func:`map_search`."""

    labels: np.ndarray  #: (N,) partition in the original data order (canonical labels)
    score: float  #: its objective: log prior (the chosen one) + sum of cluster log marginals
    order: np.ndarray  #: the order in which points were assigned
    states_generated: int  #: children scored
    predictive_evals: int  #: predictive densities computed (the rest came from the memo)
    states_pushed: int  #: children that entered the queue
    states_popped: int  #: states taken off the queue (root included)
    queue_max: int  #: high-water mark of the queue
    search_time: float  #: CPU seconds (process time) of the whole search

    def info(self) -> dict:
        return {"states_generated": self.states_generated, "predictive_evals": self.predictive_evals,
                "states_pushed": self.states_pushed,
                "states_popped": self.states_popped, "queue_max": self.queue_max,
                "search_time": self.search_time, "search_score": self.score,
                "n_clusters": int(self.labels.max()) + 1}


def search_order(lpp: np.ndarray, order: str, rng: np.random.Generator | None = None) -> np.ndarray:
    """Order in which the points are assigned (docs/algorithms.md §7.5).

    Parameters
    ----------
    lpp : (N,) array
        Singleton log marginals L({n}) of the points.
    order : str
        "given" (data order), "random" (a permutation drawn from ``rng``), "increasing" or
        "decreasing" L({n}) (ties kept in data order).
    rng : numpy.random.Generator
        Required for "random".
    """
    N = len(lpp)
    if order == "given":
        return np.arange(N)
    if order == "random":
        if rng is None:
            raise ValueError("order='random' needs a random generator")
        return rng.permutation(N)
    if order == "increasing":
        return np.argsort(lpp, kind="stable")
    if order == "decreasing":
        return np.argsort(-lpp, kind="stable")
    raise ValueError(f"order must be one of {list(ORDERS)}, got {order!r}")


def map_search(X, family, alpha: float = RUN_DEFAULTS["alpha"], heuristic: str = "inadmissible", beam: int = 100,
               order: str = "increasing", prior: str = "eppf", rng: np.random.Generator | None = None) -> SearchResult:
    """Best-first / beam search for the MAP partition (Daumé 2007).

    Parameters
    ----------
    X : array_like or scipy.sparse.csr_matrix
        Data, as ``family`` expects them (validated here).
    family : algorithms.families.Family
        Conjugate family.
    alpha : float
        DP concentration.
    heuristic : {"trivial", "admissible", "inadmissible"}
        Estimate of the log marginal of the points not yet assigned (docs/algorithms.md §7.3): 0; the sum
        over them of their greedy best predictive under any cluster (an upper bound, up to the
        greedy inner maximisation; O(N^2 K) predictives per state); the sum of their
        singleton log marginals (cheap, usually pessimistic).
    beam : int
        Queue size B; 0 = unbounded (A* with an admissible heuristic: exact, but the number of
        states can grow exponentially with N, so only for small problems). B = 1 is greedy.
    order : {"given", "random", "increasing", "decreasing"}
        Data order (docs/algorithms.md §7.5); the reference default is "increasing".
    prior : {"eppf", "esf"}
        Partition prior: the DP's EPPF (the true posterior, closed-form p_max) or the Ewens
        sampling formula of the reference code.
    rng : numpy.random.Generator, optional
        For ``order="random"``.

    Returns
    -------
    SearchResult
    """
    _check_arguments(alpha, heuristic, beam, order, prior)
    start = time.process_time()
    X = family.validate(X)
    N = family.n_points(X)
    lpp_data = prior_predictive(family, X)
    perm = search_order(lpp_data, order, rng)
    Xo = X[perm]
    if N == 1:
        labels = np.zeros(1, dtype=np.int64)
        score = log_posterior_score(X, labels, family, alpha, prior)
        return SearchResult(labels, score, perm, 0, 0, 0, 1, 0, time.process_time() - start)
    ws = _Workspace(family, Xo, lpp_data[perm], alpha, beam, heuristic, prior)
    status = ws.resume()
    while status != sk.DONE:
        ws.grow(status)
        status = ws.resume()
    labels = np.empty(N, dtype=np.int64)
    labels[perm] = ws.goal_labels()
    c = ws.counters
    return SearchResult(canonical(labels), float(ws.goal[0]), perm, int(c[sk.C_GENERATED]), int(c[sk.C_PREDICTIVES]),
                        int(c[sk.C_PUSHED]),
                        int(c[sk.C_POPPED]), int(c[sk.C_QMAX]), time.process_time() - start)


def _check_arguments(alpha, heuristic, beam, order, prior):
    check_parameter("alpha", alpha)
    for name, value, allowed in (("heuristic", heuristic, HEURISTICS), ("order", order, ORDERS),
                                 ("prior", prior, PRIORS)):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")
    if isinstance(beam, bool) or not isinstance(beam, numbers.Integral) or beam < 0:
        raise ValueError(f"beam must be an integer >= 0 (0 = unbounded), got {beam!r}")


class _Workspace:
    """The arrays the compiled loop works in, and their growth (by doubling)."""

    #: initial capacities (pool slots, live states, clusters per state, queue entries for an
    #: unbounded beam, path nodes); everything grows on demand, so these only save reallocations
    INITIAL = {"slots": 64, "states": 64, "clusters": 8, "entries": 256, "nodes": 64}

    def __init__(self, family, Xo, lpp, alpha, beam, heuristic, prior):
        N = len(lpp)
        self.N = N
        self.data = family.kernel_data(Xo)
        self.hyper = family.kernel_hyper()
        self.run = sk.search_loop(dispatch.fingerprint(family.kernels))
        log_alpha = math.log(alpha)
        lgam = np.full(N + 2, np.inf)
        lgam[1:] = gammaln(np.arange(1, N + 2))
        if prior == "eppf":
            const = float(gammaln(alpha) - gammaln(alpha + N))
        else:  # log N! - log alpha^(N): the Ewens formula's normalisation, so scores are exact
            const = float(gammaln(N + 1) + gammaln(alpha) - gammaln(alpha + N))
        esf_exact = prior == "esf" and N <= ESF_EXACT_MAX_N
        if prior == "esf" and not esf_exact:
            G = sk.esf_new_clusters_table(N, log_alpha, lgam, min(N, ESF_TABLE_LIMIT))
        else:
            G = np.zeros(2)
        suffix = np.zeros(N + 1)
        suffix[:N] = np.cumsum(lpp[::-1])[::-1]
        self.consts = (np.ascontiguousarray(lpp, dtype=np.float64), suffix, lgam, G)
        self.ints = (N, int(beam), HEURISTICS.index(heuristic), PRIORS.index(prior), int(esf_exact))
        self.floats = (log_alpha, const)

        # the pool: a family table in which all points sit in slot 0 and slot 1 is empty; it is
        # enlarged to the working capacity and slot 0 reset by copying slot 1 over it
        self.per_slot = _per_slot_arrays(family, Xo)
        table = family.kernel_table(Xo, np.zeros(N, dtype=np.int64), sk.FIRST_FREE_SLOT + 1)
        self.other_dims = {a.shape[0] for a, s in zip(table, self.per_slot) if not s}
        cap = self._capacity(self.INITIAL["slots"])
        table = tuple(_enlarge(a, cap) if s else a for a, s in zip(table, self.per_slot))
        sk.copy_slot(table, 1, sk.TEMPLATE)
        dispatch.register(family.kernels, table, self.hyper, self.data)
        self.table = table
        self.refcount = np.zeros(cap, dtype=np.int64)
        self.free_slots = np.zeros(cap, dtype=np.int64)
        self.free_slots[:cap - sk.FIRST_FREE_SLOT] = np.arange(cap - 1, sk.FIRST_FREE_SLOT - 1, -1)
        self.memo_point = np.full((cap, sk.MEMO_WAYS), -1, dtype=np.int64)
        self.memo_value = np.zeros((cap, sk.MEMO_WAYS))

        kcap = self.INITIAL["clusters"]
        M = self.INITIAL["states"]
        self.s_int = np.zeros((M, 5), dtype=np.int64)
        self.s_float = np.zeros((M, 2))
        self.s_slots = np.zeros((M, kcap), dtype=np.int64)
        self.free_states = np.arange(M - 1, -1, -1, dtype=np.int64)
        Q = beam if beam > 0 else self.INITIAL["entries"]
        self.heap = np.zeros(Q, dtype=np.int64)
        self.e_int = np.zeros((Q, 3), dtype=np.int64)
        self.e_float = np.zeros((Q, 2))
        self.free_entries = np.arange(Q - 1, -1, -1, dtype=np.int64)
        self.node_parent = np.zeros(max(2 * N, self.INITIAL["nodes"]), dtype=np.int64)
        self.node_choice = np.zeros_like(self.node_parent)

        admissible = heuristic == "admissible"
        nd = N + 1 if esf_exact else 1
        self.scratch_fixed = (np.zeros(N + 2, dtype=np.int64), np.zeros(N + 2, dtype=np.int64),
                              np.empty((nd, nd)), np.empty((nd, nd)),
                              np.empty((N + 1, N) if admissible else (1, 1)),
                              np.zeros(N + 1 if admissible else 1, dtype=np.bool_),
                              np.empty(N), np.empty(N, dtype=np.int64), np.empty(N))
        self.hchild = np.empty(kcap + 1)

        self.counters = np.zeros(sk.N_COUNTERS, dtype=np.int64)
        self.counters[sk.C_FREE_SLOTS] = cap - sk.FIRST_FREE_SLOT
        self.counters[sk.C_FREE_STATES] = M
        self.counters[sk.C_FREE_ENTRIES] = Q
        self.goal = np.zeros(1)

    def _capacity(self, want):
        """A slot capacity >= ``want`` that no non-slot array of the table has as its
        leading dimension (the compiled slot copy recognises slot arrays by that)."""
        cap = max(want, sk.FIRST_FREE_SLOT + 1)
        while cap in self.other_dims:
            cap += 1
        return cap

    def resume(self):
        pool = (self.refcount, self.free_slots, self.counters, self.memo_point, self.memo_value)
        states = (self.s_int, self.s_float, self.s_slots, self.free_states)
        queue = (self.heap, self.e_int, self.e_float, self.free_entries)
        path = (self.node_parent, self.node_choice)
        scratch = self.scratch_fixed + (self.hchild,)
        return self.run(self.table, self.hyper, self.data, self.ints, self.floats, pool, states, queue,
                        path, self.consts, scratch, self.goal)

    def grow(self, status):
        c = self.counters
        if status == sk.NEED_SLOTS:
            old = self.table[0].shape[0]
            cap = self._capacity(2 * old)
            self.table = tuple(_enlarge(a, cap) if s else a for a, s in zip(self.table, self.per_slot))
            self.refcount = _enlarge(self.refcount, cap, fill=0)
            self.memo_point = _enlarge(self.memo_point, cap, fill=-1)
            self.memo_value = _enlarge(self.memo_value, cap, fill=0.0)
            self.free_slots = _push_ids(self.free_slots, c, sk.C_FREE_SLOTS, old, cap)
        elif status == sk.NEED_STATES:
            old = self.s_int.shape[0]
            self.s_int = _enlarge(self.s_int, 2 * old)
            self.s_float = _enlarge(self.s_float, 2 * old)
            self.s_slots = _enlarge(self.s_slots, 2 * old)
            self.free_states = _push_ids(self.free_states, c, sk.C_FREE_STATES, old, 2 * old)
        elif status == sk.NEED_K:
            kcap = 2 * (int(c[sk.C_MAXK]) + 2)
            slots = np.zeros((self.s_slots.shape[0], kcap), dtype=np.int64)
            slots[:, :self.s_slots.shape[1]] = self.s_slots
            self.s_slots = slots
            self.hchild = np.empty(kcap + 1)
        elif status == sk.NEED_NODES:
            old = self.node_parent.shape[0]
            self.node_parent = _enlarge(self.node_parent, 2 * old)
            self.node_choice = _enlarge(self.node_choice, 2 * old)
        elif status == sk.NEED_ENTRIES:
            old = self.heap.shape[0]
            self.heap = _enlarge(self.heap, 2 * old)
            self.e_int = _enlarge(self.e_int, 2 * old)
            self.e_float = _enlarge(self.e_float, 2 * old)
            self.free_entries = _push_ids(self.free_entries, c, sk.C_FREE_ENTRIES, old, 2 * old)
        else:  # pragma: no cover - the loop only returns the codes above
            raise RuntimeError(f"search loop returned unknown status {status}")

    def goal_labels(self) -> np.ndarray:
        """Labels (in search order) of the goal: walk the path tree back to the root."""
        out = np.empty(self.N, dtype=np.int64)
        out[-1] = self.counters[sk.C_GOAL_CHOICE]
        node = self.counters[sk.C_GOAL_NODE]
        for d in range(self.N - 2, -1, -1):
            out[d] = self.node_choice[node]
            node = self.node_parent[node]
        return out


def _per_slot_arrays(family, X) -> tuple[bool, ...]:
    """Which entries of the family's kernel table are per-slot arrays (their length follows
    the capacity), found by building two tiny tables; cached per family class."""
    cls = type(family)
    if cls not in _PER_SLOT:
        one = np.zeros(1, dtype=np.int64)
        small, large = family.kernel_table(X[:1], one, 4), family.kernel_table(X[:1], one, 5)
        _PER_SLOT[cls] = tuple(a.shape[0] != b.shape[0] for a, b in zip(small, large))
    return _PER_SLOT[cls]


_PER_SLOT: dict = {}


def _enlarge(a, n, fill=None):
    out = np.empty((n,) + a.shape[1:], dtype=a.dtype) if fill is None else np.full((n,) + a.shape[1:], fill, a.dtype)
    out[:a.shape[0]] = a
    return out


def _push_ids(stack, counters, which, old, new):
    """Grow a free-id stack from ``old`` to ``new`` ids and push the new ids on it."""
    out = np.empty(new, dtype=np.int64)
    top = int(counters[which])
    out[:top] = stack[:top]
    out[top:top + new - old] = np.arange(new - 1, old - 1, -1)
    counters[which] = top + new - old
    return out


@dataclass
class SearchState(State):
    done: bool = False  #: the search has run; later steps keep its result
    searched_alpha: float = float("nan")  #: the alpha of the last search


class BeamSearch(Sampler):
    """Daumé (2007) A*/beam search for the MAP partition (registry name ``search``).

    Options
    -------
    heuristic : "trivial", "admissible" or "inadmissible" (default, the paper's choice for MNIST)
    beam : queue size, 0 = unbounded (default 100, the paper's MNIST setting)
    order : "increasing" (default, the reference's), "decreasing", "random" or "given"
    prior : "eppf" (default, the DP prior) or "esf" (the reference code's objective)
    """

    name = "search"
    exact = False
    kind = "optimiser"
    info_columns = {
        "states_generated": "children scored by this step's search (0: no search ran)",
        "predictive_evals": "predictive densities the search computed (the others came from its memo)",
        "states_pushed": "children that entered the search's queue",
        "states_popped": "states taken off the queue (the root included)",
        "queue_max": "the largest size the queue reached",
        "search_time": "process (CPU) seconds of this step's search",
        "search_score": "objective of the partition found: log prior plus the clusters' log marginals",
    }
    options = {
        "heuristic": Option("inadmissible", OneOf(HEURISTICS),
                            "estimate of the remaining points' log marginal (docs/algorithms.md §7.3)"),
        "beam": Option(100, Interval(int, 0), "queue size B (0 = unbounded: A*, practical for small N only)"),
        "order": Option("increasing", OneOf(ORDERS), "data order (docs/algorithms.md §7.5)"),
        "prior": Option("eppf", OneOf(PRIORS), "partition prior: DP EPPF, or the Ewens formula of the reference"),
    }

    def _init(self, X, labels, rng):
        # a start partition is accepted (contract) but the search does not use it
        return SearchState(X, compact(labels)[0], rng)

    def _resample_alpha(self, state):
        """An optimiser learns alpha by coordinate ascent: the mode of ``p(alpha | K, N)`` for
        the last search's partition (the first search runs at the starting alpha), and the
        search is run again while alpha moves."""
        if not state.done:
            return state.alpha
        return posterior_mode(self._n_clusters(state), self.family.n_points(state.X), self.alpha_prior)

    def _step(self, state):
        if state.done and state.alpha == state.searched_alpha:
            state.info = {"states_generated": 0, "predictive_evals": 0, "states_pushed": 0, "states_popped": 0, "queue_max": 0,
                          "search_time": 0.0, "n_clusters": int(state.labels.max()) + 1}
            return state
        p = self.params
        result = map_search(state.X, self.family, state.alpha, heuristic=p["heuristic"], beam=p["beam"],
                            order=p["order"], prior=p["prior"], rng=state.rng)
        state.labels = result.labels
        state.info = result.info()
        state.done, state.searched_alpha = True, state.alpha
        return state
