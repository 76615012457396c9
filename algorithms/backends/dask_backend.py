"""The Dask backend: shards resident on ``distributed`` workers (ENGINEERING-NOTES §3.1).

Each shard is created *by a task* pinned to its worker (``client.submit(make_shard, ...,
workers=[w])``), so the scheduler knows how to recompute it; scattered data could not be
recovered after a worker loss. Its rows travel once, inside that task.

An iteration submits, per shard, ``run_on_shard(fn, shard, payload)``: it runs where the
shard is, returns the next version of the shard (a new future, which replaces the old one;
the old version is then released from the worker's memory) and a second small task hands
the map function's result back. Map functions are pure (see :mod:`.base`), so the chain of
versions is a lineage Dask can replay: if a worker is lost, its shard is rebuilt from the
creation task and the recorded payloads, with the same labels and generator state.
Placement is a preference (``allow_other_workers=True``) so that such a replay can run on a
surviving worker; in the synchronous schedule a worker never has a queued step another could
steal, so shards do not move (the tests check ``who_has``).

Worker loss (checked by killing a worker mid-step, ``tests/test_faults.py``):

* *Recovery.* A released version's data leave the worker, but the scheduler keeps its task
  (function and payload) for as long as a later version depends on it, and forgets the
  chain only when the group is closed (or dropped). So a lost current version is
  recomputed from the creation task through every recorded step, on a surviving worker,
  with the same labels and generator state: a killed run gives the labels of an
  uninterrupted one. The price: the scheduler holds every payload of the run (measured:
  pickled task specs of 489 kB after 40 ``auxvar`` iterations whose cumulative
  ``bytes_sent`` was 455 kB), and a replay re-runs every step of the lost shards. With
  no worker left at all, the tasks wait for one to join (Dask's
  ``distributed.scheduler.no-workers-timeout`` makes that an error); a Nanny usually
  restarts a killed worker, but not always (in repeated kills here, some restarts never
  came back).
* *Reporting.* The scheduler publishes a ``remove-worker`` event when a worker leaves, on a
  topic named by the worker's address; the group subscribes to the topics of the workers it
  places shards on (:class:`_Departures`), the scheduler pushes the event to the client, and
  :meth:`ShardGroup.take_stats` reports ``workers_lost``: how many of those workers left
  the cluster since the previous call (a worker holding nothing of the run is not an event
  of the run). Nothing is polled and the topics are silent while no worker comes or goes,
  so a step costs no extra message (measured: no event reached the client in 1,200
  ``slice-mr`` iterations, whose time was unchanged within the noise).
* *Placement.* Shards whose worker left are placed (as a preference) on the group's
  surviving workers, the least loaded first, for every later task; a replay itself runs
  wherever the scheduler puts it.

Costs measured here (2 workers x 1 thread, loopback, a loaded 2-core box): an iteration's
two chained tasks per shard plus the gather take 13-15 ms with no work in them (one task
alone: 8-9 ms), the price of the lineage above. Start workers with larger ``malloc``
thresholds in the Nanny's *pre-spawn* environment, e.g.
``distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_ = 128 MiB`` and
``MALLOC_MMAP_THRESHOLD_ = 32 MiB``: with Dask's default trim threshold (64 kB) every large
numpy temporary is a fresh ``mmap`` and the ``slice-mr`` map step on 128k points took
185 ms instead of 60 ms. The workflow's embedded clusters do this
(``workflows.cluster.MALLOC_ENVIRONMENT``).
"""
from __future__ import annotations

import functools
import itertools
import numbers
import threading
import uuid
import weakref

import numpy as np

from .base import (
    Backend,
    Pending,
    ShardGroup,
    make_shard,
    run_on_shard,
    shard_labels,
    shard_output,
)


