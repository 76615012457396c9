"""``digits``: UCI optdigits (1,797 8x8 handwritten digits), the copy bundled with scikit-learn.

Real, small and labelled, so it needs no download and suits fast tests. It is not MNIST: in
runs that follow the papers it stands in for MNIST and is reported as a substitute.
"""
from __future__ import annotations

import numpy as np

from dpmmbench.algorithms.families import NormalInverseWishart

from .base import Builder, Parameter, make_meta
from .preprocessing import pca as pca_project

N_SAMPLES = 1797
N_FEATURES = 64


def describe(*, pca: int) -> dict:
    """Metadata of ``digits`` for the given parameters (the data are not read)."""
    return make_meta(
        source="scikit-learn bundled copy of UCI optdigits",
        licence="CC BY 4.0",
        citation="E. Alpaydin and C. Kaynak, Optical Recognition of Handwritten Digits, "
                 "UCI Machine Learning Repository, 1998, doi:10.24432/C50P49",
        preprocessing=(f"PCA to {pca} dimensions (centred, largest loading positive)"
                       if pca else "none (pixel counts 0..16)"),
        substitute=True,
        n=N_SAMPLES,
        dim=pca or N_FEATURES,
        description="1,797 8x8 handwritten digits (UCI optdigits test set), labels 0-9; a small "
                    "real stand-in for MNIST, not MNIST",
    )


def generate(*, pca: int):
    """Read the bundled copy; returns ``(X, labels, family)``."""
    from sklearn.datasets import load_digits  # deferred: importing scikit-learn takes ~1 s

    bunch = load_digits()
    X = np.ascontiguousarray(bunch.data, dtype=np.float64)
    if pca:
        X = pca_project(X, pca)
    return X, bunch.target.astype(np.int64), NormalInverseWishart.default_for(X)


BUILDER = Builder(
    name="digits",
    parameters=(Parameter("pca", int, 0, low=0, high=N_FEATURES),),
    describe=describe,
    generate=generate,
)
