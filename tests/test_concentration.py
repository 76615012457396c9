"""Learning the concentration (docs/algorithms.md §0.7): every alpha update leaves its
conditional invariant, the optimiser's mode is the mode, and bad priors are refused.

The invariance checks are "getting it right" tests (docs/algorithms.md §9.5) reduced to alpha:
draw alpha from the prior and the state from the model given alpha, apply one update; an
exact update returns alpha distributed as the prior. The replicates are independent, so a
Kolmogorov-Smirnov test against the prior's CDF is calibrated (fixed seeds: deterministic).
"""
import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from dpmmbench import algorithms
from dpmmbench.algorithms.concentration import (GammaPrior, escobar_west, log_crp_alpha, posterior_mode,
                                                 slice_log_alpha)
from dpmmbench.algorithms.exact import log_alpha_integrals
from dpmmbench.algorithms.families import NormalKnownCovariance

PRIOR = GammaPrior(2.0, 1.0)
REPLICATES = 3000
#: a p-value below this fails: with fixed seeds, a miss is a bug, not bad luck
P_MIN = 1e-3
FAMILY = NormalKnownCovariance(sigma=1.0, mu0=[0.0], sigma0=2.0)


def crp_sizes(alpha, n_points, rng):
    """Cluster sizes of a partition of ``n_points`` drawn from the CRP at ``alpha``."""
    sizes = []
    for i in range(n_points):
        w = np.array(sizes + [alpha], dtype=float)
        k = rng.choice(len(w), p=w / w.sum())
        if k == len(sizes):
            sizes.append(1)
        else:
            sizes[k] += 1
    return np.array(sizes)


def prior_p_value(update, seed=0):
    """KS p-value of ``update(alpha, rng)`` (one update from a state drawn given alpha)
    against the prior, alpha drawn from the prior."""
    rng = np.random.default_rng(seed)
    out = np.empty(REPLICATES)
    for r in range(REPLICATES):
        alpha = rng.gamma(PRIOR.shape, 1.0 / PRIOR.rate)
        out[r] = update(alpha, rng)
    return stats.kstest(out, stats.gamma(PRIOR.shape, scale=1.0 / PRIOR.rate).cdf).pvalue


def test_escobar_west_leaves_the_dp_conditional_invariant():
    N = 12

    def update(alpha, rng):
        return escobar_west(alpha, len(crp_sizes(alpha, N, rng)), N, PRIOR, rng)

    assert prior_p_value(update) > P_MIN


def test_escobar_west_matches_the_quadrature_moments_at_fixed_k():
    """Independent chains of alpha-only updates at K = 3, N = 10 from prior draws: their last
    values have the mean and variance of p(alpha | K, N) computed by quadrature."""
    K, N, chains = 3, 10, 2000
    log_i = log_alpha_integrals(N, PRIOR, K + 2)
    mean = math.exp(log_i[K] - log_i[K - 1])
    var = math.exp(log_i[K + 1] - log_i[K - 1]) - mean ** 2
    rng = np.random.default_rng(1)
    last = np.empty(chains)
    for c in range(chains):
        alpha = rng.gamma(PRIOR.shape, 1.0 / PRIOR.rate)
        for _ in range(20):
            alpha = escobar_west(alpha, K, N, PRIOR, rng)
        last[c] = alpha
    assert abs(last.mean() - mean) < 4.0 * math.sqrt(var / chains)
    # the sample variance's standard error from the fourth central moment of the draws
    se_var = math.sqrt(((last - last.mean()) ** 4).mean() / chains)
    assert abs(last.var(ddof=1) - var) < 4.0 * se_var


def test_slice_sampler_leaves_an_arbitrary_conditional_invariant():
    """A made-up likelihood of alpha: draw alpha from the prior, y | alpha ~ N(alpha, 1);
    ``log_lik`` is then ``-(y - alpha)^2 / 2``."""
    def update(alpha, rng):
        y = alpha + rng.normal()
        return slice_log_alpha(alpha, lambda a: -0.5 * (y - a) ** 2, PRIOR, rng)

    assert prior_p_value(update) > P_MIN


def test_slice_sampler_on_the_dp_conditional():
    N = 12

    def update(alpha, rng):
        K = len(crp_sizes(alpha, N, rng))
        return slice_log_alpha(alpha, lambda a: float(log_crp_alpha(a, K, N)), PRIOR, rng)

    assert prior_p_value(update) > P_MIN


def fsd_labels(alpha, L, n_points, rng):
    """Labels drawn from the finite symmetric Dirichlet model: w ~ Dir(alpha / L), z ~ w."""
    g = rng.gamma(alpha / L, size=L) + 1e-300
    return rng.choice(L, size=n_points, p=g / g.sum())


