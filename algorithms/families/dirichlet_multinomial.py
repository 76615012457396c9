"""Dirichlet-multinomial: bag-of-words documents with a symmetric Dirichlet prior (docs/algorithms.md §0.4c).

Input is a ``scipy.sparse`` CSR matrix of counts (documents x vocabulary); it is never
densified. **Log marginals and predictives exclude the multinomial coefficients**
``log(l_i! / prod_v x_iv!)``: they do not depend on the partition, so every ratio and every
comparison between partitions is unaffected ("bag of tokens" convention).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from .._numba_cache import kernel
from .._numerics import log_dirichlet
from ._base import CollapsedKernels, Family


class CountStats(NamedTuple):
    n: np.ndarray  #: (K,) number of documents
    counts: np.ndarray  #: (K, V) pooled word counts


class CategoricalParams(NamedTuple):
    log_theta: np.ndarray  #: (K, V) log word probabilities


class DirichletMultinomial(Family):
    """Multinomial documents with a symmetric ``Dirichlet(gamma, ..., gamma)`` prior.

    Parameters
    ----------
    gamma : float
        Symmetric Dirichlet concentration per word (> 0).
    vocab_size : int
        Number of vocabulary entries V (columns of the count matrix).
    """

    def __init__(self, gamma, vocab_size):
        if not (np.isfinite(gamma) and gamma > 0):
            raise ValueError(f"gamma must be > 0, got {gamma}")
        if int(vocab_size) != vocab_size or vocab_size < 1:
            raise ValueError(f"vocab_size must be a positive integer, got {vocab_size}")
        self.gamma = float(gamma)
        self.vocab_size = int(vocab_size)
        self.dim = self.vocab_size
        self.B = self.gamma * self.vocab_size

    def __repr__(self):
        return f"DirichletMultinomial(gamma={self.gamma:g}, vocab_size={self.vocab_size})"

    @classmethod
    def default_for(cls, X, gamma: float = 0.5):
        """Symmetric prior with ``gamma = 0.5`` over the columns of ``X``."""
        return cls(gamma, X.shape[1])

    # ---- data ----------------------------------------------------------------------
    def validate(self, X):
        if not sp.issparse(X):
            arr = np.asarray(X)
            if arr.ndim != 2:
                raise ValueError(f"X must be a 2-D count matrix (documents x vocabulary), got shape {arr.shape}")
            if not np.issubdtype(arr.dtype, np.number):
                raise TypeError(f"X must hold numeric counts, got dtype {arr.dtype}")
            X = sp.csr_matrix(arr)
        X = sp.csr_matrix(X, dtype=np.float64, copy=True)
        if X.ndim != 2 or X.shape[0] == 0:
            raise ValueError(f"X must be a non-empty (documents x vocabulary) matrix, got shape {X.shape}")
        if X.shape[1] != self.vocab_size:
            raise ValueError(f"X has {X.shape[1]} vocabulary columns but the DirichletMultinomial prior has "
                             f"vocab_size {self.vocab_size}")
        d = X.data
        if not np.all(np.isfinite(d)):
            raise ValueError("X contains NaN or inf counts")
        if np.any(d < 0):
            raise ValueError("X contains negative counts")
        if np.any(d != np.round(d)):
            raise ValueError("X contains non-integer (fractional) counts")
        X.eliminate_zeros()
        X.sort_indices()
        return X

    # ---- statistics ----------------------------------------------------------------
    def _indicator(self, labels, n_clusters):
        labels = np.asarray(labels, dtype=np.int64)
        N = labels.shape[0]
        return sp.csr_matrix((np.ones(N), (labels, np.arange(N))), shape=(n_clusters, N))

    def stats(self, X, labels, n_clusters):
        Z = self._indicator(labels, n_clusters)
        counts = np.asarray((Z @ X).todense())
        n = np.asarray(Z.sum(axis=1)).ravel()
        return CountStats(n, counts)

    def empty_stats(self, n_clusters):
        return CountStats(np.zeros(n_clusters), np.zeros((n_clusters, self.vocab_size)))

    def log_marginal_stats(self, stats):
        c = stats.counts
        total = c.sum(axis=1)
        return (gammaln(self.B) - gammaln(self.B + total)
                + (gammaln(self.gamma + c) - gammaln(self.gamma)).sum(axis=1))

    def log_predictive(self, X, stats):
        X = self.validate(X)
        lengths = np.asarray(X.sum(axis=1)).ravel()
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        total = stats.counts.sum(axis=1)
        out = np.empty((X.shape[0], len(total)))
        for k in range(len(total)):
            ck = stats.counts[k, X.indices]
            per_nz = gammaln(self.gamma + ck + X.data) - gammaln(self.gamma + ck)
            out[:, k] = (gammaln(self.B + total[k]) - gammaln(self.B + total[k] + lengths)
                         + np.bincount(rows, weights=per_nz, minlength=X.shape[0]))
        return out

    # ---- parameters ----------------------------------------------------------------
    def sample_params(self, stats, rng):
        return CategoricalParams(log_dirichlet(rng, self.gamma + stats.counts))

    def loglik(self, X, params):
        return np.asarray(X @ params.log_theta.T)

    def divergence(self, params):
        lt = params.log_theta
        th = np.exp(lt)
        # sum_v (th_a - th_b)(log th_a - log th_b), expanded to stay finite where th = 0
        lt_safe = np.maximum(lt, -745.0)
        cross = th @ lt_safe.T
        self_term = (th * lt_safe).sum(axis=1)
        return self_term[:, None] + self_term[None, :] - cross - cross.T

    def sample_data(self, params, labels, rng, lengths=None, **kwargs):
        labels = np.asarray(labels)
        N = labels.shape[0]
        lengths = np.full(N, 50) if lengths is None else np.asarray(lengths)
        theta = np.exp(params.log_theta)
        theta /= theta.sum(axis=1, keepdims=True)
        dense_rows = [rng.multinomial(int(lengths[i]), theta[labels[i]]) for i in range(N)]
        return sp.csr_matrix(np.array(dense_rows, dtype=np.float64))

    # ---- collapsed kernels ---------------------------------------------------------
    kernels = None

    def kernel_data(self, X):
        lengths = np.asarray(X.sum(axis=1)).ravel().astype(np.float64)
        return (X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data.astype(np.float64), lengths)

    def kernel_hyper(self):
        return (self.gamma, self.B)

    def kernel_table_from_stats(self, stats):
        counts = np.array(stats.counts, dtype=np.float64, order="C")
        return (np.rint(stats.n).astype(np.int64), counts, counts.sum(axis=1))


# ---- numba kernels: table = (n, counts, total); data = (indptr, indices, values, lengths) --

@kernel
def dm_add(table, hyper, data, i, k):
    n, counts, total = table
    indptr, indices, values, lengths = data
    for p in range(indptr[i], indptr[i + 1]):
        counts[k, indices[p]] += values[p]
    total[k] += lengths[i]
    n[k] += 1


@kernel
def dm_remove(table, hyper, data, i, k):
    n, counts, total = table
    indptr, indices, values, lengths = data
    for p in range(indptr[i], indptr[i + 1]):
        counts[k, indices[p]] -= values[p]
    total[k] -= lengths[i]
    n[k] -= 1


@kernel
def dm_logpred(table, hyper, data, i, k):
    n, counts, total = table
    indptr, indices, values, lengths = data
    gamma, B = hyper
    out = math.lgamma(B + total[k]) - math.lgamma(B + total[k] + lengths[i])
    for p in range(indptr[i], indptr[i + 1]):
        c = gamma + counts[k, indices[p]]
        out += math.lgamma(c + values[p]) - math.lgamma(c)
    return out


DirichletMultinomial.kernels = CollapsedKernels(dm_add, dm_remove, dm_logpred, dm_add)
