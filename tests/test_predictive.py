"""The DP posterior predictive (docs/algorithms.md §0.8): a density that integrates to 1, equal
to the chain rule of the families' marginals, averaged over draws as a mixture, and clear
errors."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import PROBLEMS
from scipy.integrate import quad
from scipy.special import gammaln, logsumexp

from dpmmbench.algorithms.families import DirichletMultinomial, NormalInverseWishart, NormalKnownCovariance
from dpmmbench.algorithms.predictive import (assignment_log_proba, log_predictive_density,
                                             mean_log_predictive_density)


def by_marginals(family, X, labels, alpha, x):
    """``log p(x | z, X)`` from log marginals alone: ``p(x | X_k) = m(X_k + x) / m(X_k)``."""
    terms = [math.log(alpha) + family.log_marginal(x)]
    for k in np.unique(labels):
        Xk = X[labels == k]
        stacked = sp.vstack([Xk, x]) if sp.issparse(X) else np.vstack([Xk, x])
        terms.append(math.log(Xk.shape[0]) + family.log_marginal(stacked) - family.log_marginal(Xk))
    return logsumexp(terms) - math.log(alpha + len(labels))


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
def test_the_predictive_is_the_chain_rule_of_the_marginals(problem):
    X, family, alpha = PROBLEMS[problem]()
    labels = np.array([0, 0, 1, 1, 2, 1])
    X_new = X[[0, 4]] if sp.issparse(X) else X[[0, 4]] + 0.3
    got = log_predictive_density(family, X, labels, alpha, X_new)
    want = [by_marginals(family, X, labels, alpha, X_new[i:i + 1]) for i in range(2)]
    np.testing.assert_allclose(got, want, rtol=1e-10)


@pytest.mark.parametrize("family", [
    NormalInverseWishart(mu0=[0.5], kappa0=0.3, nu0=2.5, psi0=[[0.8]]),
    NormalKnownCovariance(sigma=0.7, mu0=[0.0], sigma0=2.0),
], ids=["niw", "known-covariance"])
def test_the_1d_predictive_integrates_to_one(family):
    X = np.array([[-2.0], [-1.6], [-2.3], [1.8], [2.4], [0.2]])
    labels = np.array([3, 3, 3, 7, 7, 0])  # gaps in the ids: any integer labels will do

    def density(x):
        return math.exp(log_predictive_density(family, X, labels, 0.6, np.array([[x]]))[0])

    total = sum(quad(density, a, b, limit=200)[0] for a, b in [(-np.inf, -2.0), (-2.0, 2.0), (2.0, np.inf)])
    assert total == pytest.approx(1.0, abs=1e-7)


def test_the_multinomial_predictive_sums_to_one_over_documents_of_one_length():
    # without the multinomial coefficient (the family's convention) the density of a count
    # vector sums to 1 once the coefficient multiplies it back in
    family = DirichletMultinomial(gamma=0.4, vocab_size=3)
    X = sp.csr_matrix(np.array([[2, 0, 1], [3, 1, 0], [0, 0, 4]], dtype=float))
    length = 3
    docs = np.array([c for c in itertools.product(range(length + 1), repeat=3) if sum(c) == length], dtype=float)
    log_coef = gammaln(length + 1) - gammaln(docs + 1).sum(axis=1)
    log_p = log_predictive_density(family, X, np.array([0, 0, 1]), 1.5, sp.csr_matrix(docs))
    assert math.exp(logsumexp(log_p + log_coef)) == pytest.approx(1.0, rel=1e-12)


def test_averaging_over_draws_is_the_mixture_of_their_densities():
    X, family, _ = PROBLEMS["niw-2d"]()
    X_new = np.array([[0.0, 0.1], [3.0, -2.0]])
    draws = [(np.array([0, 0, 1, 1, 2, 1]), 1.0), (np.zeros(6, dtype=int), 0.2), (np.arange(6), 4.0)]
    per_draw = np.stack([log_predictive_density(family, X, z, a, X_new) for z, a in draws])
    np.testing.assert_allclose(mean_log_predictive_density(family, X, draws, X_new),
                               np.log(np.exp(per_draw).mean(axis=0)), rtol=1e-12)
    np.testing.assert_array_equal(mean_log_predictive_density(family, X, draws[:1], X_new), per_draw[0])


def test_assignment_probabilities_are_the_clusters_share_of_the_predictive():
    X, family, alpha = PROBLEMS["known-1d"]()
    labels = np.array([5, 5, 2, 9, 9, 2])  # compact numbers them 2 -> 0, 5 -> 1, 9 -> 2
    X_new = np.array([[-2.0], [0.3], [2.2]])
    got = np.exp(assignment_log_proba(family, X, labels, X_new))
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-12)
    for i, x in enumerate(X_new):
        weights = [len(X[labels == k]) * math.exp(family.log_marginal(np.vstack([X[labels == k], x]))
                                                  - family.log_marginal(X[labels == k])) for k in (2, 5, 9)]
        np.testing.assert_allclose(got[i], np.array(weights) / sum(weights), rtol=1e-10)
    assert got.argmax(axis=1).tolist() == [1, 0, 2]


def test_bad_input_is_named():
    X, family, alpha = PROBLEMS["niw-2d"]()
    labels = np.zeros(6, dtype=int)
    with pytest.raises(ValueError, match="draws must hold at least one"):
        mean_log_predictive_density(family, X, [], X)
    with pytest.raises(ValueError, match="alpha must be > 0"):
        log_predictive_density(family, X, labels, 0.0, X)
    with pytest.raises(ValueError, match=r"labels must have shape \(6,\)"):
        log_predictive_density(family, X, labels[:4], alpha, X)
    with pytest.raises(ValueError, match="X has dimension 3 but the NormalInverseWishart prior has dimension 2"):
        log_predictive_density(family, X, labels, alpha, np.ones((2, 3)))
    with pytest.raises(TypeError, match="sparse matrix"):
        assignment_log_proba(family, X, labels, sp.csr_matrix(X))
