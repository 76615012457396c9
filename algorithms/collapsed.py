"""Collapsed single-site moves shared by every collapsed sampler, generic over families.

The family supplies ``add``/``remove``/``logpred`` numba kernels (see
:class:`algorithms.families.CollapsedKernels`); the compiled sweep reaches them through
``algorithms._dispatch``, so numba specialises it per family and caches it on disk.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from . import _dispatch as dispatch
from ._dispatch import k_add, k_logpred, k_remove, k_undo_remove
from .numba_cache import kernel
from ._numerics import sample_log_weights


def collapsed_sweep(kernels):
    """Compiled Neal (2000) Algorithm-3 sweep for one family's kernels (register the
    kernels for the argument types first: ``algorithms._dispatch.register``).

    ``sweep(data, hyper, table, labels, order, uniforms, log_alpha, log_prior_pred, n_fixed, start, logw)``
    visits ``order[start:]``; for each point it removes it from its cluster, weighs every
    occupied slot by ``log n_k + logpred`` and the first empty slot at or after ``n_fixed``
    by ``log alpha + log p(x_i)``, draws with ``uniforms[t]`` and adds the point back. Slots
    below ``n_fixed`` are never handed out as new (0 for a plain sweep; the consolidation
    samplers keep the global components there). When no empty slot is left it puts the
    point back where it was and returns its position so the caller can enlarge the table;
    otherwise it returns ``len(order)``.
    """
    return _sweep(dispatch.fingerprint(kernels))


@functools.cache
def _sweep(fingerprint):
    @kernel(nogil=True)
    def sweep(data, hyper, table, labels, order, uniforms, log_alpha, log_prior_pred, n_fixed, start, logw):
        if fingerprint == -1:  # never true: ties the cached binary to the kernels' source
            return -1
        counts = table[0]
        C = counts.shape[0]
        # log n_k changes only for the two clusters a point leaves and joins: kept, not
        # recomputed for every (point, cluster) pair
        log_counts = np.empty(C)
        for k in range(C):
            log_counts[k] = math.log(counts[k]) if counts[k] > 0 else -np.inf
        for t in range(start, order.shape[0]):
            i = order[t]
            old = labels[i]
            k_remove(table, hyper, data, i, old)
            log_counts[old] = math.log(counts[old]) if counts[old] > 0 else -np.inf
            free = -1
            for k in range(C):
                if counts[k] > 0:
                    logw[k] = log_counts[k] + k_logpred(table, hyper, data, i, k)
                else:
                    logw[k] = -np.inf
                    if free < 0 and k >= n_fixed:
                        free = k
            if free < 0:
                k_undo_remove(table, hyper, data, i, old)
                return t
            logw[free] = log_alpha + log_prior_pred[i]
            new = sample_log_weights(logw, C, uniforms[t])
            if new == old:  # the common case once clusters have settled
                k_undo_remove(table, hyper, data, i, old)
            else:
                k_add(table, hyper, data, i, new)
                labels[i] = new
                log_counts[new] = math.log(counts[new])
            log_counts[old] = math.log(counts[old]) if counts[old] > 0 else -np.inf
        return order.shape[0]

    return sweep


def conditional_logweights(kernels):
    """A function returning the log weights the sweep would use for point ``i`` (removed
    from its cluster first, then put back): exposes the kernel's conditional for the exact
    transition-matrix tests. Same arguments as the compiled helper below."""
    compiled = _weights(dispatch.fingerprint(kernels))

    def weights(data, hyper, table, labels, i, log_alpha, log_prior_pred, logw):
        dispatch.register(kernels, table, hyper, data)
        return compiled(data, hyper, table, labels, i, log_alpha, log_prior_pred, logw)
    return weights


@functools.cache
def _weights(fingerprint):
    """The weighing loop repeats the sweep's on purpose: factoring it into a shared jitted
    function measured 15-70% slower sweeps."""
    @kernel
    def weights(data, hyper, table, labels, i, log_alpha, log_prior_pred, logw):
        if fingerprint == -1:  # never true: ties the cached binary to the kernels' source
            return -2
        counts = table[0]
        C = counts.shape[0]
        old = labels[i]
        k_remove(table, hyper, data, i, old)
        free = -1
        for k in range(C):
            if counts[k] > 0:
                logw[k] = math.log(counts[k]) + k_logpred(table, hyper, data, i, k)
            else:
                logw[k] = -np.inf
                if free < 0:
                    free = k
        if free >= 0:
            logw[free] = log_alpha + log_prior_pred[i]
        k_undo_remove(table, hyper, data, i, old)
        return free

    return weights


def run_sweep(family, X, kdata, labels, order, uniforms, log_alpha, log_prior_pred, capacity):
    """Run one collapsed sweep over ``order``, growing the cluster table as needed.

    ``X``, ``kdata``, ``labels`` and ``log_prior_pred`` describe the same points in the same
    order. ``labels`` (values in ``0..capacity-1``) is updated in place; returns the table.
    """
    sweep = collapsed_sweep(family.kernels)
    hyper = family.kernel_hyper()
    table = family.kernel_table(X, labels, capacity)
    dispatch.register(family.kernels, table, hyper, kdata)
    logw = np.empty(capacity)
    pos = 0
    while True:
        pos = sweep(kdata, hyper, table, labels, order, uniforms, log_alpha, log_prior_pred, 0, pos, logw)
        if pos == len(order):
            return table
        capacity *= 2
        table = family.kernel_table(X, labels, capacity)
        logw = np.empty(capacity)


def prior_predictive(family, X) -> np.ndarray:
    """log p(x_i) under the prior, for every point (the new-cluster term)."""
    return np.ascontiguousarray(family.log_predictive(X, family.empty_stats(1))[:, 0])
