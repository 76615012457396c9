"""The in-process backend: shards are plain local objects, map functions run one after the
other in the calling thread. Used by tests, the exactness harness and 1-worker runs."""
from __future__ import annotations

import numbers

import numpy as np

from .base import Backend, Pending, ShardGroup, make_shard, shard_labels, shard_output, timed_call


class SerialShardGroup(ShardGroup):
    def __init__(self, offsets, shards):
        super().__init__(offsets)
        self._shards = shards

    def _submit(self, index, fn, payload, size):
        # in place: nothing in-process ever replays a step, so the copy that keeps
        # ``run_on_shard`` pure (for the Dask backend's replays) would only cost time; the map function
        # sees the same shard contents and draws the same numbers either way
        shard = self._shards[index]
        timed_call(fn, shard, payload)
        return shard_output(shard)

    def _results(self, pending: list[Pending]):
        return [p.handle for p in pending]

    def _as_completed(self, pending: list[Pending]):
        for p in pending:
            yield p.index, p.handle

    def _gather_labels(self):
        return [shard_labels(s) for s in self._shards]

    def close(self):
        self._shards = []


class SerialBackend(Backend):
    """Shards in this process, computed one after the other.

    Communication is counted exactly as the Dask backend counts it (the same payloads and
    results are serialised and sized, as if every shard were on its own worker), so traces
    of a serial run and of a Dask run with the same number of shards are comparable; with
    the same seed they are identical, labels included.

    Parameters
    ----------
    n_shards : int
        Number of shards (>= 1).
    """

    def __init__(self, n_shards: int = 1):
        if isinstance(n_shards, bool) or not isinstance(n_shards, numbers.Integral):
            raise TypeError(f"n_shards must be an integer, got {n_shards!r}")
        if n_shards < 1:
            raise ValueError(f"n_shards must be >= 1, got {n_shards}")
        self.n_shards = int(n_shards)

    def __repr__(self):
        return f"SerialBackend(n_shards={self.n_shards})"

    def describe(self) -> str:
        return f"serial in-process, {self.n_shards} shard(s)"

    def _create(self, offsets, specs):
        return SerialShardGroup(np.asarray(offsets), [make_shard(*spec) for spec in specs])
