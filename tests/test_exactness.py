"""Exactness by enumeration (docs/algorithms.md §9), generic over the registry.

Every sampler with ``exact = True`` must match the exact posterior on each tiny problem;
every approximate one has its measured distance reported (terminal summary). The same
harness is shown to fail on a deliberately wrong sampler.
"""
import numpy as np
import pytest

from dpmmbench import algorithms
from dpmmbench.algorithms.backends import SerialBackend
from dpmmbench.algorithms.exact import (check_against_exact, exact_posterior, exact_posterior_learned_alpha,
                                        gibbs_transition_matrix)
from dpmmbench.algorithms.partitions import enumerate_partitions
from conftest import PROBLEMS, report_exactness

BELL = [1, 1, 2, 5, 15, 52, 203, 877]

#: the suite's own samplers, held to the full budget below. Peers (docs/design.md "Peers") are
#: other libraries' optimisers or samplers, under their own priors where they have them: their
#: distance is measured and reported on a small budget (a variational fit settles on one
#: partition, so a long run adds nothing), never asserted, and they are not run with a learned alpha
#: (most cannot take our Gamma prior).
OURS = [name for name in algorithms.available(plugins=False) if not algorithms.get(name).external]
PEERS = [name for name in algorithms.available() if algorithms.get(name).external]

#: the Gamma(shape, rate) prior of the learned-alpha checks (docs/algorithms.md §9.7): mean 1,
#: spread enough that the data move alpha
ALPHA_PRIOR = (2.0, 2.0)
#: their budget: 12 chains x 500 thinned samples, enough that the wrong prior below fails
LEARNED = {"chains": 12, "samples": 500}


def test_enumeration_counts_bell_numbers():
    for n in range(1, 8):
        parts = list(enumerate_partitions(n))
        assert len(parts) == BELL[n]
        assert len({p.tobytes() for p in parts}) == BELL[n]


def test_exact_posterior_sums_to_one_and_is_spread(problem):
    _, X, fam, alpha = problem
    parts, p = exact_posterior(X, fam, alpha)
    assert p.sum() == pytest.approx(1.0)
    # the problems are built so that many partitions matter
    assert (p > 0.01).sum() >= 5


def test_collapsed_gibbs_kernel_leaves_posterior_invariant(problem):
    """docs/algorithms.md §9.2: the exact transition matrix of the compiled single-site update, built
    from the kernels' own weights, has the exact posterior as stationary law."""
    _, X, fam, alpha = problem
    parts, T = gibbs_transition_matrix(fam, X, alpha)
    _, p = exact_posterior(X, fam, alpha)
    np.testing.assert_allclose(T.sum(axis=1), 1.0, atol=1e-12)
    assert np.abs(p @ T - p).sum() < 1e-10
    flow = p[:, None] * T  # Gibbs updates are reversible
    assert np.abs(flow - flow.T).max() < 1e-12


def test_transition_check_catches_a_wrong_alpha():
    X, fam, alpha = PROBLEMS["known-1d"]()
    _, T = gibbs_transition_matrix(fam, X, 2.0 * alpha)
    _, p = exact_posterior(X, fam, alpha)
    assert np.abs(p @ T - p).sum() > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("name", OURS)
def test_sampler_against_exact_posterior(name, problem, request):
    label, X, fam, alpha = problem
    exact = algorithms.get(name).exact
    # approximate samplers only report their distance: a smaller budget measures it well enough
    res = check_against_exact(name, X, fam, alpha, samples=1500 if exact else 500)
    report_exactness(request, name, label, res, exact=exact)
    if exact:
        assert res.passed, f"{name} on {label}: TV {res.tv:.4f} > calibrated threshold {res.threshold:.4f}"
    else:
        assert 0.0 <= res.tv <= 1.0


@pytest.mark.slow
def test_harness_fails_a_deliberately_wrong_sampler(problem):
    """Collapsed Gibbs run at 3x the concentration is a valid sampler of the wrong posterior:
    the harness must reject it at the same budget at which it accepts the right one."""
    label, X, fam, alpha = problem
    res = check_against_exact("gibbs", X, fam, alpha, sampler_alpha=3.0 * alpha)
    assert not res.passed, f"wrong sampler passed on {label}: TV {res.tv:.4f} <= {res.threshold:.4f}"


def test_harness_measures_fsd_truncation_bias():
    """With L = 2 components FSD cannot reach partitions with three or more clusters: the
    harness must see at least that missing mass as distance."""
    X, fam, alpha = PROBLEMS["known-1d"]()
    parts, p = exact_posterior(X, fam, alpha)
    unreachable = p[parts.max(axis=1) >= 2].sum()
    res = check_against_exact("fsd", X, fam, alpha, options={"truncation": 2}, samples=500,
                              inits=(1, 2))
    assert unreachable > 0.2
    assert res.tv >= unreachable - 1e-9
    assert not res.passed


