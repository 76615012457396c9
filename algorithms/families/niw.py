"""Normal-inverse-Wishart: full-covariance Gaussian components (docs/algorithms.md §0.4a).

``Sigma ~ IW(psi0, nu0)``, ``mu | Sigma ~ N(mu0, Sigma / kappa0)``. Everything is computed on
data centred at ``mu0`` (so the prior mean is 0 inside), with Cholesky log-determinants and
triangular solves. The collapsed kernels keep, per cluster, the Cholesky factor of Psi_n and
update it by rank-1 update/downdate, so moving one point costs O(D^2).
"""
from __future__ import annotations

import functools
import math
from contextlib import nullcontext
from numbers import Real
from typing import NamedTuple

import numpy as np
from numba import prange
from scipy.linalg import solve_triangular
from scipy.special import gammaln

from ..numba_cache import kernel
from .._numerics import (FUSED_CHUNK, LOG_2PI, LOG_PI, NEGLIGIBLE_LOG_RATIO, PARALLEL_MIN_WORK, chunk_seeds,
                         one_blas_thread, parallel_variants, right_side, sample_log_weights)
from ..constraints import Interval
from ._empirical import MAX_POINTS, kmeans_partition
from ._base import CollapsedKernels, Family, check_finite_matrix, check_prior_mean

#: kappa0: a normal double (its log and 1/kappa0 finite) up to 1e300
POSITIVE_SCALE = Interval(Real, 1e-300, 1e300)
#: bound on nu0 and on the entries of psi0: log_multigamma(nu / 2) overflows near 5e305
MAX_ABS_SCALE = 1e300


class GaussianStats(NamedTuple):
    """Additive statistics of points centred at the prior mean."""

    n: np.ndarray  #: (K,) number of points
    s1: np.ndarray  #: (K, D) sum of (x - mu0)
    s2: np.ndarray  #: (K, D, D) sum of (x - mu0)(x - mu0)^T


class GaussianParams(NamedTuple):
    """Component parameters; the precision is ``W @ W.T``."""

    mu: np.ndarray  #: (K, D) means
    W: np.ndarray  #: (K, D, D) precision factors
    logdet_sigma: np.ndarray  #: (K,) log |Sigma|

    @property
    def sigma(self) -> np.ndarray:
        return np.linalg.inv(self.W @ np.swapaxes(self.W, -1, -2))


#: fixed number of row chunks for the small-D statistics kernel: partial sums are reduced in
#: a fixed order, so the result does not depend on the number of threads
_STATS_CHUNKS = 16


@kernel(inline="always")
def _add_centred(x, c, k, n, s1, s2):
    """A row ``x``, already centred, into the partial statistics ``[c, k]`` (lower triangle of
    the scatter)."""
    n[c, k] += 1.0
    for a in range(x.shape[0]):
        xa = x[a]
        s1[c, k, a] += xa
        for b in range(a + 1):
            s2[c, k, a, b] += xa * x[b]


def _small_d_stats(X, shift, labels, K, n, s1, s2):
    N, D = X.shape
    C = n.shape[0]
    step = (N + C - 1) // C
    for c in prange(C):
        x = np.empty(D)
        for r in range(c * step, min(N, (c + 1) * step)):
            for a in range(D):
                x[a] = X[r, a] - shift[a]
            _add_centred(x, c, labels[r], n, s1, s2)


def _symmetrise_lower(s2):
    """(K, D, D) scatter matrices summed in their lower triangles (the upper ones zero, as the
    compiled passes leave them), with the lower triangles copied to the upper."""
    # the strict lower triangle by a mask found once per dimension: np.tril builds its mask
    # every call, ~6 numpy calls that took 30-75 us each time within a subc step at 100k
    # points (3-4 a step; its caches cold after the label pass), the same values
    return s2 + np.swapaxes(s2 * _strict_lower_mask(s2.shape[-1]), -1, -2)


@functools.cache
def _strict_lower_mask(D: int) -> np.ndarray:
    """(D, D) ones strictly below the diagonal, zeros elsewhere (read-only)."""
    mask = np.tri(D, D, -1)
    mask.flags.writeable = False
    return mask


def grouped_gaussian_stats(X: np.ndarray, labels: np.ndarray, K: int, shift=None) -> GaussianStats:
    """(n, sum x, sum x x^T) per label of the rows of ``X - shift``, in O(N D^2)."""
    N, D = X.shape
    shift = np.zeros(D) if shift is None else shift
    # one pass, centring on the fly, partial sums per row chunk, while the (chunks x K x D x D)
    # partial scatters stay small: 5-10x the sort-and-GEMM below at 10-16 D (54k x 10-D, two
    # groups, a subc restart at a million points: 1.4 against 7.3 ms)
    if D <= 8 or (D <= FUSED_STATS_MAX_D and K <= 64):
        C = _STATS_CHUNKS if N * D * D >= PARALLEL_MIN_WORK else 1
        n, s1, s2 = np.zeros((C, K)), np.zeros((C, K, D)), np.zeros((C, K, D, D))
        SMALL_D_STATS[C > 1](X, shift, labels, K, n, s1, s2)
        return GaussianStats(n.sum(axis=0), s1.sum(axis=0), _symmetrise_lower(s2.sum(axis=0)))
    Xc = np.ascontiguousarray(X - shift)
    n = np.bincount(labels, minlength=K).astype(np.float64)[:K]
    s1 = np.zeros((K, D))
    s2 = np.zeros((K, D, D))
    if K > 64:
        for a in range(D):
            s1[:, a] = np.bincount(labels, weights=Xc[:, a], minlength=K)[:K]
            for b in range(a + 1):
                s2[:, a, b] = np.bincount(labels, weights=Xc[:, a] * Xc[:, b], minlength=K)[:K]
                s2[:, b, a] = s2[:, a, b]
    else:  # few clusters, many dimensions: one GEMM per cluster
        order = np.argsort(labels, kind="stable")
        bounds = np.searchsorted(labels[order], np.arange(K + 1))
        Xs = Xc[order]
        for k in range(K):
            block = Xs[bounds[k]:bounds[k + 1]]
            s1[k] = block.sum(axis=0)
            s2[k] = block.T @ block
    return GaussianStats(n, s1, s2)


