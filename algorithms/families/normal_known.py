"""Isotropic Gaussian with known variance (Wang & Lin's model, docs/algorithms.md §0.4b).

``x | mu ~ N(mu, sigma^2 I)``, ``mu ~ N(mu0, sigma0^2 I)``. Data are centred at ``mu0``.
"""
from __future__ import annotations

import math
from numbers import Real
from typing import NamedTuple

import numpy as np

from ..numba_cache import kernel
from .._numerics import LOG_2PI
from ..constraints import Interval
from ._base import CollapsedKernels, Family, check_finite_matrix, check_prior_mean
from .niw import (FUSED_MAX_D, SMALL_D, GaussianParams, fused_gaussian_slice_draw, fused_gaussian_subcluster_draw,
                  gaussian_loglik)

#: sigma and sigma0: the variances and their squares (the marginal divides by var ** 2) stay
#: finite doubles (at sigma = 1e150, var ** 2 overflowed: found by a property test)
SCALE = Interval(Real, 1e-75, 1e75)


class IsotropicStats(NamedTuple):
    n: np.ndarray  #: (K,) number of points
    s1: np.ndarray  #: (K, D) sum of (x - mu0)
    ss: np.ndarray  #: (K,) sum of ||x - mu0||^2


class IsotropicParams(NamedTuple):
    mu: np.ndarray  #: (K, D) component means


class NormalKnownCovariance(Family):
    """Gaussian components with known isotropic covariance ``sigma^2 I``.

    Parameters
    ----------
    sigma : float
        Known standard deviation of every component (> 0).
    mu0 : array_like, shape (D,)
        Prior mean of component means.
    sigma0 : float
        Prior standard deviation of component means (> 0).
    """

    def __init__(self, sigma, mu0, sigma0):
        mu0 = check_prior_mean(mu0)
        sigma, sigma0 = SCALE.check("sigma", sigma), SCALE.check("sigma0", sigma0)
        self.sigma, self.mu0, self.sigma0 = sigma, mu0, sigma0
        self.dim = mu0.shape[0]
        self.kappa0 = 1.0 / self.sigma0 ** 2
        self.var = self.sigma ** 2

    def __repr__(self):
        return f"NormalKnownCovariance(D={self.dim}, sigma={self.sigma:g}, sigma0={self.sigma0:g})"

    @classmethod
    def default_for(cls, X, sigma: float | None = None):
        """``mu0`` = data mean, ``sigma0`` = overall spread of the data; ``sigma`` defaults to
        a tenth of that spread (components narrower than the data)."""
        X = check_finite_matrix(X)
        spread = float(np.sqrt(max(X.var(axis=0).mean(), 1e-12))) if X.shape[0] > 1 else 1.0
        return cls(sigma if sigma is not None else 0.1 * spread, X.mean(axis=0), spread)

    def validate(self, X):
        return check_finite_matrix(X, dim=self.dim, family=self)

    def _centre(self, X):
        return np.ascontiguousarray(X - self.mu0)

    def stats(self, X, labels, n_clusters):
        Xc = self._centre(X)
        labels = np.asarray(labels, dtype=np.int64)
        n = np.bincount(labels, minlength=n_clusters).astype(np.float64)[:n_clusters]
        s1 = np.stack([np.bincount(labels, weights=Xc[:, d], minlength=n_clusters)[:n_clusters]
                       for d in range(self.dim)], axis=1)
        ss = np.bincount(labels, weights=(Xc * Xc).sum(axis=1), minlength=n_clusters)[:n_clusters]
        return IsotropicStats(n, s1, ss)

    def empty_stats(self, n_clusters):
        return IsotropicStats(np.zeros(n_clusters), np.zeros((n_clusters, self.dim)), np.zeros(n_clusters))

    def posterior(self, stats):
        """(kappa_n, posterior mean of mu (centred)); posterior var of mu is 1/kappa_n."""
        kappa = self.kappa0 + stats.n / self.var
        return kappa, (stats.s1 / self.var) / kappa[:, None]

    def log_marginal_stats(self, stats):
        n, s1, ss = stats
        D = self.dim
        kappa = self.kappa0 + n / self.var
        eta2 = (s1 * s1).sum(axis=1) / self.var ** 2
        return (-0.5 * n * D * np.log(2.0 * np.pi * self.var) + 0.5 * D * np.log(self.kappa0 / kappa)
                - ss / (2.0 * self.var) + eta2 / (2.0 * kappa))

    def log_predictive(self, X, stats):
        Xc = self._centre(self.validate(X))
        kappa, m = self.posterior(stats)
        v = 1.0 / kappa + self.var
        d2 = ((Xc[:, None, :] - m[None, :, :]) ** 2).sum(axis=2)
        return -0.5 * self.dim * np.log(2.0 * np.pi * v)[None, :] - d2 / (2.0 * v[None, :])

    def sample_params(self, stats, rng):
        kappa, m = self.posterior(stats)
        mu = self.mu0 + m + rng.standard_normal(m.shape) / np.sqrt(kappa)[:, None]
        return IsotropicParams(mu)

    def _as_gaussian(self, params) -> GaussianParams:
        """The components as full-covariance Gaussians (precision factor I / sigma): in few
        dimensions they share the compiled, multi-threaded kernels of the NIW family."""
        K, D = params.mu.shape
        W = np.zeros((K, D, D))
        W[:, np.arange(D), np.arange(D)] = 1.0 / self.sigma
        return GaussianParams(params.mu, W, np.full(K, D * math.log(self.var)))

    def loglik(self, X, params):
        X = np.asarray(X, dtype=np.float64)
        if self.dim <= SMALL_D:
            return gaussian_loglik(X, self._as_gaussian(params))
        mu = params.mu
        # -||x - mu||^2 / 2 var = x.mu / var - ||x||^2 / 2 var - ||mu||^2 / 2 var: one matrix
        # product, then in place (one (rows x K) array instead of six; slice-mr's map is
        # dominated by it: 15 -> 10 ms per 64k rows)
        out = X @ (mu.T / self.var)
        out -= (0.5 / self.var) * (X * X).sum(axis=1)[:, None]
        out -= ((0.5 / self.var) * (mu * mu).sum(axis=1))[None, :]
        np.minimum(out, 0.0, out=out)  # round-off could make a distance negative
        out += -0.5 * self.dim * (LOG_2PI + math.log(self.var))
        return out

    def loglik_uses_blas(self, n_components):
        return self.dim > SMALL_D

    def fused_subcluster_draw(self, X, params, log_weights, sub_params, sub_log_weights, rng, within=None):
        """See :meth:`Family.fused_subcluster_draw`: the NIW family's compiled pass (D <= 16)."""
        if self.dim > FUSED_MAX_D:
            return None
        z, zs, (n, s1, s2) = fused_gaussian_subcluster_draw(X, self.mu0, self._as_gaussian(params), log_weights,
                                                             self._as_gaussian(sub_params), sub_log_weights, rng,
                                                             within)
        return z, zs, IsotropicStats(n, s1, np.trace(s2, axis1=1, axis2=2).copy())

    def fused_slice_draw(self, X, params, log_w, labels, star, log_u_star, seeds):
        """See :meth:`Family.fused_slice_draw`: the NIW family's compiled pass (D <= 16)."""
        if self.dim > FUSED_MAX_D:
            return None
        z, (n, s1, s2) = fused_gaussian_slice_draw(X, self.mu0, self._as_gaussian(params), log_w, labels, star,
                                                   log_u_star, seeds)
        return z, IsotropicStats(n, s1, np.trace(s2, axis1=1, axis2=2).copy())

    def divergence(self, params):
        mu = params.mu
        d2 = ((mu[:, None, :] - mu[None, :, :]) ** 2).sum(axis=2)
        return d2 / self.var

    def sample_data(self, params, labels, rng, **kwargs):
        labels = np.asarray(labels)
        return params.mu[labels] + self.sigma * rng.standard_normal((labels.shape[0], self.dim))

    kernels = None

    def kernel_data(self, X):
        return (self._centre(X),)

    def kernel_hyper(self):
        return (self.kappa0, self.var)

    def kernel_table_from_stats(self, stats):
        n = np.rint(stats.n).astype(np.int64)
        table = (n, np.array(stats.s1, dtype=np.float64, order="C"), np.empty((len(n), self.dim)),
                 np.empty(len(n)), np.empty(len(n)))
        for k in range(len(n)):
            _iso_refresh(table, self.kernel_hyper(), k)
        return table