class _Departures:
    """The scheduler's ``remove-worker`` events of the workers that hold shards, pushed to
    the shard groups placed on them.

    The scheduler publishes a worker's removal on a topic named by its address, and pushes
    it to the clients subscribed to that topic. (Its ``"all"`` topic has the removals too,
    but also an event per gather, i.e. per iteration, and a subscriber to it gets a
    ``CRITICAL`` log of the scheduler when its client closes, because the scheduler
    publishes the client's own removal there after its connection closed.)

    ``Client.subscribe_topic`` keeps one handler per topic and client, so two groups (or
    two backends) on one client cannot each subscribe: the second would silently replace the
    first. One instance per client therefore holds the subscriptions and fans the events out;
    it lives on the client itself (:meth:`of`), whose lifetime it shares, and a topic is
    unsubscribed when the last group on that worker closes. Groups are held weakly: a group
    dropped without ``close`` (a driver's warm-up chain) just stops listening.

    The handlers run in the client's event-loop thread, the groups are driven from the
    caller's thread: both sides take the lock.
    """

    _ATTRIBUTE = "_dpmmbench_departures"

    def __init__(self, client):
        self._client = client
        self._lock = threading.Lock()
        self._groups: dict[str, weakref.WeakSet] = {}  #: worker address -> groups placed on it

    @classmethod
    def of(cls, client) -> _Departures:
        """The instance of ``client`` (created on first use)."""
        feed = vars(client).get(cls._ATTRIBUTE)
        if feed is None:
            feed = cls(client)
            setattr(client, cls._ATTRIBUTE, feed)
        return feed

    def add(self, group, addresses):
        """Tell ``group`` when one of the workers ``addresses`` leaves the cluster.

        A subscription travels on the client's ordered stream to the scheduler: sent before
        the group's first task on that worker, it is in force before anything of the group
        runs there.
        """
        with self._lock:
            for address in addresses:
                groups = self._groups.get(address)
                if groups is None:
                    groups = self._groups[address] = weakref.WeakSet()
                    self._client.subscribe_topic(address, functools.partial(self._event, address))
                groups.add(group)

    def discard(self, group):
        """Stop telling ``group``; a worker's last group to go ends its subscription."""
        with self._lock:
            for address, groups in list(self._groups.items()):
                groups.discard(group)
                if not groups:
                    del self._groups[address]
                    if self._client.status in ("running", "connecting", "newly-created"):
                        self._client.unsubscribe_topic(address)

    def _event(self, address, event):
        _timestamp, msg = event
        if isinstance(msg, dict) and msg.get("action") == "remove-worker":
            with self._lock:
                groups = list(self._groups.get(address, ()))
            for group in groups:
                group._worker_left(address)


