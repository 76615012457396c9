"""The Dask backend: shards resident on ``distributed`` workers (docs/design.md "Backends").

Each shard lives in a Dask *actor* (:class:`ShardActor`) on its worker. An iteration calls
``actor.step(fn, payload)``: one direct request to the worker and one reply with the map
function's small result. (The first version of this backend chained two scheduler tasks per
shard and step, so that the scheduler's lineage could replay a lost shard. Measured here
with no work in them, 2 workers: two chained tasks per shard plus the gather 22 ms, one task
per shard 12-14 ms, one actor call per shard 3 ms; every scheduler hop costs 3-4 ms on this
box. ``slice-mr`` spent more time in that overhead than in computing with 2 workers.)

Worker loss (checked by killing a worker mid-step, ``tests/test_faults.py``):

* *Recovery without the scheduler's lineage.* The master keeps, per shard, a *base* (the
  shard as created, or its last checkpoint) and the *log* of every ``(fn, payload)`` sent
  since. Map functions are pure (see :mod:`.base`), so a shard lost with its worker is
  rebuilt exactly on a survivor: a new actor loads the base and replays the log, then the
  step in flight is sent again. A killed run gives the labels of an uninterrupted one.
* *Bounded memory.* When a shard's log outgrows ``checkpoint_ratio`` times the size of its
  base, the master fetches the shard itself (labels, generator state, rows) as the new
  base and drops the log: the master holds at most ``1 + checkpoint_ratio`` times the data.
  The checkpoint's transfer is fault-tolerance overhead, not the algorithm's
  communication, and is not counted in ``bytes_received`` (it is in the step's time).
* *Telling a loss from an error.* A call fails with an ``OSError`` (or the actor's
  proxy refuses it) when its worker is gone; the group then waits up to ``loss_timeout``
  seconds for the scheduler's ``remove-worker`` event of that worker. Any other error, or
  no event, is the map function's own failure and is raised.
* *Reporting.* The scheduler publishes a ``remove-worker`` event when a worker leaves, on a
  topic named by the worker's address; the group subscribes to the topics of the workers it
  places shards on (:class:`_Departures`), the scheduler pushes the event to the client, and
  :meth:`ShardGroup.take_stats` reports ``workers_lost``: how many of those workers left
  the cluster since the previous call, counted once whether the event or a failed call
  told first (a worker holding nothing of the run is not an event of the run). Nothing is
  polled and the topics are silent while no worker comes or goes.
* *Placement.* Shards whose worker left are placed on the group's surviving workers, the
  least loaded first (any live worker of the cluster if none of the group's is left).
  With no worker left at all, a rebuild waits for one to join (Dask's
  ``distributed.scheduler.no-workers-timeout`` makes that an error); a Nanny usually
  restarts a killed worker, at a new address, but not always.
* *Bounded retries.* A shard whose worker is lost while it holds the shard is rebuilt and
  its step sent again at most ``retries`` times in a row (a step that succeeds resets the
  count): a step that kills its worker every time it runs (a crash in native code, the
  worker's memory limit) would otherwise take down one worker after another for ever. Then
  :class:`ShardFailedError` names the shard, its last worker and the last cause. Waiting
  for workers (the backend's ``n_workers``, a replacement after every worker of a group is
  gone, a rebuilt actor's creation) gives up after ``worker_timeout`` seconds with an error
  naming the scheduler and how many workers were expected and present. Both default to
  the Dask config keys ``dpmmbench.retries`` (2) and ``dpmmbench.worker-timeout`` (30 s),
  settable with ``dask.config.set`` or as ``DASK_DPMMBENCH__RETRIES`` /
  ``DASK_DPMMBENCH__WORKER_TIMEOUT`` in the environment.
* *A map function's own exception* is deterministic (map functions are pure) and is
  raised at once, never retried, with a note naming the shard and its worker.

Start workers with larger ``malloc`` thresholds in the Nanny's *pre-spawn* environment, e.g.
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
    Shard,
    ShardGroup,
    make_shard,
    run_on_shard,
    shard_labels,
    shard_output,
    wire_size,
)


#: Dask config keys and defaults of the retry budget and of the wait for workers (see the
#: module docstring)
RETRIES_KEY, DEFAULT_RETRIES = "dpmmbench.retries", 2
WORKER_TIMEOUT_KEY, DEFAULT_WORKER_TIMEOUT = "dpmmbench.worker-timeout", 30.0


class ShardFailedError(ConnectionError):
    """A shard could not be computed: its worker was lost on every attempt of the retry
    budget (or it could not be rebuilt). The message names the shard, the worker and the
    last cause (its type and message); the cause is also chained (``__cause__``)."""


def _configured(value, key, default):
    """``value``, or Dask config ``key`` when it is None (``default`` if unset)."""
    if value is None:
        import dask

        value = dask.config.get(key, default)
    return value


def timeout_seconds(value, name: str) -> float:
    """``value`` (seconds, or a Dask duration such as ``"30s"``, as Dask config values may
    be) as a positive float.

    Raises
    ------
    ValueError
        Not a positive duration; the message names ``name`` (e.g. the config key).
    """
    from dask.utils import parse_timedelta

    try:
        seconds = float(parse_timedelta(value, default="s"))
    except (KeyError, ValueError, TypeError, AttributeError):
        seconds = None
    if seconds is None or isinstance(value, bool) or not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"{name} must be a positive number of seconds (or a duration such as '30s'), "
                         f"got {value!r}")
    return seconds


def _cause(error) -> str:
    return f"{type(error).__name__}: {error}"


def live_workers(client) -> dict:
    """The workers the scheduler of ``client`` knows now: address -> the scheduler's record.

    Asked of the scheduler on every call. The client's ``scheduler_info`` is not safe for this:
    it returns the client's cached identity, which the client's own periodic refresh rewrites
    without the workers (``n_workers=0``), so a caller reading it just after its own refresh may
    find no worker on a full cluster (seen on a loaded machine: a shared-cluster run reserved
    none).
    """
    return client.sync(client.scheduler.identity, n_workers=-1)["workers"]


def wait_for_workers(client, n: int = 1, timeout: float | None = None, why: str = "waiting for workers"):
    """Wait until the cluster of ``client`` has ``n`` workers.

    Parameters
    ----------
    client : distributed.Client
    n : int
        Workers expected.
    timeout : float, optional
        Seconds to wait; default the Dask config ``dpmmbench.worker-timeout`` (30 s).
    why : str
        What was waiting, for the message.

    Raises
    ------
    TimeoutError
        Not ``n`` workers in time; names ``why``, the scheduler's address and the workers
        expected and present.
    """
    timeout = timeout_seconds(_configured(timeout, WORKER_TIMEOUT_KEY, DEFAULT_WORKER_TIMEOUT), WORKER_TIMEOUT_KEY)
    try:
        client.wait_for_workers(n, timeout=timeout)
    except TimeoutError:
        have = len(live_workers(client))
        raise TimeoutError(f"{why}: the Dask scheduler at {client.scheduler.address} has {have} worker(s), "
                           f"{n} expected, after waiting {timeout:g} s") from None


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


class ShardActor:
    """One shard, resident on a worker between calls (a Dask actor; see the module docstring).

    Created empty (so that the scheduler, which recomputes a lost actor's creation task,
    never replays data), then :meth:`load`-ed by the group.
    """

    def __init__(self):
        self._shard = None

    def load(self, shard: Shard, log) -> None:
        """Take ``shard`` and replay the map functions ``log`` (``(fn, payload)`` pairs) on it."""
        for fn, payload in log:
            shard = run_on_shard(fn, shard, payload)
        self._shard = shard

    def step(self, fn, payload) -> tuple:
        """Run map function ``fn``; ``(result, seconds, size)`` (:func:`shard_output`)."""
        self._shard = run_on_shard(fn, self._shard, payload)
        return shard_output(self._shard)

    def labels(self):
        """:func:`shard_labels` of the shard."""
        return shard_labels(self._shard)

    def snapshot(self) -> Shard:
        """The shard itself (a checkpoint)."""
        return self._shard


class _Call:
    """A map function sent to one shard's actor; ``outcome`` is set from the client's event
    loop when the reply (or a failure) arrives."""

    __slots__ = ("index", "fn", "payload", "outcome", "collected", "value")

    def __init__(self, index, fn, payload):
        self.index, self.fn, self.payload = index, fn, payload
        self.outcome = None  #: ("ok", shard_output triple) or ("error", exception)
        self.collected = False
        self.value = None


class DaskShardGroup(ShardGroup):
    """The shards of one chain on a ``distributed`` cluster (see the module docstring).

    Parameters
    ----------
    client : distributed.Client
    offsets : (n_shards + 1,) array
    specs : list of tuple
        ``make_shard(*spec)`` for every shard.
    workers : list of str
        Address of the worker each shard is placed on.
    checkpoint_ratio : float
        Checkpoint a shard when its log of payloads is larger than this many times its last
        base (see the module docstring).
    loss_timeout : float
        Seconds a failed call waits for its worker's removal before it counts as an error.
    retries : int
        Times in a row a shard is rebuilt and its step sent again after losing its worker,
        before :class:`ShardFailedError`.
    worker_timeout : float
        Seconds to wait for a worker to join, or for a rebuilt actor to be created.
    """

    def __init__(self, client, offsets, specs, workers, checkpoint_ratio: float = 2.0, loss_timeout: float = 30.0,
                 retries: int = DEFAULT_RETRIES, worker_timeout: float = DEFAULT_WORKER_TIMEOUT):
        super().__init__(offsets)
        self._retries = int(retries)
        self._worker_timeout = float(worker_timeout)
        self._failures = [0] * len(specs)  #: worker losses in a row of each shard's step
        self._client = client
        self._workers = list(workers)
        self._checkpoint_ratio = float(checkpoint_ratio)
        self._loss_timeout = float(loss_timeout)
        self._token = uuid.uuid4().hex[:8]
        self._counter = itertools.count()
        # the client's event-loop thread (replies, departures) and the caller's thread share it
        self._cond = threading.Condition()
        self._lost = 0  #: workers that left since the last :meth:`_take_events`
        self._gone = set()  #: addresses of the workers that left while the group was open
        self._replace = False  #: a worker left: check the placement before the next rebuild
        self._base = [make_shard(*spec) for spec in specs]  #: what each shard is rebuilt from
        self._base_size = [wire_size(b) for b in self._base]
        self._log = [[] for _ in specs]  #: (fn, payload) sent to each shard since its base
        self._log_size = [0] * len(specs)
        self._in_flight: list[_Call | None] = [None] * len(specs)
        self._creations = [None] * len(specs)  #: the actors' creation futures (they keep them alive)
        self._actors = [None] * len(specs)
        self._actor_at = [None] * len(specs)  #: worker each actor was created on
        self._departures = _Departures.of(client)
        self._departures.add(self, set(self._workers))  # before the first actor (see _Departures.add)
        self._build(range(len(specs)))

    # ---- actors --------------------------------------------------------------------------
    def _build(self, indices):
        """(Re)create the actors of shards ``indices`` on their placed workers, loaded with
        their base and every logged step but the one in flight."""
        from distributed import wait

        indices = list(indices)
        for i in indices:
            if self._creations[i] is not None:
                self._creations[i].release()
            key = f"shard-actor-{self._token}-{i}-{next(self._counter)}"
            self._creations[i] = self._client.submit(ShardActor, key=key, workers=[self._workers[i]],
                                                     allow_other_workers=False, actor=True, pure=False)
        try:
            wait([self._creations[i] for i in indices], timeout=self._worker_timeout)
        except TimeoutError:  # e.g. placed on a worker that left meanwhile
            raise TimeoutError(f"shards {indices}: actors not created within {self._worker_timeout:g} s on the "
                               f"Dask scheduler at {self._client.scheduler.address} (on workers "
                               f"{sorted({self._workers[i] for i in indices})}; "
                               f"{len(live_workers(self._client))} worker(s) present)") from None
        loads = []
        for i in indices:
            self._actors[i], self._actor_at[i] = self._creations[i].result(), self._workers[i]
            done = self._log[i][:-1] if self._in_flight[i] is not None else self._log[i]
            loads.append(self._actors[i].load(self._base[i], done))
        for future in loads:
            future.result()

    def _issue(self, call: _Call):
        """Send ``call`` to its shard's actor; the reply lands in ``call.outcome``."""
        self._in_flight[call.index] = call
        call.outcome = None
        try:
            future = self._actors[call.index].step(call.fn, call.payload)
        except RuntimeError as error:  # the proxy knows its actor's worker was lost
            self._settle(call, ("error", OSError(str(error))))
            return

        async def watch():
            try:
                outcome = ("ok", await future)
            except Exception as error:  # noqa: BLE001 - handed to the caller's thread
                outcome = ("error", error)
            self._settle(call, outcome)

        self._client.loop.add_callback(watch)

    def _settle(self, call, outcome):
        with self._cond:
            call.outcome = outcome
            self._cond.notify_all()

    def _collect(self, call: _Call) -> tuple:
        """Wait for ``call``; rebuild its shard and send it again if its worker was lost."""
        while not call.collected:
            with self._cond:
                self._cond.wait_for(lambda: call.outcome is not None)
            kind, value = call.outcome
            if kind == "error":
                self._recover(call.index, value)
                continue
            call.collected, call.value = True, value
            self._failures[call.index] = 0
            if self._in_flight[call.index] is call:
                self._in_flight[call.index] = None
                self._maybe_checkpoint(call.index)
        return call.value

    def _recover(self, index, error):
        """A call to shard ``index`` failed: if its worker left the cluster, rebuild every
        shard the group had there on a survivor and send their calls in flight again;
        otherwise raise ``error``. Bounded by the retry budget (see the module docstring)."""
        address = self._workers[index]
        if not isinstance(error, OSError):
            note = f"(raised by shard {index} on Dask worker {address})"
            if note not in getattr(error, "__notes__", ()):  # a failed call stays failed: raised again
                error.add_note(note)
            raise error
        with self._cond:
            if not self._cond.wait_for(lambda: address in self._gone, timeout=self._loss_timeout):
                error.add_note(f"(shard {index} on Dask worker {address}, which is still in the cluster)")
                raise error
        self._failures[index] += 1
        if self._failures[index] > self._retries:
            raise ShardFailedError(f"shard {index} failed: its worker was lost {self._failures[index]} times in a "
                                   f"row while running its step (retries = {self._retries}); last worker "
                                   f"{address}, cause {_cause(error)}") from error
        try:
            self._replace_orphans()
            with self._cond:
                orphans = [i for i, w in enumerate(self._actor_at) if w in self._gone]
            self._build(orphans)
        except (OSError, RuntimeError) as again:  # another loss, a timeout, a refused actor
            if isinstance(again, ShardFailedError):
                raise
            raise ShardFailedError(f"shard {index} failed: rebuilding it after losing worker {address} failed: "
                                   f"{_cause(again)} (the loss: {_cause(error)})") from again
        for i in orphans:
            if self._in_flight[i] is not None:
                self._issue(self._in_flight[i])

    def _maybe_checkpoint(self, index):
        if self._log_size[index] > self._checkpoint_ratio * self._base_size[index]:
            try:
                base = self._actors[index].snapshot().result()
            except OSError:  # lost right now: the next call rebuilds from the log
                return
            self._base[index], self._base_size[index] = base, wire_size(base)
            self._log[index], self._log_size[index] = [], 0

    # ---- worker loss -------------------------------------------------------------------
    def _worker_left(self, address):
        """A worker left the cluster (called from the client's event-loop thread)."""
        with self._cond:
            if address not in self._gone:
                self._lost += 1
                self._gone.add(address)
                self._replace = True
            self._cond.notify_all()

    def _take_events(self) -> dict:
        with self._cond:
            lost, self._lost = self._lost, 0
        return {"workers_lost": lost}

    def _replace_orphans(self):
        """Place every shard whose worker left on a surviving worker: the group's own
        survivors, the least loaded first; if none is left, any live worker of the
        cluster."""
        with self._cond:
            gone, self._replace = set(self._gone), False
        orphans = [i for i, w in enumerate(self._workers) if w in gone]
        if not orphans:
            return
        survivors = [w for w in dict.fromkeys(self._workers) if w not in gone]
        if not survivors:  # a round trip, only after losing every worker of the group
            wait_for_workers(self._client, 1, self._worker_timeout, "every worker holding shards was lost")
            survivors = [w for w in sorted(live_workers(self._client)) if w not in gone]
            self._departures.add(self, survivors)
        load = {w: 0 for w in survivors}
        for w in self._workers:
            if w in load:
                load[w] += 1
        for i in orphans:
            target = min(survivors, key=load.__getitem__)  # ties: the first in placement order
            self._workers[i] = target
            load[target] += 1

    # ---- the ShardGroup interface ------------------------------------------------------
    def _submit(self, index, fn, payload, size):
        previous = self._in_flight[index]
        if previous is not None:  # one call in flight per shard: a shard's steps stay in order
            self._collect(previous)
        self._log[index].append((fn, payload))
        self._log_size[index] += size
        call = _Call(index, fn, payload)
        self._issue(call)
        return call

    def _results(self, pending: list[Pending]):
        return [self._collect(p.handle) for p in pending]

    def _as_completed(self, pending: list[Pending]):
        waiting = list(pending)
        while waiting:
            with self._cond:
                self._cond.wait_for(lambda: any(p.handle.outcome is not None for p in waiting))
                ready = next(p for p in waiting if p.handle.outcome is not None)
            output = self._collect(ready.handle)  # a lost shard: rebuilt, sent again, waited for
            waiting.remove(ready)
            yield ready.index, output

    def _gather_labels(self):
        out = []
        for i in range(self.n_shards):
            if self._in_flight[i] is not None:
                self._collect(self._in_flight[i])
            while True:
                try:
                    out.append(self._actors[i].labels().result())
                    break
                except (OSError, RuntimeError) as error:
                    self._recover(i, error if isinstance(error, OSError) else OSError(str(error)))
        return out

    @property
    def log_bytes(self) -> list[int]:
        """Serialised size of the payloads kept to replay each shard (since its last
        checkpoint)."""
        return list(self._log_size)

    def locations(self) -> list[set[str]]:
        """Addresses of the workers holding each shard's actor.

        Returns
        -------
        list of set of str
            One set per shard.
        """
        who = self._client.who_has(self._creations)
        return [set(who[f.key]) for f in self._creations]

    @property
    def workers(self) -> list[str]:
        """Address of the worker each shard is placed on (after a worker loss, the
        surviving worker its shards were moved to)."""
        return list(self._workers)

    def close(self):
        """Release the shards' actors and stop listening for worker losses."""
        live = [f for f in self._creations if f is not None]
        if live:
            self._client.cancel(live)
        self._creations, self._actors = [], []
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
    timeout : float, optional
        Seconds to wait for ``n_workers`` workers (at least one without ``n_workers``), and
        later for a replacement worker; default the Dask config ``dpmmbench.worker-timeout``
        (30 s).
    checkpoint_ratio : float
        A shard is checkpointed when the payloads kept to replay it outgrow this many times
        its last checkpoint (see :class:`DaskShardGroup`); 0 checkpoints after every step.
    retries : int, optional
        Times in a row a shard's step is sent again after losing its worker, before
        :class:`ShardFailedError`; default the Dask config ``dpmmbench.retries`` (2).
    workers : list of str, optional
        Addresses of the ``n_workers`` workers to use (e.g. those a run reserved on a shared
        cluster); default the first ``n_workers`` by address.

    Raises
    ------
    ValueError
        Fewer than ``n_workers`` workers after ``timeout`` seconds (or none at all); the
        message names the scheduler's address and the workers expected and present.
    """

    def __init__(self, client, n_workers: int | None = None, n_shards: int | None = None,
                 timeout: float | None = None, checkpoint_ratio: float = 2.0, retries: int | None = None,
                 workers: list[str] | None = None):
        if not checkpoint_ratio >= 0:
            raise ValueError(f"checkpoint_ratio must be >= 0, got {checkpoint_ratio!r}")
        self.checkpoint_ratio = float(checkpoint_ratio)
        timeout = timeout_seconds(_configured(timeout, WORKER_TIMEOUT_KEY, DEFAULT_WORKER_TIMEOUT),
                                  f"timeout ({WORKER_TIMEOUT_KEY})")
        retries = _configured(retries, RETRIES_KEY, DEFAULT_RETRIES)
        if isinstance(retries, bool) or not isinstance(retries, numbers.Integral) or retries < 0:
            raise ValueError(f"retries ({RETRIES_KEY}) must be an integer >= 0, got {retries!r}")
        self.timeout, self.retries = timeout, int(retries)
        for name, value in (("n_workers", n_workers), ("n_shards", n_shards)):
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                    raise TypeError(f"{name} must be an integer, got {value!r}")
                if value < 1:
                    raise ValueError(f"{name} must be >= 1, got {value}")
        try:
            wait_for_workers(client, 1 if n_workers is None else n_workers, timeout, "not enough workers")
        except TimeoutError as error:
            raise ValueError(f"n_workers = {n_workers}: {error}" if n_workers is not None else str(error)) from None
        present = sorted(live_workers(client))
        if workers is not None:
            if n_workers is not None and len(workers) != n_workers or not set(workers) <= set(present):
                raise ValueError(f"workers {workers!r}: not {n_workers} workers of the Dask scheduler at "
                                 f"{client.scheduler.address} (present: {present})")
            present = list(workers)
        self.client = client
        self.workers = present[:n_workers] if n_workers is not None else present
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
        return DaskShardGroup(self.client, np.asarray(offsets), specs, placement,
                              checkpoint_ratio=self.checkpoint_ratio, retries=self.retries,
                              worker_timeout=self.timeout)
