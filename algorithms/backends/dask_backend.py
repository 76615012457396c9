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

Costs measured here (2 workers x 1 thread, loopback, a loaded 2-core box): an iteration's
two chained tasks per shard plus the gather take 13-15 ms with no work in them (one task
alone: 8-9 ms), the price of the lineage above. Start workers with larger ``malloc``
thresholds in the Nanny's *pre-spawn* environment, e.g.
``distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_ = 128 MiB`` and
``MALLOC_MMAP_THRESHOLD_ = 32 MiB``: with Dask's default trim threshold (64 kB) every large
numpy temporary is a fresh ``mmap`` and the ``slice-mr`` map step on 128k points took
185 ms instead of 60 ms.
"""
from __future__ import annotations

import itertools
import numbers
import uuid

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


class DaskShardGroup(ShardGroup):
    def __init__(self, client, offsets, futures, workers):
        super().__init__(offsets)
        self._client = client
        self._futures = futures
        self._workers = workers
        self._token = uuid.uuid4().hex[:8]
        self._counter = itertools.count()

    def _task(self, func, *args, index, name):
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
        """Addresses of the workers holding each shard's current version."""
        who = self._client.who_has(self._futures)
        return [set(who[f.key]) for f in self._futures]

    @property
    def workers(self) -> list[str]:
        """Address of the worker each shard is placed on."""
        return list(self._workers)

    def close(self):
        if self._futures:
            self._client.cancel(self._futures)
        self._futures = []


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
        token = uuid.uuid4().hex[:8]
        futures = [self.client.submit(make_shard, *spec, key=f"shard-make-{token}-{spec[0]}", workers=[w],
                                      allow_other_workers=True, pure=False)
                   for spec, w in zip(specs, placement)]
        return DaskShardGroup(self.client, np.asarray(offsets), futures, placement)
