"""The execution backends: contiguous shards with their own seeded generators, pure map
steps, honest byte counts, and a real Dask cluster (2 worker processes x 1 thread) that
keeps the shards resident and gives exactly the labels and traffic of the serial backend."""
from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import PROBLEMS, record_chain

from dpmmbench import datasets
from dpmmbench.algorithms.backends import (
    DaskBackend,
    SerialBackend,
    make_backend,
    run_on_shard,
    split_offsets,
    wire_size,
)
from dpmmbench.algorithms.backends.base import make_shard, shard_seeds
from dpmmbench.algorithms._shard_maps import component_stats


def distributed_wire_size(obj) -> int:
    """Size of ``obj`` as distributed's own pickler serialises it (stream + out-of-band buffers)."""
    from distributed.protocol.pickle import dumps

    buffers = []
    head = dumps(obj, buffer_callback=buffers.append)
    return len(head) + sum(memoryview(b).nbytes for b in buffers)


def slice_trace(backend, steps=6):
    ds = datasets.load("synth-wang2017?n_clusters=10&scale=0.05")
    return record_chain("slice-mr", ds.X, ds.family, 1.0, backend, seed=11, steps=steps, init_clusters=3)


# ---- serial ---------------------------------------------------------------------------------

@pytest.mark.parametrize("n, m", [(10, 3), (6, 8), (128_000, 2), (1, 1)])
def test_shards_are_contiguous_balanced_and_gathered_in_order(n, m):
    offsets = split_offsets(n, m)
    assert offsets[0] == 0 and offsets[-1] == n and np.all(np.diff(offsets) >= 0)
    assert np.ptp(np.diff(offsets)) <= 1
    X = np.arange(2.0 * n).reshape(n, 2)
    group = SerialBackend(m).distribute(X, np.arange(n), seed=0)
    np.testing.assert_array_equal(group.gather_labels(), np.arange(n))
    np.testing.assert_array_equal(group.sizes, np.diff(offsets))


def test_shard_generators_are_reproducible_and_independent():
    a = [np.random.default_rng(s).random(4) for s in shard_seeds(7, 3)]
    b = [np.random.default_rng(s).random(4) for s in shard_seeds(7, 3)]
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a[0], a[1])
    assert not np.allclose(a[0], np.random.default_rng(7).random(4))  # not the master's stream


def test_run_on_shard_is_pure():
    """A map step never changes the shard it was given, so re-running it (as Dask does to
    rebuild a lost shard by replaying its steps) reproduces the same next version."""
    X, fam, _ = PROBLEMS["known-1d"]()

    def scramble(shard, payload):
        shard.labels[:] = shard.rng.integers(0, payload, shard.labels.size)
        return shard.labels.sum()

    shard = make_shard(0, 0, X, np.zeros(6, dtype=np.int64), shard_seeds(1, 1)[0], {"family": fam})
    before = shard.rng.bit_generator.state
    first, second = run_on_shard(scramble, shard, 4), run_on_shard(scramble, shard, 4)
    np.testing.assert_array_equal(shard.labels, 0)
    assert shard.rng.bit_generator.state == before
    np.testing.assert_array_equal(first.labels, second.labels)
    assert first.out == second.out and first.X is shard.X


@pytest.mark.parametrize("make_X", [lambda: PROBLEMS["niw-2d"]()[0], lambda: PROBLEMS["dirmult"]()[0]])
def test_wire_size_is_distributeds_serialised_size(make_X):
    X = make_X()
    objects = [X, (component_stats, 3), np.arange(5), {"a": np.zeros((3, 2)), "b": 1.5}]
    if sp.issparse(X):
        objects.append(X[2:5])
    for obj in objects:
        assert wire_size(obj) == distributed_wire_size(obj)


