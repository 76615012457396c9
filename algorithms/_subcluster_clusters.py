"""The clusters of one ``subc`` step, as its moves see and edit them (see :mod:`.subcluster`).

:class:`Clusters` keeps, consistent with the labels, what the moves change: the statistics
of every cluster's two sub-clusters (rows ``2k``, ``2k + 1``; a cluster's statistics are
their sum), the burn-in history, the splittable flags, the super-cluster of each cluster and
whether it still exists; it splits, merges and restarts clusters on the points in process.
:class:`ShardedClusters` offers the same operations when the points live on shards: the
master keeps the statistics, and the edits reach the shards through the protocol of
:mod:`._subcluster_shards`.
"""
from __future__ import annotations

import numpy as np

from ._subcluster_shards import Edit, Restructure, merge_labels, pick_worst, pooled_moments, restructure
from ._numerics import centred_rows, column_mean, one_blas_thread, put_at, rows_where, take_rows
from .labelstep import take_params


def subcluster_rows(ks):
    """Rows of the sub-cluster statistics of clusters ``ks``: 2k, 2k + 1 for each."""
    return (2 * np.asarray(ks)[:, None] + np.arange(2)).ravel()


class Clusters:
    """Everything the moves of one step change, kept consistent with the labels: the
    sub-cluster statistics, burn-in history, splittable flags, super-cluster of each
    cluster and whether it still exists. Clusters are only appended or marked dead; the
    step compacts at the end."""

    def __init__(self, family, X, z, zs, sub, history, splittable, group=None, principal=False, params=None,
                 isolated=None):
        self.family, self.X, self.z, self.zs = family, X, z, zs
        self.principal = principal
        self.params = params  #: the family's parameters of the step's clusters (read by :meth:`isolate`)
        self.sub, self.history, self.splittable = sub, history, splittable
        K = len(splittable)
        #: sub-labels last started from one point (:meth:`isolate`), not by :meth:`restart` or a merge
        self.isolated = np.zeros(K, dtype=bool) if isolated is None else isolated
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
        return rows_where(self.z, k)

    def subcluster(self, k, h):
        """The points of sub-cluster ``h`` of cluster k (what :meth:`split` moves)."""
        return rows_where(self.z, k, self.zs, h)

    def cluster_stats(self, ks):
        """Statistics of clusters ``ks`` (sums of their sub-clusters')."""
        return self.family.sum_pairs(self.family.take_stats(self.sub, subcluster_rows(ks)))

    def totals(self):
        """Statistics of every cluster, the same numbers as :meth:`cluster_stats` (a snapshot:
        the random moves read it until one of them is accepted)."""
        return self.family.sum_pairs(self.sub)

    def random_halves(self, k, w_right, rng):
        """A random Dirichlet-categorical labelling of cluster k's points (each goes right
        with probability ``w_right``): the statistics of the two halves, and the right half
        (what :meth:`split` moves if the split is accepted)."""
        members = self.members(k)
        side = (rng.random(members.size) < w_right).astype(np.int64)
        return self.family.stats(take_rows(self.X, members), side, 2), members[side == 1]

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
        # drawn even where the principal axis decides: skipping it (up to 10^5 draws a restart
        # at a million points) moved the stream, and a seeded screen chain then settled later
        side = rng.integers(0, 2, members.size)
        Xm = take_rows(self.X, members)
        with one_blas_thread():  # the statistics after the products may be a parallel region
            if self.principal and members.size > 2 and isinstance(self.X, np.ndarray):
                # DPMMSubClusters' "smart splits": halves across the direction of largest spread
                centred = centred_rows(Xm, column_mean(Xm))
                axis = np.linalg.eigh(centred.T @ centred)[1][:, -1]
                side = (centred @ axis > 0).astype(np.int64)
            put_at(self.zs, members, side)
            self.family.set_stats(self.sub, [2 * k, 2 * k + 1], self.family.stats(Xm, side, 2))
        self.history[k] = -np.inf
        self.splittable[k] = False
        self.isolated[k] = False

    def isolate(self, k):
        """New sub-labels for cluster k after its sub-cluster split was rejected: sub-cluster 1
        is the one point that k's parameters explain worst, sub-cluster 0 the rest; it must
        burn in again before it can split.

        From the principal axis or random halves the sub-labels settle on a balanced split;
        when that split is rejected they stay there and the same split is proposed, and
        rejected, every iteration. From one point they either stay there (an outlier: the
        split the posterior favours on small real data) or grow into the structure around it.
        """
        members = self.members(k)
        Xm = take_rows(self.X, members)
        with one_blas_thread():  # as in restart
            loglik = self.family.loglik(Xm, take_params(self.params, [k]))[:, 0]
            side = np.zeros(members.size, dtype=np.int64)
            side[np.argmin(loglik)] = 1
            put_at(self.zs, members, side)
            self.family.set_stats(self.sub, [2 * k, 2 * k + 1], self.family.stats(Xm, side, 2))
        self.history[k] = -np.inf
        self.splittable[k] = False
        self.isolated[k] = True

    def split(self, k, moved, rng):
        """Points ``moved`` of cluster k form a new cluster; both restart."""
        new = self.K
        self.sub = self.family.pad_stats(self.sub, 2 * (new + 1))
        self.history = np.vstack([self.history, np.full(self.history.shape[1], -np.inf)])
        self.splittable = np.append(self.splittable, False)
        self.isolated = np.append(self.isolated, False)
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
        merge_labels(self.z, self.zs, a, b)
        fam.set_stats(self.sub, [2 * a, 2 * a + 1], both)
        fam.set_stats(self.sub, [2 * b, 2 * b + 1], fam.empty_stats(2))
        self.alive[b] = False
        self.history[a] = -np.inf
        self.splittable[a] = False
        self.isolated[a] = False

    def living(self):
        """(the living clusters, how many of them each super-cluster holds, the number of
        unordered pairs of them within super-clusters): what a random proposal reads, the same
        until a move is accepted."""
        ids = np.flatnonzero(self.alive)
        counts = np.bincount(self.group[ids])
        return ids, counts, int((counts * (counts - 1) // 2).sum())

    def pick_pair(self, rng, living=None):
        """A uniformly random pair of living clusters in the same super-cluster (``living``:
        :meth:`living`, if known)."""
        ids, counts, _ = self.living() if living is None else living
        # the group as rng.choice(p=...) draws it (one uniform into the weights' cdf), without
        # its checks of p: half the cost of a merge proposal once the marginal was compiled.
        # With one group the uniform is drawn all the same (the stream), its answer known
        if len(counts) == 1:
            rng.random()
            members = ids
        else:
            cdf = np.cumsum(counts * (counts - 1) / 2.0)
            cdf /= cdf[-1]
            g = int(np.searchsorted(cdf, rng.random(), side="right"))
            members = ids[self.group[ids] == g]
        a, b = members[rng.choice(len(members), size=2, replace=False)]
        return int(a), int(b)


class ShardedClusters(Clusters):
    """:class:`Clusters` whose points live on shards. The master keeps the statistics of
    every cluster and sub-cluster; an edit of the partition is queued and reaches the shards
    with the next map (:meth:`sync`, or a random split proposal). The sub-cluster statistics
    of a restarted cluster are unknown ("stale") until then; nothing reads them before.

    ``drawn``: what the step's label draw brought back besides the statistics (see
    :class:`._subcluster_shards.Drawn`, pooled over shards): the moments of some sub-clusters
    ``(their rows, (n, mean, centred scatter))`` and the worst-explained point of some
    clusters (cluster -> (shard, row)), each None if not asked for. A restart
    of a cluster still made of the draw's sub-clusters (untouched, or one side of a sub-cluster
    split) then needs no map to find its principal axis or its worst point."""

    def __init__(self, family, shards, sub, history, splittable, principal, params=None, isolated=None,
                 drawn=(None, None)):
        super().__init__(family, None, None, None, sub, history, splittable, principal=principal, params=params,
                         isolated=isolated)
        self.shards = shards
        self.clusters = family.sum_pairs(sub)  #: statistics of every cluster (current even when stale)
        self.stale = set()
        self.to_isolate = set()  #: clusters to :meth:`isolate` at sync (their statistics are stale too)
        self.edits = []
        self.drawn_moments, self.drawn_worst = drawn
        #: the draw's sub-clusters each cluster is made of (None: other points since)
        self.origin = [(2 * k, 2 * k + 1) for k in range(self.K)]

    def size(self, k):
        return self.clusters.n[k]

    def members(self, k):
        raise RuntimeError("the points of a sharded cluster live on the shards")

    def cluster_stats(self, ks):
        return self.family.take_stats(self.clusters, np.asarray(ks))

    def totals(self):
        return self.clusters

    def log_marginals(self, ks):
        if (self.stale | self.to_isolate).intersection(np.asarray(ks).tolist()):
            raise RuntimeError("sub-cluster statistics of restarted clusters are read before sync()")
        return super().log_marginals(ks)

    def subcluster(self, k, h):
        return ("sub", k, h)

    def restart(self, k, rng, members=None):
        self.stale.add(int(k))
        self.to_isolate.discard(int(k))
        self.history[k] = -np.inf
        self.splittable[k] = False
        self.isolated[k] = False

    def isolate(self, k):
        self.to_isolate.add(int(k))
        self.stale.discard(int(k))
        self.history[k] = -np.inf
        self.splittable[k] = False
        self.isolated[k] = True

    def _grow(self):
        K = self.K + 1
        self.sub = self.family.pad_stats(self.sub, 2 * K)
        self.clusters = self.family.pad_stats(self.clusters, K)
        self.history = np.vstack([self.history, np.full(self.history.shape[1], -np.inf)])
        self.splittable = np.append(self.splittable, False)
        self.isolated = np.append(self.isolated, False)
        self.alive = np.append(self.alive, True)
        self.origin.append(None)

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
            left, right = ((2 * k,), (2 * k + 1,)) if self.origin[k] == (2 * k, 2 * k + 1) else (None, None)
        else:  # the shards have moved the right half already
            assert moved[1] == new
            parts = moved[2]
            left = right = None
        self._grow()
        self.origin[k], self.origin[new] = left, right
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
        self.isolated[a] = False
        self.stale.difference_update((a, b))  # the merge sets the sub-labels of both
        self.to_isolate.difference_update((a, b))
        self.edits.append(Edit("merge", a, b))
        self.origin[a] = self.origin[b] = None

    def sync(self, remap=None):
        """Carry out the queued edits on the shards, give restarted clusters new sub-labels
        (random, or the sides of their principal axis: then the clusters' moments are
        fetched first), isolate the worst-explained point of isolated clusters (found first,
        with the moments) and bring back their sub-cluster statistics; then ``remap``."""
        stale = [k for k in sorted(self.stale) if self.alive[k]]
        isolated = [k for k in sorted(self.to_isolate) if self.alive[k]]
        if not (self.edits or stale or isolated or remap is not None):
            return
        edits, self.edits = tuple(self.edits), []
        principal = [k for k in stale if self.principal and self.clusters.n[k] > 2]
        # cluster -> (mean, centred scatter), cluster -> (shard, row): the moments from the
        # clusters' statistics where the family holds them precisely; else from the draw where
        # it brought them, from a map of their own otherwise
        moments, worst = self._stats_moments(principal), self._drawn_worst(isolated)
        moments.update(self._drawn_moments([k for k in principal if k not in moments]))
        fetch_moments = [k for k in principal if k not in moments]
        fetch_worst = [k for k in isolated if k not in worst]
        if fetch_moments or fetch_worst:
            parts = self.shards.map(restructure, Restructure(
                edits, moments=np.array(fetch_moments) if fetch_moments else None,
                worst=(np.array(fetch_worst), take_params(self.params, fetch_worst)) if fetch_worst else None))
            edits = ()
            if fetch_moments:
                _, mean, scatter = pooled_moments([p.moments for p in parts])
                moments.update(zip(fetch_moments, zip(mean, scatter)))
            if fetch_worst:
                worst.update(pick_worst(fetch_worst, [p.worst for p in parts]))
        axes = points = None
        if principal:
            mean, scatter = (np.array([moments[k][i] for k in principal]) for i in (0, 1))
            axes = (principal, mean, np.linalg.eigh(scatter)[1][:, :, -1])
        if isolated:
            shard, row = (np.array([worst[k][i] for k in isolated]) for i in (0, 1))
            points = (np.array(isolated), shard, row)
        restarted = stale + isolated
        restart = np.array(restarted, dtype=np.int64) if restarted else None
        parts = self.shards.map(restructure, Restructure(edits, restart=restart, principal=axes, isolate=points,
                                                         remap=remap))
        if restarted:
            fam = self.family
            fam.set_stats(self.sub, subcluster_rows(restart), fam.sum_stats([p.restarted for p in parts]))
        self.stale.clear()
        self.to_isolate.clear()

    def _stats_moments(self, ks) -> dict:
        """cluster -> (mean, centred scatter) of the clusters of ``ks`` whose statistics give
        them precisely (:meth:`Family.moments_from_stats`; none where the family cannot)."""
        if not ks:
            return {}
        got = self.family.moments_from_stats(self.family.take_stats(self.clusters, np.asarray(ks)))
        if got is None:
            return {}
        mean, scatter, precise = got
        return {k: (mean[i], scatter[i]) for i, k in enumerate(ks) if precise[i]}

    def _drawn_moments(self, ks) -> dict:
        """cluster -> (mean, centred scatter) from the draw's sub-cluster moments, for the
        clusters of ``ks`` still made of the draw's sub-clusters."""
        if self.drawn_moments is None:
            return {}
        rows, (n, mean, scatter) = self.drawn_moments
        where = dict(zip(rows.tolist(), range(len(rows))))
        out = {}
        for k in ks:
            if self.origin[k] is not None and all(r in where for r in self.origin[k]):
                at = [where[r] for r in self.origin[k]]  # one sub-cluster, or both: pooled
                _, m, S = pooled_moments([(n[[i]], mean[[i]], scatter[[i]]) for i in at])
                out[k] = (m[0], S[0])
        return out

    def _drawn_worst(self, ks) -> dict:
        """cluster -> (shard, row) of its worst-explained point found by the draw, for the
        clusters of ``ks`` it looked at whose points are still the draw's."""
        found = self.drawn_worst or {}
        return {k: found[k] for k in ks if k in found and self.origin[k] == (2 * k, 2 * k + 1)}

