"""Faults: a Dask worker killed in the middle of a run (SIGKILL, while a step is running on
it). The run completes every iteration; every point ends with exactly one label; the
master's statistics equal a recomputation from the gathered labels; the trace records the
loss (``workers_lost``) on the iteration it happened; and the synchronous samplers give
exactly the labels and trace of an uninterrupted run with the same seed and worker count,
because the lost shard is rebuilt by replaying its pure steps (see
``algorithms/backends/dask_backend.py``)."""
from __future__ import annotations

import functools
import os
import signal
import threading
import time
from copy import deepcopy
from pathlib import Path

import numpy as np
import pytest

from dpmmbench import algorithms
from dpmmbench import datasets
from dpmmbench.algorithms.backends import DaskBackend, SerialBackend
from dpmmbench.algorithms.backends.dask_backend import DaskShardGroup
from dpmmbench.workflows.cluster import dask_client
from dpmmbench.workflows.driver import run_chain

# each kills a real Dask worker mid-step: seconds apiece, left out of the fast loop
pytestmark = pytest.mark.slow

DATASET = "synth-wang2017?n_clusters=8&scale=0.03"  # 510 points in 2-D, 8 clusters
#: trace columns that measure wall-clock time, or the fault itself: all others must match
#: the uninterrupted run
NOT_REPRODUCIBLE = ("time_s", "compute_s", "compute_max_s", "workers_lost")
#: seconds a stalled step waits to be killed; far above the kill's latency, and bounds the
#: test if the kill never comes (the run then completes and the assertions fail)
STALL_S = 60.0


@pytest.fixture
def client():
    """A fresh cluster of 2 worker processes x 1 thread for every test: a test never
    inherits a restarted worker (the Nanny restarts a killed one at a new address)."""
    with dask_client(workers=2, threads=1) as client:
        yield client


# ---- a step that stalls where it runs until the test kills that worker ------------------

def stall_once(fn, marker, shard, payload):
    """``fn(shard, payload)``, except the first time (across processes) it runs: then it
    writes its process id to ``marker`` and waits, so that the test kills the worker while
    the step is in flight. The replay of the step, on another worker, runs ``fn`` at once."""
    staged = f"{marker}.{os.getpid()}"
    with open(staged, "w") as f:
        f.write(str(os.getpid()))
    try:
        os.link(staged, marker)  # exclusive, and the marker appears with the whole pid in it
    except FileExistsError:
        return fn(shard, payload)
    finally:
        os.unlink(staged)
    time.sleep(STALL_S)
    return fn(shard, payload)


class StallingGroup(DaskShardGroup):
    """Stalls the ``nth`` call of map function ``fn_name`` on shard 0 (:func:`stall_once`)
    and keeps its payload. The counted traffic is the real map's (the base class sizes
    ``fn`` before this wraps it)."""

    def __init__(self, *args, stall):
        super().__init__(*args)
        self._stall = stall
        self._calls = 0
        self.stalled_payload = None

    def _submit(self, index, fn, payload, size):
        fn_name, nth, marker = self._stall
        if index == 0 and getattr(fn, "__name__", None) == fn_name:
            self._calls += 1
            if self._calls == nth:
                fn = functools.partial(stall_once, fn, marker)
                self.stalled_payload = payload
        return super()._submit(index, fn, payload, size)


def row_ids(shard, _payload):
    """A map function: the global index of every row the shard holds."""
    return shard.ids if shard.ids is not None else np.arange(shard.offset, shard.offset + len(shard.labels))


class StallingBackend(DaskBackend):
    """A :class:`DaskBackend` whose chains on ``n_points`` points stall (only the run's own
    chain, not the driver's warm-up on a few points)."""

    def __init__(self, client, n_points, stall):
        super().__init__(client, n_workers=2)
        self._n_points, self._stall = n_points, stall

    def _create(self, offsets, specs):
        if offsets[-1] != self._n_points:
            return super()._create(offsets, specs)
        placement = [self.workers[i % len(self.workers)] for i in range(len(specs))]
        return StallingGroup(self.client, np.asarray(offsets), specs, placement, stall=self._stall)


class Killer(threading.Thread):
    """Kills (SIGKILL) the worker process whose id appears in ``marker``: a worker of the
    test's own cluster (``pids``: address -> process id), never anything else."""

    def __init__(self, marker: Path, pids: dict):
        super().__init__(daemon=True)
        self.marker, self.pids = marker, dict(pids)
        self.killed = None  #: address of the killed worker
        self.done = threading.Event()

    def run(self):
        deadline = time.monotonic() + STALL_S
        while not self.done.is_set() and time.monotonic() < deadline:
            try:
                pid = int(self.marker.read_text())
            except (FileNotFoundError, ValueError):  # not yet stalled, or pid not yet written
                time.sleep(0.01)
                continue
            (address,) = [a for a, p in self.pids.items() if p == pid]
            os.kill(pid, signal.SIGKILL)
            self.killed = address
            return


