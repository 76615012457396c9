"""The interface every conjugate family implements, and what they share."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, NamedTuple

import numpy as np

from .._numerics import rows_where, take_rows
from ..labelstep import take_params


class CollapsedKernels(NamedTuple):
    """Numba functions a collapsed sampler needs from a family.

    All take ``(table, hyper, data, i, k)``: ``table`` is the family's tuple of per-cluster
    arrays (``table[0]`` is always the int64 cluster sizes), ``hyper`` its hyperparameter
    tuple, ``data`` its data tuple, ``i`` a point and ``k`` a cluster slot.

    add(table, hyper, data, i, k)      -- put point i into cluster k (sizes included)
    remove(table, hyper, data, i, k)   -- take point i out of cluster k; an emptied slot is
                                          reset to the prior
    logpred(table, hyper, data, i, k)  -- log p(x_i | points of cluster k)
    undo_remove(table, hyper, data, i, k) -- put back the point just removed from k
                                          (may restore a saved copy instead of recomputing)
    """

    add: Any
    remove: Any
    logpred: Any
    undo_remove: Any


class Family(ABC):
    """A conjugate prior G0 and likelihood F.

    Sufficient statistics are NamedTuples of arrays with a leading cluster axis; they are
    additive, so the statistics of a union are the sum of the statistics of its parts.
    """

    #: numba kernels for collapsed samplers (set by each family)
    kernels: CollapsedKernels

    # ---- data ----------------------------------------------------------------------
    @abstractmethod
    def validate(self, X):
        """Check ``X`` for this family; return it in canonical form or raise."""

    def n_points(self, X) -> int:
        return X.shape[0]

    # ---- statistics and marginals --------------------------------------------------
    @abstractmethod
    def stats(self, X, labels, n_clusters: int):
        """Sufficient statistics of every cluster ``0..n_clusters-1``."""

    @abstractmethod
    def empty_stats(self, n_clusters: int):
        """Statistics of ``n_clusters`` empty clusters."""

    @abstractmethod
    def log_marginal_stats(self, stats) -> np.ndarray:
        """log m(x_C) for each cluster, from its statistics (0 for an empty cluster)."""

    # ---- arithmetic on statistics ------------------------------------------------------
    # Every family's statistics are a NamedTuple of float64 arrays with a leading cluster
    # axis, so one implementation serves them all; samplers go through these methods rather
    # than taking the tuples apart themselves.

    def take_stats(self, stats, idx):
        """Rows ``idx`` of ``stats`` (clusters picked, reordered or repeated)."""
        return type(stats)(*(np.asarray(a)[idx] for a in stats))

    def set_stats(self, stats, idx, values) -> None:
        """Overwrite rows ``idx`` of ``stats`` with ``values``, in place."""
        for a, b in zip(stats, values):
            a[idx] = b

    def sum_stats(self, parts: list):
        """Element-wise sum of statistics of the same clusters (e.g. every shard's share)."""
        first = parts[0]
        return type(first)(*(np.sum([np.asarray(p[j]) for p in parts], axis=0) for j in range(len(first))))

    def subtract_stats(self, stats, part):
        """``stats`` less ``part`` (statistics of the same clusters; points leaving them)."""
        return type(stats)(*(np.asarray(a) - np.asarray(b) for a, b in zip(stats, part)))

    def sum_pairs(self, stats):
        """Statistics of the unions of rows ``2k`` and ``2k + 1`` (a cluster from its two
        sub-clusters)."""
        K = len(stats.n) // 2
        return type(stats)(*(a.reshape((K, 2) + a.shape[1:]).sum(axis=1) for a in stats))

    def pad_stats(self, stats, n_clusters: int):
        """``stats`` followed by empty clusters up to ``n_clusters`` rows."""
        extra = n_clusters - len(stats.n)
        return type(stats)(*(np.concatenate([np.asarray(a, dtype=np.float64), np.zeros((extra,) + np.shape(a)[1:])])
                             for a in stats))

    def stats_to_rows(self, stats) -> np.ndarray:
        """(K, W) rows: every field of ``stats`` flattened per cluster, ``n`` first. Rows add
        like the statistics do (compiled loops take statistics in this form)."""
        K = len(stats.n)
        fields = [np.asarray(a, dtype=np.float64) for a in stats]
        return np.ascontiguousarray(np.concatenate([a.reshape(K, int(np.prod(a.shape[1:], dtype=np.int64)))
                                                    for a in fields], axis=1))

    def rows_to_stats(self, rows: np.ndarray):
        """Inverse of :meth:`stats_to_rows`."""
        template = self.empty_stats(1)
        fields, start = [], 0
        for a in template:
            shape = np.shape(a)[1:]
            width = int(np.prod(shape, dtype=np.int64))
            fields.append(np.ascontiguousarray(rows[:, start:start + width]).reshape((rows.shape[0],) + shape))
            start += width
        return type(template)(*fields)

    #: :meth:`lowest_loglik` is one compiled pass over the rows (cheap beside a label draw)
    lowest_loglik_in_one_pass = False

    def lowest_loglik(self, X, labels, clusters, params):
        """The point each of ``clusters`` explains worst: ``(lowest, rows)``, the lowest
        log-likelihood under its parameters (``params``, the clusters' in that order) among
        the rows of ``X`` labelled with it, and its row (the first of equals); inf and -1 for
        a cluster with no row."""
        lowest, rows = np.full(len(clusters), np.inf), np.full(len(clusters), -1, dtype=np.int64)
        for r, k in enumerate(clusters):
            idx = rows_where(labels, k)
            if idx.size:
                loglik = self.loglik(take_rows(X, idx), take_params(params, [r]))[:, 0]
                j = int(np.argmin(loglik))
                lowest[r], rows[r] = loglik[j], idx[j]
        return lowest, rows

    def moments_from_stats(self, stats):
        """``(mean, centred scatter, precise)`` of each cluster from its statistics alone, or
        ``None`` where the statistics do not hold the second moments (then the caller computes
        them from the points). ``precise``: where the result can be trusted."""
        return None

    def log_marginal(self, X) -> float:
        """Log marginal likelihood of all points of ``X`` as one cluster.

        Raises
        ------
        ValueError
            Invalid ``X``, or a result that is not a finite number (data and
            hyperparameters together past the range of float64).
        """
        X = self.validate(X)
        labels = np.zeros(self.n_points(X), dtype=np.int64)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # the result is checked instead
            value = float(self.log_marginal_stats(self.stats(X, labels, 1))[0])
        return check_finite_score(value, f"log marginal under {self!r}")

    @abstractmethod
    def log_predictive(self, X, stats) -> np.ndarray:
        """(N, K) log posterior predictive of every point under every cluster."""

    # ---- instantiated parameters ---------------------------------------------------
    @abstractmethod
    def sample_params(self, stats, rng: np.random.Generator):
        """Draw component parameters from the posterior given ``stats`` (prior if empty)."""

    @abstractmethod
    def loglik(self, X, params) -> np.ndarray:
        """(N, K) log-likelihood of every point under every component's parameters."""

    def loglik_uses_blas(self, n_components: int) -> bool:
        """Whether :meth:`loglik` under ``n_components`` components is a multi-threaded matrix
        product (then the sampling that follows it runs single-threaded, see ``sample_rows``)."""
        return False

    def fused_label_draw(self, X, params, log_weights, uniforms):
        """Every label ``z_i ~ Cat(w_k F(x_i | theta_k))``, drawn with ``uniforms[i]``, in one pass
        over ``X``, or ``None`` where the family has none for ``X`` (the caller composes
        :meth:`loglik` and the draw, ``labelstep.sample_labels``)."""
        return None

    def fused_sublabel_draw(self, X, labels, sub_params, sub_log_weights, uniforms):
        """Every point's sub-label between the two sub-components ``2k, 2k + 1`` of its component
        ``k = labels[i]`` (weights ``exp(sub_log_weights)``), drawn with ``uniforms[i]``, in one
        pass over ``X``, or ``None`` where the family has none for ``X`` (the caller composes
        :meth:`loglik` and the draw, ``labelstep.sample_sublabels``)."""
        return None

    def fused_subcluster_draw(self, X, params, log_weights, sub_params, sub_log_weights, rng, within=None):
        """Labels, sub-labels and sub-cluster statistics in one pass over ``X``, or ``None``
        (``rng`` untouched) where the family has no fused kernel for ``X``: then the caller
        composes :meth:`loglik`, sampling and :meth:`stats` (``labelstep.draw_with_sublabels``).
        ``within = (labels, groups)``: each point chooses among the components of its old
        component's group only (super-clusters); ``None``: among all.

        Each chunk of ``_numerics.FUSED_CHUNK`` rows draws its uniforms from its own stream,
        seeded from ``rng`` (``_numerics.chunk_seeds``), so the result does not depend on the
        number of threads. Returns ``(labels, sublabels, stats of the 2K sub-clusters)``.
        """
        return None

    def fused_slice_draw(self, X, params, log_w, labels, star, log_u_star, seeds):
        """Walker's slice step of ``slice-mr`` in one pass over ``X``, or ``None`` where the family
        has no fused kernel for ``X`` (the caller composes :meth:`loglik`, the draw and
        :meth:`stats`, ``slice_mr.slice_map``).

        Components come sorted by decreasing ``log_w``. Row ``star`` (or none, -1) gets the
        minimum slice ``log_u_star``, every other row ``u ~ U(u*, w_{labels[r]})``; the new label
        is drawn from the likelihoods of the components above the slice only (a prefix). Chunk
        ``c`` of ``_numerics.FUSED_CHUNK`` rows draws its two uniforms per row from a stream
        seeded by ``seeds[c]``. Returns ``(labels, stats of the K components)``.
        """
        return None

    @abstractmethod
    def divergence(self, params) -> np.ndarray:
        """(K, K) symmetric KL (J-) divergence between components."""

    @abstractmethod
    def sample_data(self, params, labels, rng: np.random.Generator, **kwargs):
        """Draw data given component parameters and labels (for simulation and tests)."""

    # ---- collapsed-sampler support -------------------------------------------------
    @abstractmethod
    def kernel_data(self, X) -> tuple:
        """The data tuple the numba kernels read."""

    @abstractmethod
    def kernel_hyper(self) -> tuple:
        """The hyperparameter tuple the numba kernels read."""

    @abstractmethod
    def kernel_table_from_stats(self, stats) -> tuple:
        """The kernels' table of clusters given by their statistics (one slot per row; an
        empty row is a free slot): a sweep can then start from clusters holding points it
        does not see, e.g. other workers' shares (Wang & Lin, docs/algorithms.md §8.2)."""

    def kernel_table(self, X, labels, capacity: int) -> tuple:
        """Per-cluster table for the kernels with ``capacity`` slots, built from labels
        (labels must lie in ``0..capacity-1``)."""
        return self.kernel_table_from_stats(self.stats(X, labels, capacity))


#: largest magnitude of a data value (and of a prior mean) of the Gaussian families: squares
#: of centred values (<= 4e200) and their sums over any data set stay finite, so the
#: sufficient statistics never overflow to inf (which would make a log joint NaN)
MAX_ABS_VALUE = 1e100


def check_finite_matrix(X, name: str = "X", dim: int | None = None, family: Family | None = None) -> np.ndarray:
    """Validate a dense (N, D) real data matrix (with ``D == dim`` if given, the dimension of
    ``family``'s prior); return it as C-contiguous float64.

    Values must be finite and at most :data:`MAX_ABS_VALUE` in magnitude."""
    if hasattr(X, "tocsr"):
        raise TypeError(f"{name} is a sparse matrix; this family needs a dense (N, D) array")
    try:
        arr = np.asarray(X)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise TypeError(f"{name} cannot be converted to an array: {exc}") from exc
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{name} must be real, got complex dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of shape (N, D), got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} has no points (shape {arr.shape})")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        kind = "NaN" if np.isnan(arr[r, c]) else "inf"
        raise ValueError(f"{name} contains {int(bad.sum())} non-finite value(s) ({kind} at row {r}, column {c})")
    if arr.size and np.abs(arr).max() > MAX_ABS_VALUE:
        r, c = np.argwhere(np.abs(arr) > MAX_ABS_VALUE)[0]
        raise ValueError(f"{name}[{r}, {c}] = {arr[r, c]:g} exceeds {MAX_ABS_VALUE:g} in magnitude (the largest "
                         f"value whose square cannot overflow the sufficient statistics)")
    if dim is not None and arr.shape[1] != dim:
        raise ValueError(f"{name} has dimension {arr.shape[1]} but the {type(family).__name__} prior has "
                         f"dimension {dim}")
    return arr


