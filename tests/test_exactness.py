"""Exactness by enumeration (docs/algorithms.md §9), generic over the registry.

Every sampler with ``exact = True`` must match the exact posterior on each tiny problem;
every approximate one has its measured distance reported (terminal summary). The same
harness is shown to fail on a deliberately wrong sampler.
"""
import numpy as np
import pytest

from dpmmbench import algorithms
from dpmmbench.algorithms.exact import check_against_exact, exact_posterior, gibbs_transition_matrix
from dpmmbench.algorithms.partitions import enumerate_partitions
from conftest import PROBLEMS, report_exactness

BELL = [1, 1, 2, 5, 15, 52, 203, 877]


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
@pytest.mark.parametrize("name", algorithms.available())
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
