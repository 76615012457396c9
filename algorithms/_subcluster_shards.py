"""The shard protocol of ``subc`` on a backend: what the master sends the shards, what they
compute on their points and what they send back (see :mod:`.subcluster` for the schedule).

The points, their labels and sub-labels stay on the shards; a shard's labels hold the
sub-cluster of each point, ``2 z + zs``. Right after the label draw the bits from 32 up also
hold the point's cluster before the draw, which the sequential sweep needs if the master
finds that the parallel draw emptied a cluster. Messages down are :class:`LabelDraw`,
:class:`Resweep` and :class:`Restructure` (a batch of :class:`Edit` of the partition, new
sub-labels, a tentative random split); the map functions :func:`draw_labels`,
:func:`resweep_labels` and :func:`restructure` answer with sub-cluster statistics (in
:class:`Drawn` and :class:`Restructured`, with the moments and worst-explained points asked
for), which the master sums or pools over shards.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import prange

from ._numerics import PARALLEL_MIN_WORK, centred_rows, parallel_variants, rows_where, take_rows
from .families.niw import grouped_gaussian_stats
from .labelstep import draw_with_sublabels, sample_sublabels, sweep_keeping_clusters, take_params

PREVIOUS_SHIFT = 32  #: shard labels: bits from here up hold the cluster before the draw
_SUB_MASK = (1 << PREVIOUS_SHIFT) - 1


def decode_labels(labels):
    """(cluster, sub-label) of every point from shard labels."""
    sub = labels & _SUB_MASK
    return sub >> 1, sub & 1


def _merge_labels(z, zs, a, b):
    for r in prange(z.shape[0]):
        if z[r] == b:
            z[r], zs[r] = a, 1
        elif z[r] == a:
            zs[r] = 0


_MERGE_LABELS = parallel_variants(_merge_labels)


def merge_labels(z, zs, a: int, b: int) -> None:
    """Cluster ``b`` joins ``a`` in the int64 labels ``z``, in place; the two old clusters
    become the sub-clusters of ``a`` (``zs`` 0 for a's points, 1 for b's): one pass over the
    labels, in parallel from :data:`PARALLEL_MIN_WORK` points."""
    _MERGE_LABELS[len(z) >= PARALLEL_MIN_WORK](z, zs, int(a), int(b))


# ---- messages ------------------------------------------------------------------------------

class LabelDraw(NamedTuple):
    """What the master broadcasts for the label step."""

    log_pi: np.ndarray  #: (K,) log weights of the clusters
    theta: Any  #: the family's parameters of the K clusters
    log_spi: np.ndarray  #: (2K,) log sub-weights
    stheta: Any  #: parameters of the 2K sub-clusters
    #: clusters whose sub-clusters' moments to return after the draw (what a principal restart
    #: of such a cluster needs, whole or split along its sub-clusters), or None
    moments: np.ndarray | None = None
    #: clusters whose worst-explained point under ``theta`` to find after the draw (what an
    #: isolate needs), or None
    worst: np.ndarray | None = None


class Drawn(NamedTuple):
    """What one shard returns from :func:`draw_labels`."""

    stats: Any  #: statistics of the 2K sub-clusters
    moments: tuple | None = None  #: (n, mean, centred scatter) of the sub-clusters 2r, 2r + 1 of each cluster of ``moments``
    worst: tuple | None = None  #: (lowest log-likelihood, its row; inf and -1 if none) per cluster of ``worst``


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
    clusters ``moments`` and the worst-explained point of clusters ``worst``; new sub-labels
    for clusters ``restart`` (random, except those in ``principal``: the two sides of a given
    axis through a given mean, and those in ``isolate``: one given point alone); a tentative
    random split ``propose`` = (cluster, new cluster, probability of going right); ``remap``
    of the cluster ids."""

    edits: tuple = ()
    moments: np.ndarray | None = None
    restart: np.ndarray | None = None
    principal: tuple | None = None  #: (clusters, (R, D) means, (R, D) axes)
    propose: tuple | None = None
    remap: np.ndarray | None = None
    worst: tuple | None = None  #: (clusters, the family's parameters of each)
    isolate: tuple | None = None  #: (clusters, shard holding the point of each, its row there)


class Restructured(NamedTuple):
    """What one shard returns from :func:`restructure`."""

    restarted: Any = None  #: statistics of the sub-clusters of ``restart`` (rows 2r, 2r+1)
    moments: tuple | None = None  #: (n, mean, centred scatter) of each cluster of ``moments``
    halves: Any = None  #: statistics of the two halves of the proposed random split
    worst: tuple | None = None  #: (lowest log-likelihood, its row; inf and -1 if none) per cluster of ``worst``


# ---- map functions (run where the shards are) -----------------------------------------------