def test_fsd_alpha_update_leaves_its_conditional_invariant():
    L, N = 3, 12
    sampler = algorithms.make("fsd", family=FAMILY, alpha_prior=tuple(PRIOR), truncation=L)

    def update(alpha, rng):
        state = SimpleNamespace(labels=fsd_labels(alpha, L, N, rng), alpha=alpha, rng=rng)
        return sampler._resample_alpha(state)

    assert prior_p_value(update) > P_MIN


def test_the_dp_update_is_wrong_for_fsd_and_the_check_sees_it():
    """Negative control: Escobar-West given K ignores how a finite Dirichlet spreads the
    points; the same check at the same size rejects it."""
    L, N = 2, 12

    def update(alpha, rng):
        K = len(np.unique(fsd_labels(alpha, L, N, rng)))
        return escobar_west(alpha, K, N, PRIOR, rng)

    assert prior_p_value(update) < P_MIN


def test_subc_alpha_update_leaves_its_conditional_invariant():
    """The sub-cluster sampler's alpha given the partition and the sub-partition (sub-cluster
    weights Beta(alpha / 2, alpha / 2) integrated out)."""
    N = 12
    sampler = algorithms.make("subc", family=FAMILY, alpha_prior=tuple(PRIOR))

    def update(alpha, rng):
        n = crp_sizes(alpha, N, rng)
        left = rng.binomial(n, rng.beta(alpha / 2.0, alpha / 2.0, size=len(n)))
        sizes = np.column_stack([left, n - left]).ravel().astype(float)
        state = SimpleNamespace(sub_stats=SimpleNamespace(n=sizes), alpha=alpha, rng=rng)
        return sampler._resample_alpha(state)

    assert prior_p_value(update) > P_MIN


@pytest.mark.parametrize("K, N, prior", [(1, 10, (2.0, 1.0)), (3, 10, (2.0, 2.0)), (8, 10, (0.5, 0.1)),
                                         (2, 1000, (1.0, 1.0)), (1, 5, (1.5, 3.0))])
def test_posterior_mode_is_the_grid_maximum(K, N, prior):
    a, b = prior
    grid = np.exp(np.linspace(math.log(1e-4), math.log(1e4), 400001))
    density = log_crp_alpha(grid, K, N) + (a - 1.0) * np.log(grid) - b * grid
    best = grid[np.argmax(density)]
    mode = posterior_mode(K, N, GammaPrior(*prior))
    # the grid's resolution: adjacent points differ by a factor exp(2e-5)
    assert mode == pytest.approx(best, rel=1e-4)


def test_log_alpha_integrals_agree_with_a_second_representation():
    """``I_K`` through the Beta integral Gamma(alpha) / Gamma(alpha + N) = B(alpha, N) / Gamma(N)
    (eta = exp(-s)): the alpha integral becomes closed form,
    ``I_K = Gamma(a + K) b^a / (Gamma(a) Gamma(N)) ∫ (1 - e^-s)^(N-1) (b + s)^-(a+K) ds``."""
    from scipy import integrate, special

    for N, (a, b) in [(6, (2.0, 2.0)), (6, (6.0, 2.0)), (8, (0.5, 3.0)), (1, (2.0, 2.0)), (30, (1.0, 0.2))]:
        got = log_alpha_integrals(N, (a, b), N + 1)
        for K in range(1, N + 2):
            def f(s, K=K):
                return math.exp((N - 1) * math.log(-math.expm1(-s)) - (a + K) * math.log(b + s)) if s > 0 else float(N == 1)
            val = sum(integrate.quad(f, lo, hi, epsabs=0.0, epsrel=1e-12, limit=500)[0]
                      for lo, hi in [(0.0, 1.0), (1.0, np.inf)])
            want = (math.log(val) + special.gammaln(a + K) + a * math.log(b) - special.gammaln(a)
                    - special.gammaln(N))
            assert got[K - 1] == pytest.approx(want, abs=1e-9), (N, a, b, K)


def test_log_alpha_integrals_with_one_point_are_the_prior_moments():
    """N = 1: the DP factor is alpha^K Gamma(alpha) / Gamma(alpha + 1) = alpha^(K-1), so I_K is
    the prior's (K-1)-th moment, closed form; a prior of small shape checks the heavy tail at 0."""
    for a, b in [(2.0, 2.0), (1e-3, 1e-3), (1e-3, 1e3), (1e3, 1e-3)]:
        got = log_alpha_integrals(1, (a, b), 4)
        want = [math.lgamma(a + k) - math.lgamma(a) - k * math.log(b) for k in range(4)]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-8)


@pytest.mark.parametrize("bad, error, words", [((0, 1), ValueError, "shape must be in"),
                                                ((1,), TypeError, "must be a pair"),
                                                ("a", TypeError, "must be a pair"),
                                                ((float("nan"), 1), ValueError, "finite"),
                                                ((1, -2), ValueError, "rate must be in")])
def test_bad_priors_are_refused_with_a_clear_message(bad, error, words):
    with pytest.raises(error, match=f"alpha_prior.*{words}"):
        algorithms.make("gibbs", family=FAMILY, alpha_prior=bad)
