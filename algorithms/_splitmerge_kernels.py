"""Shared machinery of the conjugate split-merge samplers (SAMS, Jain-Neal; docs/algorithms.md §1, §2).

A split-merge move works on two anchors ``i``, ``j`` and the other points ``S`` of their
cluster(s). :class:`PairSet` holds them (anchors first, then ``S`` in the order the move
processes them) and offers the operations both samplers are built from:

* :meth:`PairSet.allocate` -- Dahl's sequential allocation of ``S`` to the two anchors;
* :meth:`PairSet.scan` -- one restricted Gibbs scan of ``S`` between the two anchors;
* :meth:`PairSet.log_merge_ratio` -- ``log p(merged) - log p(separate)`` (docs/algorithms.md §0.3).

Each runs as one compiled loop over the family's collapsed kernels (generic over families,
like :mod:`algorithms.collapsed`). A loop either *samples* its choices (from given uniforms)
or is *forced* to a given sequence of choices; both return the log probability of the
choices made. The forced mode gives the reverse-move probabilities of merges, and lets the
tests enumerate every outcome of a move and build its exact transition matrix from this very
code.

A "part" is an int64 array over the move's points: 0 = with anchor ``i``, 1 = with anchor
``j`` (so ``part[0] == 0`` and ``part[1] == 1`` always).

The log marginals ``L`` of the two groups are accumulated by the chain rule,
``L(A) = sum_t log p(x_t | x_{A_<t})``, from the same predictives the moves use (for the
allocation they come for free); the union's then costs one pass over the smaller group. No
per-move call into NumPy/SciPy statistics: a move on a handful of points costs microseconds
and a move on a large cluster is a linear pass in compiled code.

:class:`SplitMergeGibbs` is the step both samplers share: Gibbs sweeps, then moves.
"""
from __future__ import annotations

import functools
import math
from abc import abstractmethod
from dataclasses import dataclass, fields
from typing import NamedTuple

import numpy as np
from numba import njit

from . import _dispatch as dispatch
from .numba_cache import kernel
from ._dispatch import k_add, k_logpred, k_remove, k_undo_remove
from ._numerics import mh_accept
from .constraints import Interval, Option
from .gibbs import CollapsedGibbs, GibbsState
from .partitions import compact

#: table slots of a move: the two groups, and a slot that parks every point so the table is
#: sized for the whole data set (NIW tabulates size-dependent constants up to the number of
#: points it was built from)
GROUP_I, GROUP_J, PARK = range(3)


@kernel(inline="always")
def _choose(w0, w1, u, forced):
    """Choose slot 0 or 1 with probabilities proportional to ``exp(w0)``, ``exp(w1)``.

    ``forced`` < 0 samples with the uniform ``u``; otherwise the choice is ``forced``.
    Returns (choice, log probability of the choice).
    """
    m = max(w0, w1)
    lse = m + math.log1p(math.exp(-abs(w0 - w1)))
    lp0 = w0 - lse
    if forced < 0:
        k = 0 if u < math.exp(lp0) else 1
    else:
        k = forced
    return k, (lp0 if k == 0 else w1 - lse)


def move_kernels(kernels):
    """Compiled loops of the split-merge moves for one family's collapsed kernels (register
    the kernels for the argument types first: ``algorithms._dispatch.register``).

    Returns ``(fill, allocate, scan, absorb)``; all take the family's ``data``/``hyper``
    tuples, a kernel ``table`` whose slots ``GROUP_I``, ``GROUP_J`` hold the two groups
    (empty unless stated) and ``idx``, the global ids of the move's points (anchors first).

    ``fill(data, hyper, table, idx, part, marginals) -> (l0, l1)``
        Adds every point to its group's slot. With ``marginals`` it returns the groups' log
        marginals by the chain rule; otherwise (0, 0).
    ``absorb(data, hyper, table, idx, part, l0, l1) -> l_union``
        From a table holding the two groups (with log marginals ``l0``, ``l1``), the log
        marginal of their union by the chain rule, adding the smaller group's points to the
        larger group's slot (the table then no longer holds the groups).
    ``allocate(data, hyper, table, idx, part, uniforms, force) -> (log_q, l0, l1, l_union)``
        Sequential allocation (Dahl 2003): the anchors start the two groups, then each
        later point joins group ``k`` with probability proportional to ``n_k p(x | group
        k)``, drawn with ``uniforms[t]`` (or read from ``part`` if ``force``; the choices
        are written to ``part``). Returns the log probability of the choices and the log
        marginals of the resulting groups and of their union.
    ``scan(data, hyper, table, idx, part, uniforms, target, force) -> log_q``
        One restricted Gibbs scan (Jain & Neal 2004) of the non-anchor points, in order,
        with the groups of ``part`` in the table: each point leaves its group and rejoins
        group ``k`` with probability proportional to ``n_k^- p(x | group k minus x)``
        (drawn, or forced to ``target``). The anchors never move, so neither group
        empties. Updates ``part`` and ``table``; returns the log probability of the choices.
    """
    return _move_kernels(dispatch.fingerprint(kernels))


