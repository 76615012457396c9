"""Label steps given instantiated component parameters: the data-parallel hot loop shared
by every sampler that samples weights and parameters (FSD, sub-clusters, slice, ...)."""
from __future__ import annotations

import numpy as np

from numba import prange

from .numba_cache import kernel
from ._numerics import PARALLEL_MIN_WORK, parallel_variants, right_side, rows_touching, sample_rows, take_rows


def take_params(params, idx):
    """The components ``idx`` of a parameter NamedTuple (every field has a leading K axis)."""
    return type(params)(*(np.ascontiguousarray(np.asarray(a)[idx]) for a in params))


def sample_labels(family, X, params, log_weights, uniforms, out=None) -> np.ndarray:
    """Draw every label ``z_i ~ Cat(w_k F(x_i | theta_k))`` given parameters and log weights.

    One pass where the family has one (:meth:`Family.fused_label_draw`), else in row blocks so
    that the (rows x components) working set stays small. Uses one uniform per point, so the
    draw does not depend on the number of threads.
    """
    N = family.n_points(X)
    K = len(log_weights)
    out = np.empty(N, dtype=np.int64) if out is None else out
    fused = family.fused_label_draw(X, params, log_weights, uniforms)
    if fused is not None:
        out[:] = fused
        return out
    block = int(np.clip(2 ** 19 // max(K, 1), 256, 16384))
    parallel = not family.loglik_uses_blas(K)
    for a in range(0, N, block):
        b = min(a + block, N)
        ll = family.loglik(X[a:b], params)
        sample_rows(ll, log_weights, uniforms[a:b], out[a:b], parallel)
    return out


@kernel
def _keep_last_members(drawn, labels, counts):
    """The sequential part of the restricted sweep, given every row's draw: in row order a
    point that is the last member of its cluster stays, the others take their draw.
    ``labels`` and ``counts`` are updated."""
    for r in range(len(labels)):
        old = labels[r]
        if counts[old] == 1:
            continue
        new = drawn[r]
        counts[old] -= 1
        counts[new] += 1
        labels[r] = new


#: rows per chunk of :func:`_cluster_stays`' partial counts
_STAYS_CHUNK = 1 << 14


def _cluster_stays(old, new, n_clusters):
    N = old.shape[0]
    C = max(1, (N + _STAYS_CHUNK - 1) // _STAYS_CHUNK)
    stays = np.zeros((C, n_clusters), dtype=np.int64)
    for c in prange(C):
        local = np.zeros(n_clusters, dtype=np.int64)
        for r in range(c * _STAYS_CHUNK, min(N, (c + 1) * _STAYS_CHUNK)):
            if new[r] == old[r]:
                local[old[r]] += 1
        stays[c] = local
    return stays.sum(axis=0)


_CLUSTER_STAYS = parallel_variants(_cluster_stays)

#: rows :func:`_first_stays` reads before the count falls back to a whole parallel pass
_STAYS_PREFIX = 1 << 16


@kernel
def _first_stays(old, new, sizes, limit):
    """Per cluster, whether one of its points (from the first row on) draws its own cluster,
    read until every cluster with points (``sizes``) has one or ``limit`` rows were read.
    Returns the counts (0 or 1) and whether they are final: every cluster counted that has
    points has one, or every row was read."""
    K = sizes.shape[0]
    found = np.zeros(K, dtype=np.int64)
    remaining = 0
    for k in range(K):
        remaining += 1 if sizes[k] >= 1 else 0
    if remaining == 0:
        return found, True
    N = old.shape[0]
    for r in range(min(limit, N)):
        o = old[r]
        if new[r] == o and found[o] == 0:
            found[o] = 1
            if sizes[o] >= 1:
                remaining -= 1
                if remaining == 0:
                    return found, True
    return found, limit >= N


def restricted_keeps(old, new, n_clusters, sizes=None) -> np.ndarray:
    """The rows that restricted Gibbs keeps in their cluster although their draw ``new`` left it.

    The sweep over the rows in order (:func:`sweep_keeping_clusters`, each row's draw made
    beforehand) keeps a point that is the last member of its cluster and gives every other
    point its draw. A cluster one of whose points draws it again keeps that point throughout
    the sweep, so each of its other points, when its turn comes, shares the cluster with it
    and takes its draw: nothing is kept there. Only the clusters none of whose points stay
    ("at risk": the draw would empty them) and the rows leaving or entering them are swept,
    in order, and the rows kept returned (usually none).

    Parameters
    ----------
    old, new : ndarray of int64
        Every point's cluster before the step (none empty) and its draw, both below ``n_clusters``.
    n_clusters : int
    sizes : ndarray, optional
        The clusters' sizes in ``old``, if known: then the points that stay are looked for from
        the first row only until every cluster has one (usually within a few rows; one pass
        over every row otherwise). Wrong sizes cost time, never the answer.

    Returns
    -------
    ndarray of int64
        The rows whose label stays ``old`` where ``new`` differs, increasing.
    """
    final = False
    if sizes is not None:
        stays, final = _first_stays(old, new, np.asarray(sizes, dtype=np.int64), _STAYS_PREFIX)
    if not final:
        stays = _CLUSTER_STAYS[len(old) >= PARALLEL_MIN_WORK](old, new, n_clusters)
    at_risk = (stays == 0).astype(np.int64)
    if not at_risk.any():
        return np.zeros(0, dtype=np.int64)
    rows = rows_touching(old, new, at_risk)
    swept, drawn = old[rows], new[rows]
    # these rows hold every point of the clusters at risk, so their sizes; a cluster not at
    # risk keeps its staying point whatever these rows do, so never a last member that
    # leaves (a size it never reaches stands for it)
    counts = np.where(at_risk == 1, np.bincount(swept, minlength=n_clusters), len(old) + 1)
    _keep_last_members(drawn, swept, counts)
    return rows[swept != drawn]


def sample_labels_keeping_clusters(family, X, params, log_weights, labels, rng) -> tuple[np.ndarray, bool]:
    """Restricted Gibbs for the labels given instantiated weights and parameters, never
    emptying a cluster.

    An emptied cluster could never come back through this step, so allowing it biases the
    chain towards fewer clusters (measured: TV 0.39 at N = 6). The kernel used here is the
    sequential sweep over the old labels that keeps the last point of each cluster in place
    (:func:`sweep_keeping_clusters`), its draws made in one parallel pass and the few points
    it keeps found by :func:`restricted_keeps`.

    Returns (labels, whether a point was kept).
    """
    new = sample_labels(family, X, params, log_weights, rng.random(family.n_points(X)))
    kept = restricted_keeps(np.asarray(labels, dtype=np.int64), new, len(log_weights))
    new[kept] = np.asarray(labels)[kept]
    return new, bool(kept.size)


def sweep_keeping_clusters(family, X, params, log_weights, labels, counts, uniforms):
    """Restricted Gibbs over the rows of ``X`` in order, a point that is the last member of its
    cluster staying put, from fresh draws (the sharded step's sweep after a draw that emptied a
    cluster; in process :func:`restricted_keeps` finds what it keeps from the draw itself).

    ``labels`` (int64, contiguous) and ``counts`` (int64 sizes of every cluster, over all
    points, not only these rows) are updated in place, so the rows of a large set can be
    swept block after block, or shard after shard, passing ``counts`` on.
    """
    # A point's draw given the parameters does not depend on the other labels, only whether
    # it is taken does: every draw in parallel (the same uniform per row, so the same labels
    # as drawing row by row), then the cheap sequential pass over the integers.
    _keep_last_members(sample_labels(family, X, params, log_weights, uniforms), labels, counts)


def _sample_sub_rows(sub_loglik, sub_log_weights, labels, uniforms, out):
    N = sub_loglik.shape[0]
    for r in prange(N):
        k = labels[r]
        left = sub_loglik[r, 2 * k] + sub_log_weights[2 * k]
        right = sub_loglik[r, 2 * k + 1] + sub_log_weights[2 * k + 1]
        d = left - right
        out[r] = right_side(d, uniforms[r])


_SAMPLE_SUB_ROWS = parallel_variants(_sample_sub_rows)


def sample_sublabels(family, X, labels, sub_params, sub_log_weights, uniforms) -> np.ndarray:
    """Each point picks one of the two sub-components ``2k, 2k+1`` of its component
    ``k = labels[i]`` (Chang & Fisher's sub-cluster labels): in one pass where the family has
    one (:meth:`Family.fused_sublabel_draw`), else in row blocks.

    Where the likelihood is a matrix product (Gaussians in many dimensions) each cluster's
    points are scored against its own two sub-components only: 2 instead of 2K quadratic
    forms per point."""
    fused = family.fused_sublabel_draw(X, labels, sub_params, sub_log_weights, uniforms)
    if fused is not None:
        return fused
    N = family.n_points(X)
    K2 = len(sub_log_weights)
    out = np.empty(N, dtype=np.int64)
    if family.loglik_uses_blas(2) and K2 > 2:  # then scored a pair of sub-components at a time
        order = np.argsort(labels, kind="stable")
        bounds = np.searchsorted(labels[order], np.arange(K2 // 2 + 1))
        for k in range(K2 // 2):
            rows = order[bounds[k]:bounds[k + 1]]
            if rows.size:
                pair = np.array([2 * k, 2 * k + 1])
                sll = family.loglik(take_rows(X, rows), take_params(sub_params, pair))
                side = np.empty(rows.size, dtype=np.int64)
                # serial: BLAS threads still spinning after the product stall a parallel region
                _SAMPLE_SUB_ROWS[0](sll, sub_log_weights[pair], np.zeros(rows.size, dtype=np.int64),
                                    uniforms[rows], side)
                out[rows] = side
        return out
    block = int(np.clip(2 ** 19 // max(K2, 1), 256, 16384))
    for a in range(0, N, block):
        b = min(a + block, N)
        sll = family.loglik(X[a:b], sub_params)
        _SAMPLE_SUB_ROWS[sll.size >= PARALLEL_MIN_WORK](sll, sub_log_weights, labels[a:b], uniforms[a:b], out[a:b])
    return out


def draw_with_sublabels(family, X, params, log_weights, sub_params, sub_log_weights, rng, within=None):
    """Every label among the K components, then every sub-label between the two
    sub-components of its component, and the statistics of the 2K sub-components: the label
    step of Chang & Fisher's samplers given instantiated weights and parameters.
    ``within = (labels, groups)``: a point chooses among the components of its old
    component's group only (super-clusters).

    One compiled pass where the family has one (:meth:`Family.fused_subcluster_draw`: one
    stream of uniforms per chunk of rows, so any number of threads gives the same draw);
    otherwise the likelihood, sampling and statistics one after the other. Labels may leave
    a component empty (see :func:`draw_keeping_clusters_with_sublabels`).

    Returns
    -------
    (labels, sublabels, sub-component statistics)
    """
    fused = family.fused_subcluster_draw(X, params, log_weights, sub_params, sub_log_weights, rng, within)
    if fused is not None:
        return fused
    N = family.n_points(X)
    if within is None:
        z = sample_labels(family, X, params, log_weights, rng.random(N))
    else:
        z = _sample_labels_within_groups(family, X, params, log_weights, *within, rng)
    zs = sample_sublabels(family, X, z, sub_params, sub_log_weights, rng.random(N))
    return z, zs, family.stats(X, 2 * z + zs, len(sub_log_weights))


def _sample_labels_within_groups(family, X, params, log_weights, labels, groups, rng):
    """:func:`sample_labels` where each point chooses among its old component's group."""
    out = np.empty(len(labels), dtype=np.int64)
    point_groups = groups[labels]
    for g in range(int(groups.max()) + 1):
        comps, idx = np.flatnonzero(groups == g), np.flatnonzero(point_groups == g)
        out[idx] = comps[sample_labels(family, take_rows(X, idx), take_params(params, comps), log_weights[comps],
                                       rng.random(idx.size))]
    return out


def draw_keeping_clusters_with_sublabels(family, X, params, log_weights, sub_params, sub_log_weights, labels, rng,
                                         groups=None, sizes=None):
    """:func:`draw_with_sublabels` restricted to labellings that leave no component empty,
    as :func:`sample_labels_keeping_clusters`: the sweep that keeps the last point of each
    component, its draws those of the one parallel pass; the few points it keeps (if any) get
    a sub-label of their own component, and the statistics follow them.

    With super-clusters (``groups``, the group of each component) a point moves only within
    its group: the draw is made within groups and the sweep is the same. ``sizes``: the
    components' sizes in ``labels``, if known (see :func:`restricted_keeps`).

    Returns
    -------
    (labels, sublabels, sub-component statistics, whether a point was kept)
    """
    K = len(log_weights)
    labels = np.asarray(labels, dtype=np.int64)
    within = None if groups is None else (labels, groups)
    z, zs, sub = draw_with_sublabels(family, X, params, log_weights, sub_params, sub_log_weights, rng, within)
    kept = restricted_keeps(labels, z, K, sizes)
    if not kept.size:
        return z, zs, sub, False
    Xk = take_rows(X, kept)
    drawn = family.stats(Xk, 2 * z[kept] + zs[kept], 2 * K)
    z[kept] = labels[kept]
    zs[kept] = sample_sublabels(family, Xk, z[kept], sub_params, sub_log_weights, rng.random(kept.size))
    sub = family.subtract_stats(family.sum_stats([sub, family.stats(Xk, 2 * z[kept] + zs[kept], 2 * K)]), drawn)
    return z, zs, sub, True
