"""The DP mixture's posterior predictive for new points (docs/algorithms.md §0.8).

Given a partition ``z`` of training data ``X`` and the concentration ``alpha``, a new point
joins cluster ``k`` with probability ``n_k / (alpha + N)`` and a new cluster with probability
``alpha / (alpha + N)``, so

``p(x | z, X) = sum_k n_k / (alpha + N) p(x | X_k) + alpha / (alpha + N) p(x)``,

with each cluster's posterior predictive ``p(x | X_k)`` and the prior predictive ``p(x)``
from the family (:meth:`Family.log_predictive`). Averaged over several draws of a chain
(``(labels, alpha)`` pairs) it estimates the posterior predictive ``p(x | X)``; its mean log
over held-out points is the quality score that compares model-based methods without
matching labels.

Example
-------
>>> import numpy as np
>>> from dpmmbench.algorithms.families import NormalKnownCovariance
>>> from dpmmbench.algorithms.predictive import log_predictive_density
>>> fam = NormalKnownCovariance(0.5, [0.0], 3.0)
>>> X = np.array([[-2.0], [-1.8], [2.1], [2.3]])
>>> log_predictive_density(fam, X, np.array([0, 0, 1, 1]), 1.0, np.array([[2.0]])).shape
(1,)
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from .constraints import check_parameter
from .families._base import check_labels
from .partitions import compact


def _cluster_terms(family, X, labels, X_new):
    """(M, K + 1) ``log n_k + log p(x | X_k)`` of every new point under every cluster of the
    partition, then ``log p(x)`` (the new-cluster predictive, weight still to add)."""
    X = family.validate(X)
    labels, K = compact(check_labels(labels, family.n_points(X)))
    X_new = family.validate(X_new)
    stats = family.pad_stats(family.stats(X, labels, K), K + 1)
    with np.errstate(divide="ignore"):
        log_n = np.log(np.asarray(stats.n, dtype=np.float64))
    terms = family.log_predictive(X_new, stats)
    terms[:, :K] += log_n[:K]
    return terms


def log_predictive_density(family, X, labels, alpha: float, X_new) -> np.ndarray:
    """``log p(x | z, X)`` of every row of ``X_new`` under the partition ``labels`` of ``X``.

    Parameters
    ----------
    family : algorithms.families.Family
        The prior and likelihood the partition was sampled under.
    X : array_like or scipy.sparse.csr_matrix
        Training data, as the family takes them.
    labels : (N,) array_like of int
        A partition of ``X`` (any integer ids).
    alpha : float
        The DP concentration of that partition (> 0).
    X_new : array_like or scipy.sparse.csr_matrix
        New points, in the same form as ``X``.

    Returns
    -------
    (M,) numpy.ndarray
        Log predictive density of each new point (for the Dirichlet-multinomial family without
        the multinomial coefficient, as its marginals).

    Raises
    ------
    ValueError, TypeError
        Bad data (checked by the family), labels or alpha.
    """
    alpha = check_parameter("alpha", alpha)
    terms = _cluster_terms(family, X, labels, X_new)
    terms[:, -1] += math.log(alpha)
    N = family.n_points(family.validate(X))
    return logsumexp(terms, axis=1) - math.log(alpha + N)


def mean_log_predictive_density(family, X, draws, X_new) -> np.ndarray:
    """``log (1/S) sum_s p(x | z_s, X)`` over draws ``(labels_s, alpha_s)`` of one chain: the
    Monte-Carlo estimate of the posterior predictive ``log p(x | X)`` for every new point.

    Parameters
    ----------
    family, X, X_new
        As in :func:`log_predictive_density`.
    draws : sequence of (labels, alpha)
        At least one.

    Returns
    -------
    (M,) numpy.ndarray
    """
    draws = list(draws)
    if not draws:
        raise ValueError("draws must hold at least one (labels, alpha) pair")
    per_draw = np.stack([log_predictive_density(family, X, z, a, X_new) for z, a in draws])
    return logsumexp(per_draw, axis=0) - math.log(len(draws))


def assignment_log_proba(family, X, labels, X_new) -> np.ndarray:
    """(M, K) log probability that each new point belongs to each existing cluster of the
    partition (clusters numbered as :func:`algorithms.partitions.compact` numbers them), i.e.
    the predictive restricted to the clusters and normalised per row."""
    terms = _cluster_terms(family, X, labels, X_new)[:, :-1]
    return terms - logsumexp(terms, axis=1, keepdims=True)
