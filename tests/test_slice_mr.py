"""``slice-mr``, the Ge et al. map-reduce slice sampler (docs/algorithms.md §4), on the serial backend: the
master's draws against brute force, exactness with several shards, statistics kept
consistent with the labels, reproducibility, traffic of the expected size, and recovery of
a known clustering. The Dask backend is compared with these runs in ``test_backend.py``."""
from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from conftest import PROBLEMS, record_chain, report_exactness

from dpmmbench import algorithms
from dpmmbench import datasets
from dpmmbench.algorithms.backends import SerialBackend, wire_size
from dpmmbench.algorithms.exact import check_against_exact
from dpmmbench.algorithms.slice_mr import break_sticks, minimum_slice
from dpmmbench.reports.metrics import log_joint, vi


def run(X, family, alpha, backend, seed=3, steps=10, init_clusters=2):
    """Labels and info after init and after every step."""
    return record_chain("slice-mr", X, family, alpha, backend, seed, steps, init_clusters)


def test_minimum_slice_matches_brute_force():
    """k* and u* from the Beta(1, n_k) trick have the law of the argmin and min of the
    explicit slices u_i ~ U(0, w_{z_i}) (docs/algorithms.md §4.3)."""
    w = np.array([0.45, 0.3, 0.2])
    counts = np.array([3.0, 2.0, 1.0])
    z = np.repeat(np.arange(3), counts.astype(int))
    draws = 40_000
    rng = np.random.default_rng(0)
    trick = np.array([minimum_slice(np.log(w), counts, rng) for _ in range(draws)])
    u = rng.random((draws, len(z))) * w[z]
    brute_k, brute_u = z[u.argmin(axis=1)], u.min(axis=1)
    for k in range(3):
        p = (brute_k == k).mean()
        se = math.sqrt(2 * p * (1 - p) / draws)
        assert abs((trick[:, 0] == k).mean() - p) < 5 * se
    u_trick = np.exp(trick[:, 1])
    se = math.sqrt((u_trick.var() + brute_u.var()) / draws)
    assert abs(u_trick.mean() - brute_u.mean()) < 5 * se
    assert np.all(u_trick < w[trick[:, 0].astype(int)])


def test_break_sticks_leaves_less_than_the_minimum_slice():
    rng = np.random.default_rng(1)
    alpha, log_rest = 1.5, math.log(0.3)
    firsts = []
    for _ in range(20_000):
        log_u_star = math.log(rng.uniform(1e-4, 0.2))
        new = break_sticks(log_rest, log_u_star, alpha, rng)
        left = 0.3 - np.exp(new).sum()
        assert len(new) >= 1 and left < math.exp(log_u_star) + 1e-12
        firsts.append(math.exp(new[0]))
    # first stick: w_* Beta(1, alpha), mean w_* / (1 + alpha)
    firsts = np.array(firsts)
    assert abs(firsts.mean() - 0.3 / (1 + alpha)) < 5 * firsts.std() / math.sqrt(len(firsts))
    assert break_sticks(math.log(1e-6), math.log(1e-3), alpha, rng) == []


def test_reduce_payload_is_consistent():
    X, fam, alpha = PROBLEMS["known-1d"]()
    s = algorithms.make("slice-mr", family=fam, alpha=alpha, seed=0, backend=SerialBackend(2))
    state = s.init(X, labels=[0, 0, 4, 1, 1, 4])  # compacted to 3 components
    rng = np.random.default_rng(5)
    for _ in range(200):
        # a component of the last map that is now empty must be dropped
        stats = [fam.stats(X[:3], [0, 0, 3], 4), fam.stats(X[3:], [1, 1, 3], 4)]
        payload, n_new = s.reduce(stats, rng, s.alpha)
        K = 3 + n_new
        assert payload.remap[2] == -1 and len(set(payload.remap[[0, 1, 3]])) == 3
        assert len(payload.log_w) == K == payload.params.mu.shape[0]
        assert np.all(np.diff(payload.log_w) <= 0)  # sorted by decreasing weight
        w = np.exp(payload.log_w)
        assert w.sum() < 1 and 1 - w.sum() < math.exp(payload.log_u_star) + 1e-12
        assert payload.log_u_star < payload.log_w[payload.k_star]
        assert payload.k_star in payload.remap[[0, 1, 3]]  # an occupied component
        # m* holds a point of k*: component 0 only on shard 0, component 1 only on shard 1
        old = int(np.flatnonzero(payload.remap == payload.k_star)[0])
        assert payload.m_star == {0: 0, 1: 1}.get(old, payload.m_star)
    assert state.labels.max() == 2


