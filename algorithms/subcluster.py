"""Chang & Fisher (2013) sub-cluster split-merge samplers: ``subc``, ``subc-supc``,
``subc-supc-approx`` (SPEC §5).

State: labels ``z``; for every cluster two sub-clusters (sub-labels ``zs`` in {0, 1}); the
sufficient statistics of every sub-cluster (cluster statistics are their pair sums, since
statistics are additive). One step (the DPMMSubClusters schedule, SPEC §5.8):

1. weights ``pi ~ Dir(n_1..n_K)`` (over the existing clusters: the new-cluster mass only
   rescales them), cluster parameters from their posteriors, sub-weights
   ``Dir(n_kl + alpha/2, n_kr + alpha/2)`` and sub-cluster parameters;
2. (``subc-supc``) super-clusters from the J-divergences between components (SPEC §5.7);
3. restricted Gibbs, data-parallel: every label among the existing clusters (of its
   super-cluster) without emptying any, then every sub-label between the two sub-clusters
   of its cluster; one pass of sufficient statistics;
4. a cluster with an empty sub-cluster gets random sub-labels and restarts its burn-in;
5. a sub-cluster split of every burnt-in cluster (SPEC §5.3-§5.4), MH-accepted;
6. ``random_moves`` random split/merge proposals with the thesis Hastings ratio and exact
   selection probabilities (SPEC §5.5): the merges sub-cluster splits cannot make.
   Option ``merges="pairwise"`` makes DPMMSubClusters-style merges of every pair instead.

Measured deviations from exactness (the enumeration harness, N = 6) and what was fixed:

* emptying a cluster in the restricted label step has no reverse move and biased the chain
  towards fewer clusters (TV 0.39): the label step here never empties a cluster;
* a number of random proposals that depends on the state (one per cluster) biased it too:
  the number is a fixed option;
* the deterministic sub-cluster split itself has no paired reverse move; on tiny data it
  leaves the chain with too many clusters (TV 0.18 on the 2-D NIW problem; with sub-cluster
  splits switched off the same chain matches the posterior). Chang & Fisher argue the
  effect vanishes as burnt-in sub-clusters concentrate on one split, so ``exact = False``.

Across workers (``subc`` with a backend, the way DPMMSubClusters.jl spreads it): the points,
their labels and sub-labels stay on the shards; the master keeps the sub-cluster statistics.
Step 1 runs on the master; step 3 is a map (weights and parameters down, per-sub-cluster
statistics up); steps 4-6 are decided by the master from statistics alone, and the edits
they make to the partition (split, merge, new sub-labels) are sent to the shards in the
next map, which brings back the statistics the master does not know yet. The moves are the
in-process ones, run on the same statistics (:meth:`SubClusters._moves`), so the chain is
the same; only the random streams differ (every shard draws its own points'). A steady
iteration is one map; one that restarts sub-clusters or proposes a random split needs one
or two more.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from scipy.special import gammaln

from ._numerics import log_dirichlet
from ._shard_maps import component_stats
from .backends import ShardedState
from .base import Sampler
from .constraints import Interval, OneOf, Option
from .labelstep import (
    sample_labels,
    sample_labels_keeping_clusters,
    sample_labels_within,
    sample_sublabels,
    sweep_keeping_clusters,
)
from .partitions import compact
from .state import State


@dataclass
class SubclusterState(State):
    sublabels: np.ndarray | None = None  #: (N,) sub-cluster of each point, 0 or 1
    sub_stats: tuple | None = None  #: statistics of the 2K sub-clusters (rows 2k, 2k+1)
    history: np.ndarray | None = None  #: (K, W) recent L(left) + L(right); -inf = not yet
    splittable: np.ndarray | None = None  #: (K,) burnt-in clusters


def subcluster_rows(ks):
    """Rows of the sub-cluster statistics of clusters ``ks``: 2k, 2k + 1 for each."""
    ks = np.asarray(ks)
    return np.ravel(np.column_stack([2 * ks, 2 * ks + 1]))


def _log_q_dircat(n_left, n_right, alpha):
    """log probability of one labelling of n points into sizes (n_left, n_right) under the
    random Dirichlet-categorical split with Dir(alpha/2, alpha/2) (SPEC §5.5)."""
    a2 = alpha / 2.0
    n = n_left + n_right
    return (gammaln(alpha) - gammaln(alpha + n) + gammaln(a2 + n_left) + gammaln(a2 + n_right)
            - 2.0 * gammaln(a2))


def _split_log_ratio(alpha, n_left, n_right, L_left, L_right, L_whole):
    """log p(split) - log p(merged) for two disjoint sets (SPEC §0.3: minus log rho)."""
    return (math.log(alpha) + gammaln(n_left) + gammaln(n_right) - gammaln(n_left + n_right)
            + L_left + L_right - L_whole)


def random_split_log_ratio(alpha, p_split, n_clusters, pairs_after, n_left, n_right, L_left, L_right, L_whole):
    """log Hastings ratio of a random Dirichlet-categorical split of one of ``n_clusters``
    clusters into parts of sizes (n_left, n_right), paired with the random merge of those
    parts (SPEC §5.5, thesis ratio). The split picks its cluster with probability
    p/K and an unordered labelling with probability 2 q; the merge picks its pair with
    probability (1 - p)/pairs among the ``pairs_after`` pairs of the split state. The merge's
    ratio is the negative of this one evaluated at the split state."""
    log_select = math.log((1 - p_split) / pairs_after) - math.log(p_split / n_clusters) - math.log(2.0)
    return (log_select + _split_log_ratio(alpha, n_left, n_right, L_left, L_right, L_whole)
            - _log_q_dircat(n_left, n_right, alpha))


def supercluster_groups(divergence: np.ndarray, rng, scale: float = 4.0) -> np.ndarray:
    """Data-dependent super-clusters (Chang & Fisher 2013, SPEC §5.7): each cluster links to
    one other drawn with probability proportional to ``A_km + A_mk``, ``A = exp(-scale J)``;
    super-clusters are the connected components. With K <= 3 everything is one group."""
    K = divergence.shape[0]
    if K <= 3:
        return np.zeros(K, dtype=np.int64)
    logits = np.logaddexp(-scale * divergence, -scale * divergence.T)
    np.fill_diagonal(logits, -np.inf)
    neighbour = np.argmax(logits + rng.gumbel(size=(K, K)), axis=1)  # Gumbel-max draw
    parent = np.arange(K)

    def root(a):
        while parent[a] != a:
            a = parent[a]
        return a

    for a, b in enumerate(neighbour):
        ra, rb = root(a), root(int(b))
        parent[max(ra, rb)] = min(ra, rb)
    return compact(np.array([root(a) for a in range(K)]))[0]


class _Clusters:
    """Everything the moves of one step change, kept consistent with the labels: the
    sub-cluster statistics, burn-in history, splittable flags, super-cluster of each
    cluster and whether it still exists. Clusters are only appended or marked dead; the
    step compacts at the end."""

    def __init__(self, family, X, z, zs, sub, history, splittable, group=None, principal=False):
        self.family, self.X, self.z, self.zs = family, X, z, zs
        self.principal = principal
        self.sub, self.history, self.splittable = sub, history, splittable
        K = len(splittable)
        self.alive = np.ones(K, dtype=bool)
        self.group = np.zeros(K, dtype=np.int64) if group is None else np.asarray(group, dtype=np.int64)

    @property
    def K(self):
        return len(self.alive)

    def sizes(self, k):
        return self.sub.n[2 * k], self.sub.n[2 * k + 1]

    def size(self, k):
        return self.sub.n[2 * k] + self.sub.n[2 * k + 1]

    def members(self, k):
        return np.flatnonzero(self.z == k)

    def subcluster(self, k, h):
        """The points of sub-cluster ``h`` of cluster k (what :meth:`split` moves)."""
        return np.flatnonzero((self.z == k) & (self.zs == h))

    def cluster_stats(self, ks):
        """Statistics of clusters ``ks`` (sums of their sub-clusters')."""
        return self.family.sum_pairs(self.family.take_stats(self.sub, subcluster_rows(ks)))

    def random_halves(self, k, w_right, rng):
        """A random Dirichlet-categorical labelling of cluster k's points (each goes right
        with probability ``w_right``): the statistics of the two halves, and the right half
        (what :meth:`split` moves if the split is accepted)."""
        members = self.members(k)
        side = (rng.random(members.size) < w_right).astype(np.int64)
        return self.family.stats(self.X[members], side, 2), members[side == 1]

    def reject_split(self, k, moved):
        """A proposed random split of k was rejected (nothing to undo in-process)."""

    def sync(self):
        """Statistics of every living sub-cluster are current (always so in-process)."""

    def log_marginals(self, ks):
        """(L(left), L(right), L(cluster)) for clusters ``ks``."""
        fam = self.family
        sub = fam.take_stats(self.sub, subcluster_rows(ks))
        Lsub = fam.log_marginal_stats(sub).reshape(-1, 2)
        return Lsub[:, 0], Lsub[:, 1], fam.log_marginal_stats(fam.sum_pairs(sub))

    def restart(self, k, rng, members=None):
        """New sub-labels for cluster k (random, or the two sides of its principal axis);
        it must burn in again before it can split."""
        members = self.members(k) if members is None else members
        side = rng.integers(0, 2, members.size)
        if self.principal and members.size > 2 and isinstance(self.X, np.ndarray):
            # DPMMSubClusters' "smart splits": halves across the direction of largest spread
            Xm = self.X[members]
            centred = Xm - Xm.mean(axis=0)
            axis = np.linalg.eigh(centred.T @ centred)[1][:, -1]
            side = (centred @ axis > 0).astype(np.int64)
        self.zs[members] = side
        self.family.set_stats(self.sub, [2 * k, 2 * k + 1], self.family.stats(self.X[members], side, 2))
        self.history[k] = -np.inf
        self.splittable[k] = False

    def split(self, k, moved, rng):
        """Points ``moved`` of cluster k form a new cluster; both restart."""
        new = self.K
        self.sub = self.family.pad_stats(self.sub, 2 * (new + 1))
        self.history = np.vstack([self.history, np.full(self.history.shape[1], -np.inf)])
        self.splittable = np.append(self.splittable, False)
        self.alive = np.append(self.alive, True)
        self.group = np.append(self.group, self.group[k])
        self.z[moved] = new
        self.restart(k, rng)
        self.restart(new, rng, moved)
        return new

    def merge(self, a, b):
        """b joins a; the two old clusters become a's sub-clusters (DPMMSubClusters)."""
        fam = self.family
        both = fam.sum_pairs(fam.take_stats(self.sub, subcluster_rows([a, b])))
        ma, mb = self.members(a), self.members(b)
        self.z[mb] = a
        self.zs[ma], self.zs[mb] = 0, 1
        fam.set_stats(self.sub, [2 * a, 2 * a + 1], both)
        fam.set_stats(self.sub, [2 * b, 2 * b + 1], fam.empty_stats(2))
        self.alive[b] = False
        self.history[a] = -np.inf
        self.splittable[a] = False

    def pairs(self):
        """Unordered pairs of living clusters in the same super-cluster."""
        counts = np.bincount(self.group[self.alive])
        return int((counts * (counts - 1) // 2).sum())

    def pick_pair(self, rng):
        """A uniformly random pair among :meth:`pairs`."""
        ids = np.flatnonzero(self.alive)
        counts = np.bincount(self.group[ids])
        weights = counts * (counts - 1) / 2.0
        g = rng.choice(len(counts), p=weights / weights.sum())
        a, b = rng.choice(ids[self.group[ids] == g], size=2, replace=False)
        return int(a), int(b)


class SubClusters(Sampler):
    """Sub-cluster split-merge sampler (registry name ``subc``); see the module docstring
    for why it is not exact."""

    name = "subc"
    exact = False
    supercluster = False
    options = {
        "burnin": Option("window", OneOf(("window", "first-nonincrease", "none")),
                         "when a new cluster may be split: after a window of stable sub-cluster "
                         "likelihood (DPMMSubClusters), at its first non-increase (Chang), or always"),
        "burnin_window": Option(10, Interval(int, 2), "iterations in the burn-in window"),
        "merges": Option("random", OneOf(("random", "pairwise", "none")),
                         "random split/merge pair (exact MH) or DPMMSubClusters pairwise merges (approximate)"),
        # a fixed number: a count that depends on the state (e.g. one per cluster) biases the chain
        "random_moves": Option(5, Interval(int, 0), "random split/merge proposals per step"),
        "random_split_prob": Option(0.01, Interval(float, 0.0, 1.0, low_open=True),
                                    "probability that a random proposal is a split"),
        # measured: from random halves the sub-clusters take many iterations to break their
        # symmetry (100k x 2-D, 10 clusters: stuck at 4 clusters after 8 s; principal: all 10)
        "subcluster_init": Option("principal", OneOf(("random", "principal")),
                                  "sub-labels of a new cluster: the two sides of its principal axis "
                                  "(DPMMSubClusters' smart splits; dense data only) or random halves (Chang & Fisher)"),
    }

    #: with a backend, the points live on its shards (see the module docstring)
    supports_backend = True

    def __init__(self, family, alpha=1.0, seed=0, backend=None, **options):
        super().__init__(family, alpha=alpha, seed=seed, backend=backend, **options)
        if backend is None:
            self.backend = None  # the in-process sampler, not one serial shard

    def _init(self, X, labels, rng):
        labels, K = compact(labels)
        zs = rng.integers(0, 2, len(labels))
        W = self.params["burnin_window"]
        history, splittable = np.full((K, W), -np.inf), np.zeros(K, dtype=bool)
        if self.backend is not None:
            shards = self.backend.distribute(X, 2 * labels + zs, self.seed, static={"family": self.family},
                                             n_points=self.family.n_points(X))
            sub = self.family.sum_stats(shards.map(component_stats, 2 * K))
            state = ShardedSubclusterState(X, shards, rng, sub, history, splittable)
            state.info = {"n_clusters": K, **shards.take_stats()}
            return state
        return SubclusterState(X, labels, rng, sublabels=zs, sub_stats=self.family.stats(X, 2 * labels + zs, 2 * K),
                               history=history, splittable=splittable)

    def _step(self, state):
        if self.backend is not None:
            return self._step_sharded(state)
        fam, rng, alpha = self.family, state.rng, self.alpha
        X, z, sub = state.X, state.labels, state.sub_stats
        K = len(state.splittable)
        N = len(z)
        info = dict.fromkeys(("proposed_splits", "accepted_splits", "proposed_merges", "accepted_merges"), 0)

        # 1. weights and parameters given the labels
        st = fam.sum_pairs(sub)
        log_pi = log_dirichlet(rng, st.n)
        theta = fam.sample_params(st, rng)
        log_spi = log_dirichlet(rng, sub.n.reshape(K, 2) + alpha / 2.0).ravel()
        stheta = fam.sample_params(sub, rng)

        # 2-3. restricted Gibbs for the labels (no cluster emptied), then the sub-labels
        groups = None
        if self.supercluster:
            groups = supercluster_groups(fam.divergence(theta), rng)
            z, fell_back = sample_labels_within(fam, X, theta, log_pi, z, groups, rng)
            info["n_superclusters"] = int(groups.max()) + 1
        else:
            z, fell_back = sample_labels_keeping_clusters(fam, X, theta, log_pi, z, rng)
        info["sequential_label_sweep"] = int(fell_back)
        zs = sample_sublabels(fam, X, z, stheta, log_spi, rng.random(N))
        sub = fam.stats(X, 2 * z + zs, 2 * K)
        c = _Clusters(fam, X, z, zs, sub, state.history.copy(), state.splittable.copy(), groups,
                      principal=self.params["subcluster_init"] == "principal")
        self._moves(c, rng, info)

        # drop merged-away clusters
        keep = np.flatnonzero(c.alive)
        remap = np.full(c.K, -1, dtype=np.int64)
        remap[keep] = np.arange(len(keep))
        state.labels, state.sublabels = remap[c.z], c.zs
        state.sub_stats = fam.take_stats(c.sub, subcluster_rows(keep))
        state.history, state.splittable = c.history[keep], c.splittable[keep]
        info["n_clusters"] = len(keep)
        info["n_splittable"] = int(state.splittable.sum())
        state.info = info
        return state

    def _step_sharded(self, state):
        """One step with the points on shards: the same moves as :meth:`_step`."""
        fam, rng, alpha = self.family, state.rng, self.alpha
        shards, sub = state.shards, state.sub_stats
        K = len(state.splittable)
        info = dict.fromkeys(("proposed_splits", "accepted_splits", "proposed_merges", "accepted_merges"), 0)

        # 1. weights and parameters given the statistics (as in-process)
        st = fam.sum_pairs(sub)
        log_pi = log_dirichlet(rng, st.n)
        theta = fam.sample_params(st, rng)
        log_spi = log_dirichlet(rng, sub.n.reshape(K, 2) + alpha / 2.0).ravel()
        stheta = fam.sample_params(sub, rng)
        draw = LabelDraw(log_pi, theta, log_spi, stheta)

        # 3. labels and sub-labels on the shards; statistics back
        sub = fam.sum_stats(shards.map(draw_labels, draw))
        fell_back = bool((fam.sum_pairs(sub).n == 0).any())
        if fell_back:
            # the parallel draw emptied a cluster: as in-process, it is discarded and the
            # labels are swept sequentially from the previous ones, shard after shard (the
            # order of the points), each passing the cluster sizes on
            counts, parts = st.n.astype(np.int64), []
            for j in range(shards.n_shards):
                [(stats, counts)] = shards.results([shards.submit(j, resweep_labels, Resweep(draw, counts))])
                parts.append(stats)
            sub = fam.sum_stats(parts)
        info["sequential_label_sweep"] = int(fell_back)

        # 4-6. moves decided from the statistics; their edits reach the shards at sync
        principal = self.params["subcluster_init"] == "principal" and isinstance(state.X, np.ndarray)
        c = _ShardedClusters(fam, shards, sub, state.history.copy(), state.splittable.copy(), principal=principal)
        self._moves(c, rng, info)

        # drop merged-away clusters
        keep = np.flatnonzero(c.alive)
        remap = None
        if len(keep) < c.K:
            remap = np.full(c.K, -1, dtype=np.int64)
            remap[keep] = np.arange(len(keep))
        c.sync(remap)
        state.sub_stats = fam.take_stats(c.sub, subcluster_rows(keep))
        state.history, state.splittable = c.history[keep], c.splittable[keep]
        info["n_clusters"] = len(keep)
        info["n_splittable"] = int(state.splittable.sum())
        state.info = {**info, **shards.take_stats()}
        return state

    # ---- pieces ----------------------------------------------------------------------
    def _moves(self, c, rng, info):
        """Steps 4-6 on the clusters ``c`` (in-process or sharded: only statistics are read
        here; what needs the points goes through ``c``)."""
        alpha = self.alpha
        K = c.K
        # 4. a cluster with an empty sub-cluster restarts
        for k in np.flatnonzero((c.sub.n.reshape(K, 2) == 0).any(axis=1)):
            c.restart(k, rng)
        c.sync()

        # burn-in monitor: L(left) + L(right) of every cluster
        Ll, Lr, L = c.log_marginals(np.arange(K))
        c.history = np.concatenate([c.history[:, 1:], (Ll + Lr)[:, None]], axis=1)
        c.splittable |= self._burnt_in(c.history)

        # 5. sub-cluster splits of burnt-in clusters
        for k in np.flatnonzero(c.splittable[:K]):
            nl, nr = c.sizes(k)
            if nl == 0 or nr == 0:
                continue
            info["proposed_splits"] += 1
            if math.log(rng.random()) < _split_log_ratio(alpha, nl, nr, Ll[k], Lr[k], L[k]):
                info["accepted_splits"] += 1
                c.split(k, c.subcluster(k, 1), rng)

        # 6. merges (and random splits)
        if self.params["merges"] == "random":
            self._random_moves(c, rng, info)
        elif self.params["merges"] == "pairwise":
            self._pairwise_merges(c, rng, info)

    def _burnt_in(self, history):
        rule = self.params["burnin"]
        if rule == "none":
            return np.ones(len(history), dtype=bool)
        finite = np.isfinite(history)
        if rule == "first-nonincrease":
            return finite[:, -2:].all(axis=1) & (history[:, -1] - history[:, -2] <= 0)
        W = history.shape[1]
        with np.errstate(invalid="ignore"):
            # DPMMSubClusters: the window is full and the latest value no longer rises above
            # the window's (slightly inflated) average
            return finite.all(axis=1) & (history.sum(axis=1) / (W - 0.1) - history[:, -1] < 0.01)

    def _random_moves(self, c, rng, info):
        """Random Dirichlet-categorical splits and random merges with the thesis ratio and
        exact selection probabilities (SPEC §5.5): a split picks a cluster with probability
        p/K, a merge a pair (within a super-cluster) with probability (1-p)/pairs; an
        unordered split has probability 2 q(labels). Each proposal is an exact MH move on
        the partition whatever happened earlier in the step."""
        fam, alpha = self.family, self.alpha
        p = self.params["random_split_prob"]
        for _ in range(self.params["random_moves"]):
            ids = np.flatnonzero(c.alive)
            Kc, pairs = len(ids), c.pairs()
            if rng.random() < p:
                k = int(ids[rng.integers(Kc)])
                if c.size(k) < 2:
                    continue
                info["proposed_splits"] += 1
                w_right = math.exp(log_dirichlet(rng, np.full(2, alpha / 2.0))[1])
                halves, moved = c.random_halves(k, w_right, rng)
                nl, nr = int(halves.n[0]), int(halves.n[1])
                if nl == 0 or nr == 0:  # not a split: rejected
                    c.reject_split(k, moved)
                    continue
                L_halves = fam.log_marginal_stats(halves)
                Lk = fam.log_marginal_stats(c.cluster_stats([k]))[0]
                pairs_after = pairs + int((c.group[ids] == c.group[k]).sum())
                log_h = random_split_log_ratio(alpha, p, Kc, pairs_after, nl, nr, L_halves[0], L_halves[1], Lk)
                if math.log(rng.random()) < log_h:
                    info["accepted_splits"] += 1
                    c.split(k, moved, rng)
                else:
                    c.reject_split(k, moved)
            elif pairs > 0:
                a, b = c.pick_pair(rng)
                info["proposed_merges"] += 1
                na, nb, La, Lb, Lab = self._merge_terms(c, a, b)
                log_h = -random_split_log_ratio(alpha, p, Kc - 1, pairs, na, nb, La, Lb, Lab)
                if math.log(rng.random()) < log_h:
                    info["accepted_merges"] += 1
                    c.merge(a, b)

    def _merge_terms(self, c, a, b):
        """(n_a, n_b, L(a), L(b), L(a u b)) from the statistics alone."""
        fam = self.family
        st = c.cluster_stats([a, b])
        La, Lb = fam.log_marginal_stats(st)
        Lab = fam.log_marginal_stats(fam.sum_pairs(st))[0]
        na, nb = st.n
        return na, nb, La, Lb, Lab

    def _pairwise_merges(self, c, rng, info):
        """DPMMSubClusters merges: every pair of splittable clusters, in order, with the
        random-merge ratio and no selection terms (approximate: no paired reverse move)."""
        K = c.K
        merged = np.zeros(K, dtype=bool)
        for a in range(K):
            for b in range(a + 1, K):
                if merged[a] or merged[b] or not (c.alive[a] and c.alive[b]):
                    continue
                if not (c.splittable[a] and c.splittable[b]):
                    continue
                info["proposed_merges"] += 1
                na, nb, La, Lb, Lab = self._merge_terms(c, a, b)
                log_h_split = _split_log_ratio(self.alpha, na, nb, La, Lb, Lab)
                if math.log(rng.random()) < -log_h_split + _log_q_dircat(na, nb, self.alpha):
                    info["accepted_merges"] += 1
                    c.merge(a, b)
                    merged[a] = merged[b] = True


class SubClustersSuper(SubClusters):
    """Sub-clusters with data-dependent super-clusters (``subc-supc``)."""

    name = "subc-supc"
    supercluster = True
    supports_backend = False  # its label step (within super-clusters) runs in-process only


class SubClustersSuperApprox(SubClustersSuper):
    """``subc-supc`` proposing sub-cluster splits every iteration without waiting for the
    sub-clusters to burn in (``subc-supc-approx``; Chang & Fisher's approximation)."""

    name = "subc-supc-approx"
    options = {**SubClustersSuper.options,
               "burnin": Option("none", OneOf(("window", "first-nonincrease", "none")), "see subc")}


# ---- across workers ---------------------------------------------------------------------------
#
# A shard's labels hold the sub-cluster of each of its points, 2 z + zs. Right after the
# label draw the bits from 32 up also hold the point's cluster before the draw, which the
# sequential sweep needs if the master finds that the parallel draw emptied a cluster.

_PREVIOUS_SHIFT = 32
_SUB_MASK = (1 << _PREVIOUS_SHIFT) - 1


def _decode(labels):
    """(cluster, sub-label) of every point from shard labels."""
    sub = labels & _SUB_MASK
    return sub >> 1, sub & 1


class ShardedSubclusterState(ShardedState):
    """Master state of ``subc`` on a backend: the sub-cluster statistics, burn-in monitor and
    splittable flags; the labels and sub-labels are gathered from the shards."""

    def __init__(self, X, shards, rng, sub_stats, history, splittable):
        super().__init__(X, shards, rng)
        self.sub_stats = sub_stats  #: statistics of the 2K sub-clusters (rows 2k, 2k+1)
        self.history = history  #: (K, W) recent L(left) + L(right); -inf = not yet
        self.splittable = splittable  #: (K,) burnt-in clusters

    @property
    def labels(self) -> np.ndarray:
        return _decode(self.shards.gather_labels())[0]

    @property
    def sublabels(self) -> np.ndarray:
        return _decode(self.shards.gather_labels())[1]


class LabelDraw(NamedTuple):
    """What the master broadcasts for the label step."""

    log_pi: np.ndarray  #: (K,) log weights of the clusters
    theta: Any  #: the family's parameters of the K clusters
    log_spi: np.ndarray  #: (2K,) log sub-weights
    stheta: Any  #: parameters of the 2K sub-clusters


class Resweep(NamedTuple):
    """The sequential label sweep on one shard, after a parallel draw emptied a cluster."""

    draw: LabelDraw
    counts: np.ndarray  #: (K,) cluster sizes over all points, as the sweep has left them so far


class Edit(NamedTuple):
    """A change of the partition decided by the master, carried out on every shard."""

    kind: str  #: "split": sub-cluster 1 of a becomes b; "move": the points of a go to b; "merge": b joins a
    a: int
    b: int


class Restructure(NamedTuple):
    """A map that edits the partition on the shards, in this order: ``edits``; moments of
    clusters ``moments``; new sub-labels for clusters ``restart`` (random, except those in
    ``principal``: the two sides of a given axis through a given mean); a tentative random
    split ``propose`` = (cluster, new cluster, probability of going right); ``remap`` of the
    cluster ids."""

    edits: tuple = ()
    moments: np.ndarray | None = None
    restart: np.ndarray | None = None
    principal: tuple | None = None  #: (clusters, (R, D) means, (R, D) axes)
    propose: tuple | None = None
    remap: np.ndarray | None = None


class Restructured(NamedTuple):
    """What one shard returns from :func:`restructure`."""

    restarted: Any = None  #: statistics of the sub-clusters of ``restart`` (rows 2r, 2r+1)
    moments: tuple | None = None  #: (n, mean, centred scatter) of each cluster of ``moments``
    halves: Any = None  #: statistics of the two halves of the proposed random split


def draw_labels(shard, draw: LabelDraw):
    """The label step on one shard: every label among the existing clusters, in parallel,
    then every sub-label (as in-process, :func:`sample_labels_keeping_clusters` without its
    check, which needs every shard's counts). Returns the shard's sub-cluster statistics."""
    family = shard.static["family"]
    z, _ = _decode(shard.labels)
    n = len(z)
    new = sample_labels(family, shard.X, draw.theta, draw.log_pi, shard.rng.random(n))
    zs = sample_sublabels(family, shard.X, new, draw.stheta, draw.log_spi, shard.rng.random(n))
    shard.labels = (2 * new + zs) | (z << _PREVIOUS_SHIFT)
    return family.stats(shard.X, 2 * new + zs, 2 * len(draw.log_pi))


def resweep_labels(shard, payload: Resweep):
    """The sequential branch of the label step on one shard: restricted Gibbs from the labels
    before the draw, never emptying a cluster, then the sub-labels. Returns the shard's
    sub-cluster statistics and the cluster sizes for the next shard."""
    family, draw = shard.static["family"], payload.draw
    z = shard.labels >> _PREVIOUS_SHIFT
    counts = payload.counts.copy()
    sweep_keeping_clusters(family, shard.X, draw.theta, draw.log_pi, z, counts, shard.rng.random(len(z)))
    zs = sample_sublabels(family, shard.X, z, draw.stheta, draw.log_spi, shard.rng.random(len(z)))
    shard.labels = 2 * z + zs
    return family.stats(shard.X, 2 * z + zs, 2 * len(draw.log_pi)), counts


def _position(z, clusters):
    """Index in ``clusters`` of every point's cluster (-1: not among them)."""
    lookup = np.full(max(int(z.max(initial=-1)), int(np.max(clusters))) + 1, -1, dtype=np.int64)
    lookup[clusters] = np.arange(len(clusters))
    return lookup[z]


def restructure(shard, payload: Restructure) -> Restructured:
    """Carry out the master's edits of the partition on one shard (see :class:`Restructure`)."""
    family, X, rng = shard.static["family"], shard.X, shard.rng
    z, zs = _decode(shard.labels)
    for kind, a, b in payload.edits:
        if kind == "split":
            z[(z == a) & (zs == 1)] = b
        elif kind == "move":
            z[z == a] = b
        else:  # merge: the two old clusters become the sub-clusters of a
            in_a, in_b = z == a, z == b
            zs[in_a], zs[in_b], z[in_b] = 0, 1, a
    moments = restarted = halves = None
    if payload.moments is not None:
        R, D = len(payload.moments), X.shape[1]
        n, mean, scatter = np.zeros(R), np.zeros((R, D)), np.zeros((R, D, D))
        for r, k in enumerate(payload.moments):
            Xk = X[z == k]
            if len(Xk):
                n[r], mean[r] = len(Xk), Xk.mean(axis=0)
                centred = Xk - mean[r]
                scatter[r] = centred.T @ centred
        moments = (n, mean, scatter)
    if payload.restart is not None:
        pos = _position(z, payload.restart)
        rows = np.flatnonzero(pos >= 0)
        zs[rows] = rng.integers(0, 2, rows.size)
        if payload.principal is not None:
            for k, mean, axis in zip(*payload.principal):
                idx = np.flatnonzero(z == k)
                zs[idx] = ((X[idx] - mean) @ axis > 0).astype(np.int64)
        restarted = family.stats(X[rows], 2 * pos[rows] + zs[rows], 2 * len(payload.restart))
    if payload.propose is not None:
        k, new, w_right = payload.propose
        idx = np.flatnonzero(z == k)
        side = (rng.random(idx.size) < w_right).astype(np.int64)
        z[idx[side == 1]] = new
        halves = family.stats(X[idx], side, 2)
    if payload.remap is not None:
        z = payload.remap[z]
    shard.labels = 2 * z + zs
    return Restructured(restarted, moments, halves)


def _pooled_moments(parts):
    """(n, mean, centred scatter) of clusters from those of their parts on every shard
    (Chan et al.'s pairwise update: no cancellation of large raw second moments)."""
    n = sum(p[0] for p in parts)
    safe = np.maximum(n, 1.0)[:, None]
    mean = sum(p[0][:, None] * p[1] for p in parts) / safe
    scatter = 0.0
    for n_j, mean_j, scatter_j in parts:
        d = mean_j - mean
        scatter = scatter + scatter_j + n_j[:, None, None] * d[:, :, None] * d[:, None, :]
    return n, mean, scatter


class _ShardedClusters(_Clusters):
    """:class:`_Clusters` whose points live on shards. The master keeps the statistics of
    every cluster and sub-cluster; an edit of the partition is queued and reaches the shards
    with the next map (:meth:`sync`, or a random split proposal). The sub-cluster statistics
    of a restarted cluster are unknown ("stale") until then; nothing reads them before."""

    def __init__(self, family, shards, sub, history, splittable, principal):
        super().__init__(family, None, None, None, sub, history, splittable, principal=principal)
        self.shards = shards
        self.clusters = family.sum_pairs(sub)  #: statistics of every cluster (current even when stale)
        self.stale = set()
        self.edits = []

    def size(self, k):
        return self.clusters.n[k]

    def members(self, k):
        raise RuntimeError("the points of a sharded cluster live on the shards")

    def cluster_stats(self, ks):
        return self.family.take_stats(self.clusters, np.asarray(ks))

    def log_marginals(self, ks):
        if self.stale.intersection(np.asarray(ks).tolist()):
            raise RuntimeError("sub-cluster statistics of restarted clusters are read before sync()")
        return super().log_marginals(ks)

    def subcluster(self, k, h):
        return ("sub", k, h)

    def restart(self, k, rng, members=None):
        self.stale.add(int(k))
        self.history[k] = -np.inf
        self.splittable[k] = False

    def _grow(self):
        K = self.K + 1
        self.sub = self.family.pad_stats(self.sub, 2 * K)
        self.clusters = self.family.pad_stats(self.clusters, K)
        self.history = np.vstack([self.history, np.full(self.history.shape[1], -np.inf)])
        self.splittable = np.append(self.splittable, False)
        self.alive = np.append(self.alive, True)

    def random_halves(self, k, w_right, rng):
        new = self.K
        parts = self.shards.map(restructure, Restructure(tuple(self.edits), propose=(k, new, w_right)))
        self.edits = []
        halves = self.family.sum_stats([p.halves for p in parts])
        return halves, ("random", new, halves)

    def reject_split(self, k, moved):
        self.edits.append(Edit("move", moved[1], k))  # the tentative right half goes back

    def split(self, k, moved, rng):
        new = self.K
        if moved[0] == "sub":
            assert moved[2] == 1
            self.edits.append(Edit("split", k, new))
            parts = self.family.take_stats(self.sub, [2 * k, 2 * k + 1])
        else:  # the shards have moved the right half already
            assert moved[1] == new
            parts = moved[2]
        self._grow()
        self.group = np.append(self.group, self.group[k])
        self.family.set_stats(self.clusters, [k, new], parts)
        self.restart(k, rng)
        self.restart(new, rng)
        return new

    def merge(self, a, b):
        fam = self.family
        both = self.cluster_stats([a, b])
        fam.set_stats(self.sub, [2 * a, 2 * a + 1], both)
        fam.set_stats(self.sub, [2 * b, 2 * b + 1], fam.empty_stats(2))
        fam.set_stats(self.clusters, [a], fam.sum_pairs(both))
        fam.set_stats(self.clusters, [b], fam.empty_stats(1))
        self.alive[b] = False
        self.history[a] = -np.inf
        self.splittable[a] = False
        self.stale.difference_update((a, b))  # the merge sets the sub-labels of both
        self.edits.append(Edit("merge", a, b))

    def sync(self, remap=None):
        """Carry out the queued edits on the shards, give restarted clusters new sub-labels
        (random, or the sides of their principal axis: then the clusters' moments are
        fetched first) and bring back their sub-cluster statistics; then ``remap``."""
        stale = [k for k in sorted(self.stale) if self.alive[k]]
        if not (self.edits or stale or remap is not None):
            return
        edits, self.edits = tuple(self.edits), []
        principal = [k for k in stale if self.principal and self.clusters.n[k] > 2]
        axes = None
        if principal:
            parts = self.shards.map(restructure, Restructure(edits, moments=np.array(principal)))
            edits = ()
            _, mean, scatter = _pooled_moments([p.moments for p in parts])
            axes = (principal, mean, np.linalg.eigh(scatter)[1][:, :, -1])
        restart = np.array(stale, dtype=np.int64) if stale else None
        parts = self.shards.map(restructure, Restructure(edits, restart=restart, principal=axes, remap=remap))
        if stale:
            fam = self.family
            fam.set_stats(self.sub, subcluster_rows(restart), fam.sum_stats([p.restarted for p in parts]))
        self.stale.clear()
