"""Chang & Fisher (2013) sub-cluster split-merge samplers: ``subc``, ``subc-supc``,
``subc-supc-approx`` (docs/algorithms.md §5).

State: labels ``z``; for every cluster two sub-clusters (sub-labels ``zs`` in {0, 1}); the
sufficient statistics of every sub-cluster (cluster statistics are their pair sums, since
statistics are additive). One step (the DPMMSubClusters schedule, docs/algorithms.md §5.8):

1. weights ``pi ~ Dir(n_1..n_K)`` (over the existing clusters: the new-cluster mass only
   rescales them), cluster parameters from their posteriors, sub-weights
   ``Dir(n_kl + alpha/2, n_kr + alpha/2)`` and sub-cluster parameters;
2. (``subc-supc``) super-clusters from the J-divergences between components (docs/algorithms.md §5.7);
3. restricted Gibbs, data-parallel: every label among the existing clusters (of its
   super-cluster) without emptying any, then every sub-label between the two sub-clusters
   of its cluster; one pass of sufficient statistics;
4. a cluster with an empty sub-cluster gets random sub-labels and restarts its burn-in;
5. a sub-cluster split of every burnt-in cluster (docs/algorithms.md §5.3-§5.4), MH-accepted;
   once a cluster's sub-labels have had a whole burn-in window, a rejected split restarts
   them, from the point the cluster explains worst and like a new cluster's in turn
   (kept, they proposed the same rejected split every step: chains stayed at one cluster on
   small real data, §5.4);
6. ``random_moves`` random split/merge proposals with the thesis Hastings ratio and exact
   selection probabilities (docs/algorithms.md §5.5): the merges sub-cluster splits cannot make.
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
iteration is one map; one that restarts sub-clusters (also from their worst-explained point) or
proposes a random split needs one or two more. A principal restart takes its cluster's mean
and scatter from the master's statistics where the family holds them precisely (NIW:
``Family.moments_from_stats``; the principal axis then differs from the one computed from
the points by rounding only), else from the points. The label draw also brings back the
worst-explained points that the step's isolates are likely to need: with every draw where
the family finds them in one pass (``Family.lowest_loglik_in_one_pass``: NIW), else on small
shards (``SMALL_SHARD_POINTS``), which there also brings the moments the statistics lack.
That saves most of the second of those maps and changes nothing else.

Where things are: this module holds the samplers, their states and the Hastings ratios of
their moves; :mod:`._subcluster_clusters` the clusters a step's moves edit (in process or
with the points on shards); :mod:`._subcluster_shards` the shard protocol (what the shards
compute on their points and send back).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from ._numerics import log_dirichlet, mh_accept
from .concentration import log_crp_alpha, slice_log_alpha
from ._shard_maps import component_stats
from ._subcluster_clusters import Clusters, ShardedClusters, subcluster_rows
from ._subcluster_shards import (LabelDraw, Resweep, decode_labels, draw_labels, pick_worst, pooled_moments,
                                 resweep_labels)
from .backends import ShardedState
from .backends.base import SHARD_INFO_COLUMNS
from .base import Sampler
from .constraints import Interval, OneOf, Option
from .labelstep import draw_keeping_clusters_with_sublabels, draw_with_sublabels
from .partitions import compact
from .state import State


#: with a backend, shards of at most this many points (on average) also return, with the label
#: draw, what the step's restarts are likely to need (see :meth:`SubClusters._step_sharded`).
#: Measured on 2 cores, one thread per shard: that costs ~40 ns per point and saves a round
#: trip in most steps on Wang & Lin's set (mean maps per iteration 3.95 -> 2.53 at 2 shards);
#: at 500,000 points per shard it added 40 ms to a 140 ms draw to save 0.4 maps per step
SMALL_SHARD_POINTS = 1 << 16


@dataclass
class SubclusterState(State):
    """In-process state: labels plus every point's sub-label and the sub-cluster statistics."""

    sublabels: np.ndarray | None = None  #: (N,) sub-cluster of each point, 0 or 1
    sub_stats: tuple | None = None  #: statistics of the 2K sub-clusters (rows 2k, 2k+1)
    history: np.ndarray | None = None  #: (K, W) recent L(left) + L(right); -inf = not yet
    splittable: np.ndarray | None = None  #: (K,) burnt-in clusters
    isolated: np.ndarray | None = None  #: (K,) sub-labels last started from one point


