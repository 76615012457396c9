"""Conjugate-family primitives: posterior predictives, sufficient statistics and the
collapsed kernels' rank-1 updates (the per-point cost of every collapsed sampler)."""
from __future__ import annotations

import functools

import numpy as np
from numba import njit

from . import common


@functools.cache
def logpred_all(logpred):
    """Compiled loop ``out[i, k] = logpred(table, hyper, data, i, k)`` over every point and
    cluster. Built per kernel (numba specialises the closure), like the collapsed sweep."""

    @njit
    def run(table, hyper, data, out):
        for i in range(out.shape[0]):
            for k in range(out.shape[1]):
                out[i, k] = logpred(table, hyper, data, i, k)

    return run


@functools.cache
def remove_add_all(add, remove):
    """Compiled loop taking every point out of its cluster and putting it back: one rank-1
    downdate plus one update per point, i.e. what a Gibbs move costs besides scoring."""

    @njit
    def run(table, hyper, data, labels):
        for i in range(labels.shape[0]):
            remove(table, hyper, data, i, labels[i])
            add(table, hyper, data, i, labels[i])

    return run


class NIWPredictive:
    """Log posterior predictive of N points under all K clusters of a normal-inverse-Wishart
    model: vectorised numpy (``family.log_predictive``) vs the numba kernel ``logpred``
    called point by point (what collapsed sweeps do)."""

    params = ([10_000], [10, 100], [2, 50])
    param_names = ["N", "K", "D"]
    tiny_params = [(50, 3, 2), (50, 3, 5)]  # for tests/test_benchmarks.py

    def setup(self, N, K, D):
        X, labels, self.family = common.clustered(N, D, K)
        self.X = X
        self.stats = self.family.stats(X, labels, K)
        self.table = self.family.kernel_table(X, labels, K)
        self.hyper = self.family.kernel_hyper()
        self.data = self.family.kernel_data(X)
        self.out = np.empty((N, K))
        self.loop = logpred_all(self.family.kernels.logpred)
        self.time_logpred_kernel(N, K, D)  # compile outside the timings

    def time_log_predictive_numpy(self, N, K, D):
        self.family.log_predictive(self.X, self.stats)

    def time_logpred_kernel(self, N, K, D):
        self.loop(self.table, self.hyper, self.data, self.out)


class NIWStats:
    """Sufficient statistics (n, sum x, sum x x^T) of every cluster."""

    params = ([100_000], [2], [10])
    param_names = ["N", "D", "K"]
    tiny_params = [(50, 2, 3)]

    def setup(self, N, D, K):
        self.X, self.labels, self.family = common.clustered(N, D, K)

    def time_stats(self, N, D, K):
        self.family.stats(self.X, self.labels, K)


class NIWRankOneUpdate:
    """The numba ``remove`` + ``add`` kernels (Cholesky rank-1 downdate + update), over
    N points each moved out of and back into its own cluster: O(D^2) per move."""

    params = ([10_000], [2, 50])
    param_names = ["N", "D"]
    tiny_params = [(50, 2), (50, 5)]

    def setup(self, N, D):
        X, self.labels, family = common.clustered(N, D, 10)
        self.table = family.kernel_table(X, self.labels, 10)
        self.hyper = family.kernel_hyper()
        self.data = family.kernel_data(X)
        self.loop = remove_add_all(family.kernels.add, family.kernels.remove)
        self.time_remove_add(N, D)  # compile outside the timings

    def time_remove_add(self, N, D):
        self.loop(self.table, self.hyper, self.data, self.labels)
