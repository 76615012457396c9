"""Learning the DP concentration alpha (docs/algorithms.md §0.7).

With ``alpha_prior=(shape, rate)`` a sampler puts a Gamma(shape, rate) prior (rate
parameterisation: mean shape / rate) on alpha and redraws it at the start of every step from
its conditional given the current state, before the step's own moves; the step then runs at
the new value (``state.alpha``).

Under the DP the partition depends on alpha only through ``K`` and ``N``:
``p(z | alpha) ∝ alpha^K Gamma(alpha) / Gamma(alpha + N)``, so every sampler whose state is
the partition (plus variables whose law given the partition does not involve alpha) draws
alpha exactly with Escobar & West's auxiliary variable (:func:`escobar_west`). A sampler
whose state carries more alpha-dependent variables (the finite Dirichlet of ``fsd``, the
sub-cluster weights of ``subc``) gives the extra log terms to :func:`slice_log_alpha`, a
slice sampler on ``log alpha`` for any such conditional.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np
from scipy.special import gammaln


class GammaPrior(NamedTuple):
    """Gamma(shape, rate) prior on alpha (mean ``shape / rate``)."""

    shape: float
    rate: float


def log_crp_alpha(alpha, n_clusters: int, n_points: int):
    """The alpha-dependent part of the DP's partition probability,
    ``K log alpha + log Gamma(alpha) - log Gamma(alpha + N)`` (vectorised over ``alpha``)."""
    alpha = np.asarray(alpha, dtype=np.float64)
    return n_clusters * np.log(alpha) + gammaln(alpha) - gammaln(alpha + n_points)


def escobar_west(alpha: float, n_clusters: int, n_points: int, prior: GammaPrior,
                 rng: np.random.Generator) -> float:
    """Draw alpha from ``p(alpha | K, N)`` under a Gamma prior (Escobar & West 1995, §6).

    The auxiliary ``eta ~ Beta(alpha + 1, N)`` makes the conditional of alpha a two-component
    mixture of Gammas; drawing ``eta`` from the current alpha and alpha given ``eta`` is one
    exact Gibbs update of alpha (it leaves ``p(alpha | K, N)`` invariant).

    Parameters
    ----------
    alpha : float
        The current value (> 0).
    n_clusters, n_points : int
        ``K >= 1`` occupied clusters among ``N >= K`` points.
    prior : GammaPrior
    rng : numpy.random.Generator

    Returns
    -------
    float
        The new alpha.
    """
    a, b = prior
    K, N = int(n_clusters), int(n_points)
    log_eta = math.log(max(rng.beta(alpha + 1.0, N), np.finfo(float).tiny))
    rate = b - log_eta
    # odds of the shape a + K component against the a + K - 1 one
    odds = (a + K - 1.0) / (N * rate)
    shape = a + K if rng.random() * (1.0 + odds) < odds else a + K - 1.0
    # shape a + K - 1 = a > 0 when K = 1: always a proper Gamma
    return _positive(rng.gamma(shape, 1.0 / rate))


def slice_log_alpha(alpha: float, log_lik: Callable[[float], float], prior: GammaPrior,
                    rng: np.random.Generator, width: float = 1.0, max_steps: int = 50) -> float:
    """One slice-sampling update (Neal 2003: stepping out, shrinkage) of ``u = log alpha``.

    The target is ``p(alpha | .) ∝ exp(log_lik(alpha)) Gamma(alpha; shape, rate)``; on the
    log scale it gains the Jacobian ``alpha``. Exact for any ``log_lik`` (it leaves the
    conditional invariant), used where the state holds more than the partition.

    Parameters
    ----------
    alpha : float
        The current value (> 0).
    log_lik : callable
        ``alpha -> log p(state | alpha)`` up to a constant.
    prior : GammaPrior
    rng : numpy.random.Generator
    width : float
        Initial bracket width on the log scale.
    max_steps : int
        Most stepping-out steps on each side.

    Returns
    -------
    float
        The new alpha.
    """
    a, b = prior

    def log_target(u):
        x = math.exp(u)
        if not 0.0 < x < math.inf:
            return -math.inf
        return float(log_lik(x)) + a * u - b * x

    u0 = math.log(alpha)
    level = log_target(u0) + math.log(1.0 - rng.random())  # log(1 - U): U = 0 would give -inf
    left = u0 - width * rng.random()
    right = left + width
    j = int(rng.integers(max_steps))
    k = max_steps - 1 - j
    while j > 0 and log_target(left) > level:
        left -= width
        j -= 1
    while k > 0 and log_target(right) > level:
        right += width
        k -= 1
    while True:
        u = left + (right - left) * rng.random()
        if log_target(u) > level:
            return _positive(math.exp(u))
        if u < u0:
            left = u
        else:
            right = u


def posterior_mode(n_clusters: int, n_points: int, prior: GammaPrior) -> float:
    """The mode of ``p(alpha | K, N)`` under a Gamma prior (for the optimiser ``search``),
    by a bounded scalar search on ``log alpha`` over ``[1e-8, 1e8]``."""
    from scipy.optimize import minimize_scalar

    a, b = prior

    def negative(u):
        x = math.exp(u)
        # the mode of the density of alpha itself: no Jacobian
        return -(float(log_crp_alpha(x, n_clusters, n_points)) + (a - 1.0) * u - b * x)

    res = minimize_scalar(negative, bounds=(math.log(1e-8), math.log(1e8)), method="bounded",
                          options={"xatol": 1e-10})
    return _positive(math.exp(res.x))


def _positive(x: float) -> float:
    """``x`` kept inside the positive normal floats: a Gamma draw with a tiny shape can
    underflow to 0 (log alpha = -inf) and one with a huge rate ratio overflow."""
    tiny, huge = np.finfo(float).tiny, np.finfo(float).max
    return float(min(max(x, tiny), huge))
