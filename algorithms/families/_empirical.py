"""What the empirical-Bayes priors share: a quick, seeded k-means partition of the data
(docs/design.md "Default priors").

An empirical-Bayes prior is fitted to a rough clustering of the data rather than to the data
as a whole: its component scale is then the scale of a cluster, not of the whole set. The
clustering is scikit-learn's k-means with a fixed seed, on a seeded subsample of at most
``max_points`` rows, so a prior costs about as much whatever the size of the data.
"""
from __future__ import annotations

from numbers import Integral

import numpy as np

from ..constraints import Interval

#: rows k-means sees at most (a seeded subsample beyond that): the prior needs a scale, not a
#: clustering of every point
MAX_POINTS = 20000
#: k-means restarts (the best of them is kept)
N_INIT = 3


def crp_expected_clusters(n_points: int) -> int:
    """The expected number of clusters of a Chinese restaurant process with ``alpha = 1``
    on ``n_points`` points (``sum_{i=1}^N 1 / i``, about ``ln N + 0.58``), rounded, at least 2
    and at most ``n_points - 1``: the number of k-means clusters an empirical-Bayes prior is
    fitted to when none is given (the DP's own prior guess at the default concentration)."""
    expected = float(np.sum(1.0 / np.arange(1, n_points + 1)))
    return int(max(2, min(n_points - 1, round(expected))))


def kmeans_partition(X, n_clusters, seed, max_points=MAX_POINTS, *, name="empirical_bayes"):
    """A seeded k-means partition of (a subsample of) the rows of ``X``.

    Parameters
    ----------
    X : (N, D) numpy.ndarray or scipy.sparse.csr_matrix
        Checked data, at least 3 rows.
    n_clusters : int or None
        Number of k-means clusters, between 2 and ``min(N, max_points) - 1``; None picks
        :func:`crp_expected_clusters`.
    seed : int
        Seed of the subsample and of k-means (>= 0).
    max_points : int
        Rows used at most.
    name : str
        The caller, named in messages.

    Returns
    -------
    rows : (M,) numpy.ndarray of int
        The rows of ``X`` that were clustered (all of them, in order, when ``N <= max_points``).
    labels : (M,) numpy.ndarray of int64
        Their k-means cluster, ``0 .. n_clusters - 1``.

    Raises
    ------
    ValueError, TypeError
        Fewer than 3 points, or a bad ``n_clusters``, ``seed`` or ``max_points``.
    """
    from sklearn.cluster import KMeans  # deferred: importing scikit-learn takes ~1 s

    seed = Interval(Integral, 0, 2 ** 32 - 1).check("seed", seed)
    max_points = Interval(Integral, 3, None).check("max_points", max_points)
    n = X.shape[0]
    if n < 3:
        raise ValueError(f"{name} needs at least 3 points to fit a prior to a clustering, got {n}")
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(n, max_points, replace=False)) if n > max_points else np.arange(n)
    m = len(rows)
    if n_clusters is None:
        n_clusters = crp_expected_clusters(m)
    n_clusters = Interval(Integral, 2, m - 1).check("n_clusters", n_clusters)
    data = X[rows] if m < n else X
    km = KMeans(n_clusters=n_clusters, n_init=N_INIT, random_state=int(rng.integers(2 ** 31)))
    return rows, km.fit_predict(data).astype(np.int64)