class Keep:
    """The sampler as the driver sees it, keeping its last state (the driver returns only
    the trace)."""

    def __init__(self, sampler):
        self.sampler = sampler
        self.state = None
        self.name, self.seed, self.family, self.alpha = sampler.name, sampler.seed, sampler.family, sampler.alpha

    def __deepcopy__(self, memo):  # the driver's warm-up copy
        return Keep(deepcopy(self.sampler, memo))

    def init(self, *args, **kwargs):
        self.state = self.sampler.init(*args, **kwargs)
        return self.state

    def step(self, state):
        self.state = self.sampler.step(state)
        return self.state

    def step_info(self, state):  # the trace's per-step columns
        return self.sampler.step_info(state)


def run(name, backend, iterations, seed=4, **options):
    """Trace and last state of ``name`` on the test data set, through the driver."""
    ds = datasets.load(DATASET)
    sampler = Keep(algorithms.make(name, family=ds.family, alpha=1.0, seed=seed, backend=backend, **options))
    trace = run_chain(sampler, ds.X, iterations, truth=ds.labels, init_clusters=2, dataset=ds.name,
                      workers=2)
    return ds, trace, sampler.state


def killed_run(client, tmp_path, name, fn_name, kill_at, iterations, call=None, reference=True, **options):
    """``name`` on two workers, the worker of shard 0 killed while it runs the map
    ``fn_name`` of iteration ``kill_at`` (its ``call``-th call, by default the
    ``kill_at``-th: one call per iteration); also (``reference``) the same run uninterrupted
    (two serial shards: the labels and counted traffic of an uninterrupted two-worker Dask
    run, as test_backend.py and the samplers' Dask tests check).

    Checks what holds for every sampler: the run completes; the trace records exactly one
    lost worker, on the iteration of the kill; the shards end up placed on the survivor;
    and another chain open on the same client (through another backend) is told of the
    loss too and keeps all its points."""
    ds = datasets.load(DATASET)
    N = ds.X.shape[0]
    bystander = DaskBackend(client, n_workers=2).distribute(ds.X, np.arange(N) % 5, seed=1)
    killer = Killer(tmp_path / f"stall-{name}", client.run(os.getpid))
    killer.start()
    backend = StallingBackend(client, N, (fn_name, kill_at if call is None else call, str(killer.marker)))
    try:
        _, trace, state = run(name, backend, iterations, **options)
    finally:
        killer.done.set()
        killer.join()
    assert killer.killed is not None, "the stalled step was never killed"
    assert len(trace) == iterations + 1  # init and every step
    lost = trace["workers_lost"].to_numpy()
    assert lost[kill_at] >= 1 and lost.sum() == 1, lost
    # later steps ran where the shards are placed: on the survivor, not the dead worker
    group = state.shards
    assert killer.killed not in group.workers and group.locations() == [{w} for w in group.workers]

    assert bystander.take_stats()["workers_lost"] == 1
    np.testing.assert_array_equal(bystander.gather_labels(), np.arange(N) % 5)  # the lost shard rebuilt
    bystander.close()

    if not reference:
        return ds, trace, state
    _, ref_trace, ref_state = run(name, SerialBackend(2), iterations, **options)
    return ds, trace, state, ref_trace, ref_state


def check_same_as_uninterrupted(trace, state, ref_trace, ref_state):
    np.testing.assert_array_equal(state.labels, ref_state.labels)
    columns = [c for c in ref_trace.columns if c not in NOT_REPRODUCIBLE]
    assert set(trace.columns) == set(ref_trace.columns)
    # every iteration's score, cluster count and counted traffic: the replay sent nothing
    # the algorithm did not
    assert trace[columns].equals(ref_trace[columns])


def check_one_label_per_point(state, N):
    """Every point has exactly one label (then the shards are released)."""
    labels = state.labels
    assert labels.shape == (N,) and labels.dtype.kind == "i" and labels.min() >= 0
    state.shards.close()


# ---- the tests ----------------------------------------------------------------------------

def test_slice_mr_survives_a_worker_killed_mid_step(client, tmp_path):
    ds, trace, state, ref_trace, ref_state = killed_run(client, tmp_path, "slice-mr", "slice_map", kill_at=3,
                                                         iterations=6)
    check_same_as_uninterrupted(trace, state, ref_trace, ref_state)
    # the master's statistics, shard by shard, are those of the shard's gathered labels
    labels = state.labels
    offsets = state.shards.offsets
    K = len(state.shard_stats[0].n)
    for j, got in enumerate(state.shard_stats):
        rows = slice(offsets[j], offsets[j + 1])
        for a, b in zip(got, ds.family.stats(ds.X[rows], labels[rows], K)):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-9)
    assert sum(int(np.sum(s.n)) for s in state.shard_stats) == ds.X.shape[0]
    check_one_label_per_point(state, ds.X.shape[0])


