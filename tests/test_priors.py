"""Empirical-Bayes priors, the prior-sensitivity experiment and its place in the report."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from dpmmbench.algorithms.families import DirichletMultinomial, NormalInverseWishart
from dpmmbench.algorithms.families._empirical import crp_expected_clusters
from dpmmbench.workflows.scripts import prior_sensitivity

RNG = np.random.default_rng(7)


def _blobs(n_per=400, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(3, 3))
    sigma = A @ A.T + np.eye(3)
    centres = rng.normal(size=(4, 3)) * 40  # far apart: k-means recovers the blobs
    X = np.concatenate([rng.multivariate_normal(c, sigma, n_per) for c in centres])
    return X, sigma


# ---- normal-inverse-Wishart ----------------------------------------------------------------
def test_niw_empirical_bayes_measures_the_within_cluster_covariance():
    X, sigma = _blobs()
    fam = NormalInverseWishart.empirical_bayes(X, n_clusters=4, seed=3)
    D = X.shape[1]
    expected = fam.psi0 / (fam.nu0 - D - 1)
    np.testing.assert_allclose(expected, sigma, atol=0.25 * np.abs(sigma).max())
    np.testing.assert_allclose(fam.mu0, X.mean(axis=0))
    assert fam.nu0 == D + 2 and fam.kappa0 == NormalInverseWishart.default_for(X).kappa0
    # the default's guess is a tenth of the data's variance: far from a cluster's here
    default = NormalInverseWishart.default_for(X)
    assert np.trace(default.psi0) > 5 * np.trace(fam.psi0)


def test_niw_empirical_bayes_is_seeded_and_subsamples():
    X, _ = _blobs()
    a = NormalInverseWishart.empirical_bayes(X, seed=1)
    b = NormalInverseWishart.empirical_bayes(X, seed=1)
    np.testing.assert_array_equal(a.psi0, b.psi0)
    sub = NormalInverseWishart.empirical_bayes(X, n_clusters=4, max_points=800, seed=2)
    full = NormalInverseWishart.empirical_bayes(X, n_clusters=4, seed=2)
    np.testing.assert_allclose(sub.psi0, full.psi0, rtol=0.2)


def test_niw_empirical_bayes_keeps_a_constant_column_positive_definite():
    X, _ = _blobs(100)
    X = np.column_stack([X, np.full(len(X), 3.0)])
    fam = NormalInverseWishart.empirical_bayes(X, n_clusters=4)
    assert np.all(np.linalg.eigvalsh(fam.psi0) > 0)


def test_default_number_of_kmeans_clusters_is_the_crp_expectation():
    assert crp_expected_clusters(3) == 2  # at least 2, at most N - 1
    assert crp_expected_clusters(1000) == round(sum(1 / i for i in range(1, 1001)))  # 7.49 -> 7
    assert crp_expected_clusters(4) == 2


@pytest.mark.parametrize("kwargs, match", [
    ({"n_clusters": 1}, "n_clusters"),
    ({"n_clusters": 10}, "n_clusters"),
    ({"seed": -1}, "seed"),
    ({"kappa0": 0.0}, "kappa0"),
])
def test_niw_empirical_bayes_bad_arguments_are_named(kwargs, match):
    X = RNG.normal(size=(10, 2))
    with pytest.raises((ValueError, TypeError), match=match):
        NormalInverseWishart.empirical_bayes(X, **kwargs)


def test_niw_empirical_bayes_bad_data_are_named():
    with pytest.raises(ValueError, match="at least 3 points"):
        NormalInverseWishart.empirical_bayes(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="non-finite"):
        NormalInverseWishart.empirical_bayes(np.array([[0.0, np.nan]] * 5))
    with pytest.raises(TypeError, match="sparse"):
        NormalInverseWishart.empirical_bayes(sp.csr_matrix(np.eye(5)))


# ---- Dirichlet-multinomial -----------------------------------------------------------------
def _documents(seed=0, n=120, vocab=30, topics=3, length=40, gamma=0.3):
    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(np.full(vocab, gamma), size=topics)
    z = rng.integers(0, topics, n)
    return sp.csr_matrix(np.array([rng.multinomial(length, theta[k]) for k in z], dtype=float))


def test_dm_empirical_bayes_finds_the_maximiser_of_its_clustering():
    X = _documents()
    fam = DirichletMultinomial.empirical_bayes(X, seed=0)
    # the same clustering, scored on a fine grid: the search's gamma is at least as good as any
    from dpmmbench.algorithms.families._empirical import kmeans_partition
    from sklearn.preprocessing import normalize

    rows, labels = kmeans_partition(normalize(X), None, 0)
    stats = fam.stats(X[rows], labels, labels.max() + 1)
    grid = np.exp(np.linspace(np.log(1e-3), np.log(1e2), 2001))
    scores = np.array([DirichletMultinomial(g, X.shape[1]).log_marginal_stats(stats).sum() for g in grid])
    best = grid[np.argmax(scores)]
    assert fam.gamma == pytest.approx(best, rel=0.01)
    assert fam.log_marginal_stats(stats).sum() >= scores.max() - 1e-9


def test_dm_empirical_bayes_returns_a_bound_and_is_seeded():
    X = _documents()
    assert DirichletMultinomial.empirical_bayes(X, bounds=(5.0, 50.0)).gamma == pytest.approx(5.0)
    assert DirichletMultinomial.empirical_bayes(X, seed=4).gamma == DirichletMultinomial.empirical_bayes(X, seed=4).gamma


@pytest.mark.parametrize("kwargs, match", [
    ({"bounds": (1.0, 0.5)}, "low < high"),
    ({"bounds": (0.0, 1.0)}, "bounds"),
    ({"bounds": "x"}, "bounds"),
    ({"n_clusters": 0}, "n_clusters"),
])
def test_dm_empirical_bayes_bad_arguments_are_named(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        DirichletMultinomial.empirical_bayes(_documents(n=20), **kwargs)


def test_dm_empirical_bayes_bad_counts_are_named():
    with pytest.raises(ValueError, match="negative"):
        DirichletMultinomial.empirical_bayes(-np.ones((5, 3)))
    with pytest.raises(ValueError, match="2-D"):
        DirichletMultinomial.empirical_bayes(np.ones(5))
