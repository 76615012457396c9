"""Conformance of every registered sampler to the public contract (benchopt-style: one
suite parametrised over the registry), plus recovery of a known clustering."""
import numpy as np
import pytest

from dpmmbench import algorithms
from dpmmbench.algorithms import certify
from dpmmbench import datasets
from dpmmbench.algorithms.families import NormalKnownCovariance
from conftest import PROBLEMS, fits
from dpmmbench.reports.metrics import log_joint, vi

ALL = algorithms.available()


def test_registry_lists_the_implemented_algorithms():
    assert {"gibbs", "fsd"} <= set(ALL)
    for name in ALL:
        cls = algorithms.get(name)
        assert cls.name == name and isinstance(cls.exact, bool)


@pytest.mark.parametrize("name", ALL)
def test_contract_and_determinism(name):
    """The contract on each tiny problem the sampler fits (``dpmmbench check``'s conformance
    part); a peer that fits some families only refuses the others when built."""
    failed = [f for f in certify.conformance(name) if not f.passed]
    assert not failed, failed
    for _, build in sorted(PROBLEMS.items()):
        X, fam, alpha = build()
        if not fits(name, fam):
            with pytest.raises(ValueError, match=type(fam).__name__):
                algorithms.make(name, family=fam, alpha=alpha, seed=7)


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
    """Each kind of bad input refused with an error naming it (``dpmmbench check``'s bad-input part)."""
    findings = certify.bad_input(name)
    assert len(findings) >= 12 or (len(findings) == 1 and "family" in findings[0].check)
    failed = [f for f in findings if not f.passed]
    assert not failed, failed


def test_a_sampler_that_accepts_bad_input_is_named():
    """The harness is not vacuous: a sampler that skips the data check is caught, by name."""
    from dpmmbench.algorithms.gibbs import CollapsedGibbs

    class Careless(CollapsedGibbs):
        name = "careless"

        def init(self, X, init_clusters=1, labels=None):
            if isinstance(X, np.ndarray):  # NaN quietly made 0 (inf still reaches the check)
                X = np.where(np.isnan(X), 0.0, X)
            return super().init(X, init_clusters=init_clusters, labels=labels)

    failed = {f.check: f.detail for f in certify.bad_input(Careless) if not f.passed}
    assert set(failed) == {"NaN in the data"} and "accepted it" in failed["NaN in the data"]


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