def check_master_statistics(ds, trace, state):
    """The consolidation master's global statistics equal those of the gathered labels."""
    labels = state.labels
    G = int(trace["n_clusters"].iloc[-1])
    assert sorted(np.unique(labels)) == list(range(G))
    for got, want in zip(state.global_stats(ds.family), ds.family.stats(ds.X, labels, G)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-9)
    assert state.atoms.rows[:, 0].sum() == ds.X.shape[0]


def test_cons_prog_survives_a_worker_killed_mid_step(client, tmp_path):
    ds, trace, state, ref_trace, ref_state = killed_run(client, tmp_path, "cons-prog", "worker_cycle", kill_at=3,
                                                         iterations=6)
    check_same_as_uninterrupted(trace, state, ref_trace, ref_state)
    check_master_statistics(ds, trace, state)
    check_one_label_per_point(state, ds.X.shape[0])


def test_auxvar_survives_a_worker_killed_while_rows_arrive(client, tmp_path):
    """The hardest case: rows move between the workers every iteration, and the killed
    step is the one in which the shard takes in the rows the other worker sent. Its replay
    must rebuild the shard with exactly those rows: no point lost, none held twice."""
    ds, trace, state, ref_trace, ref_state = killed_run(client, tmp_path, "auxvar", "local_step", kill_at=3,
                                                         iterations=6)
    assert len(state.shards.stalled_payload.incoming) > 0  # rows were arriving on the killed shard
    check_same_as_uninterrupted(trace, state, ref_trace, ref_state)
    N = ds.X.shape[0]
    # every point on exactly one shard, asked of the shards themselves (gather_labels also
    # refuses a lost or duplicated row)
    held = np.concatenate(state.shards.map(row_ids, None))
    np.testing.assert_array_equal(np.sort(held), np.arange(N))
    labels = state.labels
    P = state.shards.n_shards
    # the cluster sizes each worker reported are those of its clusters in the gathered labels
    for j, counts in enumerate(state.counts):
        mine = labels[labels % P == j] // P
        np.testing.assert_array_equal(np.bincount(mine, minlength=len(counts)), counts)
    assert sum(int(c.sum()) for c in state.counts) == N
    check_one_label_per_point(state, N)


def test_subc_survives_a_worker_killed_mid_step(client, tmp_path):
    ds, trace, state, ref_trace, ref_state = killed_run(client, tmp_path, "subc", "draw_labels", kill_at=3,
                                                         iterations=6)
    check_same_as_uninterrupted(trace, state, ref_trace, ref_state)
    labels, sublabels = state.labels, state.sublabels
    K = len(state.splittable)
    np.testing.assert_array_equal(np.unique(labels), np.arange(K))
    for got, want in zip(state.sub_stats, ds.family.stats(ds.X, 2 * labels + sublabels, 2 * K)):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    check_one_label_per_point(state, ds.X.shape[0])


def test_cons_async_survives_a_worker_killed_mid_cycle(client, tmp_path):
    """The asynchronous schedule (results taken as they complete; its labels depend on the
    order of arrival, so there is no uninterrupted run to compare with): the master's
    statistics still equal those of the gathered labels."""
    # two cycles per iteration: the 6th cycle of shard 0 is the second of iteration 3, launched
    # as soon as its first was integrated, while the other worker computes
    ds, trace, state = killed_run(client, tmp_path, "cons-async", "worker_cycle", kill_at=3, call=6, iterations=6,
                                  reference=False, cycles=2)
    check_master_statistics(ds, trace, state)
    assert (trace["messages"].iloc[1:] == 8).all()  # 2 cycles of 2 workers, one message each way
    check_one_label_per_point(state, ds.X.shape[0])


@pytest.mark.parametrize("ratio", [0.0, 2.0])
def test_a_shard_lost_between_steps_is_rebuilt_from_its_checkpoint_and_log(client, ratio):
    """With ``checkpoint_ratio`` 0 every step checkpoints, so nothing is kept to replay and a
    lost shard is rebuilt from its last checkpoint alone; with the default it is rebuilt
    from its creation and the logged payloads. Either way the chain goes on exactly as the
    serial one, and the loss is reported once."""
    ds = datasets.load(DATASET)
    runs = [algorithms.make("slice-mr", family=ds.family, alpha=1.0, seed=3, backend=backend)
            for backend in (DaskBackend(client, n_workers=2, checkpoint_ratio=ratio), SerialBackend(2))]
    states = [s.init(ds.X, init_clusters=2) for s in runs]

    def steps(n):
        lost = 0
        for _ in range(n):
            for j, s in enumerate(runs):
                states[j] = s.step(states[j])
            lost += states[0].info["workers_lost"]
        return lost

    assert steps(3) == 0
    group = states[0].shards
    assert group.log_bytes == [0, 0] if ratio == 0 else min(group.log_bytes) > 0
    victim = group.workers[0]
    os.kill(client.run(os.getpid)[victim], signal.SIGKILL)
    assert steps(3) == 1
    assert victim not in group.workers and group.locations() == [{w} for w in group.workers]
    np.testing.assert_array_equal(states[0].labels, states[1].labels)
    group.close()
