"""Finite symmetric Dirichlet (FSD) approximation, blocked Gibbs (docs/algorithms.md §6).

``pi ~ Dir(alpha/L, ..., alpha/L)`` over ``L = truncation`` components. One step:
``pi | z ~ Dir(alpha/L + n_k)``, ``theta_k | z`` from the posterior (prior if empty), then all
labels at once, ``z_i ~ Cat(pi_k F(x_i | theta_k))``: the data-parallel "every point x every
component" kernel (a matrix product for Gaussians, numba ``prange`` for the rest).
Approximate: it cannot represent more than L clusters and equals the DP only as L -> inf.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scipy.special import gammaln

from ._numerics import log_dirichlet
from .base import Sampler
from .concentration import slice_log_alpha
from .constraints import Interval, Option
from .labelstep import sample_labels
from .partitions import compact
from .state import State


@dataclass
class FSDState(State):
    log_weights: np.ndarray | None = None  #: (L,) log pi of the last step
    params: object = None  #: component parameters of the last step


class FiniteSymmetricDirichlet(Sampler):
    """Blocked Gibbs for the L-component finite symmetric Dirichlet mixture (``fsd``)."""

    name = "fsd"
    exact = False
    threaded = True
    options = {"truncation": Option(100, Interval(int, 1), "number of components L")}

    def _init(self, X, labels, rng):
        labels, K = compact(labels)
        L = self.params["truncation"]
        if K > L:
            raise ValueError(f"the initial partition has {K} clusters, more than truncation = {L}")
        return FSDState(X, labels, rng)

    def _resample_alpha(self, state):
        """Under ``Dir(alpha/L, ...)`` the labels depend on alpha through
        ``Gamma(alpha) / Gamma(alpha + N) prod_k Gamma(n_k + alpha/L) / Gamma(alpha/L)``, not the
        DP's ``K`` and ``N`` alone: alpha is drawn from that conditional (the weights are
        redrawn from the labels after it)."""
        L = self.params["truncation"]
        n = np.bincount(state.labels)
        n = n[n > 0]
        N = float(n.sum())

        def log_lik(alpha):
            a = alpha / L
            return float(gammaln(alpha) - gammaln(alpha + N) + (gammaln(a + n) - gammaln(a)).sum())

        return slice_log_alpha(state.alpha, log_lik, self.alpha_prior, state.rng)

    def _step(self, state):
        family, rng = self.family, state.rng
        L = self.params["truncation"]
        stats = family.stats(state.X, state.labels, L)
        log_w = log_dirichlet(rng, state.alpha / L + stats.n)
        params = family.sample_params(stats, rng)
        uniforms = rng.random(len(state.labels))
        labels = sample_labels(family, state.X, params, log_w, uniforms)
        state.labels, state.log_weights, state.params = labels, log_w, params
        # a count, not np.unique: sorting or hashing every label was the step's largest serial part
        state.info = {"n_clusters": int(np.count_nonzero(np.bincount(labels, minlength=L)))}
        return state
