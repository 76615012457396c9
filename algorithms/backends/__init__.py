"""Execution backends for sharded samplers (docs/design.md "Execution model").

The data are split into contiguous shards that stay where they were created; each iteration
the master sends every shard the small global state and a pure map function turns it into
sufficient statistics. Two implementations with one interface:

* :class:`SerialBackend` -- shards are local objects (tests, exactness checks, 1 worker);
* :class:`DaskBackend` -- shards resident on ``distributed`` workers, created by tasks.

Samplers receive a backend (``algorithms.make(name, ..., backend=...)``) and never create
clusters. Communication is counted by serialising what crosses the wire (see
:mod:`dpmmbench.algorithms.backends.base`).

>>> from dpmmbench.algorithms.backends import SerialBackend
>>> SerialBackend(2).n_shards
2
"""
from __future__ import annotations

from ..constraints import RUN_DEFAULTS
from .base import (
    Backend,
    Shard,
    ShardedState,
    ShardGroup,
    run_on_shard,
    split_offsets,
    wire_size,
)
from .dask_backend import DaskBackend
from .serial import SerialBackend


def make_backend(workers: int = RUN_DEFAULTS["workers"], client=None) -> Backend:
    """The backend of a run with ``workers`` workers.

    Parameters
    ----------
    workers : int
        Number of workers (>= 1); one shard per worker.
    client : distributed.Client, optional
        A connected client. Without one, the shards are computed in-process
        (:class:`SerialBackend` with ``workers`` shards: the same labels and traffic counts
        as a Dask run with that many workers, without the parallelism).

    Returns
    -------
    Backend
    """
    if client is None:
        return SerialBackend(workers)
    return DaskBackend(client, n_workers=workers)


__all__ = ["Backend", "DaskBackend", "SerialBackend", "Shard", "ShardGroup", "ShardedState", "make_backend",
           "run_on_shard", "split_offsets", "wire_size"]