@njit(inline="always")
def _fill(data, hyper, table, idx, part, marginals):
    l0 = 0.0
    l1 = 0.0
    for t in range(idx.shape[0]):
        x = idx[t]
        k = part[t]
        if marginals:
            lp = k_logpred(table, hyper, data, x, k)
            if k == GROUP_I:
                l0 += lp
            else:
                l1 += lp
        k_add(table, hyper, data, x, k)
    return l0, l1


@njit(inline="always")
def _absorb(data, hyper, table, idx, part, l0, l1):
    # the union's marginal costs one pass over the smaller group only
    small = GROUP_J if table[0][GROUP_J] <= table[0][GROUP_I] else GROUP_I
    big = GROUP_I + GROUP_J - small
    l_union = l0 if big == GROUP_I else l1
    for t in range(idx.shape[0]):
        if part[t] == small:
            l_union += k_logpred(table, hyper, data, idx[t], big)
            k_add(table, hyper, data, idx[t], big)
    return l_union


@functools.cache
def _move_kernels(fingerprint):
    # Each loop tests ``fingerprint`` so that it is captured, which ties the cached binary
    # to the family kernels' source; the loops capture nothing else (a captured jitted
    # function would keep them out of numba's disk cache).
    @kernel
    def fill(data, hyper, table, idx, part, marginals):
        if fingerprint == -1:  # never true
            return -1.0, -1.0
        return _fill(data, hyper, table, idx, part, marginals)

    @kernel
    def absorb(data, hyper, table, idx, part, l0, l1):
        if fingerprint == -1:  # never true
            return -1.0
        return _absorb(data, hyper, table, idx, part, l0, l1)

    @kernel
    def allocate(data, hyper, table, idx, part, uniforms, force):
        if fingerprint == -1:  # never true
            return -1.0, -1.0, -1.0, -1.0
        counts = table[0]
        part[0] = GROUP_I
        part[1] = GROUP_J
        l0, l1 = _fill(data, hyper, table, idx[:2], part[:2], True)
        log_q = 0.0
        for t in range(2, idx.shape[0]):
            x = idx[t]
            p0 = k_logpred(table, hyper, data, x, GROUP_I)
            p1 = k_logpred(table, hyper, data, x, GROUP_J)
            k, lp = _choose(math.log(counts[GROUP_I]) + p0, math.log(counts[GROUP_J]) + p1,
                            uniforms[t], part[t] if force else -1)
            part[t] = k
            log_q += lp
            if k == GROUP_I:
                l0 += p0
            else:
                l1 += p1
            k_add(table, hyper, data, x, k)
        return log_q, l0, l1, _absorb(data, hyper, table, idx, part, l0, l1)

    @kernel
    def scan(data, hyper, table, idx, part, uniforms, target, force):
        if fingerprint == -1:  # never true
            return -1.0
        counts = table[0]
        log_q = 0.0
        for t in range(2, idx.shape[0]):
            x = idx[t]
            old = part[t]
            k_remove(table, hyper, data, x, old)
            w0 = math.log(counts[GROUP_I]) + k_logpred(table, hyper, data, x, GROUP_I)
            w1 = math.log(counts[GROUP_J]) + k_logpred(table, hyper, data, x, GROUP_J)
            k, lp = _choose(w0, w1, uniforms[t], target[t] if force else -1)
            log_q += lp
            if k == old:
                k_undo_remove(table, hyper, data, x, old)
            else:
                k_add(table, hyper, data, x, k)
                part[t] = k
        return log_q

    return fill, allocate, scan, absorb