def test_bytes_counted_equal_the_serialised_payloads_and_results():
    X, fam, _ = PROBLEMS["niw-2d"]()
    M = 3
    group = SerialBackend(M).distribute(X, np.array([0, 1, 0, 1, 0, 1]), seed=0, static={"family": fam})
    created = group.take_comm()
    assert created["messages"] == M
    assert created["bytes_sent"] == sum(
        distributed_wire_size((make_shard, i, int(group.offsets[i]), X[group.offsets[i]:group.offsets[i + 1]],
                               np.array([0, 1, 0, 1, 0, 1])[group.offsets[i]:group.offsets[i + 1]],
                               shard_seeds(0, M)[i], {"family": fam}))
        for i in range(M))
    results = group.map(component_stats, 2)
    comm = group.take_comm()
    assert comm["messages"] == 2 * M
    assert comm["bytes_sent"] == M * distributed_wire_size((component_stats, 2))
    assert comm["bytes_received"] == sum(distributed_wire_size(r) for r in results)
    assert group.take_comm() == {"bytes_sent": 0, "bytes_received": 0, "messages": 0}
    done = dict(group.as_completed([group.submit(i, component_stats, 2) for i in range(M)]))
    assert sorted(done) == list(range(M)) and group.take_comm()["messages"] == 2 * M


def nap(shard, seconds):
    """A map function that computes ``seconds`` times (its shard's index + 1)."""
    time.sleep(seconds * (shard.index + 1))
    return shard.index


def check_compute_times(backend):
    X, fam, _ = PROBLEMS["dirmult"]()
    group = backend.distribute(X, np.zeros(X.shape[0], dtype=int), seed=0)
    assert group.take_stats()["compute_s"] == 0.0  # creating the shards is not a map
    assert group.map(nap, 0.05) == [0, 1]
    stats = group.take_stats()
    # the shards computed 0.05 s and 0.1 s: the critical path is the larger
    assert 0.1 <= stats["compute_max_s"] < 0.3 and 0.15 <= stats["compute_s"] < 0.5
    assert stats["messages"] == 4 and stats["workers_lost"] == 0
    assert group.take_stats()["compute_s"] == 0.0  # reset by the call
    group.close()


def test_compute_time_of_the_map_functions_is_reported():
    check_compute_times(SerialBackend(2))


def test_make_backend():
    assert isinstance(make_backend(1), SerialBackend) and make_backend(3).n_shards == 3
    with pytest.raises(TypeError, match="n_shards"):
        SerialBackend(1.5)


# ---- Dask -----------------------------------------------------------------------------------

def test_dask_gives_the_serial_labels_and_traffic(client):
    """slice-mr on two Dask workers and on two serial shards, same seed: the same labels
    and the same counted traffic at every iteration (the map is the same code)."""
    backend = DaskBackend(client, n_workers=2)
    assert backend.n_shards == 2 and make_backend(2, client).workers == backend.workers
    dask_labels, dask_infos, state = slice_trace(backend)
    serial_labels, serial_infos, _ = slice_trace(SerialBackend(2))
    for a, b in zip(dask_labels, serial_labels):
        np.testing.assert_array_equal(a, b)
    assert dask_infos == serial_infos
    for info in dask_infos[1:]:
        assert info["messages"] == 4 and info["bytes_sent"] > 0 and info["bytes_received"] > 0
        assert info["workers_lost"] == 0
    # the shards never moved: one shard actor on each worker
    group = state.shards
    assert group.locations() == [{w} for w in group.workers] and len(set(group.workers)) == 2
    counts = client.run(lambda dask_worker: sum(str(k).startswith("shard-actor") for k in dask_worker.state.actors))
    assert sorted(counts.values()) == [1, 1]


def test_dask_as_completed_and_byte_counts(client):
    X, fam, _ = PROBLEMS["dirmult"]()
    labels = np.array([0, 1, 0, 1, 2, 2])
    group = DaskBackend(client).distribute(X, labels, seed=0, static={"family": fam})
    group.take_comm()
    pending = [group.submit(i, component_stats, 3) for i in range(group.n_shards)]
    done = dict(group.as_completed(pending))
    assert sorted(done) == list(range(group.n_shards))
    comm = group.take_comm()
    assert comm["bytes_sent"] == group.n_shards * distributed_wire_size((component_stats, 3))
    assert comm["bytes_received"] == sum(distributed_wire_size(r) for r in done.values())
    total = sum(done[i].counts for i in done)
    np.testing.assert_allclose(total, fam.stats(X, labels, 3).counts)
    np.testing.assert_array_equal(group.gather_labels(), labels)
    group.close()


def test_dask_reports_compute_time_where_the_maps_ran(client):
    check_compute_times(DaskBackend(client, n_workers=2))


def test_dask_backend_rejects_more_workers_than_the_cluster_has(client):
    with pytest.raises(ValueError, match="n_workers = 5"):
        DaskBackend(client, n_workers=5, timeout=0.5)