class ShardedSubclusterState(ShardedState):
    """Master state of ``subc`` on a backend: the sub-cluster statistics, burn-in monitor and
    splittable flags; the labels and sub-labels are gathered from the shards."""

    def __init__(self, X, shards, rng, sub_stats, history, splittable, isolated):
        super().__init__(X, shards, rng)
        self.sub_stats = sub_stats  #: statistics of the 2K sub-clusters (rows 2k, 2k+1)
        self.history = history  #: (K, W) recent L(left) + L(right); -inf = not yet
        self.splittable = splittable  #: (K,) burnt-in clusters
        self.isolated = isolated  #: (K,) sub-labels last started from one point

    @property
    def labels(self) -> np.ndarray:
        return decode_labels(self.shards.gather_labels())[0]

    @property
    def sublabels(self) -> np.ndarray:
        return decode_labels(self.shards.gather_labels())[1]


# ---- Hastings ratios and super-clusters -------------------------------------------------------

def _log_q_dircat(n_left, n_right, alpha):
    """log probability of one labelling of n points into sizes (n_left, n_right) under the
    random Dirichlet-categorical split with Dir(alpha/2, alpha/2) (docs/algorithms.md §5.5)."""
    a2 = alpha / 2.0
    n = n_left + n_right
    return (gammaln(alpha) - gammaln(alpha + n) + gammaln(a2 + n_left) + gammaln(a2 + n_right)
            - 2.0 * gammaln(a2))


def _split_log_ratio(alpha, n_left, n_right, L_left, L_right, L_whole):
    """log p(split) - log p(merged) for two disjoint sets (docs/algorithms.md §0.3: minus log rho)."""
    return (math.log(alpha) + gammaln(n_left) + gammaln(n_right) - gammaln(n_left + n_right)
            + L_left + L_right - L_whole)


def random_split_log_ratio(alpha, p_split, n_clusters, pairs_after, n_left, n_right, L_left, L_right, L_whole):
    """log Hastings ratio of a random Dirichlet-categorical split of one of ``n_clusters``
    clusters into parts of sizes (n_left, n_right), paired with the random merge of those
    parts (docs/algorithms.md §5.5, thesis ratio). The split picks its cluster with probability
    p/K and an unordered labelling with probability 2 q; the merge picks its pair with
    probability (1 - p)/pairs among the ``pairs_after`` pairs of the split state. The merge's
    ratio is the negative of this one evaluated at the split state."""
    log_select = math.log((1 - p_split) / pairs_after) - math.log(p_split / n_clusters) - math.log(2.0)
    return (log_select + _split_log_ratio(alpha, n_left, n_right, L_left, L_right, L_whole)
            - _log_q_dircat(n_left, n_right, alpha))