def check_prior_mean(mu0, name: str = "mu0") -> np.ndarray:
    """Validate a Gaussian family's prior mean: a finite 1-D vector with entries at most
    :data:`MAX_ABS_VALUE` in magnitude (data are centred at it); return it as float64."""
    mu0 = np.atleast_1d(np.asarray(mu0, dtype=np.float64))
    if mu0.ndim != 1 or not np.all(np.isfinite(mu0)):
        raise ValueError(f"{name} must be a finite 1-D vector")
    if mu0.size and np.abs(mu0).max() > MAX_ABS_VALUE:
        raise ValueError(f"{name} has an entry beyond {MAX_ABS_VALUE:g} in magnitude")
    return mu0


def check_labels(labels, n: int, name: str = "labels") -> np.ndarray:
    """Validate integer labels for ``n`` points; return them as int64."""
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},), got {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise TypeError(f"{name} must be integers, got dtype {arr.dtype}")
    if arr.size and arr.min() < 0:
        raise ValueError(f"{name} must be non-negative")
    return arr.astype(np.int64, copy=False)


def check_finite_score(value: float, what: str) -> float:
    """``value`` if it is finite; else a ValueError naming ``what`` (a NaN or infinite score
    means the data and hyperparameters together left the range of float64)."""
    if not np.isfinite(value):
        raise ValueError(f"the {what} is {value} (not finite): the data and hyperparameters together are "
                         f"outside the range where it can be computed in float64")
    return value
