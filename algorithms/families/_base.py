"""The interface every conjugate family implements, and what they share."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, NamedTuple

import numpy as np


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

    def log_marginal(self, X) -> float:
        """Log marginal likelihood of all points of ``X`` as one cluster."""
        X = self.validate(X)
        labels = np.zeros(self.n_points(X), dtype=np.int64)
        return float(self.log_marginal_stats(self.stats(X, labels, 1))[0])

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

    def loglik_uses_blas(self) -> bool:
        """Whether :meth:`loglik` is a multi-threaded matrix product (then the sampling that
        follows it runs single-threaded, see ``sample_rows``)."""
        return False

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
    def kernel_table(self, X, labels, capacity: int) -> tuple:
        """Per-cluster table for the kernels with ``capacity`` slots, built from labels
        (labels must lie in ``0..capacity-1``)."""


def check_finite_matrix(X, name: str = "X") -> np.ndarray:
    """Validate a dense (N, D) real data matrix; return it as C-contiguous float64."""
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
    return arr


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
