"""Collapsed Gibbs with super-clusters (``gibbs-supercluster``, docs/algorithms.md §3).

The main check is docs/algorithms.md §9.2 on the augmented state (partition z, super-cluster s of each
cluster): the exact transition matrix of one step (the P local sweeps, every scan order
enumerated, then the global step) built from the compiled kernels' own conditional weights
leaves the joint p(z, s) of docs/algorithms.md §3.2 invariant, so its partition marginal is the DP
posterior. The same matrix with the Wang & Lin code's count-based acceptance for the global
moves is shown to fail.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpmmbench import algorithms
import dpmmbench.algorithms.supercluster as supercluster
from dpmmbench import datasets
from dpmmbench.algorithms.collapsed import conditional_logweights, prior_predictive
from dpmmbench.algorithms.exact import check_against_exact, exact_posterior, tv_distance
from dpmmbench.algorithms.partitions import canonical, enumerate_partitions, partition_key
from dpmmbench.algorithms.supercluster import Block, SuperclusterGibbs, sweep_block
from conftest import PROBLEMS
from dpmmbench.reports.metrics import log_joint, vi

N_EXACT = 5  # Bell(5) = 52 partitions; the augmented chain has sum_z P^K(z) states


def five_point_problem(label):
    """The first five points of a shared tiny problem (for ``known-1d`` these are exactly
    the data of docs/algorithms.md Appendix A)."""
    X, fam, alpha = PROBLEMS[label]()
    return X[:N_EXACT], fam, alpha


# ---- exact transition matrices over (partition, super-cluster of each cluster) -----------

class AugmentedChain:
    """States, target and exact one-step transition matrices of the super-cluster sampler
    on a tiny data set.

    A state is ``(z, s)``: ``z`` a restricted growth string, ``s[k]`` the super-cluster of
    cluster ``k`` of ``z``. The target is p(z, s | x) = p(z | x) P^-K(z) (docs/algorithms.md §3.2).
    """

    def __init__(self, X, family, alpha, P):
        self.X, self.family, self.alpha, self.P = X, family, alpha, P
        self.N = family.n_points(X)
        self.parts, self.post = exact_posterior(X, family, alpha)
        self._pindex = {partition_key(z): j for j, z in enumerate(self.parts)}
        self.states, self.index = [], {}
        for z in self.parts:
            for s in itertools.product(range(P), repeat=z.max() + 1):
                self.index[(partition_key(z), s)] = len(self.states)
                self.states.append((z, s))
        self.partition_of = np.array([self._pindex[partition_key(z)] for z, _ in self.states])
        K = np.array([len(s) for _, s in self.states])
        self.target = self.post[self.partition_of] * float(P) ** -K
        self._weights = conditional_logweights(family.kernels)
        self._sweeps = {}

    def state_of(self, labels, point_sc):
        """Index of the state with partition ``labels`` whose clusters sit on the
        super-clusters of their points (``point_sc``)."""
        z = canonical(labels)
        s = tuple(int(point_sc[np.flatnonzero(z == k)[0]]) for k in range(z.max() + 1))
        return self.index[(partition_key(z), s)]

    # local step ------------------------------------------------------------------------
    def site_matrix(self, subset, i, subset_parts):
        """Collapsed Gibbs update of point ``subset[i]`` within the super-cluster holding
        the points ``subset`` (concentration alpha / P), over the partitions of ``subset``,
        from the compiled conditional weights the sampler's sweep uses."""
        Xs = self.X[list(subset)]
        kdata, hyper = self.family.kernel_data(Xs), self.family.kernel_hyper()
        lpp = prior_predictive(self.family, Xs)
        pindex = {partition_key(z): a for a, z in enumerate(subset_parts)}
        M = np.zeros((len(subset_parts), len(subset_parts)))
        for a, z in enumerate(subset_parts):
            K = z.max() + 1
            labels = z.copy()
            table = self.family.kernel_table(Xs, labels, K + 1)
            logw = np.empty(K + 1)
            self._weights(kdata, hyper, table, labels, i, math.log(self.alpha / self.P), lpp, logw)
            p = np.exp(logw - logw.max())
            p /= p.sum()
            for k in np.flatnonzero(p > 0):
                new = labels.copy()
                new[i] = k
                M[a, pindex[partition_key(new)]] += p[k]
        return M

    def sweep_matrix(self, subset):
        """One random-scan sweep over ``subset`` (every scan order, equally likely)."""
        if subset not in self._sweeps:
            n = len(subset)
            subset_parts = list(enumerate_partitions(n))
            sites = [self.site_matrix(subset, i, subset_parts) for i in range(n)]
            S = np.zeros((len(subset_parts), len(subset_parts)))
            orders = list(itertools.permutations(range(n)))
            for order in orders:
                S += np.linalg.multi_dot([sites[i] for i in order] + [np.eye(len(subset_parts))])
            self._sweeps[subset] = (subset_parts, S / len(orders))
        return self._sweeps[subset]

    def local_matrix(self):
        """The P independent sweeps given s (points never change super-cluster)."""
        T = np.zeros((len(self.states),) * 2)
        for a, (z, s) in enumerate(self.states):
            point_sc = np.array(s)[z]
            outcomes = []  # per occupied super-cluster: its points and (partition, prob) pairs
            for j in range(self.P):
                subset = tuple(np.flatnonzero(point_sc == j))
                if not subset:
                    continue
                subset_parts, S = self.sweep_matrix(subset)
                start = next(b for b, p in enumerate(subset_parts)
                             if partition_key(p) == partition_key(z[list(subset)]))
                row = S[start]
                outcomes.append((subset, [(subset_parts[b], row[b]) for b in np.flatnonzero(row > 0)]))
            for combo in itertools.product(*(o for _, o in outcomes)):
                labels = np.empty(self.N, dtype=np.int64)
                prob = 1.0
                for (subset, _), (part, p) in zip(outcomes, combo):
                    labels[list(subset)] = point_sc[subset[0]] * self.N + part
                    prob *= p
                T[a, self.state_of(labels, point_sc)] += prob
        return T

    # global step -----------------------------------------------------------------------
    def global_matrix(self):
        """The sampler's global step: every cluster to a uniformly random super-cluster."""
        T = np.zeros((len(self.states),) * 2)
        for a, (z, s) in enumerate(self.states):
            for s2 in itertools.product(range(self.P), repeat=len(s)):
                T[a, self.index[(partition_key(z), s2)]] = float(self.P) ** -len(s)
        return T

    def wang_lin_global_matrix(self):
        """The Wang & Lin code's move (NOT the sampler's): pick a cluster and a target
        super-cluster uniformly, accept with min{1, a_{n,j}! / (a_{n,j'} + 1)!}, where
        a_{n,j} counts the clusters of size n (the moved one's) on super-cluster j."""
        T = np.zeros((len(self.states),) * 2)
        for a, (z, s) in enumerate(self.states):
            sizes = np.bincount(z)
            K = len(s)
            for c, target in itertools.product(range(K), range(self.P)):
                same = [k for k in range(K) if sizes[k] == sizes[c]]
                a_from = sum(s[k] == s[c] for k in same)
                a_to = sum(s[k] == target for k in same)
                acc = 1.0 if target == s[c] else min(1.0, math.factorial(a_from) / math.factorial(a_to + 1))
                s2 = s[:c] + (target,) + s[c + 1:]
                T[a, self.index[(partition_key(z), s2)]] += acc / (K * self.P)
                T[a, a] += (1.0 - acc) / (K * self.P)
        return T

    def partition_marginal(self, dist):
        return np.bincount(self.partition_of, weights=dist, minlength=len(self.parts))


