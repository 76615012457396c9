"""Ge, Chen, Wan & Ghahramani (2015) map-reduce slice sampler, ``slice-mr`` (docs/algorithms.md §4).

Walker's (2007) slice sampler, split between a master and the shards of the data. The
master keeps only per-shard counts and sufficient statistics; the labels live on the shards.

Reduce (master), from the statistics of the last map:

* drop empty components; weights ``(w_1..w_K, w_*) ~ Dir(n_1..n_K, alpha)``; parameters
  ``phi_k`` from the posterior of the reduced statistics;
* the minimum slice directly: ``u_k = w_k Beta(1, n_k)`` is the minimum of ``n_k`` uniforms
  on ``(0, w_k)``, so ``u* = min_k u_k`` is attained in ``k*`` by a uniformly chosen point of
  that component, on shard ``m*`` with probability proportional to its count there;
* new components from ``G0`` with stick-breaking weights ``w_* Beta(1, alpha)`` until the
  mass left is below ``u*`` (no component beyond could ever pass a slice). Their number
  grows like ``alpha log(w_* / u*)``: with a huge ``alpha`` it is unbounded in practice, so
  an iteration that would need more than the option ``max_new_components`` stops with a
  ValueError instead of exhausting memory. Truncating the stick-breaking instead would change
  the stationary distribution; every run that stays under the cap is exact and draws
  exactly what it would without one;
* broadcast relabelling, weights, parameters, ``u*``, ``k*``, ``m*`` (components sorted by
  decreasing weight, so the components a slice allows are a prefix).

Map (every shard): relabel; the chosen point of ``k*`` on ``m*`` gets ``u*``, every other
point ``u_i ~ U(u*, w_{z_i})``; every label ``z_i ~ Cat(1[w_k > u_i] F(x_i | phi_k))``; emit
per-component counts and sufficient statistics. Exact (two-block Gibbs on the labels and the
weights/parameters/slices); all weights and slices are handled in log space.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from numba import prange

from ._numerics import (
    FUSED_CHUNK,
    PARALLEL_MIN_WORK,
    chunk_seeds,
    log_dirichlet,
    parallel_variants,
    sample_log_weights,
)
from ._shard_maps import component_stats
from .backends import ShardedState
from .backends.base import SHARD_INFO_COLUMNS
from .base import Sampler
from .constraints import Interval, Option
from .labelstep import take_params
from .partitions import compact


class SlicePayload(NamedTuple):
    """What the master broadcasts each iteration."""

    remap: np.ndarray  #: (K_prev,) new id of every component of the last map (-1: dropped)
    log_w: np.ndarray  #: (K+,) log weights, decreasing
    params: Any  #: the family's parameters of the K+ components
    log_u_star: float  #: log of the minimum slice
    k_star: int  #: component holding the point with the minimum slice
    m_star: int  #: shard holding that point


class SliceState(ShardedState):
    """Master state: the shards plus the statistics each returned from the last map."""

    def __init__(self, X, shards, rng, shard_stats):
        super().__init__(X, shards, rng)
        self.shard_stats = shard_stats  #: list over shards of (K_prev rows) statistics


def _concat_params(a, b):
    """Parameters of the components of ``a``, then those of ``b``."""
    return type(a)(*(np.concatenate([x, y]) for x, y in zip(a, b)))


# ---- map functions (run where the shards are) ---------------------------------------------

def _slice_draw(loglik, log_w, labels, star, log_u_star, seeds, out):
    """Slices and labels of one block of rows, a whole number of chunks of ``FUSED_CHUNK``
    rows; chunk ``c`` draws its uniforms from a stream seeded by ``seeds[c]`` (any number of
    threads gives the same draw).

    Row ``star`` (or none, -1) gets the minimum slice ``u*``; every other row
    ``u ~ U(u*, w_z)``. Components are sorted by decreasing weight, so those with ``w_k > u``
    are a prefix; the label is drawn from ``loglik`` over that prefix. The row's own component
    always qualifies (``u < w_z``); the ``max`` only guards against rounding.
    """
    N, K = loglik.shape
    u_star = math.exp(log_u_star)
    for c in prange(seeds.shape[0]):
        np.random.seed(seeds[c])
        for r in range(c * FUSED_CHUNK, min(N, (c + 1) * FUSED_CHUNK)):
            z = labels[r]
            u_slice, u_draw = np.random.random(), np.random.random()
            if r == star:
                log_u = log_u_star
            else:
                log_u = math.log(u_star + u_slice * (math.exp(log_w[z]) - u_star))
            n = 0
            while n < K and log_w[n] > log_u:
                n += 1
            out[r] = sample_log_weights(loglik[r], max(n, z + 1), u_draw)


_SLICE_DRAW = parallel_variants(_slice_draw)


def slice_map(shard, payload: SlicePayload):
    """The map of one iteration on one shard: relabel, slices, labels; returns the shard's
    per-component statistics (see the module docstring)."""
    family = shard.static["family"]
    z = payload.remap[shard.labels]
    if z.size and z.min() < 0:
        raise RuntimeError(f"shard {shard.index}: a point belongs to a component the master dropped as empty")
    K = len(payload.log_w)
    N = z.shape[0]
    rng = shard.rng
    star = -1
    if shard.index == payload.m_star:
        members = np.flatnonzero(z == payload.k_star)
        star = int(members[rng.integers(members.size)])
    seeds = chunk_seeds(rng, N)
    fused = family.fused_slice_draw(shard.X, payload.params, payload.log_w, z, star, payload.log_u_star, seeds)
    if fused is not None:  # one pass, likelihoods of the components above each slice only
        shard.labels[:] = fused[0]
        return fused[1]
    out = shard.labels  # the shard's own labels (z holds the relabelled old ones): overwritten block by block
    # rows per block: (rows x K) stays in a core's L2, in whole chunks of seeded uniforms
    block = FUSED_CHUNK * max(1, min(2 ** 16 // max(K, 1), 16384) // FUSED_CHUNK)
    parallel = not family.loglik_uses_blas(K)
    for a in range(0, N, block):
        b = min(a + block, N)
        loglik = family.loglik(shard.X[a:b], payload.params)
        _SLICE_DRAW[parallel and loglik.size >= PARALLEL_MIN_WORK](
            loglik, payload.log_w, z[a:b], star - a if a <= star < b else -1, payload.log_u_star,
            seeds[a // FUSED_CHUNK:-(-b // FUSED_CHUNK)], out[a:b])
    return family.stats(shard.X, out, K)


# ---- the master's draws --------------------------------------------------------------------

def minimum_slice(log_w: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> tuple[int, float]:
    """The smallest of the slices ``u_i ~ U(0, w_{z_i})`` of all points, without drawing them.

    The minimum of ``n_k`` uniforms on ``(0, w_k)`` is ``w_k Beta(1, n_k)`` and
    ``Beta(1, n) = 1 - U^(1/n)``; the overall minimum is the smallest of these.

    Parameters
    ----------
    log_w : (K,) log weights of the occupied components
    counts : (K,) their sizes (> 0)
    rng : numpy.random.Generator

    Returns
    -------
    (k_star, log_u_star)
        The component holding the point with the minimum slice, and the log of that slice.
    """
    with np.errstate(divide="ignore"):  # U = 0 gives Beta = 1: a slice equal to its weight
        log_b = np.log(-np.expm1(np.log(rng.random(len(counts))) / counts))
    log_u = log_w + log_b
    k_star = int(np.argmin(log_u))
    return k_star, float(log_u[k_star])


def break_sticks(log_rest: float, log_u_star: float, alpha: float, rng: np.random.Generator,
                 limit: int | None = None) -> list[float]:
    """Log weights of the new components: stick-breaking of the leftover mass ``w_*`` with
    ``Beta(1, alpha)`` fractions until what is left is below ``u*`` (docs/algorithms.md §4.3).

    ``1 - v ~ Beta(alpha, 1) = U^(1/alpha)``, with ``U`` on ``(0, 1]`` so that the log stays
    finite (``U = 1`` is a stick of length 0).

    Parameters
    ----------
    log_rest : float
        Log of the leftover mass ``w_*``.
    log_u_star : float
        Log of the minimum slice ``u*``.
    alpha : float
        DP concentration.
    rng : numpy.random.Generator
    limit : int, optional
        Most new components allowed (None: no limit). The draws are the same as without a
        limit until it is reached.

    Raises
    ------
    ValueError
        More than ``limit`` components would be needed (about ``alpha log(w_* / u*)``).
    """
    new_log_w = []
    while log_rest >= log_u_star:
        if limit is not None and len(new_log_w) >= limit:
            expected = alpha * (log_rest - log_u_star) + len(new_log_w)
            raise ValueError(
                f"slice-mr: this iteration needs more than max_new_components={limit} new components "
                f"(alpha={alpha:g}: about alpha * log(w_*/u*) = {expected:.3g}); lower alpha, or raise the "
                "option 'max_new_components' if memory allows")
        log_keep = math.log(1.0 - rng.random()) / alpha
        new_log_w.append(log_rest + math.log(-math.expm1(log_keep)) if log_keep < 0 else -math.inf)
        log_rest += log_keep
    return new_log_w


# ---- the sampler ---------------------------------------------------------------------------

class SliceMapReduce(Sampler):
    """Map-reduce slice sampler (registry name ``slice-mr``); see the module docstring.

    Runs on any backend (``algorithms.make("slice-mr", ..., backend=...)``); the default is
    one in-process shard. ``state.info`` reports ``n_components`` (instantiated this
    iteration, new ones included), ``n_new_components`` and the iteration's
    ``bytes_sent``, ``bytes_received`` and ``messages``.
    """

    name = "slice-mr"
    exact = True
    supports_backend = True
    threaded = True
    info_columns = {
        **SHARD_INFO_COLUMNS,
        "n_components": "components instantiated in this iteration (occupied and new)",
        "n_new_components": "empty components the slice instantiated in this iteration",
    }
    options = {"max_new_components": Option(
        10_000, Interval(int, 1),
        "most new components in one iteration (more raises ValueError; see the module docstring)")}

    def _init(self, X, labels, rng):
        labels, K = compact(labels)
        shards = self.backend.distribute(X, labels, self.seed, static={"family": self.family},
                                         n_points=self.family.n_points(X))
        state = SliceState(X, shards, rng, shards.map(component_stats, K))
        state.info = {"n_components": K, **shards.take_stats()}
        return state

    def _step(self, state):
        payload, n_new = self.reduce(state.shard_stats, state.rng, state.alpha)
        state.shard_stats = state.shards.map(slice_map, payload)
        occupied = int((sum(np.asarray(s.n) for s in state.shard_stats) > 0).sum())
        state.info = {"n_components": len(payload.log_w), "n_new_components": n_new, "n_clusters": occupied,
                      **state.shards.take_stats()}
        return state

    def reduce(self, shard_stats: list, rng: np.random.Generator, alpha: float) -> tuple[SlicePayload, int]:
        """The master's half of an iteration (docs/algorithms.md §4.3) at concentration ``alpha``:
        the payload of the next map and the number of new components in it."""
        family = self.family
        counts = np.stack([np.asarray(s.n) for s in shard_stats])  # (shards, K_prev)
        total = family.sum_stats(shard_stats)
        active = np.flatnonzero(total.n > 0)
        n = total.n[active]
        K = len(active)

        log_w_all = log_dirichlet(rng, np.append(n, alpha))
        log_w, log_rest = log_w_all[:K], float(log_w_all[K])
        params = family.sample_params(family.take_stats(total, active), rng)

        k_star, log_u_star = minimum_slice(log_w, n, rng)
        holders = np.cumsum(counts[:, active[k_star]])
        m_star = int(np.searchsorted(holders, rng.random() * holders[-1], side="right"))
        new_log_w = break_sticks(log_rest, log_u_star, alpha, rng, self.params["max_new_components"])
        n_new = len(new_log_w)
        if n_new:
            log_w = np.concatenate([log_w, new_log_w])
            params = _concat_params(params, family.sample_params(family.empty_stats(n_new), rng))

        order = np.argsort(-log_w, kind="stable")
        position = np.empty(len(order), dtype=np.int64)
        position[order] = np.arange(len(order))
        remap = np.full(len(total.n), -1, dtype=np.int64)
        remap[active] = position[:K]
        payload = SlicePayload(remap, np.ascontiguousarray(log_w[order]), take_params(params, order), log_u_star,
                               int(position[k_star]), m_star)
        return payload, n_new

    def _n_clusters(self, state):
        # from the shards' statistics held here, not the labels on the shards
        return int((sum(np.asarray(s.n) for s in state.shard_stats) > 0).sum())
