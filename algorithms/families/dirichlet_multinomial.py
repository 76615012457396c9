"""Dirichlet-multinomial: bag-of-words documents with a symmetric Dirichlet prior (docs/algorithms.md §0.4c).

Input is a ``scipy.sparse`` CSR matrix of counts (documents x vocabulary); it is never
densified. **Log marginals and predictives exclude the multinomial coefficients**
``log(l_i! / prod_v x_iv!)``: they do not depend on the partition, so every ratio and every
comparison between partitions is unaffected ("bag of tokens" convention).
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from ..numba_cache import kernel
from .._numerics import log_dirichlet
from ..constraints import Interval
from ._base import CollapsedKernels, Family
from ._empirical import MAX_POINTS, kmeans_partition


#: the symmetric concentration: normal doubles only (scipy's gammaln of a subnormal is inf,
#: which makes the log marginal NaN), and small enough that gamma + counts has a finite lgamma
GAMMA = Interval(Real, 1e-300, 1e300)
#: the range DirichletMultinomial.empirical_bayes searches for gamma by default
GAMMA_SEARCH = (1e-3, 1e2)
#: bound on B = gamma * vocab_size: lgamma(B + total count) stays finite below ~2.5e305
MAX_TOTAL_PRIOR = 1e300
#: bound on the sum of all counts: beyond 2**53 a float64 sum of counts is no longer exact
MAX_TOTAL_COUNT = 2 ** 53


def check_count_matrix(X, vocab_size: int, name: str = "X") -> sp.csr_matrix:
    """Check a (documents x vocabulary) count matrix completely; return a canonical CSR copy.

    Every array of a sparse input is checked (index dtypes and bounds, ``indptr`` monotone
    and consistent with the lengths of ``indices`` and ``data``, the shape) before any
    compiled code (scipy's conversions, the numba kernels) reads it: the kernels index
    ``counts[k, indices[p]]`` without bounds checks. The cost is O(nnz + N).

    Parameters
    ----------
    X : scipy.sparse matrix or array (CSR, CSC or COO checked as such; other formats are
        converted to COO first), or a dense (N, V) array
    vocab_size : int
        Number of columns V the family expects.
    name : str
        What ``X`` is called in messages.

    Returns
    -------
    scipy.sparse.csr_matrix
        float64 counts with sorted, unique column indices (duplicates summed) and no stored
        zeros.

    Raises
    ------
    TypeError
        Not numeric, complex, or non-integer index arrays.
    ValueError
        Malformed structure, a column outside ``0..vocab_size-1``, or counts that are
        negative, fractional, NaN, inf, or sum past 2**53.
    """
    if not sp.issparse(X):
        arr = np.asarray(X)
        if arr.ndim != 2:
            raise ValueError(f"{name} must be a 2-D count matrix (documents x vocabulary), got shape {arr.shape}")
        _check_values(arr.ravel(), name)
        X = sp.csr_matrix(arr)
    shape = _check_shape(X.shape, name)
    if shape[1] != vocab_size:
        raise ValueError(f"{name} has {shape[1]} vocabulary columns but the DirichletMultinomial prior has "
                         f"vocab_size {vocab_size}")
    fmt = X.format
    if fmt == "csr":
        data, indices, indptr = _check_compressed(X.data, X.indices, X.indptr, shape, name, "row", "column")
        out = sp.csr_matrix((data, indices, indptr), shape=shape)
    elif fmt == "csc":
        data, indices, indptr = _check_compressed(X.data, X.indices, X.indptr, shape[::-1], name, "column", "row")
        out = sp.csc_matrix((data, indices, indptr), shape=shape).tocsr()
    else:
        if fmt != "coo":
            X = X.tocoo()
        data, row, col = (np.asarray(a) for a in (X.data, X.row, X.col))
        if not (data.ndim == row.ndim == col.ndim == 1 and len(data) == len(row) == len(col)):
            raise ValueError(f"{name} (COO): data, row and col must be 1-D of one length, got lengths "
                             f"{len(data)}, {len(row)}, {len(col)}")
        for what, idx, bound in (("row", row, shape[0]), ("col", col, shape[1])):
            _check_index_array(idx, f"{name} (COO) {what}")
            if len(idx) and (idx.min() < 0 or idx.max() >= bound):
                p = int(np.argmax((idx < 0) | (idx >= bound)))
                raise ValueError(f"{name} (COO) {what}: index {int(idx[p])} outside 0..{bound - 1} at entry {p}")
        data = _check_values(data, name)
        out = sp.coo_matrix((data, (row, col)), shape=shape).tocsr()
    out = sp.csr_matrix(out, dtype=np.float64, copy=True)
    # Canonical form: the kernels' predictive adds lgamma terms per stored entry, which is
    # wrong for a word stored twice, so duplicates are summed (and indices sorted).
    out.sum_duplicates()
    out.eliminate_zeros()
    return out


def _check_shape(shape, name):
    try:
        rows, cols = (int(s) for s in shape)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must have a 2-D shape (documents, vocabulary), got {shape!r}") from None
    if rows < 1 or cols < 0:
        raise ValueError(f"{name} must be a non-empty (documents x vocabulary) matrix, got shape {tuple(shape)}")
    return rows, cols


def _check_index_array(idx, what):
    if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
        raise TypeError(f"{what} must be a 1-D integer array, got dtype {idx.dtype} and shape {idx.shape}")


def _check_compressed(data, indices, indptr, shape, name, major, minor):
    """The structure of a CSR (``major="row"``) or CSC matrix, then its values; return the
    three arrays (data as float64)."""
    fmt = "CSR" if major == "row" else "CSC"
    data, indices, indptr = np.asarray(data), np.asarray(indices), np.asarray(indptr)
    n_major, n_minor = shape
    _check_index_array(indptr, f"{name} ({fmt}) indptr")
    _check_index_array(indices, f"{name} ({fmt}) indices")
    if data.ndim != 1:
        raise ValueError(f"{name} ({fmt}) data must be 1-D, got shape {data.shape}")
    if len(indptr) != n_major + 1:
        raise ValueError(f"{name} ({fmt}) indptr has length {len(indptr)}, expected {n_major + 1} "
                         f"(the number of {major}s + 1)")
    if indptr[0] != 0:
        raise ValueError(f"{name} ({fmt}) indptr must start at 0, got {int(indptr[0])}")
    steps = np.diff(indptr)
    if len(steps) and steps.min() < 0:
        r = int(np.argmax(steps < 0))
        raise ValueError(f"{name} ({fmt}) indptr decreases at {major} {r} ({int(indptr[r])} > {int(indptr[r + 1])})")
    nnz = int(indptr[-1])
    if len(indices) != nnz:
        raise ValueError(f"{name} ({fmt}) indices have length {len(indices)} but indptr ends at {nnz}")
    if len(data) != nnz:
        raise ValueError(f"{name} ({fmt}) data has length {len(data)} but indptr ends at {nnz}")
    if nnz:
        low, high = indices.min(), indices.max()
        if low < 0 or high >= n_minor:
            p = int(np.argmax((indices < 0) | (indices >= n_minor)))
            at = int(np.searchsorted(indptr, p, side="right")) - 1
            bound = f"vocab_size {n_minor}" if minor == "column" else f"the {n_minor} rows"
            if indices[p] < 0:
                raise ValueError(f"{name} ({fmt}) indices: negative {minor} {int(indices[p])} in {major} {at}")
            raise ValueError(f"{name} ({fmt}) indices: {minor} {int(indices[p])} >= {bound} in {major} {at}")
    return _check_values(data, name), indices, indptr


def _check_values(data, name):
    """Counts: finite, non-negative integers of exactly representable total; as float64."""
    if data.dtype == object or not (np.issubdtype(data.dtype, np.number) or data.dtype == bool):
        raise TypeError(f"{name} must hold numeric counts, got dtype {data.dtype}")
    if np.issubdtype(data.dtype, np.complexfloating):
        raise TypeError(f"{name} must hold real counts, got complex dtype {data.dtype}")
    d = data.astype(np.float64)
    if not np.all(np.isfinite(d)):
        bad = d[~np.isfinite(d)][0]
        raise ValueError(f"{name} contains NaN or inf counts (first: {'NaN' if np.isnan(bad) else 'inf'})")
    if np.any(d < 0):
        raise ValueError(f"{name} contains negative counts")
    if np.any(d != np.round(d)):
        raise ValueError(f"{name} contains non-integer (fractional) counts")
    if d.sum() > MAX_TOTAL_COUNT:
        raise ValueError(f"{name}: the counts sum to {d.sum():g}, more than 2**53 (float64 sums are exact only "
                         f"up to there)")
    return d


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
        self.gamma = GAMMA.check("gamma", gamma)
        self.vocab_size = Interval(Integral, 1, None).check("vocab_size", vocab_size)
        self.dim = self.vocab_size
        self.B = self.gamma * self.vocab_size
        if self.B > MAX_TOTAL_PRIOR:
            # lgamma(B + counts) must stay finite for the log marginal to be a number
            raise ValueError(f"gamma * vocab_size must be <= {MAX_TOTAL_PRIOR:g}, got {self.B:g}")

    def __repr__(self):
        return f"DirichletMultinomial(gamma={self.gamma:g}, vocab_size={self.vocab_size})"

    @classmethod
    def default_for(cls, X, gamma: float = 0.5):
        """Symmetric prior with ``gamma = 0.5`` over the columns of ``X``."""
        return cls(gamma, X.shape[1])

    @classmethod
    def empirical_bayes(cls, X, n_clusters: int | None = None, seed: int = 0, bounds=GAMMA_SEARCH,
                        max_points: int = MAX_POINTS):
        """The symmetric ``gamma`` that maximises the marginal likelihood of a quick clustering.

        The documents (rows scaled to unit length, so that k-means groups them by the direction
        of their word counts rather than by their length) are clustered by a seeded k-means;
        ``gamma`` maximises the sum of the clusters' log marginals (:meth:`log_marginal_stats`)
        over ``log gamma``: the best of a grid of 8 points per decade, then a bounded 1-D search
        between that point's neighbours. A maximiser at a bound is returned as the bound. See
        docs/design.md "Default priors".

        Parameters
        ----------
        X : scipy.sparse matrix or array_like, shape (N, V)
            Counts, at least 3 documents.
        n_clusters : int, optional
            Number of k-means clusters (2 to N - 1); default: the expected number of clusters
            of the DP prior with ``alpha = 1`` on N documents, about ``ln N + 0.58``.
        seed : int
            Seed of the subsample and of k-means (>= 0): one seed, one prior.
        bounds : (float, float)
            Range searched for ``gamma``, ``0 < low < high``.
        max_points : int
            k-means sees a seeded subsample of at most this many documents.

        Returns
        -------
        DirichletMultinomial

        Raises
        ------
        ValueError, TypeError
            Bad counts (see :func:`check_count_matrix`), fewer than 3 documents, bad bounds, or a
            bad ``n_clusters``, ``seed`` or ``max_points``.
        """
        from scipy.optimize import minimize_scalar
        from sklearn.preprocessing import normalize

        try:
            low, high = (GAMMA.check("bounds", float(b)) for b in bounds)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"bounds must be two numbers in {GAMMA}, got {bounds!r} ({exc})") from None
        if not low < high:
            raise ValueError(f"bounds must be (low, high) with low < high, got {bounds!r}")
        shape = X.shape if sp.issparse(X) else np.shape(X)
        X = check_count_matrix(X, shape[1] if len(shape) == 2 else 0)
        V = X.shape[1]
        rows, labels = kmeans_partition(normalize(X), n_clusters, seed, max_points,
                                        name="DirichletMultinomial.empirical_bayes")
        stats = cls(low, V).stats(X[rows], labels, int(labels.max()) + 1)

        def loss(log_gamma):
            return -float(cls(math.exp(log_gamma), V).log_marginal_stats(stats).sum())

        grid = np.linspace(math.log(low), math.log(high), max(2, int(math.ceil(8 * math.log10(high / low))) + 1))
        values = np.array([loss(g) for g in grid])
        best = int(np.argmin(values))
        if best in (0, len(grid) - 1):
            return cls(math.exp(grid[best]), V)
        found = minimize_scalar(loss, bounds=(grid[best - 1], grid[best + 1]), method="bounded",
                                options={"xatol": 1e-6})
        log_gamma = found.x if found.fun <= values[best] else grid[best]
        return cls(math.exp(log_gamma), V)

    # ---- data ----------------------------------------------------------------------
    def validate(self, X):
        return check_count_matrix(X, self.vocab_size)

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
