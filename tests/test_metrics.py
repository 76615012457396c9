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


def test_state_scorer_equals_the_separate_scores_and_skips_a_repeated_state(monkeypatch):
    """A chain's scorer gives each state the numbers of log_joint, n_clusters, vi and nmi, and
    does not score again a state equal to the previous one (labels and alpha)."""
    from dpmmbench.algorithms.families import NormalInverseWishart
    from dpmmbench.reports import metrics

    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(-3, 1, (40, 2)), rng.normal(3, 1, (40, 2))])
    truth = np.repeat([0, 1], 40)
    fam = NormalInverseWishart(np.zeros(2), 0.1, 4.0, np.eye(2))
    score = metrics.StateScorer(X, fam, truth)
    calls = []
    real = metrics.log_joint_compact
    monkeypatch.setattr(metrics, "log_joint_compact", lambda *a: calls.append(1) or real(*a))
    for alpha in (1.0, 0.3):
        for _ in range(3):
            z = rng.integers(0, 5, len(X)) * 7  # ids with gaps: compacted by the scorer
            got = score(z, alpha)
            assert got == {"log_joint": pytest.approx(log_joint(X, z, fam, alpha), rel=1e-12),
                           "n_clusters": n_clusters(z), "vi": pytest.approx(vi(z, truth), abs=1e-12),
                           "nmi": pytest.approx(nmi(z, truth), abs=1e-12)}
    assert len(calls) == 6
    assert score(z.copy(), 0.3) == got and len(calls) == 6  # the same state again: not rescored
    assert score(z, 0.5)["log_joint"] != got["log_joint"] and len(calls) == 7  # another alpha: rescored
    assert np.isnan(metrics.StateScorer(X, fam)(z, 1.0)["vi"])
    with pytest.raises(ValueError, match="labels have 3 entries but X has 80 points"):
        score([0, 1, 0], 1.0)
    with pytest.raises(ValueError, match="truth has 2 labels but X has 80 points"):
        metrics.StateScorer(X, fam, [0, 1])