def stationary(T):
    """The stationary distribution of an irreducible stochastic matrix."""
    n = len(T)
    A = np.vstack([T.T - np.eye(n), np.ones(n)])
    b = np.zeros(n + 1)
    b[-1] = 1.0
    return np.linalg.lstsq(A, b, rcond=None)[0]


@pytest.fixture(scope="module")
def chains():
    """Augmented chains for every shared problem (first five points) at P = 2 and the
    Appendix A problem at P = 3, built once for the tests below."""
    out = {(label, 2): AugmentedChain(*five_point_problem(label), 2) for label in sorted(PROBLEMS)}
    out[("known-1d", 3)] = AugmentedChain(*five_point_problem("known-1d"), 3)
    return out


@pytest.mark.parametrize("key", [("dirmult", 2), ("known-1d", 2), ("niw-2d", 2),
                                 pytest.param(("known-1d", 3), marks=pytest.mark.slow)],  # the longest: slow
                         ids=lambda k: f"{k[0]}-P{k[1]}")
def test_one_step_leaves_the_augmented_joint_invariant(chains, key):
    """docs/algorithms.md §9.2 over (z, s): local step, global step and one full step each leave
    p(z, s) invariant, and the stationary law of the step has the DP posterior as its
    partition marginal."""
    ch = chains[key]
    pi = ch.target
    L, G = ch.local_matrix(), ch.global_matrix()
    for M in (L, G):
        np.testing.assert_allclose(M.sum(axis=1), 1.0, atol=1e-12)
    T = L @ G
    assert np.abs(pi @ L - pi).sum() < 1e-10
    assert np.abs(pi @ G - pi).sum() < 1e-10
    assert np.abs(pi @ T - pi).sum() < 1e-10
    assert np.abs(pi @ (L @ L @ G) - pi).sum() < 1e-10  # local_sweeps = 2
    # the step is irreducible, so pi is its only stationary law
    assert np.abs(ch.partition_marginal(stationary(T)) - ch.post).sum() < 1e-10


