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


# ---- the experiment ------------------------------------------------------------------------
TINY = {"datasets": {"blobs": {"dataset": "synth-chang2013?n=120", "algorithm": "gibbs", "iterations": 2},
                     "docs": {"dataset": "synth-multinomial?n=40&vocab=15", "algorithm": "subc", "iterations": 2}},
        "alphas": [0.1, 10], "alpha_prior": [1.0, 1.0], "seeds": [0], "heldout_draws": 2}


@pytest.fixture(scope="module")
def priors_csv(tmp_path_factory):
    import json

    out = tmp_path_factory.mktemp("priors") / "priors.csv"
    assert prior_sensitivity.main(["--config-json", json.dumps(TINY), "--out", str(out)]) == 0
    return out


def test_the_experiment_writes_every_grid_point_with_finite_scores(priors_csv):
    table = pd.read_csv(priors_csv)
    assert list(table.columns) == list(prior_sensitivity.COLUMNS)
    assert len(table) == 2 * 2 * (2 + 1)  # datasets x priors x (fixed alphas + learned)
    for (dataset, prior), rows in table.groupby(["dataset", "prior"]):
        assert sorted(rows.loc[rows["alpha_mode"] == "fixed", "alpha"]) == [0.1, 10.0]
        learned = rows[rows["alpha_mode"] == "learned"]
        assert len(learned) == 1 and learned["alpha_prior_shape"].iloc[0] == 1.0
    assert set(table["prior"]) == set(prior_sensitivity.PRIORS)
    assert np.isfinite(table["heldout_lpd"]).all() and (table["n_clusters"] >= 1).all()
    assert table["nmi"].between(0, 1).all()  # both synthetic sets have labels
    assert (table["n_test"] > 0).all() and (table["n_train"] > table["n_test"]).all()
    fixed = table[table["alpha_mode"] == "fixed"]
    np.testing.assert_array_equal(fixed["alpha_mean"], fixed["alpha"])


def test_the_experiment_is_reproducible(priors_csv):
    again = prior_sensitivity.sensitivity(TINY)
    first = pd.read_csv(priors_csv)
    for column in ("n_clusters", "nmi", "heldout_lpd", "alpha_mean"):
        np.testing.assert_allclose(again[column], first[column], rtol=1e-12)


@pytest.mark.parametrize("change, match", [
    ({"colour": 1}, "unknown key"),
    ({"alphas": []}, "alphas"),
    ({"alphas": [0.0]}, "alpha"),
    ({"alpha_prior": None}, "alpha_prior"),
    ({"alpha_prior": [1.0, -1.0]}, "alpha_prior"),
    ({"seeds": [-1]}, "seed"),
    ({"test_fraction": 0.9}, "test_fraction"),
    ({"datasets": {"x": {"dataset": "nope", "algorithm": "gibbs", "iterations": 2}}}, "nope"),
    ({"datasets": {"x": {"dataset": "digits", "algorithm": "nope", "iterations": 2}}}, "nope"),
    ({"datasets": {"x": {"dataset": "digits", "algorithm": "gibbs", "iterations": 0}}}, "iterations"),
    ({"datasets": {"x": {"dataset": "digits", "algorithm": "fsd", "iterations": 2, "options": {"bad": 1}}}},
     "bad"),
])
def test_a_bad_priors_block_is_named(change, match):
    with pytest.raises((ValueError, TypeError), match=match):
        prior_sensitivity.check_spec({**TINY, **change})


def test_a_family_without_empirical_bayes_is_refused():
    from dpmmbench.algorithms.families import NormalKnownCovariance

    with pytest.raises(ValueError, match="no empirical-Bayes prior"):
        prior_sensitivity.base_measures(NormalKnownCovariance(1.0, [0.0], 1.0), np.zeros((5, 1)), 0)


# ---- the report ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def report_with_priors(priors_csv, tmp_path_factory):
    from dpmmbench import algorithms, datasets
    from dpmmbench.reports.report import build_report
    from dpmmbench.reports.traces import write_trace
    from dpmmbench.workflows import driver
    from dpmmbench.workflows.provenance import environment

    out = tmp_path_factory.mktemp("report")
    data = datasets.load("synth-chang2013?n=100")
    sampler = algorithms.make("gibbs", family=data.family, seed=0)
    trace = driver.run_chain(sampler, data.X, 2, truth=data.labels, dataset="blobs")
    path = write_trace(trace, out / "gibbs.csv", {"algorithm": "gibbs", "options": sampler.params, **environment()})
    return build_report([path], out / "index.html", priors=priors_csv)


def test_the_report_shows_one_prior_figure_per_dataset(report_with_priors):
    text = report_with_priors.read_text()
    start = text.index("<section id='priors'>")
    section = text[start:text.index("</section>", start)]
    assert section.count("<img src='data:image/png;base64,") == 2
    assert "alt='Prior sensitivity on blobs'" in section and "alt='Prior sensitivity on docs'" in section
    assert "href='#priors'" in text
    assert "Best held-out density" in section


@pytest.mark.slow
def test_the_report_with_priors_renders_in_chromium(report_with_priors, tmp_path):
    from pages import open_in_chromium

    seen = open_in_chromium(report_with_priors, tmp_path)
    assert "priors" in seen["page"]["sections"]
    for image in seen["page"]["images"]:
        assert image["decoded"] and min(image["natural"]) > 0 and min(image["box"]) > 0, image["alt"]
    assert not seen["errors"], seen["errors"]


def test_a_table_that_is_not_a_priors_table_is_named(tmp_path):
    from dpmmbench.reports.priors import read_priors

    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="prior-sensitivity"):
        read_priors(bad)