# ---- numba kernels: table = (n, sum of centred x, predictive mean, log normaliser, 1/(2v)) --
# The predictive of cluster k is N(mean_k, v_k I); its mean and constants change only when a
# point joins or leaves k, so they are kept per cluster: scoring a point against K clusters
# then costs no log and no division (the sweep's inner loop), moving it costs one log.

@kernel
def _iso_refresh(table, hyper, k):
    n, s1, mean, const, half_prec = table
    kappa0, var = hyper
    D = s1.shape[1]
    kappa = kappa0 + n[k] / var
    v = 1.0 / kappa + var
    for d in range(D):
        mean[k, d] = s1[k, d] / (var * kappa)
    const[k] = -0.5 * D * math.log(2.0 * math.pi * v)
    half_prec[k] = 0.5 / v


@kernel
def iso_add(table, hyper, data, i, k):
    n, s1 = table[0], table[1]
    x = data[0][i]
    for d in range(x.shape[0]):
        s1[k, d] += x[d]
    n[k] += 1
    _iso_refresh(table, hyper, k)


@kernel
def iso_remove(table, hyper, data, i, k):
    n, s1 = table[0], table[1]
    x = data[0][i]
    n[k] -= 1
    for d in range(x.shape[0]):
        s1[k, d] = 0.0 if n[k] == 0 else s1[k, d] - x[d]
    _iso_refresh(table, hyper, k)


@kernel
def iso_logpred(table, hyper, data, i, k):
    mean, const, half_prec = table[2], table[3], table[4]
    x = data[0][i]
    q = 0.0
    for d in range(x.shape[0]):
        r = x[d] - mean[k, d]
        q += r * r
    return const[k] - q * half_prec[k]


NormalKnownCovariance.kernels = CollapsedKernels(iso_add, iso_remove, iso_logpred, iso_add)
