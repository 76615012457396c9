"""Deterministic preprocessing shared by real datasets."""
from __future__ import annotations

import numpy as np


def pca(X: np.ndarray, n_components: int) -> np.ndarray:
    """Project centred data on its first principal components.

    Uses numpy's SVD. Each component's sign is fixed so that its largest-magnitude loading is
    positive, so the result does not depend on the sign LAPACK happens to return.

    Parameters
    ----------
    X : numpy.ndarray
        ``(N, D)`` data.
    n_components : int
        Number of components kept, ``1 <= n_components <= min(N, D)``.

    Returns
    -------
    numpy.ndarray
        ``(N, n_components)`` float64 scores, columns in order of decreasing variance.
    """
    X = np.asarray(X, dtype=np.float64)
    if not 1 <= n_components <= min(X.shape):
        raise ValueError(f"n_components must be in [1, {min(X.shape)}], got {n_components}")
    centred = X - X.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    vt = vt[:n_components]
    pivot = np.abs(vt).argmax(axis=1)
    vt = vt * np.sign(vt[np.arange(n_components), pivot])[:, None]
    return centred @ vt.T