# ---- learned alpha (docs/algorithms.md §9.7) -------------------------------------------------
def test_learned_alpha_posterior_mixes_the_fixed_alpha_posteriors(problem):
    """Second route to the same target: p(z | X) = ∫ p(z | X, alpha) p(alpha | X) d alpha, where
    p(alpha | X) ∝ p(X | alpha) Gamma(alpha) and p(X | alpha) is the normaliser of the
    fixed-alpha enumeration; integrated on a fine grid of log alpha, independent of the
    quadrature of the harness."""
    from scipy.special import gammaln, logsumexp

    from dpmmbench.algorithms.partitions import cluster_sizes

    _, X, fam, _ = problem
    parts, probs, alpha_mean = exact_posterior_learned_alpha(X, fam, ALPHA_PRIOR)
    a, b = ALPHA_PRIOR
    u = np.linspace(-25.0, 6.0, 6001)
    log_marginal = np.array([fam.log_marginal_stats(fam.stats(X, z, z.max() + 1)).sum() for z in parts])
    # the CRP's log p(z | alpha) (docs/algorithms.md §0.2) on the whole grid at once
    N, K = parts.shape[1], parts.max(axis=1) + 1
    log_sizes = np.array([gammaln(cluster_sizes(z)).sum() for z in parts])
    log_joint = (np.outer(u, K) + (gammaln(np.exp(u)) - gammaln(np.exp(u) + N))[:, None]
                 + log_sizes + log_marginal)
    log_evidence = logsumexp(log_joint, axis=1)
    log_post_u = log_evidence + a * u - b * np.exp(u)  # alpha^(a-1) e^(-b alpha) d alpha, in u
    w = np.exp(log_post_u - log_post_u.max())
    w /= np.trapezoid(w, u)
    fixed = np.exp(log_joint - log_evidence[:, None])  # p(z | X, alpha) on the grid
    mixed = np.trapezoid(w[:, None] * fixed, u, axis=0)
    np.testing.assert_allclose(mixed, probs, rtol=1e-6, atol=1e-9)
    assert np.trapezoid(w * np.exp(u), u) == pytest.approx(alpha_mean, rel=1e-6)
    # the data moved alpha away from the prior mean: the check has something to see
    assert abs(alpha_mean - a / b) > 0.01


@pytest.mark.slow
@pytest.mark.parametrize("name", OURS)
def test_sampler_against_learned_alpha_posterior(name, problem, request):
    """Every exact sampler, learning alpha, matches the posterior with alpha integrated out
    (partition frequencies by TV, and the mean of alpha); approximate ones report both."""
    label, X, fam, alpha = problem
    exact = algorithms.get(name).exact
    budget = LEARNED if exact else {"chains": 8, "samples": 200}
    res = check_against_exact(name, X, fam, alpha, alpha_prior=ALPHA_PRIOR, **budget)
    report_exactness(request, f"{name} (learned alpha)", label, res, exact=exact, note=", learned alpha")
    if exact:
        assert res.tv_passed, f"{name} on {label}: TV {res.tv:.4f} > calibrated threshold {res.threshold:.4f}"
        assert res.alpha_passed, (f"{name} on {label}: mean alpha {res.alpha_mean:.4f}, exact {res.alpha_exact:.4f}, "
                                  f"beyond the calibrated {res.alpha_threshold:.4f}")
    else:
        assert 0.0 <= res.tv <= 1.0 and res.alpha_mean > 0.0


@pytest.mark.slow
def test_learned_alpha_harness_fails_a_sampler_with_the_wrong_prior(problem):
    """Collapsed Gibbs learning alpha under Gamma(3, 2) (mean 1.5) is a valid sampler of
    another posterior: at the same budget both checks must reject it."""
    label, X, fam, alpha = problem
    res = check_against_exact("gibbs", X, fam, alpha, alpha_prior=ALPHA_PRIOR, sampler_alpha_prior=(3.0, 2.0),
                              **LEARNED)
    assert not res.tv_passed, f"wrong prior passed TV on {label}: {res.tv:.4f} <= {res.threshold:.4f}"
    assert not res.alpha_passed, (f"wrong prior passed the alpha check on {label}: |{res.alpha_mean:.4f} - "
                                  f"{res.alpha_exact:.4f}| <= {res.alpha_threshold:.4f}")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["slice-mr", "auxvar"])
def test_sharded_sampler_against_learned_alpha_posterior(name, request):
    """On two serial shards the sharded samplers count K from the master's statistics for
    the alpha update: the same target and checks."""
    X, fam, alpha = PROBLEMS["known-1d"]()
    res = check_against_exact(name, X, fam, alpha, alpha_prior=ALPHA_PRIOR, options={"backend": SerialBackend(2)},
                              **LEARNED)
    report_exactness(request, f"{name} (2 shards, learned alpha)", "known-1d", res, note=", learned alpha")
    assert res.passed, (f"TV {res.tv:.4f} (threshold {res.threshold:.4f}), mean alpha {res.alpha_mean:.4f} "
                        f"vs {res.alpha_exact:.4f} (threshold {res.alpha_threshold:.4f})")


# dpgmm's sweeps take tens of seconds at this budget (its PyTorch overhead per point): a slow test
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "dpgmm" else n for n in PEERS])
def test_peer_distance_to_the_exact_posterior_is_reported(name, problem, request):
    label, X, fam, alpha = problem
    if not isinstance(fam, algorithms.get(name).families or type(fam)):
        # the peer refuses this family when it is built (tests/test_samplers.py checks that)
        with pytest.raises((TypeError, ValueError), match=type(fam).__name__):
            algorithms.make(name, family=fam, alpha=alpha)
        return
    res = check_against_exact(name, X, fam, alpha, chains=4, burn=5, samples=100, thin=1)
    report_exactness(request, name, label, res, exact=False, note=", peer (its own prior), small budget")
    assert 0.0 <= res.tv <= 1.0 and res.n_samples == 400