def test_wang_lin_count_based_acceptance_is_biased(chains):
    """The count-based acceptance of the Wang & Lin code, with uniform cluster/target
    selection, breaks invariance and biases the partition marginal (docs/algorithms.md §3.3)."""
    for label in sorted(PROBLEMS):
        ch = chains[(label, 2)]
        T = ch.local_matrix() @ ch.wang_lin_global_matrix()
        np.testing.assert_allclose(T.sum(axis=1), 1.0, atol=1e-12)
        assert np.abs(ch.target @ T - ch.target).sum() > 1e-3, label
        assert tv_distance(ch.partition_marginal(stationary(T)), ch.post) > 1e-3, label


def test_local_sweeps_at_the_full_concentration_are_biased():
    """The check has power on the local step too: sweeping each super-cluster with
    concentration alpha instead of alpha / P breaks invariance."""
    ch = AugmentedChain(*five_point_problem("known-1d"), 2)
    ch.alpha *= 2  # site matrices use alpha / P: this makes them use the DP's alpha
    T = ch.local_matrix() @ ch.global_matrix()
    assert np.abs(ch.target @ T - ch.target).sum() > 1e-2


def test_block_sweep_moves_points_by_the_conditional_weights():
    """Ties the matrices above to the sampler: its per-super-cluster sweep, run on one
    point with a uniform inside the interval of category k, moves the point to k of the
    compiled conditional weights used to build them."""
    X, fam, alpha = five_point_problem("niw-2d")
    P = 2
    log_alpha = math.log(alpha / P)
    weights = conditional_logweights(fam.kernels)
    kdata, hyper, lpp = fam.kernel_data(X), fam.kernel_hyper(), prior_predictive(fam, X)
    checked = 0
    for z in enumerate_partitions(N_EXACT):
        K = z.max() + 1
        for i in range(N_EXACT):
            logw = np.empty(K + 1)
            weights(kdata, hyper, fam.kernel_table(X, z.copy(), K + 1), z.copy(), i, log_alpha, lpp, logw)
            p = np.exp(logw - logw.max())
            cum = np.cumsum(p / p.sum())
            for k in np.flatnonzero(p > 0):
                u = cum[k] - 0.5 * p[k] / p.sum()
                block = Block(X, z.copy(), lpp, np.full((1, N_EXACT), u), [np.array([i])], K)
                moved, _ = sweep_block(fam, block, log_alpha)
                expected = z.copy()
                expected[i] = k
                assert partition_key(moved) == partition_key(expected)
                checked += 1
    assert checked > 200


# ---- the sampler ------------------------------------------------------------------------