@pytest.mark.slow
def test_exact_with_several_shards(monkeypatch, request):
    """The enumeration harness (calibrated threshold, docs/algorithms.md §9.3) with every chain on two
    serial shards, so that the choice of the shard m* holding the minimum slice matters."""
    X, fam, alpha = PROBLEMS["known-1d"]()
    monkeypatch.setattr(algorithms, "make", functools.partial(algorithms.make, backend=SerialBackend(2)))
    res = check_against_exact("slice-mr", X, fam, alpha)
    report_exactness(request, "slice-mr (2 shards)", "known-1d", res)
    assert res.passed, f"TV {res.tv:.4f} > calibrated threshold {res.threshold:.4f}"


@pytest.mark.parametrize("n_shards", [1, 2, 8])
def test_statistics_equal_a_recomputation_from_the_labels(problem, n_shards):
    """The per-shard statistics the master keeps sum to the statistics of the gathered
    labels (8 shards: more shards than points, some empty)."""
    _, X, fam, alpha = problem
    _, infos, state = run(X, fam, alpha, SerialBackend(n_shards), steps=15)
    K = len(state.shard_stats[0].n)
    total = [np.sum([np.asarray(s[j]) for s in state.shard_stats], axis=0) for j in range(len(state.shard_stats[0]))]
    for got, want in zip(total, fam.stats(X, state.labels, K)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert infos[-1]["n_clusters"] == len(np.unique(state.labels)) <= infos[-1]["n_components"]


def test_same_seed_and_shards_give_the_same_trace():
    X, fam, alpha = PROBLEMS["niw-2d"]()
    a = run(X, fam, alpha, SerialBackend(2))
    b = run(X, fam, alpha, SerialBackend(2))
    assert a[1] == b[1]
    for la, lb in zip(a[0], b[0]):
        np.testing.assert_array_equal(la, lb)
    other = run(X, fam, alpha, SerialBackend(2), seed=4)
    assert any(not np.array_equal(la, lo) for la, lo in zip(a[0], other[0]))


def test_traffic_is_the_serialised_global_state_and_statistics():
    """Per iteration: M broadcasts of the payload, O(K dim phi) each, and M replies of the
    per-component statistics, O(K dim psi) each; one message each way per shard."""
    ds = datasets.load("synth-wang2017?scale=0.01")
    M = 2
    _, infos, state = run(ds.X, ds.family, 1.0, SerialBackend(M), steps=6, init_clusters=5)
    K_prev, info = infos[-2]["n_components"], infos[-1]
    K, D = info["n_components"], ds.family.dim
    assert info["messages"] == 2 * M
    # payload arrays: remap (K_prev ints), log weights (K), means (K x D)
    raw_sent = M * 8 * (K_prev + K + K * D)
    assert raw_sent < info["bytes_sent"] < raw_sent + M * 1024
    raw_received = sum(np.asarray(a).nbytes for s in state.shard_stats for a in s)
    assert raw_received == M * 8 * (K + K * D + K)  # n, sum of x, sum of |x|^2
    assert info["bytes_received"] == sum(wire_size(s) for s in state.shard_stats)
    assert raw_received < info["bytes_received"] < raw_received + M * 1024
    # creating the shards ships their rows once
    assert infos[0]["bytes_sent"] > ds.X.nbytes


def test_recovers_a_synthetic_clustering_from_one_cluster():
    """Wang & Lin's model on a small draw of their synthetic set (10 clusters, 400 points):
    from a single cluster, new components drawn from the prior find the clusters (measured
    over 8 seeds: all within 1% of the truth's log joint after 600 iterations, while some
    still hold two clusters together after 300)."""
    ds = datasets.load("synth-wang2017?n_clusters=10&scale=0.02")
    _, _, state = run(ds.X, ds.family, 1.0, SerialBackend(2), seed=0, steps=600, init_clusters=1)
    truth = log_joint(ds.X, ds.labels, ds.family, 1.0)
    assert vi(state.labels, ds.labels) < 0.15
    assert log_joint(ds.X, state.labels, ds.family, 1.0) > truth - 0.02 * abs(truth)


def test_backend_argument_is_checked():
    _, fam, _ = PROBLEMS["known-1d"]()
    with pytest.raises(TypeError, match="backend"):
        algorithms.make("slice-mr", family=fam, backend="dask")
    with pytest.raises(ValueError, match="in-process only"):
        algorithms.make("gibbs", family=fam, backend=SerialBackend(2))
    with pytest.raises(ValueError, match="n_shards"):
        SerialBackend(0)
    assert algorithms.get("slice-mr").exact and algorithms.get("slice-mr").supports_backend
