"""A seeded held-out split of a loaded dataset: the chain trains on one part, the posterior
predictive density is scored on the other (docs/design.md "Traces and runs")."""
from __future__ import annotations

import numpy as np

from dpmmbench.algorithms.constraints import RUN_DEFAULTS, check_parameter

from .base import Dataset


def heldout_count(n_points: int, fraction: float) -> int:
    """Number of points a split holds out of ``n_points``: ``round(fraction * n_points)``
    (at most half, for ``fraction`` in [0, 0.5], so at least one point is left to train on
    when there are any)."""
    return round(fraction * n_points)


def holdout_indices(n_points: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the train and test points of a seeded split of ``n_points`` items.

    The test part is the first :func:`heldout_count` entries of one seeded permutation, so
    for one seed a larger fraction holds out a superset of a smaller one.

    Parameters
    ----------
    n_points : int
        Number of items (>= 0).
    fraction : float
        Fraction held out, already checked (``test_fraction``, in [0, 0.5]).
    seed : int
        Seed of the split, already checked (``split_seed``).

    Returns
    -------
    train, test : numpy.ndarray
        Disjoint int64 indices in increasing order (file order is kept) that together cover
        ``range(n_points)``; ``test`` may be empty.
    """
    n_test = heldout_count(n_points, fraction)
    order = np.random.default_rng(np.random.SeedSequence(seed)).permutation(n_points)
    in_test = np.zeros(n_points, dtype=bool)
    in_test[order[:n_test]] = True
    return np.flatnonzero(~in_test).astype(np.int64), np.flatnonzero(in_test).astype(np.int64)


def holdout(ds: Dataset, fraction: float = RUN_DEFAULTS["test_fraction"],
            seed: int = RUN_DEFAULTS["split_seed"]) -> tuple[Dataset, Dataset | None]:
    """Split a dataset into a training part and a held-out test part.

    The split depends only on the number of points, ``fraction`` and ``seed`` (see
    :func:`holdout_indices`), so every run on one dataset with one ``(fraction, seed)``
    sees the same split, whatever the algorithm or the chain's seed.

    Parameters
    ----------
    ds : Dataset
        A loaded dataset.
    fraction : float
        Fraction of the points held out, in [0, 0.5] (the run parameter ``test_fraction``);
        the number held out is :func:`heldout_count` ``(N, fraction)``.
    seed : int
        Seed of the split (the run parameter ``split_seed``, >= 0).

    Returns
    -------
    train : Dataset
        The other points, with their labels; ``ds`` itself when nothing is held out.
    test : Dataset or None
        The held-out points, with their labels; None when ``round(fraction * N)`` is 0
        (``fraction`` 0, or too few points). Both parts keep the family, the format of ``X``
        (a CSR matrix stays CSR) and the metadata, with ``n`` their own size; their names
        say which part of which split they are (they are not loadable names).

    Raises
    ------
    TypeError, ValueError
        ``fraction`` or ``seed`` outside its declared constraint; the message names it.
    """
    fraction = check_parameter("test_fraction", fraction)
    seed = check_parameter("split_seed", seed)
    n_points = int(ds.X.shape[0])
    train, test = holdout_indices(n_points, fraction, seed)
    if test.size == 0:
        return ds, None
    return tuple(_part(ds, rows, f"{part} of test_fraction={fraction!r} split_seed={seed}")
                 for part, rows in (("train", train), ("test", test)))


def _part(ds: Dataset, rows: np.ndarray, what: str) -> Dataset:
    X = ds.X[rows]  # selecting rows of a CSR matrix gives a CSR matrix
    labels = None if ds.labels is None else ds.labels[rows]
    return Dataset(name=f"{ds.name} [{what}]", X=X, labels=labels, family=ds.family,
                   meta=dict(ds.meta, n=int(rows.size)))
