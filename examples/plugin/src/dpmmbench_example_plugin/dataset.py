"""``ring-blobs``: isotropic 2-D Gaussian blobs whose centres sit evenly on a circle."""
from __future__ import annotations

import numpy as np

from dpmmbench.algorithms.families import NormalInverseWishart
from dpmmbench.datasets.base import Builder, Parameter, make_meta, mixture_labels, seeded_streams


def describe(*, n: int, n_clusters: int, radius: float, seed: int) -> dict:
    """Metadata of ``ring-blobs`` for the given parameters (no data is generated)."""
    return make_meta(
        source="generated (seeded) by dpmmbench-example-plugin",
        licence="MIT",
        citation="none (synthetic)",
        preprocessing=f"{n_clusters} unit-variance blobs on a circle of radius {radius:g}; seed {seed}",
        substitute=False,
        n=n,
        dim=2,
        description=f"{n} points in {n_clusters} 2-D Gaussian blobs on a ring (an example plugin's dataset)",
    )


def generate(*, n: int, n_clusters: int, radius: float, seed: int):
    """Draw the points; returns ``(X, labels, family)``."""
    rng_labels, rng_data = seeded_streams(seed, 2)
    labels = mixture_labels(rng_labels, n, n_clusters)
    angles = 2 * np.pi * np.arange(n_clusters) / n_clusters
    centres = radius * np.column_stack([np.cos(angles), np.sin(angles)])
    X = centres[labels] + rng_data.standard_normal((n, 2))
    return X, labels, NormalInverseWishart.default_for(X)


BUILDER = Builder(
    name="ring-blobs",
    parameters=(
        Parameter("n", int, 300, low=1, high=1_000_000),
        Parameter("n_clusters", int, 6, low=1, high=1_000),
        Parameter("radius", float, 8.0, low=0.0),
        Parameter("seed", int, 0, low=0),
    ),
    describe=describe,
    generate=generate,
)
