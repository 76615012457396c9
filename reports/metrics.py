"""The one scorer every algorithm is measured by: it reads only labels (docs/design.md "Metrics")."""
from __future__ import annotations

import math

import numpy as np

# computed in the algorithms layer, so that the estimator there shares this one implementation
from dpmmbench.algorithms.joint import log_joint, log_joint_compact
from dpmmbench.algorithms.partitions import compact

__all__ = ["log_joint", "vi", "nmi", "ari", "n_clusters", "StateScorer"]


def _contingency(a, b):
    a, ka = compact(a)
    b, kb = compact(b)
    if len(a) != len(b):
        raise ValueError(f"label vectors differ in length ({len(a)} vs {len(b)})")
    return _table(a, ka, b, kb), len(a)


def _table(a, ka, b, kb):
    """Contingency table of two compacted label vectors of equal length."""
    return np.bincount(a * kb + b, minlength=ka * kb).reshape(ka, kb).astype(np.float64)


def _entropy(counts, n):
    p = counts[counts > 0] / n
    return float(-(p * np.log(p)).sum())


def _mutual_info(table, n):
    nz = table > 0
    outer = table.sum(axis=1, keepdims=True) * table.sum(axis=0, keepdims=True)
    return float((table[nz] / n * np.log(n * table[nz] / outer[nz])).sum())


def vi(labels, truth) -> float:
    """Variation of information in nats (Meila 2003; docs/algorithms.md §8.5)."""
    return _vi_nmi(*_contingency(labels, truth))[0]


def nmi(labels, truth) -> float:
    """Normalised mutual information, arithmetic-mean normalisation (as scikit-learn's default)."""
    return _vi_nmi(*_contingency(labels, truth))[1]


def _vi_nmi(table, n) -> tuple[float, float]:
    """(VI, NMI) of one contingency table: its entropies and mutual information serve both."""
    h1 = _entropy(table.sum(axis=1), n)
    h2 = _entropy(table.sum(axis=0), n)
    mi = _mutual_info(table, n)
    nmi_value = 1.0 if h1 == 0.0 and h2 == 0.0 else mi / max((h1 + h2) / 2.0, np.finfo(float).eps)
    return max(h1 + h2 - 2.0 * mi, 0.0), nmi_value


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


class StateScorer:
    """Scores the states of one chain on one dataset: log joint, number of clusters, VI and NMI.

    The same numbers as :func:`log_joint`, :func:`n_clusters`, :func:`vi` and :func:`nmi`, at a
    fraction of the cost, since a chain is scored at every step: the data are validated and the
    truth compacted once per chain, each state's labels are compacted once for all four
    numbers, VI and NMI share one contingency table, and a state whose labels and alpha equal
    the previous state's (an optimiser at its optimum, a rejected move) is not scored again.
    To compare with the next state it keeps the last labels it scored, not a copy: give it
    labels that are not changed in place afterwards (a sampler's own arrays may be).

    Parameters
    ----------
    X : array_like or scipy.sparse.csr_matrix
        The data, as ``family`` takes them (validated here).
    family : algorithms.families.Family
    truth : array_like of int, optional
        Ground-truth labels, one per point; without them VI and NMI are NaN.

    Examples
    --------
    >>> import numpy as np
    >>> from dpmmbench.algorithms.families import NormalKnownCovariance
    >>> from dpmmbench.reports.metrics import StateScorer, vi
    >>> X = np.array([[0.0], [0.1], [5.0], [5.2]])
    >>> score = StateScorer(X, NormalKnownCovariance(0.5, [0.0], 3.0), truth=[0, 0, 1, 1])
    >>> s = score([0, 0, 0, 1], alpha=1.0)
    >>> s["n_clusters"], s["vi"] == vi([0, 0, 0, 1], [0, 0, 1, 1])
    (2, True)
    """

    def __init__(self, X, family, truth=None):
        self._X = family.validate(X)
        self._family = family
        self._n = family.n_points(self._X)
        self._truth = None
        if truth is not None:
            t, kt = compact(truth)
            if len(t) != self._n:
                raise ValueError(f"truth has {len(t)} labels but X has {self._n} points")
            self._truth = (t, kt)
        self._last = None  # (labels, alpha, scores) of the previous state

    def __call__(self, labels, alpha: float) -> dict:
        """Scores of the state ``labels`` (one non-negative integer per point) at ``alpha``:
        a dict with ``log_joint``, ``n_clusters``, ``vi`` and ``nmi`` (NaN without truth)."""
        z = np.asarray(labels)
        last = self._last
        if last is not None and last[1] == alpha and np.array_equal(last[0], z):
            return dict(last[2])
        zc, K = compact(z)
        if len(zc) != self._n:
            raise ValueError(f"labels have {len(zc)} entries but X has {self._n} points")
        scores = {"log_joint": log_joint_compact(self._X, zc, K, self._family, alpha), "n_clusters": K,
                  "vi": math.nan, "nmi": math.nan}
        if self._truth is not None:
            scores["vi"], scores["nmi"] = _vi_nmi(_table(zc, K, *self._truth), self._n)
        self._last = (z, alpha, scores)
        return dict(scores)
