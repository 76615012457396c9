"""``auxvar``, the Williamson, Dubey & Xing auxiliary-variable sampler on workers (docs/algorithms.md §3):
exact on two serial shards (enumeration harness), whole clusters and their rows really move
between shards (every point on exactly one shard, rows intact, reported sizes equal a
recomputation), reproducible, traffic dominated by the moved rows, per-worker load in the
trace, and a real Dask cluster gives the labels and traffic of the serial shards."""
from __future__ import annotations

import functools
import os
import pickle

import numpy as np
import pytest
from conftest import PROBLEMS, record_chain, report_exactness

from dpmmbench import algorithms
from dpmmbench import datasets
from dpmmbench.algorithms.auxvar import AuxiliaryVariable, LocalStep, local_step, place_clusters, send_away
from dpmmbench.algorithms.backends import DaskBackend, SerialBackend, run_on_shard, wire_size
from dpmmbench.algorithms.exact import check_against_exact
from dpmmbench.reports.metrics import log_joint, vi
from dpmmbench.workflows.cluster import MALLOC_ENVIRONMENT

def run(X, family, backend, seed=3, steps=8, init_clusters=3, alpha=1.0, **options):
    """Labels and info after init and after every step, and the last state."""
    return record_chain("auxvar", X, family, alpha, backend, seed, steps, init_clusters, **options)


def test_registered_exact_and_sharded():
    cls = algorithms.get("auxvar")
    assert cls is AuxiliaryVariable and cls.exact and cls.supports_backend
    _, fam, _ = PROBLEMS["known-1d"]()
    assert algorithms.make("auxvar", family=fam).n_superclusters == 1
    with pytest.raises(ValueError, match="local_sweeps"):
        algorithms.make("auxvar", family=fam, local_sweeps=0)