class MoveContext:
    """What every split-merge move on one data set needs, built once per chain.

    Parameters
    ----------
    family : Family
    X : validated data
    alpha : float
        DP concentration.
    kdata : tuple, optional
        ``family.kernel_data(X)`` if already computed.
    """

    def __init__(self, family, X, alpha: float, kdata=None):
        self.family = family
        self.alpha = float(alpha)
        self.kdata = family.kernel_data(X) if kdata is None else kdata
        self.hyper = family.kernel_hyper()
        N = family.n_points(X)
        # every slot but PARK empty; each move starts from a copy
        self.template = family.kernel_table(X, np.full(N, PARK, dtype=np.int64), PARK + 1)
        dispatch.register(family.kernels, self.template, self.hyper, self.kdata)
        self.fill, self.allocate, self.scan, self.absorb = move_kernels(family.kernels)

    def empty_table(self) -> tuple:
        return tuple(a.copy() for a in self.template)

    def pairset(self, labels, i: int, j: int, rest) -> PairSet:
        return PairSet(self, labels, i, j, rest)


class Proposal(NamedTuple):
    """One evaluated split-merge proposal."""

    split: bool  #: True for a split of one cluster, False for a merge of two
    part: np.ndarray  #: the two groups (proposed split, or the current split for a merge)
    log_q: float  #: log probability of the choices producing ``part`` (split: forward; merge: reverse)
    log_accept: float  #: log Metropolis-Hastings ratio (accept iff log U < log_accept)


class PairSet:
    """The points of one split-merge move: anchors ``i``, ``j``, then ``rest``.

    Parameters
    ----------
    ctx : MoveContext
    labels : (N,) current labels
    i, j : int
        The anchors (distinct).
    rest : (m - 2,) int array
        The other points of the anchors' cluster(s), in the order the move processes them.

    Attributes
    ----------
    split : bool
        Whether ``i`` and ``j`` share a cluster (the move proposes a split).
    members : (m,) int64 global ids ``[i, j, *rest]``.
    current : (m,) int64
        The current grouping: for a merge, the part of the two clusters; for a split, all
        zeros except the anchor ``j`` (not a valid part, never used as one).
    """

    def __init__(self, ctx: MoveContext, labels, i: int, j: int, rest):
        self.ctx = ctx
        self.members = np.concatenate(([i, j], np.asarray(rest, dtype=np.int64))).astype(np.int64)
        self.split = bool(labels[i] == labels[j])
        self.current = (labels[self.members] != labels[i]).astype(np.int64)
        self.current[1] = GROUP_J

    def __len__(self):
        return len(self.members)

    def _uniforms(self, uniforms):
        return np.zeros(len(self)) if uniforms is None else np.ascontiguousarray(uniforms, dtype=np.float64)

    def _log_rho(self, part, l0: float, l1: float, l_union: float) -> float:
        """``log rho`` of docs/algorithms.md §0.3 from the groups' sizes and log marginals."""
        n1 = int(np.count_nonzero(part))
        n0 = len(part) - n1
        return (-math.log(self.ctx.alpha) + math.lgamma(n0 + n1) - math.lgamma(n0) - math.lgamma(n1)
                + l_union - l0 - l1)

    def allocate(self, uniforms=None, target=None) -> tuple[np.ndarray, float, float]:
        """Sequentially allocate ``rest`` to the anchors, starting from ``{i}`` and ``{j}``.

        Draws each choice with ``uniforms[t]`` (indexed like ``members``), or, if
        ``target`` (a part) is given, follows it. Returns (part, log probability of the
        choices, :meth:`log_merge_ratio` of the part).
        """
        ctx = self.ctx
        part = np.zeros(len(self), dtype=np.int64) if target is None else np.array(target, dtype=np.int64)
        log_q, l0, l1, l_union = ctx.allocate(ctx.kdata, ctx.hyper, ctx.empty_table(), self.members, part,
                                              self._uniforms(uniforms), target is not None)
        return part, float(log_q), self._log_rho(part, l0, l1, l_union)

    def table(self, part) -> tuple:
        """Kernel table holding the groups of ``part`` (for :meth:`scan`)."""
        ctx = self.ctx
        table = ctx.empty_table()
        ctx.fill(ctx.kdata, ctx.hyper, table, self.members, np.ascontiguousarray(part, dtype=np.int64), False)
        return table

    def scan(self, table, part, uniforms=None, target=None) -> float:
        """One restricted Gibbs scan of ``rest`` in order, from ``part`` (with its ``table``).

        Draws with ``uniforms`` or, if ``target`` is given, forces the choices to it.
        ``part`` and ``table`` are updated in place; returns the log probability.
        """
        ctx = self.ctx
        forced = target is not None
        target = part if target is None else np.ascontiguousarray(target, dtype=np.int64)
        return float(ctx.scan(ctx.kdata, ctx.hyper, table, self.members, part, self._uniforms(uniforms),
                              target, forced))

    def log_merge_ratio(self, part) -> float:
        """``log rho`` of docs/algorithms.md §0.3, log p(groups merged) - log p(groups separate):
        ``-log alpha + lgamma(n0 + n1) - lgamma(n0) - lgamma(n1) + L(0 u 1) - L(0) - L(1)``."""
        ctx = self.ctx
        part = np.ascontiguousarray(part, dtype=np.int64)
        table = ctx.empty_table()
        l0, l1 = ctx.fill(ctx.kdata, ctx.hyper, table, self.members, part, True)
        return self._log_rho(part, l0, l1, ctx.absorb(ctx.kdata, ctx.hyper, table, self.members, part, l0, l1))


