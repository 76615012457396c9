"""Partitions: canonical labels, the DP (CRP) partition prior, and enumeration (docs/algorithms.md §0.2, §9.1)."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from scipy.special import gammaln


def canonical(labels) -> np.ndarray:
    """Relabel as a restricted growth string (clusters numbered by first appearance)."""
    labels = np.asarray(labels)
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    return rank[inverse.ravel()]


def compact(labels) -> tuple[np.ndarray, int]:
    """Relabel to 0..K-1 keeping the order of the old ids; return (labels, K). O(N + max id)."""
    labels = np.asarray(labels, dtype=np.int64)
    present = np.bincount(labels) > 0
    remap = np.cumsum(present) - 1
    return remap[labels], int(present.sum())


def cluster_sizes(labels) -> np.ndarray:
    counts = np.bincount(np.asarray(labels, dtype=np.int64))
    return counts[counts > 0]


def log_crp_prior(labels, alpha: float) -> float:
    """log p(z) under the Chinese restaurant process (EPPF of a labelled partition).

    ``K log(alpha) + lgamma(alpha) - lgamma(alpha + N) + sum_k lgamma(n_k)``.
    """
    sizes = cluster_sizes(labels)
    N = sizes.sum()
    return float(len(sizes) * np.log(alpha) + gammaln(alpha) - gammaln(alpha + N) + gammaln(sizes).sum())


def enumerate_partitions(n: int) -> Iterator[np.ndarray]:
    """Every set partition of ``n`` items, as restricted growth strings (Bell(n) of them)."""
    z = np.zeros(n, dtype=np.int64)
    m = np.zeros(n, dtype=np.int64)  # m[i] = max(z[:i])

    def rec(i):
        if i == n:
            yield z.copy()
            return
        for v in range(m[i - 1] + 2 if i > 0 else 1):
            z[i] = v
            if i + 1 < n:
                m[i] = max(m[i - 1], v) if i > 0 else v
            yield from rec(i + 1)

    if n == 0:
        return
    yield from rec(0)


def partition_key(labels) -> bytes:
    """Hashable key of the partition denoted by ``labels``."""
    return canonical(labels).astype(np.int8 if len(labels) < 128 else np.int64).tobytes()
