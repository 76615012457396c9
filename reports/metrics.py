"""The one scorer every algorithm is measured by: it reads only labels (docs/design.md "Metrics")."""
from __future__ import annotations

import numpy as np

# computed in the algorithms layer, so that the estimator there shares this one implementation
from dpmmbench.algorithms.joint import log_joint
from dpmmbench.algorithms.partitions import compact

__all__ = ["log_joint", "vi", "nmi", "ari", "n_clusters"]


def _contingency(a, b):
    a, ka = compact(a)
    b, kb = compact(b)
    if len(a) != len(b):
        raise ValueError(f"label vectors differ in length ({len(a)} vs {len(b)})")
    table = np.bincount(a * kb + b, minlength=ka * kb).reshape(ka, kb).astype(np.float64)
    return table, len(a)


def _entropy(counts, n):
    p = counts[counts > 0] / n
    return float(-(p * np.log(p)).sum())


def _mutual_info(table, n):
    nz = table > 0
    outer = table.sum(axis=1, keepdims=True) * table.sum(axis=0, keepdims=True)
    return float((table[nz] / n * np.log(n * table[nz] / outer[nz])).sum())


def vi(labels, truth) -> float:
    """Variation of information in nats (Meila 2003; docs/algorithms.md §8.5)."""
    table, n = _contingency(labels, truth)
    h1 = _entropy(table.sum(axis=1), n)
    h2 = _entropy(table.sum(axis=0), n)
    return max(h1 + h2 - 2.0 * _mutual_info(table, n), 0.0)


def nmi(labels, truth) -> float:
    """Normalised mutual information, arithmetic-mean normalisation (as scikit-learn's default)."""
    table, n = _contingency(labels, truth)
    h1 = _entropy(table.sum(axis=1), n)
    h2 = _entropy(table.sum(axis=0), n)
    if h1 == 0.0 and h2 == 0.0:
        return 1.0
    return _mutual_info(table, n) / max((h1 + h2) / 2.0, np.finfo(float).eps)


def ari(labels, truth) -> float:
    """Adjusted Rand index (Hubert & Arabie 1985)."""
    table, n = _contingency(labels, truth)

    def pairs(x):
        return (x * (x - 1) / 2.0).sum()

    index = pairs(table)
    a, b = pairs(table.sum(axis=1)), pairs(table.sum(axis=0))
    expected = a * b / (n * (n - 1) / 2.0) if n > 1 else 0.0
    top = (a + b) / 2.0
    if top == expected:
        return 1.0
    return float((index - expected) / (top - expected))


def n_clusters(labels) -> int:
    return int(len(np.unique(np.asarray(labels))))
