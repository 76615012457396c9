"""Learned concentration and the posterior predictive beside the label step, at 100k x 50-D.

Issue 16's costs, each measured next to the step it is added to, in the same run:

- the alpha update at the start of a step (docs/algorithms.md §0.7): Escobar & West given K
  (``gibbs``, and every sampler whose state is the partition) and ``subc``'s slice sampler on
  its sub-cluster conditional;
- the DP posterior predictive density of 100k new points under a fixed partition of ~20
  clusters (docs/algorithms.md §0.8), what a held-out score costs per draw;
- the label step of the same size (``algorithms.labelstep.sample_labels`` with given
  parameters, every point x every component), the work of one iteration of ``fsd``/``subc``.

The data are :func:`common.gaussian_blobs` with its NIW default family, started (or scored) at
the true labels; the new points are fresh noise around the same clusters.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpmmbench import algorithms
from dpmmbench.algorithms.predictive import log_predictive_density

from . import common

#: (N points = M new points, D dimensions, K clusters)
SHAPE = (100_000, 50, 20)
_TINY_SHAPE = (300, 9, 4)
_SHAPE_NAME = ["(N, D, K)"]


@dataclass
class AlphaUpdate:
    """A warmed-up chain of sampler ``name`` with a Gamma(1, 1) prior on alpha; ``run()`` is the
    alpha update alone (``Sampler._resample_alpha``) on its current state."""

    chain: common.Chain

    def run(self) -> float:
        return self.chain.sampler._resample_alpha(self.chain.state)


def alpha_update(name: str, n: int, dim: int, k: int) -> AlphaUpdate:
    """:class:`AlphaUpdate` of ``name`` on :func:`common.gaussian_blobs`, started at the true
    labels (no step taken: the update reads only the state ``init`` builds)."""
    X, labels, family = common.gaussian_blobs(n, dim, k)
    sampler = algorithms.make(name, family=family, alpha=1.0, alpha_prior=(1.0, 1.0), seed=common.SEED)
    problem = AlphaUpdate(common.Chain(sampler, sampler.init(X, labels=labels)))
    problem.run()
    return problem


@dataclass
class Predictive:
    """The log predictive density of ``X_new`` under the partition ``labels`` of ``X``."""

    family: object
    X: np.ndarray
    labels: np.ndarray
    X_new: np.ndarray

    def run(self) -> np.ndarray:
        return log_predictive_density(self.family, self.X, self.labels, 1.0, self.X_new)


def predictive(n: int, dim: int, k: int) -> Predictive:
    """A warmed-up :class:`Predictive` on :func:`common.gaussian_blobs` (the data of
    :func:`common.label_step` for the same shape) with ``n`` new points from its clusters."""
    X, labels, family = common.gaussian_blobs(n, dim, k)
    # fresh unit noise around the clusters' means: new points from the same clusters
    means = np.stack([X[labels == j].mean(axis=0) for j in range(k)])
    X_new = means[labels] + np.random.default_rng([common.SEED, n, dim, k, 2]).standard_normal(X.shape)
    problem = Predictive(family, X, labels, X_new)
    problem.run()
    return problem


class AlphaUpdateStep:
    """The alpha update of ``gibbs`` (Escobar & West given K) and of ``subc`` (slice sampler
    on its conditional given the sub-cluster sizes)."""

    params = (["gibbs", "subc"], [SHAPE])
    param_names = ["algorithm", *_SHAPE_NAME]
    tiny_params = [("gibbs", _TINY_SHAPE), ("subc", _TINY_SHAPE)]  # for tests/test_benchmarks.py
    timeout = 600

    def setup(self, algorithm, shape):
        self.problem = alpha_update(algorithm, *shape)

    def time_alpha_update(self, algorithm, shape):
        self.problem.run()


class PredictiveDensity:
    """The predictive density of N new points, beside the label step of the same (N, D, K)."""

    params = ([SHAPE],)
    param_names = _SHAPE_NAME
    tiny_params = [(_TINY_SHAPE,)]
    timeout = 600

    def setup(self, shape):
        self.predictive = predictive(*shape)
        self.label = common.label_step(*shape)

    def time_predictive_density(self, shape):
        self.predictive.run()

    def time_label_step(self, shape):
        self.label.run()

    def track_predictive_over_label_step(self, shape):
        """Predictive time / label-step time, both best-of-5 in the same process (so machine
        load affects both): what a held-out score of N points costs in label steps."""
        return common.best_of(self.predictive.run, warmup=0) / common.best_of(self.label.run, warmup=0)

    track_predictive_over_label_step.unit = "ratio"