def pick_pair(rng: np.random.Generator, n: int) -> tuple[int, int]:
    """A uniformly drawn ordered pair of distinct points (the anchors ``i``, ``j``)."""
    r = int(rng.integers(n * (n - 1)))
    i, j = divmod(r, n - 1)
    return i, j + (j >= i)


def apply(labels: np.ndarray, pairset: PairSet, part: np.ndarray, new_label: int) -> None:
    """Carry out an accepted proposal on ``labels`` in place.

    A split keeps anchor ``i``'s label for group 0 and gives group 1 ``new_label``; a merge
    relabels anchor ``j``'s cluster as anchor ``i``'s.
    """
    moved = pairset.members[part == GROUP_J]
    labels[moved] = new_label if pairset.split else labels[pairset.members[0]]


@dataclass
class SplitMergeState(GibbsState):
    context: MoveContext | None = None  #: kernel data and empty-table template of the moves


class SplitMergeGibbs(CollapsedGibbs):
    """Collapsed Gibbs sweeps followed by split-merge updates (the schedule of SAMS and
    Jain-Neal). Subclasses implement :meth:`_propose`."""

    info_columns = {
        "proposed_splits": "split proposals this step (two anchors drawn from one cluster)",
        "accepted_splits": "split proposals accepted by the Metropolis-Hastings test this step",
        "proposed_merges": "merge proposals this step (two anchors drawn from two clusters)",
        "accepted_merges": "merge proposals accepted by the Metropolis-Hastings test this step",
    }
    options = {
        **CollapsedGibbs.options,
        "moves": Option(10, Interval(int, 0), "split-merge updates per step"),
        "sweeps": Option(1, Interval(int, 0), "collapsed Gibbs sweeps per step (before the moves)"),
    }

    @abstractmethod
    def _propose(self, ctx: MoveContext, labels, i, j, others, rng) -> tuple[PairSet, Proposal]:
        """Build and evaluate the proposal for anchors ``i``, ``j``; ``others`` are the other
        points of their cluster(s), sorted."""

    def _init(self, X, labels, rng):
        state = super()._init(X, labels, rng)
        return SplitMergeState(**{f.name: getattr(state, f.name) for f in fields(state)},
                               context=MoveContext(self.family, X, self.alpha, kdata=state.kdata))

    def _step(self, state):
        for _ in range(self.params["sweeps"]):
            state = super()._step(state)
        labels, rng, ctx = state.labels, state.rng, state.context
        ctx.alpha = state.alpha  # the moves run at this step's alpha (learned or fixed)
        N = len(labels)
        counts = dict.fromkeys(("proposed_splits", "accepted_splits", "proposed_merges", "accepted_merges"), 0)
        next_label = int(labels.max()) + 1  # fresh ids within the step; compacted at its end
        for _ in range(self.params["moves"] if N > 1 else 0):
            i, j = pick_pair(rng, N)
            together = labels == labels[i]
            if labels[j] != labels[i]:
                together |= labels == labels[j]
            together[[i, j]] = False
            pairset, prop = self._propose(ctx, labels, i, j, np.flatnonzero(together), rng)
            kind = "splits" if prop.split else "merges"
            counts["proposed_" + kind] += 1
            # the complement of the draw keeps SAMS' and Jain-Neal's decisions (and traces) as
            # they were: log(1 - U) < log ratio
            if mh_accept(1.0 - rng.random(), prop.log_accept):
                apply(labels, pairset, prop.part, next_label)
                next_label += prop.split
                counts["accepted_" + kind] += 1
        state.labels, n_clusters = compact(labels)
        state.info = {"n_clusters": n_clusters, **counts}
        return state