class DaskShardGroup(ShardGroup):
    """The shards of one chain on a ``distributed`` cluster (see the module docstring)."""

    def __init__(self, client, offsets, specs, workers):
        super().__init__(offsets)
        self._client = client
        self._workers = list(workers)
        self._token = uuid.uuid4().hex[:8]
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._lost = 0  #: workers that left since the last :meth:`_take_events`
        self._gone = set()  #: addresses of the workers that left while the group was open
        self._replace = False  #: a worker left: check the placement before the next task
        self._departures = _Departures.of(client)
        self._departures.add(self, set(self._workers))  # before the first task (see _Departures.add)
        self._futures = [self._task(make_shard, *spec, index=spec[0], name="shard-make") for spec in specs]

    # ---- worker loss -------------------------------------------------------------------
    def _worker_left(self, address):
        """A worker left the cluster (called from the client's event-loop thread)."""
        with self._lock:
            self._lost += 1
            self._gone.add(address)
            self._replace = True

    def _take_events(self) -> dict:
        with self._lock:
            lost, self._lost = self._lost, 0
        return {"workers_lost": lost}

    def _replace_orphans(self):
        """Prefer a surviving worker for every shard whose worker left: the group's own
        survivors, the least loaded first; if none is left, any live worker of the cluster.
        Only a preference: a shard nobody can be placed for still runs (and is replayed)
        wherever the scheduler decides."""
        with self._lock:
            gone, self._replace = set(self._gone), False
        orphans = [i for i, w in enumerate(self._workers) if w in gone]
        if not orphans:
            return
        survivors = [w for w in dict.fromkeys(self._workers) if w not in gone]
        if not survivors:  # a round trip, only after losing every worker of the group
            survivors = [w for w in sorted(self._client.scheduler_info()["workers"]) if w not in gone]
            if not survivors:
                return
            self._departures.add(self, survivors)
        load = {w: 0 for w in survivors}
        for w in self._workers:
            if w in load:
                load[w] += 1
        for i in orphans:
            target = min(survivors, key=load.__getitem__)  # ties: the first in placement order
            self._workers[i] = target
            load[target] += 1

    # ---- tasks -------------------------------------------------------------------------
    def _task(self, func, *args, index, name):
        if self._replace:
            self._replace_orphans()
        key = f"{name}-{self._token}-{index}-{next(self._counter)}"
        return self._client.submit(func, *args, key=key, workers=[self._workers[index]],
                                   allow_other_workers=True, pure=False)

    def _submit(self, index, fn, payload):
        new = self._task(run_on_shard, fn, self._futures[index], payload, index=index,
                         name=f"shard-{getattr(fn, '__name__', 'map')}")
        self._futures[index] = new
        return self._task(shard_output, new, index=index, name="shard-output")

    def _results(self, pending: list[Pending]):
        return self._client.gather([p.handle for p in pending])

    def _as_completed(self, pending: list[Pending]):
        from distributed import as_completed

        index = {p.handle.key: p.index for p in pending}
        for future, result in as_completed([p.handle for p in pending], with_results=True):
            yield index[future.key], result

    def _gather_labels(self):
        futures = [self._task(shard_labels, f, index=i, name="shard-labels") for i, f in enumerate(self._futures)]
        return self._client.gather(futures)

    def locations(self) -> list[set[str]]:
        """Addresses of the workers holding each shard's current version.

        Returns
        -------
        list of set of str
            One set per shard (empty while a lost version is being recomputed).
        """
        who = self._client.who_has(self._futures)
        return [set(who[f.key]) for f in self._futures]

    @property
    def workers(self) -> list[str]:
        """Address of the worker each shard is placed on (as a preference; after a worker
        loss, the surviving worker its shards were moved to)."""
        return list(self._workers)

    def close(self):
        """Release the shards (and with them the lineage the scheduler kept) and stop
        listening for worker losses."""
        if self._futures:
            self._client.cancel(self._futures)
        self._futures = []
        self._departures.discard(self)


class DaskBackend(Backend):
    """Shards resident on the workers of a ``distributed`` cluster.

    The backend never creates or closes a cluster: the caller owns ``client``.

    Parameters
    ----------
    client : distributed.Client
        A connected client.
    n_workers : int, optional
        Number of workers to use (the first ones by address); default all. Waits up to
        ``timeout`` seconds for them to join.
    n_shards : int, optional
        Number of shards, placed round-robin on the workers; default one per worker.
    timeout : float
        Seconds to wait for ``n_workers`` workers.
    """

    def __init__(self, client, n_workers: int | None = None, n_shards: int | None = None, timeout: float = 30.0):
        for name, value in (("n_workers", n_workers), ("n_shards", n_shards)):
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                    raise TypeError(f"{name} must be an integer, got {value!r}")
                if value < 1:
                    raise ValueError(f"{name} must be >= 1, got {value}")
        if n_workers is not None:
            try:
                client.wait_for_workers(n_workers, timeout=timeout)
            except TimeoutError:
                have = len(client.scheduler_info()["workers"])
                raise ValueError(f"n_workers = {n_workers} but the Dask cluster has {have} worker(s) "
                                 f"after waiting {timeout:g} s") from None
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:
            raise ValueError("the Dask cluster has no workers")
        self.client = client
        self.workers = workers[:n_workers] if n_workers is not None else workers
        self.n_shards = len(self.workers) if n_shards is None else int(n_shards)

    def __repr__(self):
        return f"DaskBackend(workers={len(self.workers)}, n_shards={self.n_shards})"

    def __deepcopy__(self, memo):
        # a handle to a cluster: copies of a sampler share it (e.g. the driver's warm-up copy)
        return self

    def describe(self) -> str:
        return f"dask, {len(self.workers)} worker(s), {self.n_shards} shard(s), scheduler {self.client.scheduler.address}"

    def _create(self, offsets, specs):
        placement = [self.workers[i % len(self.workers)] for i in range(len(specs))]
        return DaskShardGroup(self.client, np.asarray(offsets), specs, placement)
