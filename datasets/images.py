"""What the 28x28 image datasets in IDX files share (MNIST and Fashion-MNIST): parameters,
reading the four files (train + t10k, images + labels), seeded subset, PCA."""
from __future__ import annotations

import numpy as np

from dpmmbench.algorithms.families import NormalInverseWishart

from .base import Parameter
from .formats import IDX_IMAGES, IDX_LABELS, read_idx_gz
from .preprocessing import pca as pca_project
from .preprocessing import subset_indices

#: the IDX files of one MNIST-style set, in the order their images are stacked
SPLITS = (("train", 60_000), ("t10k", 10_000))
N_TOTAL = sum(size for _, size in SPLITS)
N_PIXELS = 784


def file_names() -> list[str]:
    """``train-images-idx3-ubyte.gz``, ``train-labels-idx1-ubyte.gz``, then the same for t10k."""
    return [f"{split}-{kind}-ubyte.gz" for split, _ in SPLITS for kind in ("images-idx3", "labels-idx1")]


def parameters() -> tuple[Parameter, ...]:
    """``n`` (seeded subset of the 70,000), ``pca`` (dimensions, 0 = raw pixels), ``seed``."""
    return (Parameter("n", int, N_TOTAL, low=10, high=N_TOTAL), Parameter("pca", int, 50, low=0, high=N_PIXELS),
            Parameter("seed", int, 0, low=0))


def preprocessing(n: int, pca: int) -> str:
    """How the pixels were processed, in words."""
    subset = "all 70,000 (train then test)" if n >= N_TOTAL else f"seeded subset of {n} of the 70,000"
    return f"{subset}; {f'PCA to {pca} dimensions (centred, largest loading positive)' if pca else 'raw pixels 0..255'}"


def load(raw: dict[str, bytes], *, n: int, pca: int, seed: int):
    """``(X, labels, family)`` from the four gzipped IDX files, by file name."""
    X, y = [], []
    for split, size in SPLITS:
        name = f"{split}-images-idx3-ubyte.gz"
        images = read_idx_gz(raw[name], name, IDX_IMAGES)
        name = f"{split}-labels-idx1-ubyte.gz"
        labels = read_idx_gz(raw[name], name, IDX_LABELS)
        if images.shape != (size, 28, 28) or labels.shape != (size,) or labels.max() > 9:
            raise ValueError(f"{split}: expected {size} 28x28 images labelled 0-9, got images {images.shape} "
                             f"and labels {labels.shape}")
        X.append(images.reshape(size, N_PIXELS))
        y.append(labels)
    keep = subset_indices(N_TOTAL, n, seed)  # before converting: float64 pixels of all 70k take 440 MB
    X, y = np.vstack(X)[keep].astype(np.float64), np.concatenate(y)[keep].astype(np.int64)
    if pca:
        X = pca_project(X, pca)
    X = np.ascontiguousarray(X)
    return X, y, NormalInverseWishart.default_for(X)
