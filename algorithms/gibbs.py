"""Collapsed Gibbs sampling (Neal 2000, Algorithm 3), the CGS baseline of every paper.

One step = one sweep over all points in random order (or fixed order); each point is moved
with O(K D^2) work thanks to the families' incremental statistics (rank-1 Cholesky updates
for the NIW). Exact.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._numerics import take_rows
from .base import Sampler
from .collapsed import prior_predictive, run_sweep
from .constraints import OneOf, Option
from .partitions import compact
from .state import State


@dataclass
class GibbsState(State):
    kdata: tuple = ()  #: the family's kernel view of X
    log_prior_pred: np.ndarray | None = None  #: log p(x_i) under the prior (new-cluster term)


class CollapsedGibbs(Sampler):
    """Collapsed Gibbs sampler for the DP mixture (registry name ``gibbs``)."""

    name = "gibbs"
    exact = True
    options = {"scan": Option("random", OneOf(("random", "fixed")), "order in which points are visited")}

    def _init(self, X, labels, rng):
        labels, _ = compact(labels)
        return GibbsState(X, labels, rng, kdata=self.family.kernel_data(X),
                          log_prior_pred=prior_predictive(self.family, X))

    def _step(self, state):
        labels, K = compact(state.labels)
        N = len(labels)
        rng = state.rng
        if self.params["scan"] == "random":
            # visit points in a fresh uniform order, but gather them into that order first so
            # the sweep reads memory sequentially (random access costs more than the maths)
            order = rng.permutation(N)
            X = take_rows(state.X, order)
            kdata = self.family.kernel_data(X)
            lpp = state.log_prior_pred[order]
            scanned = labels[order]
        else:
            X, kdata, lpp, scanned = state.X, state.kdata, state.log_prior_pred, labels
        uniforms = rng.random(N)
        run_sweep(self.family, X, kdata, scanned, np.arange(N), uniforms,
                  math.log(state.alpha), lpp, K + max(2, K // 4))
        if self.params["scan"] == "random":
            labels[order] = scanned
        state.labels, K = compact(labels)
        state.info = {"n_clusters": K}
        return state