def test_registered_and_exact():
    assert "gibbs-supercluster" in algorithms.available()
    cls = algorithms.get("gibbs-supercluster")
    assert cls is SuperclusterGibbs and cls.exact


@pytest.mark.slow
def test_more_superclusters_and_sweeps_against_exact_posterior():
    """The long-run harness with P = 4 and two local sweeps per step (the registry-wide
    test covers the defaults on every shared problem)."""
    X, fam, alpha = PROBLEMS["niw-2d"]()
    res = check_against_exact("gibbs-supercluster", X, fam, alpha,
                              options={"n_superclusters": 4, "local_sweeps": 2})
    assert res.passed, f"TV {res.tv:.4f} > {res.threshold:.4f}"


def test_state_and_info():
    X, fam, alpha = PROBLEMS["known-1d"]()
    s = algorithms.make("gibbs-supercluster", family=fam, alpha=alpha, seed=3, n_superclusters=3)
    state = s.init(X, init_clusters=4)
    for _ in range(10):
        state = s.step(state)
        K = state.labels.max() + 1
        assert np.array_equal(np.unique(state.labels), np.arange(K))
        assert state.superclusters.shape == (K,) and state.superclusters.max() < 3
        info = state.info
        assert info["n_clusters"] == K
        loads = np.array([info[f"load_{j}"] for j in range(3)])
        assert loads.sum() == len(X)
        assert info["load_imbalance"] == pytest.approx(loads.max() / loads.mean())


def test_bad_options():
    fam = PROBLEMS["known-1d"]()[1]
    with pytest.raises(ValueError, match="n_superclusters"):
        algorithms.make("gibbs-supercluster", family=fam, n_superclusters=0)
    with pytest.raises(TypeError, match="n_superclusters"):
        algorithms.make("gibbs-supercluster", family=fam, n_superclusters=1.5)
    with pytest.raises(ValueError, match="local_sweeps"):
        algorithms.make("gibbs-supercluster", family=fam, local_sweeps=0)


def test_recovers_the_synthetic_clusters_from_one():
    """Chang & Fisher's synthetic set at 2,000 points, started from a single cluster.

    The smallest generating cluster has only 41 points at this size, so "found the ten
    clusters" is counted as ten clusters of at least 35 points.
    """
    ds = datasets.load("synth-chang2013?n=2000")
    assert np.sort(np.bincount(ds.labels))[0] == 41
    s = algorithms.make("gibbs-supercluster", family=ds.family, alpha=1.0, seed=0)
    state = s.init(ds.X, init_clusters=1)
    for _ in range(200):
        state = s.step(state)
    sizes = np.bincount(state.labels)
    assert (sizes >= 35).sum() >= 10, sizes
    assert vi(state.labels, ds.labels) < 0.3
    truth = log_joint(ds.X, ds.labels, ds.family, 1.0)
    assert log_joint(ds.X, state.labels, ds.family, 1.0) > truth - 0.01 * abs(truth)


@pytest.mark.parametrize("P", [2, 4])
def test_same_seed_same_labels_threaded_or_not(P, monkeypatch):
    """Same seed -> same labels, whether the super-clusters are swept on threads or one
    after the other (all randomness is drawn before the threads start)."""
    ds = datasets.load("synth-chang2013?n=2000")
    runs = []
    for threshold in (0, 0, 10 ** 9):  # threaded twice, then serial
        monkeypatch.setattr(supercluster, "THREADED_MIN_POINTS", threshold)
        s = algorithms.make("gibbs-supercluster", family=ds.family, alpha=1.0, seed=11, n_superclusters=P)
        state = s.init(ds.X, init_clusters=3)
        for _ in range(8):
            state = s.step(state)
        runs.append((state.labels.copy(), state.superclusters.copy()))
    for labels, sc in runs[1:]:
        np.testing.assert_array_equal(labels, runs[0][0])
        np.testing.assert_array_equal(sc, runs[0][1])
    other = algorithms.make("gibbs-supercluster", family=ds.family, alpha=1.0, seed=12, n_superclusters=P)
    state = other.init(ds.X, init_clusters=3)
    for _ in range(8):
        state = other.step(state)
    assert not np.array_equal(state.labels, runs[0][0])
