"""The sub-cluster sampler across workers (``subc`` with a backend): labels and sub-labels
sampled on the shards, splits and merges decided by the master from statistics; the chain
finds the synthetic clusters, the master's statistics always equal a recomputation from the
shards' labels (through splits, merges, restarts, random proposals and the sequential
fallback), runs are reproducible, a steady iteration costs one map of statistics, and a real
Dask cluster gives the labels and traffic of the serial shards. Without a backend ``subc``
is the in-process sampler, unchanged."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import PROBLEMS, untimed

from dpmmbench import algorithms
from dpmmbench import datasets
from dpmmbench.algorithms.backends import DaskBackend, SerialBackend
from dpmmbench.algorithms import subcluster
from dpmmbench.algorithms.subcluster import ShardedSubclusterState, SubclusterState


def run(X, family, backend, seed=0, steps=10, init_clusters=1, alpha=1.0, check=True, **options):
    """Labels, sub-labels and info after every step; checks the master's statistics against
    a recomputation from the gathered labels after each one."""
    s = algorithms.make("subc", family=family, alpha=alpha, seed=seed, backend=backend, **options)
    state = s.init(X, init_clusters=init_clusters)
    trace = [(state.labels.copy(), state.sublabels.copy(), untimed(state.info))]
    for _ in range(steps):
        state = s.step(state)
        labels, sublabels = state.labels, state.sublabels
        if check:
            K = len(state.splittable)
            np.testing.assert_array_equal(np.unique(labels), np.arange(K))
            for got, want in zip(state.sub_stats, family.stats(X, 2 * labels + sublabels, 2 * K)):
                np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
        trace.append((labels.copy(), sublabels.copy(), untimed(state.info)))
    return trace, state


def test_without_a_backend_subc_is_the_in_process_sampler():
    X, fam, alpha = PROBLEMS["known-1d"]()
    s = algorithms.make("subc", family=fam, alpha=alpha)
    assert s.backend is None and type(s.init(X)) is SubclusterState
    sharded = algorithms.make("subc", family=fam, alpha=alpha, backend=SerialBackend(2))
    assert isinstance(sharded.init(X), ShardedSubclusterState)
    for name in ("subc-supc", "subc-supc-approx"):
        with pytest.raises(ValueError, match="in-process only"):
            algorithms.make(name, family=fam, backend=SerialBackend(2))


def test_splits_from_one_cluster_on_two_shards():
    """As the in-process test does (tests/test_subcluster.py): Chang & Fisher's synthetic set
    at 3,000 points, from a single cluster, on two shards."""
    ds = datasets.load("synth-chang2013?n=3000")
    trace, state = run(ds.X, ds.family, SerialBackend(2), steps=60)
    accepted = sum(info["accepted_splits"] for _, _, info in trace[1:])
    assert accepted >= 5 and len(np.unique(state.labels)) >= 8


@pytest.mark.parametrize("options", [{"random_split_prob": 0.5}, {"merges": "pairwise", "burnin": "none"},
                                     {"subcluster_init": "random", "burnin": "first-nonincrease"}],
                         ids=["random-moves", "pairwise", "random-init"])
@pytest.mark.parametrize("label", sorted(PROBLEMS))
def test_statistics_follow_every_move(label, options):
    """On the tiny problems every kind of move happens within 120 steps (at 60, a seed with no
    accepted merge is not rare: 1-2 of 12 seeds on niw-2d), also the sequential sweep after a
    parallel draw that emptied a cluster; three shards, so one cluster spans several. The
    recomputation is checked after every step (in ``run``)."""
    X, fam, alpha = PROBLEMS[label]()
    trace, _ = run(X, fam, SerialBackend(3), seed=2, steps=120, init_clusters=3, alpha=alpha, **options)
    totals = {k: sum(info[k] for _, _, info in trace[1:])
              for k in ("accepted_splits", "accepted_merges", "sequential_label_sweep")}
    assert all(v > 0 for v in totals.values()), totals


def test_same_seed_and_workers_give_the_same_trace():
    ds = datasets.load("synth-wang2017?n_clusters=10&scale=0.02")
    a, _ = run(ds.X, ds.family, SerialBackend(2), steps=15, check=False, burnin="first-nonincrease")
    b, _ = run(ds.X, ds.family, SerialBackend(2), steps=15, check=False, burnin="first-nonincrease")
    for (la, sa, ia), (lb, sb, ib) in zip(a, b):
        np.testing.assert_array_equal(la, lb)
        np.testing.assert_array_equal(sa, sb)
        assert ia == ib
    other, _ = run(ds.X, ds.family, SerialBackend(2), seed=1, steps=15, check=False, burnin="first-nonincrease")
    assert any(not np.array_equal(x[0], y[0]) for x, y in zip(a, other))


def test_a_steady_iteration_is_one_map_of_statistics():
    """Started at the true labels of Wang & Lin's set (a 13k-point draw), no sub-cluster
    empties and no split is accepted, so an iteration is one map: the weights and parameters
    go down, the per-sub-cluster statistics come back, of a size set by K and D only; the
    points never move. (On smaller draws with 10-50 points per cluster sub-clusters often
    empty; their restarts cost one or two maps more.)"""
    ds = datasets.load("synth-wang2017?scale=0.1")
    M, D = 2, ds.family.dim
    s = algorithms.make("subc", family=ds.family, alpha=1.0, seed=0, backend=SerialBackend(M), random_moves=0)
    state = s.init(ds.X, labels=ds.labels)
    assert state.info["bytes_sent"] > ds.X.nbytes  # creating the shards ships the rows once
    for _ in range(5):
        state = s.step(state)
        info = state.info
        K = info["n_clusters"]
        assert info["messages"] == 2 * M and info["accepted_splits"] == 0
        # down: K weights and means, 2K sub-weights and sub-means; up: 2K x (n, sum x, sum |x|^2)
        assert 8 * 3 * K * (1 + D) < info["bytes_sent"] / M < 8 * 3 * K * (1 + D) + 2048
        assert 8 * 2 * K * (D + 2) < info["bytes_received"] / M < 8 * 2 * K * (D + 2) + 1024


def test_what_the_draw_brings_back_for_restarts_saves_maps_and_changes_nothing(monkeypatch):
    """On small shards the label draw also returns the sub-clusters' moments and the worst
    points that the step's restarts are likely to need (``SMALL_SHARD_POINTS``): the same
    labels, sub-labels and moves as fetching them with maps of their own, in fewer maps."""
    ds = datasets.load("synth-wang2017?scale=0.05")
    traffic, default = ("messages", "bytes_sent", "bytes_received"), subcluster.SMALL_SHARD_POINTS
    for init_clusters in (1, "truth"):  # through the first splits; near the mode, where chains spend their time
        kw = {"labels": ds.labels} if init_clusters == "truth" else {"init_clusters": 1}
        traces = []
        for small in (default, 0):
            monkeypatch.setattr(subcluster, "SMALL_SHARD_POINTS", small)
            s = algorithms.make("subc", family=ds.family, alpha=1.0, seed=0, backend=SerialBackend(3))
            state = s.init(ds.X, **kw)
            trace = []
            for _ in range(40):
                state = s.step(state)
                trace.append((state.labels.copy(), state.sublabels.copy(), untimed(state.info)))
            traces.append(trace)
        fused, apart = traces
        for (la, sa, ia), (lb, sb, ib) in zip(fused, apart):
            np.testing.assert_array_equal(la, lb)
            np.testing.assert_array_equal(sa, sb)
            assert {k: v for k, v in ia.items() if k not in traffic} == {k: v for k, v in ib.items() if k not in traffic}
        moves = sum(info["accepted_splits"] + info["proposed_merges"] for _, _, info in apart)
        maps = [sum(info["messages"] for _, _, info in trace) for trace in (fused, apart)]
        # measured: 294 against 318 messages from one cluster, 474 against 624 from the truth
        assert moves > 0 and maps[0] < (0.95 if init_clusters == 1 else 0.85) * maps[1], (init_clusters, maps)


def test_moments_from_the_statistics_are_the_points_moments_where_precise():
    """NIW statistics hold each cluster's second moments: mean and scatter from them equal the
    ones computed about each cluster's own mean from its points; a tight cluster far from the
    prior mean, whose raw moments cancel, is flagged; a family without second moments gives none."""
    from dpmmbench.algorithms._subcluster_shards import group_moments
    from dpmmbench.algorithms.families import NormalKnownCovariance

    ds = datasets.load("synth-chang2013?n=5000")
    mean, scatter, precise = ds.family.moments_from_stats(ds.family.stats(ds.X, ds.labels, 10))
    _, want_mean, want_scatter = group_moments(ds.X, ds.labels, 10)
    assert precise.all()
    np.testing.assert_allclose(mean, want_mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(scatter, want_scatter, rtol=1e-9, atol=1e-9)
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(0.0, 1.0, (1000, 2)), 1e3 + rng.normal(0.0, 1e-3, (10, 2))])
    fam = ds.family.default_for(X)  # prior mean: the data's, ~990 from the tight cluster
    _, _, precise = fam.moments_from_stats(fam.stats(X, np.repeat([0, 1], [1000, 10]), 2))
    assert precise.tolist() == [True, False]
    known = NormalKnownCovariance.default_for(ds.X)
    assert known.moments_from_stats(known.stats(ds.X, ds.labels, 10)) is None


@pytest.mark.parametrize("n", [500, 60_000])
def test_the_one_pass_lowest_loglik_is_the_per_cluster_one(n):
    """NIW's worst-explained points in one compiled pass (each row against its own cluster,
    serial and parallel chunks) are the generic per-cluster search's: the same rows, the same
    log-likelihoods up to rounding; a cluster with no row here gives (inf, -1)."""
    from dpmmbench.algorithms.families import Family
    from dpmmbench.algorithms.labelstep import take_params

    ds = datasets.load(f"synth-chang2013?n={n}")
    fam = ds.family
    rng = np.random.default_rng(n)
    params = fam.sample_params(fam.stats(ds.X, ds.labels, 11), rng)  # cluster 10 has no point
    clusters = np.array([10, 3, 0, 7])
    got = fam.lowest_loglik(ds.X, ds.labels, clusters, take_params(params, clusters))
    want = Family.lowest_loglik(fam, ds.X, ds.labels, clusters, take_params(params, clusters))
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    assert got[0][0] == np.inf and got[1][0] == -1 and (got[1][1:] >= 0).all()


def test_worst_points_with_the_draw_on_large_shards_change_nothing(monkeypatch):
    """Where the family finds the worst-explained points in one pass (NIW) every draw brings
    them back, whatever the shards' size: the same labels, sub-labels and moves as fetching
    them with maps of their own, in fewer maps."""
    ds = datasets.load("synth-chang2013?n=3000")
    monkeypatch.setattr(subcluster, "SMALL_SHARD_POINTS", 0)  # every shard is large
    traces = []
    for one_pass in (True, False):
        monkeypatch.setattr(type(ds.family), "lowest_loglik_in_one_pass", one_pass)
        traces.append(run(ds.X, ds.family, SerialBackend(2), steps=60)[0])
    traffic = ("messages", "bytes_sent", "bytes_received")
    for (la, sa, ia), (lb, sb, ib) in zip(*traces):
        np.testing.assert_array_equal(la, lb)
        np.testing.assert_array_equal(sa, sb)
        assert {k: v for k, v in ia.items() if k not in traffic} == {k: v for k, v in ib.items() if k not in traffic}
    maps = [sum(info["messages"] for _, _, info in trace[1:]) for trace in traces]
    assert maps[0] < maps[1], maps


class CountingMoments:
    """A shard map function that counts the calls asking it for moments (a module-level class:
    the serial backend pickles what it sends, to count the bytes)."""

    def __init__(self, fn):
        self.fn, self.asked = fn, 0

    def __call__(self, shard, payload):
        self.asked += payload.moments is not None
        return self.fn(shard, payload)


@pytest.mark.parametrize("family", ["niw", "known"])
def test_principal_restarts_on_shards_take_their_moments_from_the_statistics(monkeypatch, family):
    """With NIW statistics a principal restart on shards needs no map for its moments and the
    draw brings none; with a family whose statistics lack them (known variance) the moments
    come from the points, as before. The master's statistics still follow every move."""
    from dpmmbench.algorithms import _subcluster_clusters
    from dpmmbench.algorithms.families import NormalKnownCovariance

    counting_restructure, counting_draw = CountingMoments(_subcluster_clusters.restructure), \
        CountingMoments(subcluster.draw_labels)
    monkeypatch.setattr(_subcluster_clusters, "restructure", counting_restructure)
    monkeypatch.setattr(subcluster, "draw_labels", counting_draw)
    ds = datasets.load("synth-chang2013?n=3000")
    fam = ds.family if family == "niw" else NormalKnownCovariance.default_for(ds.X)
    for small in (subcluster.SMALL_SHARD_POINTS, 0):  # moments asked of the draw, or of maps of their own
        monkeypatch.setattr(subcluster, "SMALL_SHARD_POINTS", small)
        trace, state = run(ds.X, fam, SerialBackend(2), steps=40)
        restarts = sum(info["proposed_splits"] for _, _, info in trace[1:])
        assert restarts > 0 and len(np.unique(state.labels)) >= 4
    asked = (counting_restructure.asked, counting_draw.asked)
    assert asked == (0, 0) if family == "niw" else min(asked) > 0, asked


def test_dask_gives_the_serial_labels_and_traffic(client):
    """Two Dask worker processes and two serial shards, same seed, from a single cluster
    through the first splits: the same labels, sub-labels and counted traffic."""
    ds = datasets.load("synth-wang2017?n_clusters=10&scale=0.05")
    options = {"burnin": "first-nonincrease", "random_split_prob": 0.3}
    dask_trace, state = run(ds.X, ds.family, DaskBackend(client, n_workers=2), steps=12, check=False, **options)
    serial_trace, _ = run(ds.X, ds.family, SerialBackend(2), steps=12, check=False, **options)
    for (la, sa, ia), (lb, sb, ib) in zip(dask_trace, serial_trace):
        np.testing.assert_array_equal(la, lb)
        np.testing.assert_array_equal(sa, sb)
        assert ia == ib
    assert sum(info["accepted_splits"] for _, _, info in dask_trace[1:]) > 0
    group = state.shards
    assert group.locations() == [{w} for w in group.workers] and len(set(group.workers)) == 2
