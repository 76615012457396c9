"""The collapsed log joint ``log p(x, z)`` of a partition (docs/algorithms.md §0.3).

One implementation, in the lowest layer, so that every user shares it: the traces' scorer
(:func:`dpmmbench.reports.metrics.log_joint` is this function) and the estimator's
``log_joint_`` (:mod:`algorithms.estimator`).
"""
from __future__ import annotations

import numpy as np

from .constraints import check_parameter
from .families._base import check_finite_score
from .partitions import compact, log_crp_prior


def log_joint(X, labels, family, alpha: float) -> float:
    """log p(x, z) = log CRP prior of the partition + sum over clusters of log m(x_C) (docs/algorithms.md §0.3).

    This is "the log-likelihood" of every figure. Conventions are the family's (e.g. the
    Dirichlet-multinomial excludes multinomial coefficients).

    Parameters
    ----------
    X : array_like or scipy.sparse.csr_matrix
        The data, as ``family`` takes them.
    labels : (N,) array_like of int
        The partition (any non-negative integer ids).
    family : algorithms.families.Family
    alpha : float
        The DP concentration (> 0).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Invalid ``X``, labels or ``alpha``, or a log joint that is not a finite number (data,
        hyperparameters and ``alpha`` together past the range of float64): never NaN.
    """
    X = family.validate(X)
    z, K = compact(labels)
    if len(z) != family.n_points(X):
        raise ValueError(f"labels have {len(z)} entries but X has {family.n_points(X)} points")
    return log_joint_compact(X, z, K, family, alpha)


def log_joint_compact(X, z: np.ndarray, K: int, family, alpha: float) -> float:
    """:func:`log_joint` of data ``family`` has validated and labels already compacted to
    ``0..K-1`` (:func:`partitions.compact`), one per point: a chain's scorer checks the data
    once, not at every state.

    Raises
    ------
    ValueError
        An invalid ``alpha``, or a log joint that is not a finite number.
    """
    alpha = check_parameter("alpha", alpha)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # the result is checked instead
        value = log_crp_prior(z, alpha) + float(family.log_marginal_stats(family.stats(X, z, K)).sum())
    return check_finite_score(value, f"log joint under {family!r} with alpha={alpha:g}")