def draw_labels(shard, draw: LabelDraw) -> Drawn:
    """The label step on one shard: every label among the existing clusters, in parallel,
    then every sub-label (:func:`draw_with_sublabels`; whether the draw emptied a cluster needs
    every shard's counts, so the master decides on the sweep). Returns the shard's sub-cluster statistics,
    and the moments and worst-explained points asked for (so that the restarts the master
    decides from them need no map of their own)."""
    family, X = shard.static["family"], shard.X
    z, _ = decode_labels(shard.labels)
    new, zs, stats = draw_with_sublabels(family, X, draw.theta, draw.log_pi, draw.stheta, draw.log_spi, shard.rng)
    shard.labels = (2 * new + zs) | (z << PREVIOUS_SHIFT)
    moments = worst = None
    if draw.moments is not None:
        pos = _position(new, draw.moments)
        rows = np.flatnonzero(pos >= 0)
        moments = group_moments(take_rows(X, rows), 2 * pos[rows] + zs[rows], 2 * len(draw.moments))
    if draw.worst is not None:
        worst = family.lowest_loglik(X, new, draw.worst, take_params(draw.theta, draw.worst))
    return Drawn(stats, moments, worst)


def resweep_labels(shard, payload: Resweep):
    """The sequential branch of the label step on one shard: restricted Gibbs from the labels
    before the draw, never emptying a cluster, then the sub-labels. Returns the shard's
    sub-cluster statistics and the cluster sizes for the next shard."""
    family, draw = shard.static["family"], payload.draw
    z = shard.labels >> PREVIOUS_SHIFT
    counts = payload.counts.copy()
    sweep_keeping_clusters(family, shard.X, draw.theta, draw.log_pi, z, counts, shard.rng.random(len(z)))
    zs = sample_sublabels(family, shard.X, z, draw.stheta, draw.log_spi, shard.rng.random(len(z)))
    shard.labels = 2 * z + zs
    return family.stats(shard.X, 2 * z + zs, 2 * len(draw.log_pi)), counts


def group_moments(X, labels, n_groups):
    """(n, mean, centred scatter) of the rows of each label 0..n_groups-1 (mean 0 and scatter
    0 where there is none): the scatter about each group's own mean, so no large raw
    moments cancel."""
    n, s1, _ = grouped_gaussian_stats(X, labels, n_groups)
    mean = s1 / np.maximum(n, 1.0)[:, None]
    _, _, scatter = grouped_gaussian_stats(X - take_rows(mean, labels), labels, n_groups)
    return n, mean, scatter


def _position(z, clusters):
    """Index in ``clusters`` of every point's cluster (-1: not among them)."""
    lookup = np.full(max(int(z.max(initial=-1)), int(np.max(clusters))) + 1, -1, dtype=np.int64)
    lookup[clusters] = np.arange(len(clusters))
    return lookup[z]


def restructure(shard, payload: Restructure) -> Restructured:
    """Carry out the master's edits of the partition on one shard (see :class:`Restructure`)."""
    family, X, rng = shard.static["family"], shard.X, shard.rng
    z, zs = decode_labels(shard.labels)
    for kind, a, b in payload.edits:
        if kind == "split":
            z[rows_where(z, a, zs, 1)] = b
        elif kind == "move":
            z[rows_where(z, a)] = b
        else:
            merge_labels(z, zs, a, b)
    moments = restarted = halves = worst = None
    if payload.moments is not None:
        pos = _position(z, payload.moments)
        rows = np.flatnonzero(pos >= 0)
        moments = group_moments(take_rows(X, rows), pos[rows], len(payload.moments))
    if payload.worst is not None:
        worst = family.lowest_loglik(X, z, *payload.worst)
    if payload.restart is not None:
        pos = _position(z, payload.restart)
        rows = np.flatnonzero(pos >= 0)
        zs[rows] = rng.integers(0, 2, rows.size)
        if payload.principal is not None:
            for k, mean, axis in zip(*payload.principal):
                idx = rows_where(z, k)
                zs[idx] = (centred_rows(take_rows(X, idx), mean) @ axis > 0).astype(np.int64)
        if payload.isolate is not None:
            for k, holder, row in zip(*payload.isolate):
                zs[rows_where(z, k)] = 0
                if holder == shard.index:
                    zs[row] = 1
        restarted = family.stats(take_rows(X, rows), 2 * pos[rows] + zs[rows], 2 * len(payload.restart))
    if payload.propose is not None:
        k, new, w_right = payload.propose
        idx = rows_where(z, k)
        side = (rng.random(idx.size) < w_right).astype(np.int64)
        z[idx[side == 1]] = new
        halves = family.stats(take_rows(X, idx), side, 2)
    if payload.remap is not None:
        z = payload.remap[z]
    shard.labels = 2 * z + zs
    return Restructured(restarted, moments, halves, worst)


# ---- on the master ---------------------------------------------------------------------------

def pooled_moments(parts):
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


def pick_worst(clusters, parts) -> dict:
    """cluster -> (shard, row) of the lowest of the shards' worst points ``parts`` (each
    ``(lowest, rows)`` over ``clusters``); the first of equals, as in-process, since shards
    hold consecutive rows."""
    lowest = np.array([p[0] for p in parts])
    shard = np.argmin(lowest, axis=0)
    rows = np.array([p[1] for p in parts])[shard, np.arange(len(clusters))]
    return {k: (int(shard[i]), int(rows[i])) for i, k in enumerate(clusters)}