class NormalInverseWishart(Family):
    """Full-covariance Gaussian likelihood with a normal-inverse-Wishart prior.

    Parameters
    ----------
    mu0 : array_like, shape (D,)
        Prior mean of component means.
    kappa0 : float
        Prior pseudo-count for the mean (``mu | Sigma ~ N(mu0, Sigma / kappa0)``), > 0.
    nu0 : float
        Inverse-Wishart degrees of freedom, > D - 1.
    psi0 : array_like, shape (D, D)
        Inverse-Wishart scale matrix (symmetric positive definite). ``E[Sigma] =
        psi0 / (nu0 - D - 1)`` for ``nu0 > D + 1``.
    """

    def __init__(self, mu0, kappa0, nu0, psi0):
        mu0 = check_prior_mean(mu0)
        D = mu0.shape[0]
        psi0 = np.asarray(psi0, dtype=np.float64)
        if psi0.shape != (D, D):
            raise ValueError(f"psi0 must have shape ({D}, {D}) to match mu0, got {psi0.shape}")
        if not np.all(np.isfinite(psi0)) or (psi0.size and np.abs(psi0).max() > MAX_ABS_SCALE):
            raise ValueError(f"psi0 must be finite with entries at most {MAX_ABS_SCALE:g} in magnitude")
        if not np.allclose(psi0, psi0.T):
            raise ValueError("psi0 must be symmetric")
        try:
            L0 = np.linalg.cholesky(psi0)
        except np.linalg.LinAlgError:
            raise ValueError("psi0 must be positive definite") from None
        kappa0 = POSITIVE_SCALE.check("kappa0", kappa0)
        nu0 = Interval(Real, D - 1, MAX_ABS_SCALE, closed="right").check("nu0", nu0)
        self.mu0, self.kappa0, self.nu0, self.psi0 = mu0, kappa0, nu0, psi0
        self.dim = D
        self._L0 = L0
        self._logdet_psi0 = 2.0 * np.log(np.diag(L0)).sum()

    def __repr__(self):
        return f"NormalInverseWishart(D={self.dim}, kappa0={self.kappa0:g}, nu0={self.nu0:g})"

    @classmethod
    def default_for(cls, X, kappa0: float = 0.05, scale: float = 0.1):
        """A weakly informative prior fitted to the data.

        ``mu0`` = data mean; ``nu0 = D + 2`` (the least informative choice with a finite
        mean of Sigma); ``E[Sigma] = scale * diag(var(X))``, i.e. components are expected to be
        narrower than the data (variances floored at 1e-6 of the mean variance);
        ``kappa0`` small so that component means range over the data.
        """
        X = check_finite_matrix(X)
        D = X.shape[1]
        var = X.var(axis=0) if X.shape[0] > 1 else np.ones(D)
        floor = 1e-6 * max(var.mean(), 1e-12)
        var = np.maximum(var, floor)
        nu0 = D + 2.0
        return cls(X.mean(axis=0), kappa0, nu0, np.diag(scale * var * (nu0 - D - 1)))

    @classmethod
    def empirical_bayes(cls, X, n_clusters: int | None = None, kappa0: float = 0.05, seed: int = 0,
                        max_points: int = MAX_POINTS):
        """A prior whose component covariance is the data's within-cluster covariance.

        ``mu0`` = data mean, ``nu0 = D + 2`` and ``kappa0`` as in :meth:`default_for`;
        ``E[Sigma]`` = the pooled within-cluster covariance of a seeded k-means partition
        (``sum_k sum_{i in k} (x_i - xbar_k)(x_i - xbar_k)^T / (N - k)``), full rather than
        diagonal, plus a floor of 1e-6 of the mean variance on the diagonal so that a constant
        column keeps it positive definite. Where :meth:`default_for` guesses a tenth of the
        data's variance per axis, this measures the scale and the correlations of clusters
        (see docs/design.md "Default priors").

        Parameters
        ----------
        X : array_like, shape (N, D)
            Data, at least 3 points.
        n_clusters : int, optional
            Number of k-means clusters (2 to N - 1); default: the expected number of clusters
            of the DP prior with ``alpha = 1`` on N points, about ``ln N + 0.58``.
        kappa0 : float
            Prior pseudo-count for the mean (> 0).
        seed : int
            Seed of the subsample and of k-means (>= 0): one seed, one prior.
        max_points : int
            k-means sees a seeded subsample of at most this many rows.

        Returns
        -------
        NormalInverseWishart

        Raises
        ------
        ValueError, TypeError
            Bad data (not finite, fewer than 3 points) or a bad ``n_clusters``, ``kappa0``,
            ``seed`` or ``max_points``.
        """
        X = check_finite_matrix(X)
        rows, labels = kmeans_partition(X, n_clusters, seed, max_points,
                                        name="NormalInverseWishart.empirical_bayes")
        K = int(labels.max()) + 1
        mean = X.mean(axis=0)
        # centred first: the scatter is a difference of sums, exact only near zero
        n, s1, s2 = grouped_gaussian_stats(X[rows], labels, K, mean)
        nonempty = n > 0
        scatter = (s2[nonempty] - s1[nonempty, :, None] * s1[nonempty, None, :] / n[nonempty, None, None]).sum(axis=0)
        pooled = scatter / max(len(rows) - int(nonempty.sum()), 1)
        D = X.shape[1]
        floor = 1e-6 * max(X.var(axis=0).mean(), 1e-12)
        sigma = 0.5 * (pooled + pooled.T) + floor * np.eye(D)
        nu0 = D + 2.0
        return cls(mean, kappa0, nu0, sigma * (nu0 - D - 1))

    # ---- data ----------------------------------------------------------------------
    def validate(self, X):
        return check_finite_matrix(X, dim=self.dim, family=self)

    def _centre(self, X):
        return np.ascontiguousarray(X - self.mu0)

    # ---- statistics ----------------------------------------------------------------
    def stats(self, X, labels, n_clusters):
        return grouped_gaussian_stats(np.asarray(X, dtype=np.float64), np.asarray(labels, dtype=np.int64),
                                      n_clusters, self.mu0)

    def empty_stats(self, n_clusters):
        D = self.dim
        return GaussianStats(np.zeros(n_clusters), np.zeros((n_clusters, D)), np.zeros((n_clusters, D, D)))

    lowest_loglik_in_one_pass = True

    def lowest_loglik(self, X, labels, clusters, params):
        """See :meth:`Family.lowest_loglik`: one pass over the rows, each scored against its own
        cluster only (the quadratic form; ``D^2`` multiply-adds a row, where the label draw
        spends ``K`` times that), in row chunks whose lowest are taken in row order."""
        X = np.asarray(X, dtype=np.float64)
        labels = np.asarray(labels, dtype=np.int64)
        clusters = np.asarray(clusters, dtype=np.int64)
        N, D = X.shape
        pos = np.full(max(int(labels.max(initial=-1)), int(clusters.max(initial=-1))) + 1, -1, dtype=np.int64)
        pos[clusters] = np.arange(len(clusters))
        C = _STATS_CHUNKS if N * D * D >= PARALLEL_MIN_WORK else 1
        lowest, rows = np.full((C, len(clusters)), np.inf), np.full((C, len(clusters)), -1, dtype=np.int64)
        const = -0.5 * D * LOG_2PI - 0.5 * np.asarray(params.logdet_sigma, dtype=np.float64)
        _OWN_LOWEST_LOGLIK[C > 1](X, labels, pos, np.ascontiguousarray(params.mu, dtype=np.float64),
                                  np.ascontiguousarray(params.W, dtype=np.float64), const, lowest, rows)
        first = np.argmin(lowest, axis=0)  # the first chunk of equals: the lowest row
        return lowest[first, np.arange(len(clusters))], rows[first, np.arange(len(clusters))]

    def moments_from_stats(self, stats):
        """See :meth:`Family.moments_from_stats`: the mean in the data's coordinates and the
        scatter about it, ``s2 - n m m^T`` of the statistics centred at the prior mean. That
        difference cancels where a cluster lies far from the prior mean against its own spread;
        ``precise`` where it keeps at least 1e-6 of the raw second moment (a relative error
        below ~1e-10 of the scatter)."""
        n, s1, s2 = _float_stats(stats)
        m = s1 / np.maximum(n, 1.0)[:, None]
        scatter = s2 - n[:, None, None] * m[:, :, None] * m[:, None, :]
        raw, kept = np.trace(s2, axis1=1, axis2=2), np.trace(scatter, axis1=1, axis2=2)
        return self.mu0 + m, scatter, (n > 0) & (kept > MOMENTS_MIN_KEPT * raw)

    def posterior(self, stats):
        """(kappa_n, nu_n, m_n (centred), chol(Psi_n)) for every cluster."""
        n, s1, s2 = stats
        kappa = self.kappa0 + n
        nu = self.nu0 + n
        m = s1 / kappa[:, None]
        psi = self.psi0 + s2 - kappa[:, None, None] * m[:, :, None] * m[:, None, :]
        return kappa, nu, m, np.linalg.cholesky(psi)

    def log_marginal_stats(self, stats):
        # compiled: the sub-cluster samplers' serial moves score one or two clusters at a time,
        # where a dozen numpy calls on (1, D, D) arrays cost ~30 us and this ~2 us
        n, s1, s2 = _float_stats(stats)
        out = np.empty(len(n))
        _factored(_niw_log_marginals(n, s1, s2, self.kappa0, self.nu0, self.psi0, self._logdet_psi0, out))
        return out

    def log_predictive(self, X, stats):
        Xc = self._centre(self.validate(X))
        kappa, nu, m, L = self.posterior(stats)
        D = self.dim
        dof = nu - D + 1.0
        logdet_scale = D * np.log((kappa + 1.0) / (kappa * dof)) + 2.0 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(1)
        const = (gammaln((dof + D) / 2.0) - gammaln(dof / 2.0) - 0.5 * D * np.log(dof * np.pi) - 0.5 * logdet_scale)
        return const - 0.5 * (dof + D) * np.log1p(_student_quadforms(Xc, m, L, kappa / (kappa + 1.0), dof + D))

    # ---- parameters ----------------------------------------------------------------
    def sample_params(self, stats, rng):
        # Bartlett: A A^T ~ Wishart(I, nu) (A lower-triangular, chi-square diagonal, normal
        # below); Sigma = L (A A^T)^{-1} L^T ~ IW(L L^T, nu). The draws here, the algebra
        # compiled (two dozen numpy calls on small stacks were a fifth of subc's serial step)
        n, s1, s2 = _float_stats(stats)
        K, D = s1.shape
        nu = self.nu0 + n
        chi = rng.chisquare(nu[:, None] - np.arange(D)[None, :])
        below = rng.standard_normal((K, D * (D - 1) // 2))  # row by row, as np.tril_indices(D, -1)
        z = rng.standard_normal((K, D))
        mu, W, logdet = np.empty((K, D)), np.empty((K, D, D)), np.empty(K)
        _factored(_niw_bartlett(n, s1, s2, self.kappa0, self.psi0, self.mu0, chi, below, z, mu, W, logdet))
        return GaussianParams(mu, W, logdet)

    def loglik(self, X, params):
        return gaussian_loglik(np.asarray(X, dtype=np.float64), params)

    def loglik_uses_blas(self, n_components):
        # from NATURAL_MIN_K components the products run inside the likelihood's own threads on
        # one BLAS thread (gaussian_loglik). A mean too far out for that sends them back to the
        # threaded product: rare, and the parallel draw after it is then slower, not different
        return self.dim > SMALL_D and n_components < NATURAL_MIN_K

    def fused_label_draw(self, X, params, log_weights, uniforms):
        """See :meth:`Family.fused_label_draw`: :func:`natural_label_draw`."""
        return natural_label_draw(np.asarray(X, dtype=np.float64), params, log_weights, uniforms)

    def fused_sublabel_draw(self, X, labels, sub_params, sub_log_weights, uniforms):
        """See :meth:`Family.fused_sublabel_draw`: :func:`natural_sublabel_draw`."""
        return natural_sublabel_draw(np.asarray(X, dtype=np.float64), sub_params, sub_log_weights, labels, uniforms)

    def fused_subcluster_draw(self, X, params, log_weights, sub_params, sub_log_weights, rng, within=None):
        """See :meth:`Family.fused_subcluster_draw`: a compiled pass for D <=
        :data:`FUSED_SUBCLUSTER_MAX_D` (above, the caller composes the step)."""
        if self.dim > FUSED_SUBCLUSTER_MAX_D:
            return None
        z, zs, (n, s1, s2) = fused_gaussian_subcluster_draw(X, self.mu0, params, log_weights, sub_params,
                                                             sub_log_weights, rng, within)
        return z, zs, GaussianStats(n, s1, s2)

    def fused_slice_draw(self, X, params, log_w, labels, star, log_u_star, seeds):
        """See :meth:`Family.fused_slice_draw`: a compiled pass for D <= :data:`FUSED_MAX_D`."""
        if self.dim > FUSED_MAX_D:
            return None
        z, (n, s1, s2) = fused_gaussian_slice_draw(X, self.mu0, params, log_w, labels, star, log_u_star, seeds)
        return z, GaussianStats(n, s1, s2)

    def divergence(self, params):
        sigma = params.sigma
        prec = params.W @ np.swapaxes(params.W, -1, -2)
        D = self.dim
        tr = np.einsum("aij,bji->ab", prec, sigma)  # tr(P_a Sigma_b)
        diff = params.mu[:, None, :] - params.mu[None, :, :]
        Psum = prec[:, None] + prec[None, :]
        maha = np.einsum("abi,abij,abj->ab", diff, Psum, diff)
        return 0.5 * (tr + tr.T + maha) - D

    def sample_data(self, params, labels, rng, **kwargs):
        labels = np.asarray(labels)
        D = self.dim
        X = np.empty((labels.shape[0], D))
        for k in range(params.mu.shape[0]):
            idx = np.flatnonzero(labels == k)
            z = rng.standard_normal((idx.size, D))
            # x = mu + W^{-T} z has covariance (W W^T)^{-1}
            X[idx] = params.mu[k] + np.linalg.solve(params.W[k].T, z.T).T
        return X

    # ---- collapsed kernels ---------------------------------------------------------
    kernels = None  # set below, after the numba functions are defined

    def kernel_data(self, X):
        return (self._centre(X),)

    def kernel_hyper(self):
        return (self.kappa0, self.nu0, np.ascontiguousarray(self._L0))

    def kernel_table_from_stats(self, stats):
        """See :meth:`Family.kernel_table_from_stats`. The size-only part of the Student-t
        constant is tabulated for every size up to the table's total, so moving a point
        needs no lgamma calls."""
        D = self.dim
        n = np.rint(stats.n).astype(np.int64)
        kappa, nu, m, L = self.posterior(stats)
        dof = self.nu0 + np.arange(int(n.sum()) + 1) - D + 1.0
        size_term = gammaln((dof + D) / 2.0) - gammaln(dof / 2.0) - 0.5 * D * np.log(dof * np.pi)
        table = (n, kappa.copy(), np.ascontiguousarray(m), np.ascontiguousarray(L),
                 np.empty(len(n)), np.empty(D), size_term, np.empty(D * D + D + 2))
        _refresh_all(table, self.kernel_hyper())
        return table


# ---- numba kernels: table = (n, kappa, mean, chol, const, scratch, size_term, saved) -----

@kernel
def _refresh_const(table, hyper, k):
    n, kappa, mean, L, const, _, size_term, _ = table
    nu0 = hyper[1]
    D = mean.shape[1]
    dof = nu0 + n[k] - D + 1.0
    logdiag = 0.0
    for d in range(D):
        logdiag += math.log(L[k, d, d])
    kap = kappa[k]
    if n[k] < size_term.shape[0]:
        st = size_term[n[k]]
    else:  # a table built from fewer points than it now holds
        st = math.lgamma((dof + D) / 2.0) - math.lgamma(dof / 2.0) - 0.5 * D * math.log(dof * math.pi)
    # log|Sigma'| = D log((kap+1)/(kap dof)) + 2 sum log diag(L)
    const[k] = st - 0.5 * D * math.log((kap + 1.0) / (kap * dof)) - logdiag


@kernel
def _refresh_all(table, hyper):
    for k in range(table[0].shape[0]):
        _refresh_const(table, hyper, k)


@kernel
def _chol_rank1(L, k, v, sign):
    """L[k] L[k]^T + sign * v v^T, in place (v is destroyed)."""
    D = v.shape[0]
    for j in range(D):
        ljj = L[k, j, j]
        r2 = ljj * ljj + sign * v[j] * v[j]
        if r2 < 1e-300:
            r2 = 1e-300
        r = math.sqrt(r2)
        c = r / ljj
        s = v[j] / ljj
        L[k, j, j] = r
        for i in range(j + 1, D):
            L[k, i, j] = (L[k, i, j] + sign * s * v[i]) / c
            v[i] = c * v[i] - s * L[k, i, j]


@kernel(inline="always")
def _shift_point(kappa, mean, L, v, x, k, sign):
    """Point ``x`` joins (``sign = 1``) or leaves (``sign = -1``) cluster k: its kappa,
    mean and the Cholesky factor of Psi_n by a rank-1 update or downdate (``v`` is scratch)."""
    kap = kappa[k]
    f = math.sqrt(kap / (kap + sign))
    for d in range(x.shape[0]):
        v[d] = f * (x[d] - mean[k, d])
        mean[k, d] = (kap * mean[k, d] + sign * x[d]) / (kap + sign)
    _chol_rank1(L, k, v, sign)
    kappa[k] = kap + sign


@kernel
def niw_add(table, hyper, data, i, k):
    n, kappa, mean, L, const, v, _, _ = table
    _shift_point(kappa, mean, L, v, data[0][i], k, 1.0)
    n[k] += 1
    _refresh_const(table, hyper, k)


@kernel
def niw_remove(table, hyper, data, i, k):
    n, kappa, mean, L, const, v, _, saved = table
    x = data[0][i]
    D = x.shape[0]
    # keep the slot as it was: putting the point straight back is then a copy (niw_undo_remove)
    saved[0] = kappa[k]
    saved[1] = const[k]
    for a in range(D):
        saved[2 + a] = mean[k, a]
        for b in range(a + 1):
            saved[2 + D + a * D + b] = L[k, a, b]
    n[k] -= 1
    if n[k] == 0:  # reset exactly to the prior, no round-off left behind
        kappa[k] = hyper[0]
        L0 = hyper[2]
        for a in range(D):
            mean[k, a] = 0.0
            for b in range(D):
                L[k, a, b] = L0[a, b]
    else:
        _shift_point(kappa, mean, L, v, x, k, -1.0)
    _refresh_const(table, hyper, k)


@kernel
def niw_logpred(table, hyper, data, i, k):
    n, kappa, mean, L, const, y, _, _ = table
    x = data[0][i]
    D = x.shape[0]
    q = 0.0
    for a in range(D):  # forward solve L y = x - m
        s = x[a] - mean[k, a]
        for b in range(a):
            s -= L[k, a, b] * y[b]
        s /= L[k, a, a]
        y[a] = s
        q += s * s
    kap = kappa[k]
    dof = hyper[1] + n[k] - D + 1.0
    return const[k] - 0.5 * (dof + D) * math.log1p(q * kap / (kap + 1.0))


@kernel
def niw_undo_remove(table, hyper, data, i, k):
    n, kappa, mean, L, const, _, _, saved = table
    D = mean.shape[1]
    kappa[k] = saved[0]
    const[k] = saved[1]
    for a in range(D):
        mean[k, a] = saved[2 + a]
        for b in range(a + 1):
            L[k, a, b] = saved[2 + D + a * D + b]
    n[k] += 1


NormalInverseWishart.kernels = CollapsedKernels(niw_add, niw_remove, niw_logpred, niw_undo_remove)


# ---- likelihood given parameters: the data-parallel hot loop ----------------------------

@kernel(inline="always")
def _half_quadform(X, r, mu, W, k):
    """0.5 ||W_k^T (x_r - mu_k)||^2: half the squared Mahalanobis distance (precision W W^T)."""
    D = X.shape[1]
    q = 0.0
    for b in range(D):
        s = 0.0
        for a in range(D):
            s += (X[r, a] - mu[k, a]) * W[k, a, b]
        q += s * s
    return 0.5 * q


def _own_lowest_loglik(X, labels, pos, mu, W, c, lowest, rows):
    """Per row chunk, the lowest ``c[j] - ||W_j^T (x - mu_j)||^2 / 2`` of the rows whose label's
    position ``pos[label]`` is ``j >= 0``, and its row (the first of equals)."""
    N = X.shape[0]
    C = lowest.shape[0]
    step = (N + C - 1) // C
    for ch in prange(C):
        for r in range(ch * step, min(N, (ch + 1) * step)):
            j = pos[labels[r]]
            if j >= 0:
                ll = c[j] - _half_quadform(X, r, mu, W, j)
                if ll < lowest[ch, j]:
                    lowest[ch, j] = ll
                    rows[ch, j] = r


def _small_d_loglik(X, mu, W, c, out):
    N = X.shape[0]
    K = mu.shape[0]
    for r in prange(N):
        for k in range(K):
            out[r, k] = c[k] - _half_quadform(X, r, mu, W, k)


@kernel(inline="always")
def _product_quadform(Y, i, B, k):
    """``||Y[i, kD:(k+1)D] - B[k]||^2``: component k's quadratic form for row ``i`` of a product
    ``Y = x @ [U_1^T ... U_K^T]``, with ``B[k] = U_k mu_k`` (any layout)."""
    D = B.shape[1]
    q = 0.0
    base = k * D
    for d in range(D):
        s = Y[i, base + d] - B[k, d]
        q += s * s
    return q


@kernel(inline="always")
def _product_quadforms(Y, i, B, out):
    """``out[k]`` = :func:`_product_quadform` for every component k."""
    for k in range(B.shape[0]):
        out[k] = _product_quadform(Y, i, B, k)


def _blocked_quadform(Y, B, c, out):
    """out[r, k] = c[k] - 0.5 * ||Y[r, kD:(k+1)D] - B[k]||^2."""
    N = Y.shape[0]
    K = B.shape[0]
    for r in prange(N):
        _product_quadforms(Y, r, B, out[r])
        for k in range(K):
            out[r, k] = c[k] - 0.5 * out[r, k]


@kernel(inline="always")
def _centred_quadforms(X, r, shift, Ut, C, m, x, acc, out):
    """``out[k] = ||U_k (x_r - mu_k)||^2`` for the first ``m`` components (``Ut[b, a, k] = U_k[b, a]``
    upper-triangular, ``C[b, k] = (U_k (mu_k - shift))_b``), with ``x`` the row centred at ``shift``;
    the innermost loop runs over the components, so it vectorises."""
    D = X.shape[1]
    for a in range(D):
        x[a] = X[r, a] - shift[a]
    for k in range(m):
        out[k] = 0.0
    for b in range(D):
        for k in range(m):
            acc[k] = -C[b, k]
        for a in range(b, D):
            xa = x[a]
            for k in range(m):
                acc[k] += Ut[b, a, k] * xa
        for k in range(m):
            out[k] += acc[k] * acc[k]


@kernel(inline="always")
def _likely_clusters(xb, i, P, mm, base, lam_lo, lam_hi, groups, g_r, dist, keep):
    """Mark in ``keep`` the clusters of group ``g_r`` whose weight for row ``i`` of ``xb`` may
    reach ``exp(-NEGLIGIBLE_LOG_RATIO)`` of the largest, and return how many: with ``d_k`` the
    squared distance to the mean (``||x||^2 - 2 P[i, k] + mm[k]``, ``P = xb @ M^T``,
    ``mm[k] = ||mu_k||^2``), ``log w_k = base_k - q_k / 2`` lies between
    ``base_k - lam_hi_k d_k / 2`` and ``base_k - lam_lo_k d_k / 2`` (the precision's extreme
    eigenvalues). The others are weights :func:`sample_log_weights` skips anyway."""
    D = xb.shape[1]
    K = mm.shape[0]
    xx = 0.0
    for a in range(D):
        xx += xb[i, a] * xb[i, a]
    top = -np.inf
    for k in range(K):
        dist[k] = max(xx - 2.0 * P[i, k] + mm[k], 0.0)
        if groups[k] == g_r:
            top = max(top, base[k] - 0.5 * lam_hi[k] * dist[k])
    count = 0
    for k in range(K):
        keep[k] = groups[k] == g_r and base[k] - 0.5 * lam_lo[k] * dist[k] > top - NEGLIGIBLE_LOG_RATIO
        count += keep[k]
    return count


@kernel(inline="always")
def _triangular_quadform(xb, i, Lt, Cb, k, acc):
    """``||U_k x - Cb[k]||^2`` for row ``i`` of ``xb``, with ``Lt[k, a, b] = U_k[b, a]`` (``U_k``
    upper-triangular); the inner loop runs over independent sums, so it vectorises."""
    D = xb.shape[1]
    for b in range(D):
        acc[b] = -Cb[k, b]
    for a in range(D):
        xa = xb[i, a]
        for b in range(a + 1):
            acc[b] += Lt[k, a, b] * xa
    q = 0.0
    for b in range(D):
        q += acc[b] * acc[b]
    return q


def _fused_subcluster_draw(X, shift, Ut, Ucat, C, c, A, g, h0, smu0, old, groups, seeds, block, z, zs,
                           stats, n, s1, s2, prune, Mt, mm, Lt, lam_lo, lam_hi, max_share):
    """Chang & Fisher's label step in one pass (few dimensions): each point's label among the
    clusters of its old cluster's group (``groups[old[r]]``), then its sub-label between the two
    sub-clusters of that cluster only, then (with ``stats``) its share of the 2K sub-cluster
    statistics, per row chunk. Points are centred at ``shift``; cluster k's log weight is
    ``c[k] - ||U_k (x - mu_k)||^2 / 2``.

    The clusters' quadratic forms: with ``block == 0`` (the fewest dimensions)
    :func:`_centred_quadforms` row by row. With ``block > 0``, per ``block`` rows, from one
    matrix product ``x_c @ Ucat`` (the GEMM rate; the caller keeps BLAS to one thread); with
    ``prune``, only those of the clusters that can matter (:func:`_likely_clusters`; on
    well-separated clusters one or two of K), row by row (:func:`_triangular_quadform`) when
    they are at most ``max_share`` of the block's K forms, else from the product, after which
    the bounds rest for a growing number of blocks. The draw is :func:`sample_log_weights`'
    over the same weights whichever clusters were skipped. The sub-label: one quadratic form per
    row, ``log p(left) - log p(right) = h0 + (A v + g) . v`` with ``v`` the row less its
    cluster's left sub-cluster mean (:func:`_sublabel_forms`)."""
    N, D = X.shape
    K = C.shape[1]
    for ch in prange(seeds.shape[0]):
        np.random.seed(seeds[ch])
        logw, acc, v, w = np.empty(K), np.empty(max(K, D)), np.empty(D), np.empty(D)
        start, stop = ch * FUSED_CHUNK, min(N, (ch + 1) * FUSED_CHUNK)
        rows = block if block > 0 else 1
        xb, Y = np.empty((rows, D)), np.empty((rows, 0))
        keep, dist = np.empty((rows, K), dtype=np.bool_), np.empty(K)
        wait, backoff = 0, 1
        for r0 in range(start, stop, rows):
            m = min(rows, stop - r0)
            product, bounded = False, False
            if block > 0:
                for i in range(m):
                    for a in range(D):
                        xb[i, a] = X[r0 + i, a] - shift[a]
                # resting (the bounds kept too many clusters lately: overlapping or elongated
                # ones) or off, every cluster of the group: the draw skips negligible weights alike
                bounded = prune and wait == 0
                if not bounded:
                    wait = max(wait - 1, 0)
                    product = True
                else:
                    Pm = np.dot(xb[:m], Mt)  # for the distances to the means: a product of 1/D the work
                    need = 0
                    for i in range(m):
                        need += _likely_clusters(xb, i, Pm, mm, c, lam_lo, lam_hi, groups, groups[old[r0 + i]], dist,
                                                 keep[i])
                    product = need > max_share * m * K
                    # a block that needed the product: skip the bounds for the next 1, 2, 4, ... 64
                    wait, backoff = (backoff, min(2 * backoff, 64)) if product else (0, 1)
                if product:
                    Y = np.dot(xb[:m], Ucat)
            for i in range(m):
                r = r0 + i
                if block == 0:  # the row centred into xb[0], where the sub-label reads it
                    _centred_quadforms(X, r, shift, Ut, C, K, xb[0], acc, logw)
                    g_r = groups[old[r]]
                    for k in range(K):
                        logw[k] = c[k] - 0.5 * logw[k] if groups[k] == g_r else -np.inf
                elif not bounded:
                    _product_quadforms(Y, i, C.T, logw)
                    g_r = groups[old[r]]
                    for k in range(K):
                        logw[k] = c[k] - 0.5 * logw[k] if groups[k] == g_r else -np.inf
                elif product:
                    for k in range(K):
                        logw[k] = c[k] - 0.5 * _product_quadform(Y, i, C.T, k) if keep[i, k] else -np.inf
                else:
                    for k in range(K):
                        logw[k] = c[k] - 0.5 * _triangular_quadform(xb, i, Lt, C.T, k, acc) if keep[i, k] else -np.inf
                k = sample_log_weights(logw, K, np.random.random())
                # outer loop over a, inner over b: independent sums that vectorise
                for a in range(D):
                    v[a] = xb[i, a] - smu0[k, a]
                    w[a] = g[k, a]
                for a in range(D):
                    va = v[a]
                    for b in range(D):
                        w[b] += A[k, a, b] * va
                d = h0[k]
                for b in range(D):
                    d += w[b] * v[b]
                h = right_side(d, np.random.random())
                z[r], zs[r] = k, h
                if stats:
                    _add_centred(xb[i], ch, 2 * k + h, n, s1, s2)


@kernel(inline="always")
def _gaussian_features(x, phi):
    """``phi = [x, x_a x_b for a >= b]`` (the lower triangle by rows): the statistics a Gaussian
    log density is linear in, and the terms of the sufficient statistics."""
    D = x.shape[0]
    for a in range(D):
        phi[a] = x[a]
    j = D
    for a in range(D):
        xa = x[a]
        for b in range(a + 1):
            phi[j] = xa * x[b]
            j += 1


@kernel(inline="always")
def _dot4(a, b):
    """``a . b`` in four interleaved partial sums: one running sum is a chain of dependent adds
    that runs at the adder's latency (a subc pass at a million 10-D points, one thread: 20 ms
    of its ~240 ms)."""
    F = a.shape[0]
    s0, s1, s2, s3 = 0.0, 0.0, 0.0, 0.0
    stop = F - F % 4
    for j in range(0, stop, 4):
        s0 += a[j] * b[j]
        s1 += a[j + 1] * b[j + 1]
        s2 += a[j + 2] * b[j + 2]
        s3 += a[j + 3] * b[j + 3]
    for j in range(stop, F):
        s0 += a[j] * b[j]
    return (s0 + s1) + (s2 + s3)


@kernel(inline="always")
def _natural_block(X, r0, m, shift, theta, x, Phi):
    """Rows ``r0 .. r0 + m`` of ``X`` centred at ``shift`` into features ``Phi[:m]``
    (:func:`_gaussian_features`), and ``Phi[:m] @ theta``."""
    for i in range(m):
        for a in range(X.shape[1]):
            x[a] = X[r0 + i, a] - shift[a]
        _gaussian_features(x, Phi[i])
    return np.dot(Phi[:m], theta)


def _natural_subcluster_draw(X, shift, theta, c, S, s0, old, groups, seeds, block, z, zs, stats, n, t):
    """Chang & Fisher's label step in one pass with every log density linear in the row's
    features (:func:`_gaussian_features`, ``F = D + D (D + 1) / 2`` of them): per ``block`` rows
    one matrix product ``Phi @ theta`` gives the K clusters' log weights less ``c``, one dot
    product per row ``S[k] . phi + s0[k]`` the log odds of its sub-labels (left against right),
    and ``t[chunk, 2k + h] += phi`` its share of the 2K sub-clusters' statistics. The same draws
    as :func:`_fused_subcluster_draw`, in the same order, from fewer multiply-adds (``F K``
    against ``D^2 K`` a row) and no per-row reduction; the caller checks the forms' magnitudes
    (:data:`NATURAL_MAX_MAGNITUDE`), as expanded they cancel where a mean is far out."""
    N, D = X.shape
    F, K = theta.shape
    for ch in prange(seeds.shape[0]):
        np.random.seed(seeds[ch])
        x, Phi = np.empty(D), np.empty((block, F))
        start, stop = ch * FUSED_CHUNK, min(N, (ch + 1) * FUSED_CHUNK)
        for r0 in range(start, stop, block):
            m = min(block, stop - r0)
            L = _natural_block(X, r0, m, shift, theta, x, Phi)
            for i in range(m):
                r = r0 + i
                logw, phi = L[i], Phi[i]
                g_r = groups[old[r]]
                for k in range(K):
                    logw[k] = logw[k] + c[k] if groups[k] == g_r else -np.inf
                k = sample_log_weights(logw, K, np.random.random())
                d = s0[k] + _dot4(S[k], phi)
                h = right_side(d, np.random.random())
                z[r], zs[r] = k, h
                if stats:
                    n[ch, 2 * k + h] += 1.0
                    for j in range(F):
                        t[ch, 2 * k + h, j] += phi[j]


def _natural_loglik(X, shift, theta, c, block, out, log_weights, uniforms, labels):
    """``out[r, k] = phi(x_r - shift) . theta[:, k] + c[k]``, one matrix product per ``block``
    rows (see :func:`_natural_cluster_forms`); or, with ``labels`` not empty (``out`` then
    unused), each row's label drawn from ``out[r] + log_weights`` at once, as
    ``_numerics.sample_rows`` draws it (the same sums, the same uniform per row)."""
    N, D = X.shape
    F, K = theta.shape
    for bi in prange((N + block - 1) // block):
        r0 = bi * block
        m = min(block, N - r0)
        L = _natural_block(X, r0, m, shift, theta, np.empty(D), np.empty((block, F)))
        for i in range(m):
            row = L[i]
            if labels.shape[0] > 0:
                for k in range(K):
                    row[k] = (row[k] + c[k]) + log_weights[k]
                labels[r0 + i] = sample_log_weights(row, K, uniforms[r0 + i])
            else:
                for k in range(K):
                    out[r0 + i, k] = row[k] + c[k]


def _natural_sublabel_draw(X, shift, S, s0, labels, uniforms, zs):
    """Each row's sub-label between the two sub-clusters of its cluster ``labels[r]``, drawn with
    ``uniforms[r]`` from the log odds (left against right) ``S[k] . phi + s0[k]``, as
    :func:`_natural_subcluster_draw` draws it after the label."""
    N, D = X.shape
    F = S.shape[1]
    for ch in prange((N + FUSED_CHUNK - 1) // FUSED_CHUNK):
        x, phi = np.empty(D), np.empty(F)
        for r in range(ch * FUSED_CHUNK, min(N, (ch + 1) * FUSED_CHUNK)):
            for a in range(D):
                x[a] = X[r, a] - shift[a]
            _gaussian_features(x, phi)
            d = s0[labels[r]] + _dot4(S[labels[r]], phi)
            zs[r] = right_side(d, uniforms[r])


def _fused_slice_draw(X, shift, Ut, C, c, log_w, labels, star, log_u_star, seeds, out, n, s1, s2):
    """Walker's slice step in one pass (few dimensions, see :meth:`Family.fused_slice_draw`):
    per row its slice, the prefix of components above it (sorted by decreasing weight), the
    label from their likelihoods alone (quadratic forms by :func:`_centred_quadforms`),
    and its share of the K components' statistics, per row chunk."""
    N, D = X.shape
    K = C.shape[1]
    u_star = math.exp(log_u_star)
    for ch in prange(seeds.shape[0]):
        np.random.seed(seeds[ch])
        logw, acc, x = np.empty(K), np.empty(K), np.empty(D)
        for r in range(ch * FUSED_CHUNK, min(N, (ch + 1) * FUSED_CHUNK)):
            z = labels[r]
            u_slice, u_draw = np.random.random(), np.random.random()
            log_u = log_u_star if r == star else math.log(u_star + u_slice * (math.exp(log_w[z]) - u_star))
            m = 0
            while m < K and log_w[m] > log_u:
                m += 1
            m = max(m, z + 1)  # the row's own component is above its slice (rounding aside)
            _centred_quadforms(X, r, shift, Ut, C, m, x, acc, logw)
            for k in range(m):
                logw[k] = c[k] - 0.5 * logw[k]
            k = sample_log_weights(logw, m, u_draw)
            out[r] = k
            _add_centred(x, ch, k, n, s1, s2)


def fused_gaussian_slice_draw(X, shift, params: GaussianParams, log_w, labels, star, log_u_star, seeds):
    """:func:`_fused_slice_draw` on Gaussian components (D <= :data:`FUSED_MAX_D`): new labels
    and ``(n, sum x, sum x x^T)`` of the K components, centred at ``shift``."""
    X = np.asarray(X, dtype=np.float64)
    N, D = X.shape
    K = len(log_w)
    C = len(seeds)
    out = np.empty(N, dtype=np.int64)
    n, s1, s2 = np.zeros((C, K)), np.zeros((C, K, D)), np.zeros((C, K, D, D))
    U = _upper_factors(params.W)
    const = -0.5 * D * LOG_2PI - 0.5 * params.logdet_sigma
    _FUSED_SLICE_DRAW[C > 1 and N * K >= PARALLEL_MIN_WORK](
        X, shift, np.ascontiguousarray(np.transpose(U, (1, 2, 0))),
        np.ascontiguousarray(np.einsum("kba,ka->bk", U, params.mu - shift)), const, np.ascontiguousarray(log_w),
        np.ascontiguousarray(labels, dtype=np.int64), int(star), float(log_u_star), seeds, out, n, s1, s2)
    return out, (n.sum(axis=0), s1.sum(axis=0), _symmetrise_lower(s2.sum(axis=0)))


def _float_stats(stats):
    """``(n, s1, s2)`` as contiguous float64 arrays, as the compiled NIW kernels take them."""
    return tuple(np.ascontiguousarray(a, dtype=np.float64) for a in stats)


def _factored(ok: bool):
    """A compiled NIW kernel's verdict on its posterior scales, raised if one had no factor."""
    if not ok:
        raise np.linalg.LinAlgError("a posterior scale matrix is not positive definite")


@kernel(inline="always")
def _posterior_factor(n, s1, s2, k, kappa0, psi0, L):
    """Cluster k's posterior scale ``psi0 + s2 - kappa_n m m^T`` (``m = s1 / kappa_n``) into the
    lower triangle of ``L``, factored there in place (Cholesky); returns ``log |L|``, or NaN
    where the scale is not positive definite."""
    D = s1.shape[1]
    kappa = kappa0 + n[k]
    for a in range(D):
        ma = s1[k, a] / kappa
        for b in range(a + 1):
            L[a, b] = psi0[a, b] + s2[k, a, b] - kappa * ma * (s1[k, b] / kappa)
    logdet = 0.0
    for j in range(D):
        d = L[j, j]
        for i in range(j):
            d -= L[j, i] * L[j, i]
        if not d > 0.0:
            return np.nan
        d = math.sqrt(d)
        L[j, j] = d
        logdet += math.log(d)
        for r in range(j + 1, D):
            v = L[r, j]
            for i in range(j):
                v -= L[r, i] * L[j, i]
            L[r, j] = v / d
    return logdet


@kernel
def _niw_bartlett(n, s1, s2, kappa0, psi0, mu0, chi, below, z, mu, W, logdet_sigma):
    """Posterior draws of every cluster's mean and precision factor (:meth:`NormalInverseWishart.sample_params`)
    from the given chi-square, normal (``below``, the Bartlett factor under its diagonal) and
    normal (``z``, the mean) draws. Returns False where a posterior scale is not positive definite."""
    K, D = s1.shape
    L, A, Linv, y = np.zeros((D, D)), np.zeros((D, D)), np.zeros((D, D)), np.empty(D)
    for k in range(K):
        logdet_L = _posterior_factor(n, s1, s2, k, kappa0, psi0, L)
        if np.isnan(logdet_L):
            return False
        t = 0
        logdet_A = 0.0
        for a in range(D):
            for b in range(a):
                A[a, b] = below[k, t]
                t += 1
            A[a, a] = math.sqrt(chi[k, a])
            logdet_A += math.log(A[a, a])
        for j in range(D):  # L^-1, lower-triangular, column by column
            for i in range(j):
                Linv[i, j] = 0.0
            Linv[j, j] = 1.0 / L[j, j]
            for i in range(j + 1, D):
                v = 0.0
                for c in range(j, i):
                    v -= L[i, c] * Linv[c, j]
                Linv[i, j] = v / L[i, i]
        for a in range(D):  # W = L^-T A: the precision is W W^T
            for b in range(D):
                v = 0.0
                for c in range(max(a, b), D):
                    v += Linv[c, a] * A[c, b]
                W[k, a, b] = v
        logdet_sigma[k] = 2.0 * (logdet_L - logdet_A)
        for i in range(D - 1, -1, -1):  # A^T y = z (upper-triangular)
            v = z[k, i]
            for j in range(i + 1, D):
                v -= A[j, i] * y[j]
            y[i] = v / A[i, i]
        scale = math.sqrt(kappa0 + n[k])
        for a in range(D):  # mu = mu0 + m + L y / sqrt(kappa_n), L y ~ N(0, Sigma)
            v = 0.0
            for c in range(a + 1):
                v += L[a, c] * y[c]
            mu[k, a] = mu0[a] + s1[k, a] / (kappa0 + n[k]) + v / scale
    return True


@kernel
def _niw_log_marginals(n, s1, s2, kappa0, nu0, psi0, logdet_psi0, out):
    """``out[k]``: the log marginal likelihood of cluster k's points under the NIW prior, from
    its statistics (centred at the prior mean). Returns False where a posterior scale
    ``psi0 + s2 - s1 s1^T / kappa_n`` has no Cholesky factor (not positive definite)."""
    K, D = s1.shape
    L = np.empty((D, D))
    for k in range(K):
        kappa, nu = kappa0 + n[k], nu0 + n[k]
        logdet = _posterior_factor(n, s1, s2, k, kappa0, psi0, L)
        if np.isnan(logdet):
            return False
        gammas = 0.0  # log Gamma_D(nu / 2) - log Gamma_D(nu0 / 2)
        for j in range(D):
            gammas += math.lgamma((nu - j) / 2.0) - math.lgamma((nu0 - j) / 2.0)
        out[k] = (-0.5 * n[k] * D * LOG_PI + gammas + 0.5 * nu0 * logdet_psi0 - nu * logdet
                  + 0.5 * D * (math.log(kappa0) - math.log(kappa)))
    return True


def _upper_factors(W):
    """Upper-triangular ``U`` with ``U^T U = W W^T`` for each (D, D) factor in ``W`` (the R of
    a QR of ``W^T``; its rows' signs do not matter to ``||U d||``)."""
    return np.linalg.qr(np.swapaxes(W, -1, -2), mode="r")


def _sublabel_forms(sub_params: GaussianParams, sub_log_weights, shift):
    """Each cluster's sub-label choice as one quadratic form: with ``v = x - m_l`` (``m_l``, ``m_r``
    the left and right sub-cluster means centred at ``shift``, ``P_l``, ``P_r`` their precisions,
    ``delta = m_r - m_l``), ``log p(left) - log p(right) = h0 + v^T A v + g^T v`` where
    ``A = (P_r - P_l) / 2``, ``g = -P_r delta`` and ``h0`` holds the constants. Centred at a
    sub-cluster mean, ``v`` is small for the cluster's own points, so the difference keeps the
    precision of the two separate forms at half their cost."""
    P = sub_params.W @ np.swapaxes(sub_params.W, -1, -2)
    P_l, P_r = P[0::2], P[1::2]
    m = sub_params.mu - shift
    delta = m[1::2] - m[0::2]
    side = -0.5 * sub_params.logdet_sigma + np.asarray(sub_log_weights, dtype=np.float64)
    P_r_delta = np.einsum("kab,kb->ka", P_r, delta)
    h0 = side[0::2] - side[1::2] + 0.5 * np.einsum("ka,ka->k", delta, P_r_delta)
    A = 0.5 * (P_r - P_l)
    return (np.ascontiguousarray(A), np.ascontiguousarray(-P_r_delta),
            np.ascontiguousarray(h0), np.ascontiguousarray(m[0::2]))


def _bound_inputs(params: GaussianParams, U, mu, prune: bool):
    """What :func:`_likely_clusters` and :func:`_triangular_quadform` read, computed only when the
    pass bounds the weights (``prune``; else empty arrays of the same types): the centred means
    as columns, their squared norms, ``Lt[k, a, b] = U_k[b, a]`` and :func:`_precision_range`."""
    if not prune:
        return np.zeros((0, 0)), np.zeros(0), np.zeros((0, 0, 0)), np.zeros(0), np.zeros(0)
    return (np.ascontiguousarray(mu.T), np.einsum("ka,ka->k", mu, mu), np.ascontiguousarray(np.swapaxes(U, 1, 2)),
            *_precision_range(params))


def _precision_range(params: GaussianParams):
    """Each precision's smallest and largest eigenvalue, widened past their rounding: with them
    ``lo_k ||x - mu_k||^2 <= ||U_k (x - mu_k)||^2 <= hi_k ||x - mu_k||^2`` (:func:`_likely_clusters`)."""
    ev = np.linalg.eigvalsh(params.W @ np.swapaxes(params.W, -1, -2))
    return np.maximum(ev[:, 0] - 1e-9 * ev[:, -1], 0.0), ev[:, -1] * (1.0 + 1e-9)


@functools.cache
def _lower_triangle(D: int):
    """``np.tril_indices(D)`` and the quadratic features' multipliers (1 on the squares, 2 on the
    products), read-only: found once per dimension, as numpy's costs ~20 us a call and each
    sub-cluster step asked three times."""
    a, b = np.tril_indices(D)
    twice = np.where(a == b, 1.0, 2.0)
    for v in (a, b, twice):
        v.flags.writeable = False
    return a, b, twice


def _quadratic_coefficients(M):
    """The coefficients of ``x^T M x`` (``M`` symmetric, stacked (K, D, D)) over the quadratic
    features of :func:`_gaussian_features`: ``M_aa`` on the squares, ``2 M_ab`` on the products."""
    a, b, twice = _lower_triangle(M.shape[-1])
    return twice * M[:, a, b]


def _natural_cluster_forms(params: GaussianParams, shift):
    """Each component's log density less its normalising constant, ``-(x - mu)^T P (x - mu) / 2``
    for rows centred at ``shift``, as ``phi(x) . theta[:, k] + shift_c[k]`` over the features of
    :func:`_gaussian_features`; and the largest squared distance of a centred mean from the
    origin in its own precision's metric (how far the expanded form cancels)."""
    P = params.W @ np.swapaxes(params.W, -1, -2)
    m = params.mu - shift
    Pm = np.einsum("kab,kb->ka", P, m)
    theta = np.concatenate([Pm, _quadratic_coefficients(-0.5 * P)], axis=1).T
    shift_c = -0.5 * np.einsum("ka,ka->k", m, Pm)
    return np.ascontiguousarray(theta), shift_c, float(np.max(-2.0 * shift_c, initial=0.0))


def _natural_forms(params: GaussianParams, sub_params: GaussianParams, A, g, h0, sm, shift):
    """The inputs of :func:`_natural_subcluster_draw`: :func:`_natural_cluster_forms`' ``theta``
    and ``shift_c``, and the sub-label odds ``phi(x) . S[k] + s0[k]`` from the forms of
    :func:`_sublabel_forms` (``h0 + v^T A v + g^T v`` with ``v = x - sm``); ``far`` over the
    clusters and the sub-clusters."""
    theta, shift_c, far = _natural_cluster_forms(params, shift)
    S, s0, sub_far = _natural_sublabel_forms(sub_params, A, g, h0, sm, shift)
    return theta, shift_c, S, s0, max(far, sub_far)


def _natural_sublabel_forms(sub_params: GaussianParams, A, g, h0, sm, shift):
    """The sub-label log odds ``phi(x) . S[k] + s0[k]`` of rows centred at ``shift`` from the forms of
    :func:`_sublabel_forms`, and the largest squared distance of a centred sub-cluster mean
    from the origin in its own precision's metric (how far the expanded form cancels)."""
    Asm = np.einsum("kab,kb->ka", A, sm)
    S = np.concatenate([g - 2.0 * Asm, _quadratic_coefficients(A)], axis=1)
    s0 = h0 + np.einsum("ka,ka->k", sm, Asm) - np.einsum("ka,ka->k", g, sm)
    # the sub-clusters' reach, m^T P m = ||W^T m||^2, without their coefficients
    reach = np.einsum("kab,ka->kb", sub_params.W, sub_params.mu - shift)
    return np.ascontiguousarray(S), s0, float(np.max((reach * reach).sum(axis=1), initial=0.0))


def fused_gaussian_subcluster_draw(X, shift, params: GaussianParams, log_weights, sub_params: GaussianParams,
                                   sub_log_weights, rng, within=None):
    """Chang & Fisher's label step for Gaussian components in one compiled pass (D <=
    :data:`FUSED_SUBCLUSTER_MAX_D`, see :meth:`Family.fused_subcluster_draw`): labels, sub-labels and
    ``(n, sum x, sum x x^T)`` of the 2K sub-components, centred at ``shift``.

    Below :data:`PRUNE_MIN_D` dimensions the log densities are linear in each row's features
    (:func:`_natural_subcluster_draw`), unless a mean lies too far out for that
    (:data:`NATURAL_MAX_MAGNITUDE`); there, and from :data:`PRUNE_MIN_D`, they are quadratic forms
    (:func:`_fused_subcluster_draw`). Both draw the same labels from the same uniforms but for
    rounding."""
    X = np.asarray(X, dtype=np.float64)
    N, D = X.shape
    K = len(log_weights)
    seeds = chunk_seeds(rng, N)
    C = len(seeds)
    parallel = C > 1 and N * K >= PARALLEL_MIN_WORK
    old, groups = within if within is not None else (np.zeros(N, dtype=np.int64), np.zeros(K, dtype=np.int64))
    old, groups = np.ascontiguousarray(old, dtype=np.int64), np.ascontiguousarray(groups, dtype=np.int64)
    z, zs = np.empty(N, dtype=np.int64), np.empty(N, dtype=np.int64)
    # partial statistics per chunk: C x 2K x D^2 floats, which past a few dimensions outgrow
    # the caches and then memory (a million 50-D rows, K = 20: 0.4 GB); there the statistics
    # are matrix products after the pass
    stats = D <= FUSED_STATS_MAX_D
    n = np.zeros((C, 2 * K) if stats else (0, 0))
    const = -0.5 * D * LOG_2PI - 0.5 * params.logdet_sigma + np.asarray(log_weights, dtype=np.float64)
    forms = _sublabel_forms(sub_params, sub_log_weights, shift)
    natural = _natural_forms(params, sub_params, *forms, shift) if D < PRUNE_MIN_D else None
    if natural is not None and natural[-1] <= NATURAL_MAX_MAGNITUDE:
        theta, shift_c, S, s0, _ = natural
        F = len(theta)
        t = np.zeros((C, 2 * K, F) if stats else (0, 0, 0))
        block = min(FUSED_CHUNK, max(NATURAL_MIN_BLOCK, _FUSED_BLOCK_BYTES // (8 * F)))
        with one_blas_thread():  # see below
            _NATURAL_SUBCLUSTER_DRAW[parallel](X, shift, theta, const + shift_c, S, s0, old, groups, seeds, block, z,
                                               zs, stats, n, t)
        # chunk partial sums added in chunk order: the same floats whatever the thread count
        T, (a, b, _) = t.sum(axis=0), _lower_triangle(D)
        s1, s2 = T[:, :D], np.zeros((len(T), D, D))
        if stats:
            s2[:, a, b] = T[:, D:]
    else:
        U = _upper_factors(params.W)
        # rows per product: its (rows x K*D) result stays in a core's cache while it is reduced
        block = min(FUSED_CHUNK, max(16, _FUSED_BLOCK_BYTES // (8 * K * D))) if D >= PRODUCT_MIN_D else 0
        prune = block > 0 and D >= PRUNE_MIN_D
        Ut = np.ascontiguousarray(np.transpose(U, (1, 2, 0)))  # Ut[b, a, k] = U_k[b, a]
        Ucat = np.ascontiguousarray(np.transpose(U, (2, 0, 1)).reshape(D, K * D))  # Ucat[a, kD + b] = U_k[b, a]
        mu = params.mu - shift
        s1, s2 = np.zeros((C, 2 * K, D) if stats else (0, 0, 0)), np.zeros((C, 2 * K, D, D) if stats else (0, 0, 0, 0))
        kernel_args = (X, shift, Ut, Ucat, np.ascontiguousarray(np.einsum("kba,ka->bk", U, mu)), const, *forms, old,
                       groups, seeds, block, z, zs, stats, n, s1, s2, prune, *_bound_inputs(params, U, mu, prune),
                       PRUNED_MAX_SHARE)
        # one BLAS thread per product: the pass's own threads share the rows, and BLAS threads
        # beside them (a product over 512 rows spawns them) made the pass 20x slower
        with one_blas_thread() if block else nullcontext():
            _FUSED_SUBCLUSTER_DRAW[parallel](*kernel_args)
        s1, s2 = s1.sum(axis=0), s2.sum(axis=0)
    if not stats:
        return z, zs, tuple(grouped_gaussian_stats(X, 2 * z + zs, 2 * K, shift))
    return z, zs, (n.sum(axis=0), s1, _symmetrise_lower(s2))


#: :meth:`NormalInverseWishart.moments_from_stats` trusts a cluster's scatter from its raw
#: moments where it keeps at least this share of them (the rest cancelled in float64)
MOMENTS_MIN_KEPT = 1e-6
#: up to this dimension direct loops beat a matrix product for the quadratic forms
SMALL_D = 8
#: up to this dimension the slice label step is one compiled pass
FUSED_MAX_D = 16
#: up to this dimension the sub-cluster label step is one compiled pass (a subc step on one
#: thread, fused against composed of a matrix-product likelihood, sampling, sub-labels and
#: statistics, K = 20: 7e4 x 24-D 83 against 102 ms, 7e4 x 50-D 245 against 266 ms, but
#: 3e4 x 100-D 449 against 393 ms)
FUSED_SUBCLUSTER_MAX_D = 64
#: up to this dimension the fused sub-cluster pass also sums the statistics, per row chunk (1e5 x
#: 10-D, K = 20: 37 against 50 ms with the statistics as matrix products after the pass)
FUSED_STATS_MAX_D = 16
#: working-set target of the GEMM-then-reduce likelihood (about half a typical L2 + L3 share)
_QUADFORM_CACHE_BYTES = 1 << 23
#: from this dimension the fused sub-cluster pass takes the clusters' quadratic forms from a
#: matrix product per block of rows (measured, 1e5 rows, K = 20, one thread: a tie at D = 4,
#: 0.96x at 6, 0.86x at 8, 0.83x at 10, 0.74x at 16 the time of the row-by-row loops)
PRODUCT_MIN_D = 6
#: from this dimension the fused sub-cluster pass bounds each point's cluster weights from its
#: distances to the means and skips the negligible ones (70k points from 20 Gaussian blobs, one
#: pass, 2 threads: 16-D 22 against 24 ms, 24-D 40 against 52, 32-D 48 against 75, 50-D 72 against
#: 145; with the bounds 1e6 x 10-D, 20 clusters, was 10-20 % slower; on MNIST-10k 50-D, where the
#: clusters are too elongated for the bounds, 5-10 % slower)
PRUNE_MIN_D = 20
#: ... and computes a block's likely clusters' quadratic forms row by row up to this share of
#: its K forms, all of them by one matrix product above it
PRUNED_MAX_SHARE = 0.25
#: the natural-parameter pass (:func:`_natural_subcluster_draw`) serves while every centred
#: mean lies within this squared distance of the origin in its own precision's metric: its
#: expanded quadratic forms then lose at most ~1e-9 of a nat to cancellation
#: (``tests/test_families.py``). Against the quadratic forms, one thread, 2e5 points from 20
#: Gaussians, a whole subc step: 2-D 29 against 50 ms, 6-D 41 / 69, 12-D 64 / 96, 16-D 87 / 120;
#: from 20-D (70k points) the bounded quadratic forms win on separated clusters (24-D 44 / 57,
#: 50-D 87 / 158) and tie on MNIST's elongated ones
NATURAL_MAX_MAGNITUDE = 1e6
#: fewest rows per product of the natural-parameter pass
NATURAL_MIN_BLOCK = 64
#: fewest components for which the natural-parameter likelihood beats the quadratic forms: its
#: features cost a row ~D^2 / 2 products whatever K (2 threads, against the forms: 1e6 x 10-D,
#: K = 1, 2, 4, 8: 44 / 36, 43 / 28, 47 / 47, 59 / 95 ms; 2e4 x 50-D: 8.4 / 2.8, 12 / 8.5, 21 / 12,
#: 20 / 21)
NATURAL_MIN_K = 8
#: rows per product of the natural-parameter likelihood (2 threads, K = 20: 128 to 512 rows
#: alike at 2-16 D; at 50-D 75 ms with 256 rows against 107 with 128 and 98 with 1,024)
NATURAL_LOGLIK_BLOCK = 256
#: working-set target of one block product in the fused pass (a core's share of L2)
_FUSED_BLOCK_BYTES = 1 << 17
SMALL_D_LOGLIK = parallel_variants(_small_d_loglik)
_OWN_LOWEST_LOGLIK = parallel_variants(_own_lowest_loglik)
SMALL_D_STATS = parallel_variants(_small_d_stats)
_BLOCKED_QUADFORM = parallel_variants(_blocked_quadform)
_FUSED_SUBCLUSTER_DRAW = parallel_variants(_fused_subcluster_draw)
_FUSED_SLICE_DRAW = parallel_variants(_fused_slice_draw)
_NATURAL_SUBCLUSTER_DRAW = parallel_variants(_natural_subcluster_draw)
_NATURAL_LOGLIK = parallel_variants(_natural_loglik)
_NATURAL_SUBLABEL_DRAW = parallel_variants(_natural_sublabel_draw)


def _no_draw():
    """:func:`_natural_loglik`'s log weights, uniforms and labels when it draws no labels."""
    return np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64)


def _rows_centre(X):
    """The mean of about 1,024 evenly spaced rows: the natural-parameter kernels need a centre
    of the rows, not their exact mean."""
    return X[::max(1, len(X) // 1024)].mean(axis=0)


def _natural_inputs(X, params: GaussianParams):
    """``(X, shift, theta, c)`` of the natural-parameter kernels (log densities, normalising
    constants included, of rows centred near their mean), or ``None`` where they would not
    pay (fewer than :data:`NATURAL_MIN_K` components) or a mean lies too far out for them
    (:data:`NATURAL_MAX_MAGNITUDE`)."""
    if len(params.mu) < NATURAL_MIN_K:
        return None
    shift = _rows_centre(X)
    theta, shift_c, far = _natural_cluster_forms(params, shift)
    if far > NATURAL_MAX_MAGNITUDE:
        return None
    return X, shift, theta, -0.5 * X.shape[1] * LOG_2PI - 0.5 * params.logdet_sigma + shift_c


def natural_label_draw(X, params: GaussianParams, log_weights, uniforms):
    """Every label ``z_i ~ Cat(w_k N(x_i | mu_k, Sigma_k))`` drawn with ``uniforms[i]``, in one
    pass (:func:`_natural_loglik`), or ``None`` where it would not pay or a mean lies too far out
    for it (:func:`_natural_inputs`)."""
    N, K = X.shape[0], len(log_weights)
    natural = _natural_inputs(X, params) if N else None
    if natural is None:
        return None
    labels = np.empty(N, dtype=np.int64)
    with one_blas_thread():  # the products run inside the pass's threads
        _NATURAL_LOGLIK[N * K >= PARALLEL_MIN_WORK](*natural, NATURAL_LOGLIK_BLOCK, np.empty((0, 0)),
                                                    np.ascontiguousarray(log_weights, dtype=np.float64),
                                                    np.ascontiguousarray(uniforms, dtype=np.float64), labels)
    return labels


def natural_sublabel_draw(X, sub_params: GaussianParams, sub_log_weights, labels, uniforms):
    """Every row's sub-label between the sub-clusters ``2k, 2k + 1`` of its cluster ``k =
    labels[i]``, drawn with ``uniforms[i]``, in one pass (:func:`_natural_sublabel_draw`: a
    dot product over the row's features where the composed draw scores all 2K sub-clusters),
    or ``None`` from :data:`PRUNE_MIN_D` dimensions (as the fused pass, there quadratic forms)
    or where a sub-cluster mean lies too far out for it (:data:`NATURAL_MAX_MAGNITUDE`)."""
    N, D = X.shape
    if N == 0 or D >= PRUNE_MIN_D:
        return None
    shift = _rows_centre(X)
    S, s0, far = _natural_sublabel_forms(sub_params, *_sublabel_forms(sub_params, sub_log_weights, shift), shift)
    if far > NATURAL_MAX_MAGNITUDE:
        return None
    zs = np.empty(N, dtype=np.int64)
    _NATURAL_SUBLABEL_DRAW[N * S.shape[1] >= PARALLEL_MIN_WORK](X, shift, S, s0, np.ascontiguousarray(labels),
                                                                np.ascontiguousarray(uniforms, dtype=np.float64), zs)
    return zs


def _student_quadforms(X, m, L, scale, power):
    """``q[r, k] = scale_k ||L_k^{-1} (x_r - m_k)||^2`` for the NIW predictive (a Student-t whose
    log density falls as ``power_k / 2 * log1p(q)``): linear in each row's features
    (:func:`_natural_loglik`, from :data:`NATURAL_MIN_K` components) unless a mean lies too far out
    for that, in nats of the density (:data:`NATURAL_MAX_MAGNITUDE`); there by triangular solves."""
    N, K = X.shape[0], len(m)
    out = np.empty((N, K))
    if N == 0 or K == 0:
        return out
    if K >= NATURAL_MIN_K:
        # P = scale (L L^T)^-1 = W W^T with W = sqrt(scale) L^-T
        W = np.sqrt(scale)[:, None, None] * np.swapaxes(np.linalg.inv(L), -1, -2)
        shift = _rows_centre(X)
        theta, shift_c, _ = _natural_cluster_forms(GaussianParams(m, W, np.zeros(K)), shift)
        if float(np.max(-2.0 * shift_c * power)) <= NATURAL_MAX_MAGNITUDE:
            with one_blas_thread():  # the products run inside the pass's threads
                _NATURAL_LOGLIK[N * K >= PARALLEL_MIN_WORK](X, shift, theta, shift_c, NATURAL_LOGLIK_BLOCK, out,
                                                            *_no_draw())
            return np.maximum(-2.0 * out, 0.0)  # -q / 2 computed; round-off could make it positive
    for k in range(K):
        y = solve_triangular(L[k], (X - m[k]).T, lower=True)
        out[:, k] = (y * y).sum(axis=0) * scale[k]
    return out


def gaussian_loglik(X, params: GaussianParams, out=None) -> np.ndarray:
    """log N(x | mu_k, Sigma_k) for every point and component.

    Linear in each row's features (:func:`_natural_loglik`, one matrix product per block of
    rows with the pass's own threads) unless a mean lies too far out from the rows' centre
    for that (:data:`NATURAL_MAX_MAGNITUDE`); there as quadratic forms: for D > 8 one matrix
    product ``X @ [W_1 ... W_K]`` (GEMM rate) followed by a cheap blocked reduction; for small D
    a direct numba loop.
    """
    N, D = X.shape
    K = params.mu.shape[0]
    c = -0.5 * D * LOG_2PI - 0.5 * params.logdet_sigma
    if out is None:
        out = np.empty((N, K))
    if N == 0:
        return out
    natural = _natural_inputs(X, params)
    if natural is not None:
        with one_blas_thread():  # the products run inside the pass's threads
            _NATURAL_LOGLIK[N * K >= PARALLEL_MIN_WORK](*natural, NATURAL_LOGLIK_BLOCK, out, *_no_draw())
    elif D <= SMALL_D:
        SMALL_D_LOGLIK[N * K >= PARALLEL_MIN_WORK](X, params.mu, np.ascontiguousarray(params.W), c, out)
    else:
        Wcat = np.ascontiguousarray(np.transpose(params.W, (1, 0, 2)).reshape(D, K * D))
        B = np.einsum("ka,kab->kb", params.mu, params.W)
        # rows in chunks whose product (rows x K*D) stays in cache while it is reduced
        rows = max(64, _QUADFORM_CACHE_BYTES // (8 * K * D))
        Y = np.empty((min(rows, N), K * D))
        for a in range(0, N, rows):
            b = min(a + rows, N)
            np.matmul(X[a:b], Wcat, out=Y[:b - a])
            # serial on purpose: BLAS threads still spinning after the product would stall a
            # numba parallel region (measured: 2x slower label step). The fused passes instead
            # limit BLAS to one thread, as their products run inside numba's threads; here that
            # loses the product's own threads (70k x 50-D, K = 20, 2 cores: 264-300 against
            # 119-188 ms)
            _BLOCKED_QUADFORM[0](Y[:b - a], B, c, out[a:b])
    return out
