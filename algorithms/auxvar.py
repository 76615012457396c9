"""Williamson, Dubey & Xing (2013) auxiliary-variable sampler on workers, ``auxvar`` (docs/algorithms.md §3).

The super-cluster representation of ``gibbs-supercluster`` with one super-cluster per
worker: a DP(alpha) is a Dir(alpha/P, ...) mixture of P independent DP(alpha/P), so given
the worker of every cluster, the workers hold independent DP(alpha/P) mixtures of their own
points (docs/algorithms.md §3.2). The data of a cluster live on its worker.

One iteration:

1. *move* (every shard): the rows of every cluster the master reassigned to another worker
   leave their shard, with their global ids, and travel to the master;
2. *local step* (every shard): the arriving rows join their new shard; then ``local_sweeps``
   collapsed Gibbs sweeps (Neal's Algorithm 3, random scan) with concentration ``alpha / P``
   over the shard's points: a point may join the shard's clusters or a new one, never a
   cluster of another worker. The shard returns the size of each of its clusters;
3. *global step* (master): every cluster gets a uniformly random worker
   (:func:`algorithms.supercluster.reassign_clusters`: the exact Gibbs draw of docs/algorithms.md §3.3,
   an MH move with acceptance 1; the count-based acceptance of the Wang & Lin code would
   bias the partition). Nothing moves yet: step 1 of the next iteration carries it out.

So the chain is the one of ``gibbs-supercluster`` with the super-clusters as places, and is
exact (the enumeration harness runs it on two serial shards). The backend offers no
worker-to-worker channel, so moving rows go worker -> master -> worker and every moved
byte is counted twice (``moved_bytes`` is their size once). With P workers a fraction
(P - 1) / P of the points moves every iteration: this, not the sampling, is what the
algorithm costs on a network (Wang & Lin's Table 1: 4.8 MB per iteration).

Shard labels name the place of a cluster: cluster ``c`` of worker ``j`` is labelled
``j + P c`` (``label % P`` is its worker). The master picks the new labels when it moves
clusters, so labels stay unique across workers without any other coordination.

``state.info``: ``n_clusters``; ``load_j`` (points swept by worker ``j`` in this iteration)
and ``load_imbalance`` (max / mean load: a posteriori whole clusters sit on random workers,
so the load is unbalanced when a few large clusters dominate, Gal & Ghahramani 2014);
``moved_points``, ``moved_clusters`` and ``moved_bytes`` of this iteration's move; and
``bytes_sent``, ``bytes_received``, ``messages``, ``compute_s``, ``compute_max_s`` and
``workers_lost`` (:meth:`~algorithms.backends.ShardGroup.take_stats`).
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from ._numerics import take_rows
from .backends import ShardedState
from .backends.base import SHARD_INFO_COLUMNS
from .base import Sampler
from .collapsed import prior_predictive
from .constraints import Interval, Option
from .partitions import compact
from .supercluster import Block, reassign_clusters, sweep_block


class Rows(NamedTuple):
    """Rows of whole clusters in transit from one worker to another, grouped by cluster."""

    X: Any  #: (n, D) rows (dense or CSR), cluster after cluster
    ids: np.ndarray  #: (n,) global index of every row
    clusters: np.ndarray  #: labels of the clusters, in the order of their rows
    sizes: np.ndarray  #: number of rows of each cluster


class LocalStep(NamedTuple):
    """What the master sends a shard for its local step."""

    incoming: tuple  #: :class:`Rows` arriving from the other workers
    log_alpha: float  #: log(alpha / P), the new-cluster weight of a worker's DP
    sweeps: int  #: collapsed Gibbs sweeps over the shard


class AuxVarState(ShardedState):
    """Master state: the shards, the move decided at the end of the last step (carried out
    at the start of the next) and the cluster sizes each shard reported."""

    def __init__(self, X, shards, rng, relabel, counts):
        super().__init__(X, shards, rng)
        self.relabel = relabel  #: per shard, (K_j,) new label of each of its clusters; None: none
        self.counts = counts  #: per shard, (K_j,) sizes of its clusters after the last local step


# ---- map functions (run where the shards are) ---------------------------------------------

def _row_ids(shard) -> np.ndarray:
    """Global index of every row of ``shard``."""
    return np.arange(shard.offset, shard.offset + len(shard.labels)) if shard.ids is None else shard.ids


def _nbytes(rows: Rows) -> int:
    """Bytes of the arrays of moving rows (rows, ids and cluster sizes), each counted once."""
    X = rows.X
    data = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes if sp.issparse(X) else X.nbytes
    return int(data + rows.ids.nbytes + rows.clusters.nbytes + rows.sizes.nbytes)


def _stack(parts):
    """Row-wise concatenation of dense arrays or CSR matrices."""
    if sp.issparse(parts[0]):
        return sp.vstack(parts, format="csr")
    return np.concatenate(parts)


def send_away(shard, relabel) -> tuple:
    """The move, on one shard: relabel its clusters (``relabel[c]`` is the new label of its
    cluster ``c``; ``None`` keeps the labels) and hand over the rows of every cluster whose
    label now names another worker. Returns one :class:`Rows` (or ``None``) per worker."""
    P = shard.static["n_superclusters"]
    labels = shard.labels if relabel is None else relabel[shard.labels // P]
    ids = _row_ids(shard)
    place = labels % P
    out = [None] * P
    for dest in np.unique(place):
        if dest == shard.index:
            continue
        leaving = np.flatnonzero(place == dest)
        leaving = leaving[np.argsort(labels[leaving], kind="stable")]  # cluster after cluster
        clusters, sizes = np.unique(labels[leaving], return_counts=True)
        out[dest] = Rows(take_rows(shard.X, leaving), ids[leaving], clusters, sizes)
    stay = np.flatnonzero(place == shard.index)
    if stay.size < len(labels):  # new arrays: the shard's previous version stays intact
        shard.X, shard.ids = take_rows(shard.X, stay), ids[stay]
    shard.labels = labels[stay]
    return tuple(out)


def local_step(shard, payload: LocalStep) -> np.ndarray:
    """The local step on one shard: take in the arriving rows, then collapsed Gibbs sweeps
    with concentration ``alpha / P`` (the sweep of ``gibbs-supercluster``). Returns the
    sizes of the shard's clusters (``K_j`` ints), which are all the master needs."""
    family, P, j = shard.static["family"], shard.static["n_superclusters"], shard.index
    if payload.incoming:
        rows = payload.incoming
        shard.X = _stack([shard.X] + [r.X for r in rows])
        shard.ids = np.concatenate([_row_ids(shard)] + [r.ids for r in rows])
        shard.labels = np.concatenate([shard.labels] + [np.repeat(r.clusters, r.sizes) for r in rows])
    n = len(shard.labels)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    local, K = compact(shard.labels // P)
    ids = _row_ids(shard)
    rng = shard.rng
    # as in gibbs-supercluster: the first sweep visits the points gathered in a uniformly
    # random order (sequential memory access), later ones in fresh uniform orders
    order = rng.permutation(n)
    uniforms = rng.random((payload.sweeps, n))
    X = take_rows(shard.X, order)
    orders = [np.arange(n)] + [rng.permutation(n) for _ in range(payload.sweeps - 1)]
    block = Block(X, local[order], shard.static["log_prior_pred"][ids[order]], uniforms, orders, K)
    swept, K = sweep_block(family, block, payload.log_alpha)
    shard.labels = np.empty(n, dtype=np.int64)
    shard.labels[order] = j + P * swept
    return np.bincount(swept, minlength=K)


# ---- the sampler ---------------------------------------------------------------------------

def place_clusters(superclusters: np.ndarray, n_superclusters: int) -> np.ndarray:
    """Labels ``j + P c`` for clusters placed on workers ``superclusters``: ``c`` numbers the
    clusters of each worker ``0, 1, ...`` in the order given."""
    P = n_superclusters
    rank = np.empty(len(superclusters), dtype=np.int64)
    for j in range(P):
        on_j = np.flatnonzero(superclusters == j)
        rank[on_j] = np.arange(on_j.size)
    return superclusters + P * rank


class AuxiliaryVariable(Sampler):
    """Auxiliary-variable sampler with one super-cluster per worker (registry name
    ``auxvar``); see the module docstring.

    Runs on any backend (``algorithms.make("auxvar", ..., backend=...)``): ``P`` is the
    backend's number of shards; the default, one in-process shard, is collapsed Gibbs.

    Options
    -------
    local_sweeps : int
        Collapsed Gibbs sweeps of every worker per iteration, between two global steps.
    """

    name = "auxvar"
    exact = True
    supports_backend = True
    info_columns = {
        **SHARD_INFO_COLUMNS,
        "load_{j}": "points swept by worker j in this iteration",
        "load_imbalance": "the largest worker load over the mean load (1 = even)",
        "moved_points": "points that moved to their cluster's new worker at the start of this iteration",
        "moved_clusters": "clusters that moved to a new worker at the start of this iteration",
        "moved_bytes": "serialised size of the moved rows, counted once (they cross the wire twice)",
    }
    options = {"local_sweeps": Option(1, Interval(int, 1), "collapsed Gibbs sweeps per worker per iteration")}

    @property
    def n_superclusters(self) -> int:
        return self.backend.n_shards

    def _init(self, X, labels, rng):
        labels, K = compact(labels)
        P = self.n_superclusters
        # start in the augmented model's conditional: clusters on i.i.d. uniform workers; the
        # first iteration's move takes their points there from the blocks they start on
        placed = place_clusters(reassign_clusters(rng, K, P), P)
        # log p(x_i) under the prior (the new-cluster weight) is a per-run constant: computed
        # once and given to every worker, rows that arrive on a worker need nothing recomputed
        static = {"family": self.family, "n_superclusters": P, "log_prior_pred": prior_predictive(self.family, X)}
        shards = self.backend.distribute(X, placed[labels], self.seed, static=static,
                                         n_points=self.family.n_points(X))
        state = AuxVarState(X, shards, rng, relabel=[None] * P, counts=None)
        state.info = {"n_clusters": K, **shards.take_stats()}
        return state

    def _n_clusters(self, state):
        # counted by the last local step (or the start), not gathered from the shards
        return int(state.info["n_clusters"])

    def _step(self, state):
        P, shards = self.n_superclusters, state.shards

        # 1. carry out the last global step: rows leave for their cluster's new worker
        sent = shards.results([shards.submit(j, send_away, state.relabel[j]) for j in range(P)])
        incoming = [tuple(out[d] for out in sent if out[d] is not None) for d in range(P)]
        moving = [r for rows in incoming for r in rows]

        # 2. local collapsed Gibbs on every worker, alpha / P
        log_alpha = math.log(state.alpha / P)
        sweeps = self.params["local_sweeps"]
        counts = shards.results([shards.submit(j, local_step, LocalStep(incoming[j], log_alpha, sweeps))
                                 for j in range(P)])

        # 3. global step: every cluster to a uniformly random worker (moved next iteration)
        K_j = np.array([len(c) for c in counts])
        labels = place_clusters(reassign_clusters(state.rng, int(K_j.sum()), P), P)
        bounds = np.concatenate(([0], np.cumsum(K_j)))
        state.relabel = [labels[bounds[j]:bounds[j + 1]] for j in range(P)]
        state.counts = counts

        loads = np.array([c.sum() for c in counts], dtype=np.int64)
        state.info = {"n_clusters": int(K_j.sum()), **{f"load_{j}": int(n) for j, n in enumerate(loads)},
                      "load_imbalance": float(loads.max() / loads.mean()),
                      "moved_points": int(sum(len(r.ids) for r in moving)),
                      "moved_clusters": int(sum(len(r.clusters) for r in moving)),
                      "moved_bytes": int(sum(_nbytes(r) for r in moving)),
                      **shards.take_stats()}
        return state