def test_place_clusters_names_the_worker_and_numbers_its_clusters():
    labels = place_clusters(np.array([2, 0, 2, 1, 0]), 3)
    np.testing.assert_array_equal(labels % 3, [2, 0, 2, 1, 0])
    np.testing.assert_array_equal(labels // 3, [0, 0, 1, 0, 1])


def test_moving_rows_is_a_pure_map_step():
    """Handing rows over and taking them in return new versions of a shard and leave the
    old one intact (so Dask can replay a lost shard's lineage)."""
    ds = datasets.load("synth-wang2017?n_clusters=6&scale=0.01")
    s = algorithms.make("auxvar", family=ds.family, seed=1, backend=SerialBackend(2))
    state = s.step(s.init(ds.X, init_clusters=3))
    shard, relabel = state.shards._shards[0], state.relabel[0]
    before = (shard.X.copy(), shard.ids.copy(), shard.labels.copy(), shard.rng.bit_generator.state)
    first, second = run_on_shard(send_away, shard, relabel), run_on_shard(send_away, shard, relabel)
    arrived = LocalStep(tuple(r for r in second.out if r is not None), 0.0, 1)
    run_on_shard(local_step, first, arrived)
    np.testing.assert_array_equal(shard.X, before[0])
    np.testing.assert_array_equal(shard.ids, before[1])
    np.testing.assert_array_equal(shard.labels, before[2])
    assert shard.rng.bit_generator.state == before[3]
    np.testing.assert_array_equal(first.ids, second.ids)
    assert len(first.ids) < len(shard.ids) or all(r is None for r in first.out)


def test_gather_refuses_lost_or_duplicated_rows():
    X = np.arange(12.0).reshape(6, 2)
    group = SerialBackend(2).distribute(X, np.zeros(6, dtype=np.int64), seed=0)
    a, b = group._shards
    a.ids, a.labels = np.array([0, 1, 2, 3]), np.zeros(4, dtype=np.int64)  # 3 also on b
    group._labels = None
    with pytest.raises(RuntimeError, match="1 duplicated"):
        group.gather_labels()
    a.ids, a.labels = np.array([0, 1]), np.zeros(2, dtype=np.int64)  # 2 lost
    with pytest.raises(RuntimeError, match="1 missing"):
        group.gather_labels()
    a.ids, a.labels = np.array([0, 1, 2]), np.zeros(3, dtype=np.int64)
    b.ids, b.labels = np.array([5, 4, 3]), np.array([7, 8, 9])
    np.testing.assert_array_equal(group.gather_labels(), [0, 0, 0, 9, 8, 7])


def test_wire_size_does_not_depend_on_where_dtypes_came_from():
    """Rows relayed by the master were deserialised once; numpy then gives every array a
    private dtype object, which pickle cannot share. The count is that of the data."""
    obj = (np.arange(5.0), np.arange(3), np.array([1, 2]), np.array([4]))
    relayed = pickle.loads(pickle.dumps(obj))
    assert relayed[1].dtype is not np.dtype(np.int64)
    assert wire_size(relayed) == wire_size(obj)


@pytest.mark.slow
def test_exact_with_two_shards(monkeypatch, request):
    """The enumeration harness (calibrated threshold, docs/algorithms.md §9.3) with every chain on two
    serial shards: local sweeps at alpha / 2 plus the exact global move (one shard is
    plain collapsed Gibbs, covered by the registry-wide harness)."""
    X, fam, alpha = PROBLEMS["known-1d"]()
    monkeypatch.setattr(algorithms, "make", functools.partial(algorithms.make, backend=SerialBackend(2)))
    res = check_against_exact("auxvar", X, fam, alpha)
    report_exactness(request, "auxvar (2 shards)", "known-1d", res)
    assert res.passed, f"TV {res.tv:.4f} > calibrated threshold {res.threshold:.4f}"


@pytest.mark.parametrize("n_shards", [2, 3])
def test_clusters_move_with_their_rows_and_nothing_is_lost(n_shards):
    """After every step: each point is on exactly one shard (the gather checks it), each
    shard holds the true rows of its points, every cluster lives on one shard (its label
    names it), the cluster sizes the master holds equal a recomputation from the labels,
    and the loads add up to N. Rows do move."""
    ds = datasets.load("synth-wang2017?n_clusters=12&scale=0.02")
    s = algorithms.make("auxvar", family=ds.family, alpha=1.0, seed=5, backend=SerialBackend(n_shards))
    state = s.init(ds.X, init_clusters=4)
    P, N = n_shards, len(ds.X)
    moved = 0
    for _ in range(12):
        state = s.step(state)
        labels = state.labels  # raises if a row is missing or duplicated
        assert labels.shape == (N,)
        for j, shard in enumerate(state.shards._shards):
            np.testing.assert_array_equal(shard.X, ds.X[shard.ids])
            np.testing.assert_array_equal(labels[shard.ids], shard.labels)
            assert np.all(shard.labels % P == j)
            np.testing.assert_array_equal(state.counts[j], np.bincount(shard.labels // P))
            assert state.info[f"load_{j}"] == len(shard.ids)
        sizes = np.concatenate(state.counts)
        np.testing.assert_array_equal(np.sort(sizes), np.sort(np.bincount(labels)[np.bincount(labels) > 0]))
        assert state.info["n_clusters"] == len(np.unique(labels)) == len(sizes)
        loads = np.array([state.info[f"load_{j}"] for j in range(P)])
        assert loads.sum() == N and state.info["load_imbalance"] == pytest.approx(loads.max() / loads.mean())
        moved += state.info["moved_points"]
    assert moved > 0


def test_same_seed_and_workers_give_the_same_trace():
    X, fam, alpha = PROBLEMS["niw-2d"]()
    a = run(X, fam, SerialBackend(2), alpha=alpha)
    b = run(X, fam, SerialBackend(2), alpha=alpha)
    assert a[1] == b[1]
    for la, lb in zip(a[0], b[0]):
        np.testing.assert_array_equal(la, lb)
    other = run(X, fam, SerialBackend(2), seed=4, alpha=alpha)
    assert any(not np.array_equal(la, lo) for la, lo in zip(a[0], other[0]))


def test_traffic_is_dominated_by_the_moved_rows():
    """Each iteration: two maps (the move, the local step), one message each way per shard
    and map; the moved rows travel up to the master and down to their new worker, so the
    bytes are at least twice their size and, apart from the tiny per-cluster sizes, little
    more. Creating the shards ships every row once."""
    ds = datasets.load("synth-wang2017?scale=0.01")
    M = 2
    _, infos, _ = run(ds.X, ds.family, SerialBackend(M), steps=6, init_clusters=5)
    assert infos[0]["bytes_sent"] > ds.X.nbytes
    for info in infos[1:]:
        assert info["messages"] == 4 * M
        moved = info["moved_bytes"]
        assert info["moved_points"] > 0
        assert 2 * moved < info["bytes_sent"] + info["bytes_received"] < 2 * moved + 8 * info["n_clusters"] + 8192
        # the moved rows themselves: 2 coordinates and an id per point
        assert moved >= info["moved_points"] * (2 * 8 + 8)


def test_recovers_a_synthetic_clustering():
    """Wang & Lin's model on a small draw of their synthetic set (10 clusters, 400 points),
    two workers, from four initial clusters."""
    ds = datasets.load("synth-wang2017?n_clusters=10&scale=0.02")
    _, _, state = run(ds.X, ds.family, SerialBackend(2), seed=0, steps=150, init_clusters=4)
    truth = log_joint(ds.X, ds.labels, ds.family, 1.0)
    assert vi(state.labels, ds.labels) < 0.15
    assert log_joint(ds.X, state.labels, ds.family, 1.0) > truth - 0.02 * abs(truth)


def test_dask_gives_the_serial_labels_and_traffic(client):
    """Same seed, same worker count: two Dask worker processes give the labels and the
    counted traffic of two serial shards at every iteration, with rows really moving
    between the workers."""
    env = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
    assert set(env.values()) == {MALLOC_ENVIRONMENT["MALLOC_TRIM_THRESHOLD_"]}
    ds = datasets.load("synth-wang2017?n_clusters=10&scale=0.05")
    backend = DaskBackend(client, n_workers=2)
    dask_labels, dask_infos, state = run(ds.X, ds.family, backend, steps=6)
    serial_labels, serial_infos, _ = run(ds.X, ds.family, SerialBackend(2), steps=6)
    for a, b in zip(dask_labels, serial_labels):
        np.testing.assert_array_equal(a, b)
    assert dask_infos == serial_infos
    assert sum(info["moved_points"] for info in dask_infos[1:]) > 0
    group = state.shards
    assert group.locations() == [{w} for w in group.workers] and len(set(group.workers)) == 2
