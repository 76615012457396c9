"""Collapsed Gibbs with super-clusters (Lovell et al. 2012; Williamson, Dubey & Xing 2013), docs/algorithms.md §3.

The clusters are grouped into ``P`` super-clusters. A DP(alpha) is a Dir(alpha/P, ...)
mixture of ``P`` independent DP(alpha/P), so given the super-cluster of every cluster the
super-clusters are independent DP(alpha/P) mixtures of their own points (docs/algorithms.md §3.2):

* local step: ``local_sweeps`` (default 1) collapsed Gibbs sweeps (Neal's Algorithm 3,
  concentration ``alpha / P``, random scan) per super-cluster, the ``P`` super-clusters running
  concurrently on threads (the compiled sweep releases the GIL); points never leave their
  super-cluster here;
* global step: every cluster is moved to a uniformly random super-cluster. Given the
  partition, the super-clusters of the clusters are i.i.d. uniform under the augmented joint
  ``p(z, s) = Gamma(alpha) / Gamma(alpha + N) (alpha / P)^K prod_k Gamma(n_k)``, so this is an
  exact Gibbs draw (an MH move with acceptance 1), not the count-based acceptance of the Wang &
  Lin code, which biases the partition (docs/algorithms.md §3.3, Appendix A).

The partition marginal of the augmented joint is the DP posterior, so the sampler is exact.
All randomness (scan orders, uniforms, super-cluster draws) is drawn from ``state.rng``
before the threads start, so labels do not depend on thread timing.
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ._numerics import take_rows
from .base import Sampler
from .collapsed import prior_predictive, run_sweep
from .constraints import Interval, Option
from .partitions import compact
from .state import State

#: below this many points a step runs its super-clusters one after the other: starting
#: threads would cost more than the sweeps (the result is the same either way)
THREADED_MIN_POINTS = 20_000


@dataclass
class SuperclusterState(State):
    """Sampler state plus the auxiliary super-cluster of every cluster."""

    superclusters: np.ndarray | None = None  #: (K,) super-cluster of cluster k = 0..K-1 of ``labels``
    log_prior_pred: np.ndarray | None = None  #: log p(x_i) under the prior (new-cluster term)


@dataclass
class Block:
    """The points of one super-cluster, gathered in their first scan order, with everything
    one thread needs to sweep them (its own labels, uniforms and later scan orders)."""

    X: object  #: the block's rows of X
    labels: np.ndarray  #: (n,) local cluster slots 0..K_j-1 (updated by the sweeps)
    log_prior_pred: np.ndarray  #: (n,)
    uniforms: np.ndarray  #: (sweeps, n)
    orders: list  #: scan order of each sweep over the block (positions 0..n-1)
    n_clusters: int  #: K_j before the sweeps


def reassign_clusters(rng: np.random.Generator, n_clusters: int, n_superclusters: int) -> np.ndarray:
    """The exact global step (docs/algorithms.md §3.3): a new super-cluster for every cluster.

    Given the partition, the super-clusters of the clusters are i.i.d. uniform under the
    augmented joint (docs/algorithms.md §3.2), so drawing them afresh is a Gibbs step: an MH move of
    whole clusters whose acceptance is 1. (The Wang & Lin code's count-based acceptance
    biases the partition; ``tests/test_supercluster.py`` shows both.)

    Parameters
    ----------
    rng : numpy.random.Generator
    n_clusters : int
        K, the number of clusters.
    n_superclusters : int
        P.

    Returns
    -------
    (K,) int64
        The super-cluster of every cluster.
    """
    return rng.integers(n_superclusters, size=n_clusters)


def group_by_supercluster(point_supercluster, n_superclusters: int, perm) -> tuple[np.ndarray, np.ndarray]:
    """Points grouped by super-cluster, each group in the order of ``perm``.

    Parameters
    ----------
    point_supercluster : (N,) int
        Super-cluster of every point.
    n_superclusters : int
    perm : (N,) int
        A uniform random permutation of the points: within each group the points keep its
        order, so each group is itself in uniformly random order.

    Returns
    -------
    order : (N,) int64
        Point indices, group 0 first.
    bounds : (P + 1,) int64
        Group ``j`` is ``order[bounds[j]:bounds[j + 1]]``.
    """
    order = perm[np.argsort(point_supercluster[perm], kind="stable")]
    sizes = np.bincount(point_supercluster, minlength=n_superclusters)
    return order, np.concatenate(([0], np.cumsum(sizes)))


def sweep_block(family, block: Block, log_alpha: float) -> tuple[np.ndarray, int]:
    """Collapsed Gibbs sweeps over one super-cluster's points, with concentration
    ``exp(log_alpha)`` for a new cluster.

    Returns
    -------
    labels : (n,) int64
        The block's new local labels, compact (``0..K-1``).
    K : int
        Number of clusters in the block.
    """
    K = block.n_clusters
    kdata = family.kernel_data(block.X)
    for order, uniforms in zip(block.orders, block.uniforms):
        run_sweep(family, block.X, kdata, block.labels, order, uniforms, log_alpha,
                  block.log_prior_pred, K + max(2, K // 4))
        block.labels, K = compact(block.labels)
    return block.labels, K


class SuperclusterGibbs(Sampler):
    """Collapsed Gibbs with ``P`` super-clusters swept in parallel (``gibbs-supercluster``).

    Options
    -------
    n_superclusters : int
        ``P``, the number of super-clusters (one thread each); ``P = 1`` is plain collapsed
        Gibbs.
    local_sweeps : int
        Collapsed Gibbs sweeps of every super-cluster per step, between two global steps.

    Notes
    -----
    ``state.info`` holds ``n_clusters`` and the load of the local step just run: ``load_j``
    (points swept by super-cluster ``j``) and ``load_imbalance`` (max / mean load, 1 = even).
    A posteriori whole clusters sit on uniformly random super-clusters, so the load is poorly
    balanced whenever a few large clusters dominate (Gal & Ghahramani 2014).
    """

    name = "gibbs-supercluster"
    exact = True
    info_columns = {
        "load_{j}": "points swept by super-cluster j in this step's local sweeps",
        "load_imbalance": "the largest super-cluster load over the mean load (1 = even)",
    }
    options = {
        "n_superclusters": Option(2, Interval(int, 1), "number of super-clusters P (threads)"),
        "local_sweeps": Option(1, Interval(int, 1), "collapsed Gibbs sweeps per super-cluster per step"),
    }

    def _init(self, X, labels, rng):
        labels, K = compact(labels)
        # a draw from p(s | z): i.i.d. uniform super-clusters, so the chain starts in the
        # augmented model's conditional and the initial partition alone matters
        superclusters = reassign_clusters(rng, K, self.params["n_superclusters"])
        return SuperclusterState(X, labels, rng, superclusters=superclusters,
                                 log_prior_pred=prior_predictive(self.family, X))

    def _step(self, state):
        P = self.params["n_superclusters"]
        labels, superclusters, loads = self._local_step(state)
        K = len(superclusters)
        superclusters = reassign_clusters(state.rng, K, P)  # global step: exact Gibbs draw of s | z
        state.labels, state.superclusters = labels, superclusters
        state.info = {"n_clusters": K, **{f"load_{j}": int(n) for j, n in enumerate(loads)},
                      "load_imbalance": float(loads.max() / loads.mean())}
        return state

    def _local_step(self, state):
        """Sweep every super-cluster given the super-cluster assignment.

        Returns the new compact labels, the super-cluster of each new cluster and the number
        of points of each super-cluster.
        """
        P, sweeps = self.params["n_superclusters"], self.params["local_sweeps"]
        rng, family = state.rng, self.family
        N = len(state.labels)
        point_sc = state.superclusters[state.labels]
        # every random number of the step is drawn here, in a fixed sequence, before any thread
        order, bounds = group_by_supercluster(point_sc, P, rng.permutation(N))
        uniforms = rng.random((sweeps, N))
        # one gather puts every block's points contiguous and in scan order (sequential
        # memory access in the sweeps; a single fancy-index also for sparse input)
        X, lpp, scanned = take_rows(state.X, order), state.log_prior_pred[order], state.labels[order]
        blocks = []
        for j in range(P):
            a, b = bounds[j], bounds[j + 1]
            n = b - a
            # the first sweep visits the block in its gathered (random) order, the others in
            # fresh uniform orders
            orders = [np.arange(n)] + [rng.permutation(n) for _ in range(sweeps - 1)]
            local, K_j = compact(scanned[a:b]) if n else (scanned[a:b], 0)
            blocks.append(Block(X[a:b], local, lpp[a:b], uniforms[:, a:b], orders, K_j))

        log_alpha = math.log(state.alpha / P)
        busy = [j for j in range(P) if bounds[j + 1] > bounds[j]]
        if len(busy) > 1 and N >= THREADED_MIN_POINTS:
            with ThreadPoolExecutor(max_workers=len(busy)) as pool:
                results = list(pool.map(lambda j: sweep_block(family, blocks[j], log_alpha), busy))
        else:
            results = [sweep_block(family, blocks[j], log_alpha) for j in busy]

        # stack the super-clusters' compact local labels into one compact label space
        counts = np.zeros(P, dtype=np.int64)
        for j, (_, K_j) in zip(busy, results):
            counts[j] = K_j
        offsets = np.concatenate(([0], np.cumsum(counts)))
        labels = np.empty(N, dtype=np.int64)
        for j, (local, _) in zip(busy, results):
            labels[order[bounds[j]:bounds[j + 1]]] = offsets[j] + local
        return labels, np.repeat(np.arange(P), counts), np.diff(bounds)