def supercluster_groups(divergence: np.ndarray, rng, scale: float = 4.0) -> np.ndarray:
    """Data-dependent super-clusters (Chang & Fisher 2013, docs/algorithms.md §5.7): each cluster links to
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


class SubClusters(Sampler):
    """Sub-cluster split-merge sampler (registry name ``subc``); see the module docstring
    for why it is not exact."""

    name = "subc"
    exact = False
    threaded = True
    supercluster = False
    #: the label step never empties a cluster (the restricted conditional, §5.1); ``False``:
    #: an emptied cluster is deleted, as in Chang's released code (approximate)
    keeps_clusters = True
    #: the shards' columns come with a backend only
    info_columns = {
        "proposed_splits": "split proposals this step (sub-cluster splits of burnt-in clusters and random splits)",
        "accepted_splits": "split proposals accepted by the Metropolis-Hastings test this step",
        "proposed_merges": "merge proposals this step (random or pairwise)",
        "accepted_merges": "merge proposals accepted this step",
        "sequential_label_sweep": "1 when the restricted label sweep kept a cluster's last point that the "
                                  "parallel draw took elsewhere (in process: that point alone; on shards: "
                                  "every label swept again, shard after shard)",
        "n_splittable": "clusters whose sub-clusters have burnt in (eligible for a sub-cluster split)",
        **SHARD_INFO_COLUMNS,
    }
    options = {
        "burnin": Option("window", OneOf(("window", "first-nonincrease", "none")),
                         "when a new cluster may be split: after a window of stable sub-cluster "
                         "likelihood (DPMMSubClusters), at its first non-increase (Chang), or always"),
        "burnin_window": Option(10, Interval(int, 2), "iterations in the burn-in window"),
        "merges": Option("random", OneOf(("random", "pairwise", "none")),
                         "random split/merge pair (exact MH) or DPMMSubClusters pairwise merges (approximate)"),
        # a fixed number: a count that depends on the state (e.g. one per cluster) biases the chain
        "random_moves": Option(5, Interval(int, 0), "random split/merge proposals per step"),
        "random_split_prob": Option(0.01, Interval(float, 0.0, 1.0, closed="right"),
                                    "probability that a random proposal is a split"),
        # measured: from random halves the sub-clusters take many iterations to break their
        # symmetry (100k x 2-D, 10 clusters: stuck at 4 clusters after 8 s; principal: all 10)
        "subcluster_init": Option("principal", OneOf(("random", "principal")),
                                  "sub-labels of a new cluster: the two sides of its principal axis "
                                  "(DPMMSubClusters' smart splits; dense data only) or random halves (Chang & Fisher)"),
    }

    #: with a backend, the points live on its shards (see the module docstring)
    supports_backend = True

    def __init__(self, family, backend=None, **kwargs):
        super().__init__(family, backend=backend, **kwargs)
        if backend is None:
            self.backend = None  # the in-process sampler, not one serial shard

    def _init(self, X, labels, rng):
        labels, K = compact(labels)
        zs = rng.integers(0, 2, len(labels))
        W = self.params["burnin_window"]
        history, splittable = np.full((K, W), -np.inf), np.zeros(K, dtype=bool)
        # The initial clusters start their sub-clusters like every cluster a move creates. From
        # random halves the two sub-clusters of a big cluster have the same mean and take
        # hundreds of iterations to break their symmetry (measured, 100k x 2-D, four blobs from
        # one cluster: first split after 369 iterations; from the principal axis after 10).
        principal = self.params["subcluster_init"] == "principal" and isinstance(X, np.ndarray)
        if self.backend is not None:
            shards = self.backend.distribute(X, 2 * labels + zs, self.seed, static={"family": self.family},
                                             n_points=self.family.n_points(X))
            sub = self.family.sum_stats(shards.map(component_stats, 2 * K))
            if principal:
                c = ShardedClusters(self.family, shards, sub, history, splittable, principal=True)
                c.stale.update(range(K))
                c.sync()
                sub = c.sub
            state = ShardedSubclusterState(X, shards, rng, sub, history, splittable, np.zeros(K, dtype=bool))
            state.info = {"n_clusters": K, **shards.take_stats()}
            return state
        sub = self.family.stats(X, 2 * labels + zs, 2 * K)
        if principal:
            c = Clusters(self.family, X, labels, zs, sub, history, splittable, principal=True)
            for k in range(K):
                c.restart(k, rng)
            zs, sub = c.zs, c.sub
        return SubclusterState(X, labels, rng, sublabels=zs, sub_stats=sub, history=history, splittable=splittable,
                               isolated=np.zeros(K, dtype=bool))

    def _step(self, state):
        if self.backend is not None:
            return self._step_sharded(state)
        fam, rng = self.family, state.rng
        X, z = state.X, state.labels
        K = len(state.splittable)
        info = dict.fromkeys(("proposed_splits", "accepted_splits", "proposed_merges", "accepted_merges"), 0)

        # 1. weights and parameters given the labels
        st, draw = self._draw_params(state.sub_stats, rng, state.alpha)
        log_pi, theta, log_spi, stheta = draw.log_pi, draw.theta, draw.log_spi, draw.stheta

        # 2-3. restricted Gibbs for the labels (no cluster emptied), then the sub-labels
        groups = None
        if self.supercluster:
            groups = supercluster_groups(fam.divergence(theta), rng)
            info["n_superclusters"] = int(groups.max()) + 1
        if self.keeps_clusters:
            z, zs, sub, fell_back = draw_keeping_clusters_with_sublabels(fam, X, theta, log_pi, stheta, log_spi, z,
                                                                         rng, groups, st.n)
        else:
            within = None if groups is None else (z, groups)
            z, zs, sub = draw_with_sublabels(fam, X, theta, log_pi, stheta, log_spi, rng, within)
            fell_back = False
        info["sequential_label_sweep"] = int(fell_back)
        c = Clusters(fam, X, z, zs, sub, state.history.copy(), state.splittable.copy(), groups,
                     principal=self.params["subcluster_init"] == "principal", params=theta,
                     isolated=state.isolated.copy())
        c.alive &= fam.sum_pairs(sub).n > 0  # emptied clusters are deleted (keeps_clusters False only)
        self._moves(c, rng, info, state.alpha)

        # drop merged-away clusters (relabelling every point is a serial pass: only if any)
        keep, remap = _survivors(c.alive)
        state.labels, state.sublabels = c.z if remap is None else remap[c.z], c.zs
        self._keep(state, c, keep, info)
        state.info = info
        return state

    def _step_sharded(self, state):
        """One step with the points on shards: the same moves as :meth:`_step`."""
        fam, rng = self.family, state.rng
        shards = state.shards
        info = dict.fromkeys(("proposed_splits", "accepted_splits", "proposed_merges", "accepted_merges"), 0)

        # 1. weights and parameters given the statistics (as in-process)
        st, draw = self._draw_params(state.sub_stats, rng, state.alpha)
        principal = self.params["subcluster_init"] == "principal" and isinstance(state.X, np.ndarray)

        # 3. labels and sub-labels on the shards; statistics back. Also what this step's
        # restarts are likely to need, so that they need no map of their own: the worst points
        # of the clusters whose rejected split would isolate one (on small shards, or where
        # the family finds them in one pass), and on small shards the moments of the
        # sub-clusters of clusters that may split or restart (burnt in, or about to be;
        # isolated: their one-point sub-cluster is often emptied), where the statistics do not
        # give them
        full = np.isfinite(state.history[:, 1:]).all(axis=1)
        small = fam.n_points(state.X) <= SMALL_SHARD_POINTS * shards.n_shards
        if small or fam.lowest_loglik_in_one_pass:
            may_isolate = np.flatnonzero(full & ~state.isolated)
            draw = draw._replace(worst=may_isolate if len(may_isolate) else None)
        if small and principal:
            may_restart = full | state.splittable | state.isolated
            from_stats = fam.moments_from_stats(st)
            may_restart = np.flatnonzero(may_restart if from_stats is None else may_restart & ~from_stats[2])
            draw = draw._replace(moments=may_restart if len(may_restart) else None)
        parts = shards.map(draw_labels, draw)
        sub = fam.sum_stats([p.stats for p in parts])
        fell_back = bool((fam.sum_pairs(sub).n == 0).any())
        if fell_back:
            # the parallel draw emptied a cluster: it is discarded and the labels are swept
            # sequentially from the previous ones, shard after shard (the order of the
            # points), each passing the cluster sizes on (in process the sweep takes the
            # draw itself, docs/algorithms.md §5.1; here that would cost a second round
            # trip in every step with a one-point cluster)
            counts, parts = st.n.astype(np.int64), []
            for j in range(shards.n_shards):
                [(stats, counts)] = shards.results([shards.submit(j, resweep_labels, Resweep(draw, counts))])
                parts.append(stats)
            sub = fam.sum_stats(parts)
        info["sequential_label_sweep"] = int(fell_back)
        drawn = (None, None)
        if not fell_back:  # (a resweep's labels are not the ones the moments and points are of)
            drawn = (None if draw.moments is None else (subcluster_rows(draw.moments),
                                                         pooled_moments([p.moments for p in parts])),
                     None if draw.worst is None else pick_worst(draw.worst, [p.worst for p in parts]))

        # 4-6. moves decided from the statistics; their edits reach the shards at sync
        c = ShardedClusters(fam, shards, sub, state.history.copy(), state.splittable.copy(), principal=principal,
                            params=draw.theta, isolated=state.isolated.copy(), drawn=drawn)
        self._moves(c, rng, info, state.alpha)

        # drop merged-away clusters
        keep, remap = _survivors(c.alive)
        c.sync(remap)
        self._keep(state, c, keep, info)
        state.info = {**info, **shards.take_stats()}
        return state

    # ---- learned concentration (docs/algorithms.md §0.7) ---------------------------------
    def _n_clusters(self, state):
        return len(state.splittable)

    def _resample_alpha(self, state):
        """The sub-labels depend on alpha too (sub-cluster weights ``Dir(alpha/2, alpha/2)``,
        integrated out): alpha is drawn given the partition and the sub-partition."""
        sizes = state.sub_stats.n.reshape(-1, 2)
        n = sizes.sum(axis=1)
        K, N = len(n), float(n.sum())

        def log_lik(alpha):
            half = alpha / 2.0
            return float(log_crp_alpha(alpha, K, N) + K * (gammaln(alpha) - 2.0 * gammaln(half))
                         + (gammaln(half + sizes).sum() - gammaln(alpha + n).sum()))

        return slice_log_alpha(state.alpha, log_lik, self.alpha_prior, state.rng)

    # ---- pieces ----------------------------------------------------------------------
    def _draw_params(self, sub, rng, alpha):
        """Step 1 from the sub-cluster statistics ``sub`` at concentration ``alpha``: the cluster
        statistics, and the weights and parameters of the clusters and sub-clusters as a
        :class:`LabelDraw`."""
        fam = self.family
        K = len(sub.n) // 2
        st = fam.sum_pairs(sub)
        log_pi = log_dirichlet(rng, st.n)
        theta = fam.sample_params(st, rng)
        log_spi = log_dirichlet(rng, sub.n.reshape(K, 2) + alpha / 2.0).ravel()
        stheta = fam.sample_params(sub, rng)
        return st, LabelDraw(log_pi, theta, log_spi, stheta)

    def _keep(self, state, c, keep, info):
        """The state keeps the clusters ``keep`` of ``c`` (in this order)."""
        state.sub_stats = self.family.take_stats(c.sub, subcluster_rows(keep))
        state.history, state.splittable, state.isolated = c.history[keep], c.splittable[keep], c.isolated[keep]
        info["n_clusters"] = len(keep)
        info["n_splittable"] = int(state.splittable.sum())

    def _moves(self, c, rng, info, alpha):
        """Steps 4-6 on the clusters ``c`` at concentration ``alpha`` (in-process or sharded:
        only statistics are read here; what needs the points goes through ``c``)."""
        K = c.K
        # 4. a cluster with an empty sub-cluster restarts
        restarted = np.flatnonzero((c.sub.n.reshape(K, 2) == 0).any(axis=1) & c.alive)
        for k in restarted:
            c.restart(k, rng)
        if self.params["burnin"] == "none":  # every cluster is proposed at once, these too
            c.sync()
            restarted = restarted[:0]

        # burn-in monitor: L(left) + L(right) of every cluster but those just restarted, whose
        # window starts with the next draw, as after the restarts of step 5 (so that, with
        # the points on shards, their new sub-labels wait for the step's one sync; they could
        # not split this step under either burn-in rule that watches the window). L, the log
        # marginal of every cluster, is kept current through the splits and merges below
        # (restarts leave a cluster's points alone): a merge proposal then needs only L(a u b)
        # (a mask, not np.setdiff1d: the same sorted clusters, without its sort and search
        # of ~120 us a step within a step at 100k points)
        watched = np.ones(K, dtype=bool)
        watched[restarted] = False
        watched = np.flatnonzero(watched)
        Ll, Lr, L = np.full(K, -np.inf), np.full(K, -np.inf), np.empty(K)
        Ll[watched], Lr[watched], L[watched] = c.log_marginals(watched)
        if len(restarted):
            L[restarted] = self.family.log_marginal_stats(c.cluster_stats(restarted))
        c.history = np.concatenate([c.history[:, 1:], (Ll + Lr)[:, None]], axis=1)
        c.splittable |= self._burnt_in(c.history)

        # 5. sub-cluster splits of burnt-in clusters
        for k in np.flatnonzero(c.splittable[:K]):
            nl, nr = c.sizes(k)
            if nl == 0 or nr == 0:
                continue
            info["proposed_splits"] += 1
            if mh_accept(rng.random(), _split_log_ratio(alpha, nl, nr, Ll[k], Lr[k], L[k])):
                info["accepted_splits"] += 1
                c.split(k, c.subcluster(k, 1), rng)
                L = np.append(L, Lr[k])
                L[k] = Ll[k]
            elif np.isfinite(c.history[k]).all():
                # sub-labels that have had a whole window since their last restart and still
                # propose a rejected split are stuck in it: kept, they would propose it forever.
                # The two starts take turns: the worst-explained point alone finds what the
                # principal axis (or random halves) does not, an outlier's own cluster, and the
                # other way round
                if c.isolated[k]:
                    c.restart(k, rng)
                else:
                    c.isolate(k)

        # 6. merges (and random splits)
        if self.params["merges"] == "random":
            self._random_moves(c, rng, info, alpha, L)
        elif self.params["merges"] == "pairwise":
            self._pairwise_merges(c, rng, info, alpha, L)

    def _burnt_in(self, history):
        rule = self.params["burnin"]
        if rule == "none":
            return np.ones(len(history), dtype=bool)
        finite = np.isfinite(history)
        W = history.shape[1]
        with np.errstate(invalid="ignore"):  # -inf - -inf: a window not yet full, masked
            if rule == "first-nonincrease":
                return finite[:, -2:].all(axis=1) & (history[:, -1] - history[:, -2] <= 0)
            # DPMMSubClusters: the window is full and the latest value no longer rises above
            # the window's (slightly inflated) average
            return finite.all(axis=1) & (history.sum(axis=1) / (W - 0.1) - history[:, -1] < 0.01)

    def _random_moves(self, c, rng, info, alpha, L):
        """Random Dirichlet-categorical splits and random merges with the thesis ratio and
        exact selection probabilities (docs/algorithms.md §5.5): a split picks a cluster with probability
        p/K, a merge a pair (within a super-cluster) with probability (1-p)/pairs; an
        unordered split has probability 2 q(labels). Each proposal is an exact MH move on
        the partition whatever happened earlier in the step. ``L``: the log marginal of every
        cluster, kept current here."""
        fam = self.family
        p = self.params["random_split_prob"]
        # the living clusters and their statistics, read again only after an accepted move
        # (each proposal found them anew: a dozen numpy calls of ~80 us per proposal)
        living = totals = None
        for _ in range(self.params["random_moves"]):
            if living is None:
                living, totals = c.living(), None
            ids, _, pairs = living
            Kc = len(ids)
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
                pairs_after = pairs + int((c.group[ids] == c.group[k]).sum())
                log_h = random_split_log_ratio(alpha, p, Kc, pairs_after, nl, nr, L_halves[0], L_halves[1], L[k])
                if mh_accept(rng.random(), log_h):
                    info["accepted_splits"] += 1
                    c.split(k, moved, rng)
                    L = np.append(L, L_halves[1])
                    L[k] = L_halves[0]
                    living = None
                else:
                    c.reject_split(k, moved)
            elif pairs > 0:
                a, b = c.pick_pair(rng, living)
                info["proposed_merges"] += 1
                totals = c.totals() if totals is None else totals
                na, nb, Lab = self._merge_terms(totals, a, b)
                log_h = -random_split_log_ratio(alpha, p, Kc - 1, pairs, na, nb, L[a], L[b], Lab)
                if mh_accept(rng.random(), log_h):
                    info["accepted_merges"] += 1
                    c.merge(a, b)
                    L[a] = Lab
                    living = None

    def _merge_terms(self, totals, a, b):
        """(n_a, n_b, L(a u b)) from ``totals``, the statistics of every cluster
        (:meth:`Clusters.totals`)."""
        fam = self.family
        st = fam.take_stats(totals, [a, b])
        na, nb = st.n
        return na, nb, fam.log_marginal_stats(fam.sum_pairs(st))[0]

    def _pairwise_merges(self, c, rng, info, alpha, L):
        """DPMMSubClusters merges: every pair of splittable clusters (within a super-cluster,
        as Chang's code tests them), in order, with the random-merge ratio and no selection
        terms (approximate: no paired reverse move)."""
        K = c.K
        merged = np.zeros(K, dtype=bool)
        totals = c.totals()
        for a in range(K):
            for b in range(a + 1, K):
                if merged[a] or merged[b] or not (c.alive[a] and c.alive[b]) or c.group[a] != c.group[b]:
                    continue
                if not (c.splittable[a] and c.splittable[b]):
                    continue
                info["proposed_merges"] += 1
                na, nb, Lab = self._merge_terms(totals, a, b)
                log_h_split = _split_log_ratio(alpha, na, nb, L[a], L[b], Lab)
                if mh_accept(rng.random(), -log_h_split + _log_q_dircat(na, nb, alpha)):
                    info["accepted_merges"] += 1
                    c.merge(a, b)
                    L[a] = Lab
                    merged[a] = merged[b] = True
                    totals = c.totals()


def _survivors(alive):
    """The living clusters, and every cluster's number among them (None where none was merged
    away, so that nothing needs renumbering)."""
    keep = np.flatnonzero(alive)
    if len(keep) == len(alive):
        return keep, None
    remap = np.full(len(alive), -1, dtype=np.int64)
    remap[keep] = np.arange(len(keep))
    return keep, remap


class SubClustersSuper(SubClusters):
    """Sub-clusters with data-dependent super-clusters (``subc-supc``)."""

    name = "subc-supc"
    supercluster = True
    info_columns = {**{k: v for k, v in SubClusters.info_columns.items() if k not in SHARD_INFO_COLUMNS},
                    "n_superclusters": "super-clusters the labels were drawn within this step"}
    supports_backend = False  # its label step (within super-clusters) runs in-process only


class SubClustersSuperApprox(SubClustersSuper):
    """``subc-supc`` proposing sub-cluster splits every iteration without waiting for the
    sub-clusters to burn in (``subc-supc-approx``; Chang & Fisher's approximation), run as
    in Chang's released code (docs/algorithms.md §5.7): a label step that may empty a
    cluster (it is deleted) and merges of every pair within a super-cluster each step.

    With the exact pieces of ``subc-supc`` instead (no cluster emptied, 5 random merge
    proposals a step) the unburnt splits outran the merges: 100k x 2-D, ten clusters, from
    50 clusters ~700 at the end, from one cluster at alpha = 100 ~700 (docs/algorithms.md §5.7).
    """

    name = "subc-supc-approx"
    keeps_clusters = False
    options = {**SubClustersSuper.options,
               "burnin": Option("none", OneOf(("window", "first-nonincrease", "none")), "see subc"),
               "merges": Option("pairwise", OneOf(("random", "pairwise", "none")), "see subc")}
