"""Conformance of every registered sampler to the public contract (benchopt-style: one
suite parametrised over the registry), plus recovery of a known clustering."""
import numpy as np
import pytest
import scipy.sparse as sp

from dpmmbench import algorithms
from dpmmbench import datasets
from dpmmbench.algorithms.families import DirichletMultinomial, NormalInverseWishart, NormalKnownCovariance
from conftest import PROBLEMS, fits
from dpmmbench.reports.metrics import log_joint, vi

ALL = algorithms.available()


def test_registry_lists_the_implemented_algorithms():
    assert {"gibbs", "fsd"} <= set(ALL)
    for name in ALL:
        cls = algorithms.get(name)
        assert cls.name == name and isinstance(cls.exact, bool)


@pytest.mark.parametrize("name", ALL)
def test_contract_and_determinism(name, problem):
    _, X, fam, alpha = problem
    if not fits(name, fam):  # a peer that fits some families only refuses the others when built
        with pytest.raises(ValueError, match=type(fam).__name__):
            algorithms.make(name, family=fam, alpha=alpha, seed=7)
        return
    runs = []
    for _ in range(2):
        s = algorithms.make(name, family=fam, alpha=alpha, seed=7)
        state = s.init(X, init_clusters=2)
        for _ in range(5):
            state = s.step(state)
        runs.append(state.labels.copy())
        assert state.labels.shape == (X.shape[0],) and state.labels.dtype == np.int64
        assert state.iteration == 5 and isinstance(state.info, dict)
    np.testing.assert_array_equal(runs[0], runs[1])
    other = algorithms.make(name, family=fam, alpha=alpha, seed=8).init(X, init_clusters=2)
    assert other.labels is not None


@pytest.mark.parametrize("name", ALL)
def test_init_from_labels(name):
    X, fam, alpha = PROBLEMS["known-1d"]()
    s = algorithms.make(name, family=fam, alpha=alpha, seed=0)
    if s.external and not s.starts_from_partition:  # it starts from its own initialisation (docs/design.md "Peers")
        with pytest.raises(ValueError, match="cannot start from given labels"):
            s.init(X, labels=[0, 0, 5, 1, 1, 5])
        return
    state = s.init(X, labels=[0, 0, 5, 1, 1, 5])
    assert len(np.unique(state.labels)) == 3
    state = s.step(state)
    assert state.labels.shape == (6,)


@pytest.mark.parametrize("name", ALL)
def test_bad_input_is_rejected_with_a_clear_message(name):
    fam = NormalInverseWishart(np.zeros(2), 1.0, 4.0, np.eye(2))
    X = np.random.default_rng(0).normal(size=(10, 2))
    s = algorithms.make(name, family=fam, alpha=1.0, seed=0)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        s.init(bad)
    bad[3, 1] = np.inf
    with pytest.raises(ValueError, match="inf"):
        s.init(bad)
    with pytest.raises(ValueError, match="dimension 3"):
        s.init(np.zeros((10, 3)))
    with pytest.raises(ValueError, match="2-D"):
        s.init(np.zeros(10))
    with pytest.raises(ValueError, match="init_clusters"):
        s.init(X, init_clusters=0)
    with pytest.raises(ValueError, match="init_clusters"):
        s.init(X, init_clusters=11)
    with pytest.raises(TypeError, match="init_clusters"):
        s.init(X, init_clusters=1.5)
    with pytest.raises(ValueError, match="labels"):
        s.init(X, labels=[0, 1])
    with pytest.raises(ValueError, match="alpha"):
        algorithms.make(name, family=fam, alpha=0.0)
    with pytest.raises(ValueError, match="alpha"):
        algorithms.make(name, family=fam, alpha=-1.0)
    with pytest.raises(TypeError, match="unknown option"):
        algorithms.make(name, family=fam, no_such_option=3)
    with pytest.raises(TypeError, match="family"):
        algorithms.make(name, family="niw")
    counts = DirichletMultinomial(0.5, 3)
    if not fits(name, counts):
        with pytest.raises(ValueError, match="DirichletMultinomial"):
            algorithms.make(name, family=counts, alpha=1.0)
        return
    s = algorithms.make(name, family=counts, alpha=1.0)
    with pytest.raises(ValueError, match="negative"):
        s.init(sp.csr_matrix(np.array([[1.0, -1.0, 0.0]])))
    with pytest.raises(ValueError, match="fractional"):
        s.init(sp.csr_matrix(np.array([[1.0, 0.5, 0.0]])))
    with pytest.raises(ValueError, match="vocab"):
        s.init(sp.csr_matrix(np.ones((2, 4))))


def test_unknown_algorithm_and_bad_option_values():
    fam = NormalKnownCovariance(1.0, [0.0], 1.0)
    with pytest.raises(ValueError, match="unknown algorithm 'nope'.*gibbs"):
        algorithms.make("nope", family=fam)
    with pytest.raises(ValueError, match="truncation"):
        algorithms.make("fsd", family=fam, truncation=0)
    with pytest.raises(TypeError, match="truncation"):
        algorithms.make("fsd", family=fam, truncation=2.5)
    with pytest.raises(ValueError, match="scan"):
        algorithms.make("gibbs", family=fam, scan="sideways")
    with pytest.raises(ValueError, match="truncation = 2"):
        algorithms.make("fsd", family=fam, truncation=2).init(np.arange(5.0)[:, None], init_clusters=3)


def test_gibbs_recovers_the_ten_synthetic_clusters_from_one():
    """Chang & Fisher's synthetic set at a few thousand points: collapsed Gibbs started from
    a single cluster finds the ten generating clusters (the smallest has 69 points; the
    posterior may also carry a few small extra clusters in overlapping regions)."""
    ds = datasets.load("synth-chang2013?n=3000")
    s = algorithms.make("gibbs", family=ds.family, alpha=1.0, seed=0)
    state = s.init(ds.X, init_clusters=1)
    for _ in range(100):
        state = s.step(state)
    sizes = np.bincount(state.labels)
    assert (sizes >= 50).sum() == 10, sizes
    assert vi(state.labels, ds.labels) < 0.25
    truth_score = log_joint(ds.X, ds.labels, ds.family, 1.0)
    assert log_joint(ds.X, state.labels, ds.family, 1.0) > truth_score - 0.01 * abs(truth_score)


def test_fsd_respects_truncation_and_finds_structure():
    ds = datasets.load("synth-chang2013?n=3000")
    s = algorithms.make("fsd", family=ds.family, alpha=1.0, seed=0, truncation=20)
    state = s.init(ds.X, init_clusters=20)
    for _ in range(100):
        state = s.step(state)
        assert state.labels.max() < 20
    assert vi(state.labels, ds.labels) < 0.6


def test_gibbs_fixed_and_random_scans_both_run_multinomial():
    ds = datasets.load("synth-multinomial?n=200")
    for scan in ("random", "fixed"):
        s = algorithms.make("gibbs", family=ds.family, alpha=1.0, seed=0, scan=scan)
        state = s.init(ds.X, init_clusters=1)
        for _ in range(30):
            state = s.step(state)
        assert vi(state.labels, ds.labels) < 0.5
