"""The shared scorer: docs/algorithms.md §8.5 test values, scikit-learn cross-checks, log_joint by hand."""
import numpy as np
import pytest
from scipy.special import gammaln
from sklearn import metrics as skm

from dpmmbench.algorithms.partitions import canonical, enumerate_partitions, log_crp_prior
from conftest import PROBLEMS
from dpmmbench.reports.metrics import ari, log_joint, n_clusters, nmi, vi


def test_vi_spec_values():
    assert vi([0, 0, 0, 1, 1], [0, 0, 1, 1, 1]) == pytest.approx(0.763817, abs=1e-6)
    a = [1] * 50 + [2] * 100
    b = [1] * 50 + [2] * 50 + [3] * 50
    assert vi(a, b) == pytest.approx(0.462098, abs=1e-6)
    assert vi([0, 1, 2, 3], [0, 0, 0, 0]) == pytest.approx(np.log(4))
    assert vi([5, 5, 7], [1, 1, 0]) == 0.0


def test_vi_is_a_metric_on_random_labelings():
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b, c = (rng.integers(0, 4, 30) for _ in range(3))
        assert vi(a, b) == pytest.approx(vi(b, a))
        assert vi(a, c) <= vi(a, b) + vi(b, c) + 1e-12
        assert 0 <= vi(a, b) <= np.log(30)


def test_nmi_and_ari_match_scikit_learn():
    rng = np.random.default_rng(1)
    for _ in range(20):
        a, b = rng.integers(0, 5, 50), rng.integers(0, 3, 50)
        assert nmi(a, b) == pytest.approx(skm.normalized_mutual_info_score(a, b), abs=1e-12)
        assert ari(a, b) == pytest.approx(skm.adjusted_rand_score(a, b), abs=1e-12)
    assert ari([0, 0, 1], [3, 3, 9]) == pytest.approx(1.0)


def test_crp_prior_is_a_distribution_over_partitions():
    for alpha in (0.3, 1.0, 4.0):
        total = sum(np.exp(log_crp_prior(z, alpha)) for z in enumerate_partitions(6))
        assert total == pytest.approx(1.0)


def test_crp_prior_formula():
    z = [0, 0, 1, 2, 2, 2]
    want = 3 * np.log(1.5) + gammaln(1.5) - gammaln(7.5) + gammaln(2) + gammaln(1) + gammaln(3)
    assert log_crp_prior(z, 1.5) == pytest.approx(want)


def test_log_joint_is_label_invariant_and_adds_cluster_marginals():
    X, fam, alpha = PROBLEMS["niw-2d"]()
    z = np.array([3, 3, 7, 7, 1, 7])
    assert log_joint(X, z, fam, alpha) == pytest.approx(log_joint(X, canonical(z), fam, alpha))
    want = log_crp_prior(z, alpha) + sum(fam.log_marginal(X[z == k]) for k in (1, 3, 7))
    assert log_joint(X, z, fam, alpha) == pytest.approx(want)
    assert n_clusters(z) == 3
    with pytest.raises(ValueError, match="labels"):
        log_joint(X, z[:4], fam, alpha)
