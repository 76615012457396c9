"""The execution-layer contract shared by the serial and the Dask backends.

A sharded sampler splits the data into contiguous blocks ("shards"). Each shard holds its rows
of ``X``, the labels of those rows and its own random generator, and stays where it was
created for the whole run. One iteration sends every shard the small global state (a
*payload*) and runs a pure *map function* on it; the function updates the shard's labels and
generator and returns a small *result* (counts and sufficient statistics) to the master.

Map functions have the signature ``fn(shard, payload) -> result``. They receive a private
copy of the shard's mutable part (labels, generator; the rows of ``X`` are shared and
read-only) and may update it in place. The shard they were given is never modified, so a
step can be re-run from its input and gives the same result; this is what lets the Dask
backend rebuild a lost shard by replaying its steps.

Communication is counted at the algorithm level, by serialising what crosses the wire:
every payload (with the reference to its map function) once per shard it is sent to, every
result once, one message each way per shard and iteration, and at creation the rows, labels
and seed of every shard. Sizes are those of pickle protocol 5 with out-of-band buffers, which
is how ``distributed`` ships task arguments (:func:`wire_size`); protocol framing is not
included. Gathering the labels for scoring is instrumentation, not part of an algorithm, and
is not counted; nor is the compute time each map function reports with its result (a float
per message, :meth:`ShardGroup.take_stats`).
"""
from __future__ import annotations

import io
import pickle
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from ..state import State


class _SizingPickler(pickle.Pickler):
    """Pickles arrays of numpy's built-in dtypes with the canonical dtype object.

    Pickle shares one copy of an object among its references, and numpy dtypes are objects:
    a freshly made float64 array has numpy's own float64 dtype, one that came out of a
    deserialisation has a private (equal) copy. Without this, the same data would be counted
    a few dozen bytes larger once they have crossed the wire (as rows relayed by the master
    have), so the two backends would count the same payload differently.
    """

    def reducer_override(self, obj):
        if type(obj) is np.ndarray:
            canonical = np.dtype(obj.dtype.str)
            if obj.dtype is not canonical and canonical.isbuiltin == 1 and canonical == obj.dtype:
                return obj.view(canonical).__reduce_ex__(5)
        return NotImplemented


def wire_size(obj) -> int:
    """Bytes ``obj`` occupies when serialised to cross the wire.

    Pickle protocol 5 with out-of-band buffers: the pickle stream plus the raw bytes of
    every buffer (numpy arrays travel as such buffers). This is what
    ``distributed.protocol.pickle.dumps`` produces for plain data such as arrays, numbers
    and NamedTuples made where they are sent from; the size depends on the data only, not
    on where their dtype objects came from (see :class:`_SizingPickler`).

    Parameters
    ----------
    obj : object
        Anything picklable.

    Returns
    -------
    int
    """
    buffers = []
    stream = io.BytesIO()
    _SizingPickler(stream, protocol=5, buffer_callback=buffers.append).dump(obj)
    return stream.tell() + sum(b.raw().nbytes for b in buffers)


def split_offsets(n_points: int, n_shards: int) -> np.ndarray:
    """Start of each contiguous shard and the end, ``(n_shards + 1,)``: sizes differ by at
    most one point (the first ``n_points % n_shards`` shards get the extra ones)."""
    return np.array([i * n_points // n_shards for i in range(n_shards + 1)], dtype=np.int64)


def shard_seeds(seed: int, n_shards: int) -> list[np.random.SeedSequence]:
    """One independent seed sequence per shard, spawned from the run's seed.

    The master's generator is ``default_rng(seed)`` itself; spawned children are independent
    of it, so the whole run is reproducible from ``(seed, n_shards)``.
    """
    return np.random.SeedSequence(seed).spawn(n_shards)


@dataclass(eq=False)
class Shard:
    """One block of contiguous rows and the chain's state on it.

    Attributes
    ----------
    index : position of the shard (0 .. n_shards - 1)
    offset : row of ``X`` where the shard starts
    X : the shard's rows (read-only; shared by every version of the shard)
    labels : (n,) int64 labels of the rows
    rng : the shard's own generator
    static : per-run constants the map functions read (e.g. ``{"family": family}``)
    out : the result of the last map function
    elapsed : seconds the last map function computed (wall clock, where it ran)
    ids : global index (row of the original ``X``) of every row, once rows have moved between
        shards; ``None`` while the shard still holds its block ``offset, offset + 1, ...``.
        A map function that moves rows replaces ``X``, ``labels`` and ``ids`` together (new
        arrays: the old version of the shard must stay intact)
    """

    index: int
    offset: int
    X: Any
    labels: np.ndarray
    rng: np.random.Generator
    static: Any
    out: Any = None
    ids: Any = None
    elapsed: float = 0.0


def make_shard(index: int, offset: int, X, labels, seed: np.random.SeedSequence, static) -> Shard:
    """Create a shard (runs where the shard will live; on Dask, as a task)."""
    return Shard(index, offset, X, np.array(labels, dtype=np.int64), np.random.default_rng(seed), static)


def _copy_generator(rng: np.random.Generator) -> np.random.Generator:
    bit_generator = type(rng.bit_generator)()
    bit_generator.state = rng.bit_generator.state
    return np.random.Generator(bit_generator)


def run_on_shard(fn: Callable, shard: Shard, payload) -> Shard:
    """The next version of ``shard`` after map function ``fn``; ``shard`` itself is untouched."""
    new = Shard(shard.index, shard.offset, shard.X, shard.labels.copy(), _copy_generator(shard.rng), shard.static,
                ids=shard.ids)
    timed_call(fn, new, payload)
    return new


def timed_call(fn: Callable, shard: Shard, payload):
    """``shard.out = fn(shard, payload)``, with the seconds it took in ``shard.elapsed``."""
    start = time.perf_counter()
    shard.out = fn(shard, payload)
    shard.elapsed = time.perf_counter() - start
    return shard.out


def shard_output(shard: Shard) -> tuple:
    """``(result, seconds, size)`` of the last map function run on ``shard``: the result, the
    seconds it took and its :func:`wire_size`, measured where the shard is (on a Dask worker,
    in parallel with the other shards, not on the master, which pays every message already)."""
    return shard.out, shard.elapsed, wire_size(shard.out)


def shard_labels(shard: Shard):
    """The shard's labels; once its rows have moved between shards, ``(ids, labels)``."""
    return shard.labels if shard.ids is None else (shard.ids, shard.labels)


class Comm:
    """Running totals of the communication of one shard group."""

    __slots__ = ("bytes_received", "bytes_sent", "messages")

    def __init__(self):
        self.bytes_sent = self.bytes_received = self.messages = 0

    def as_dict(self) -> dict:
        return {"bytes_sent": self.bytes_sent, "bytes_received": self.bytes_received, "messages": self.messages}


@dataclass(frozen=True)
class Pending:
    """A map function submitted to one shard; ``handle`` is backend-specific."""

    index: int
    handle: Any


#: the per-step columns :meth:`ShardGroup.take_stats` reports beside the communication counts;
#: a sampler that reports them declares them (``info_columns = {**SHARD_INFO_COLUMNS, ...}``)
SHARD_INFO_COLUMNS = MappingProxyType({
    "compute_s": "seconds the shards' map functions computed in this step, summed over the shards",
    "compute_max_s": "the largest of the shards' compute seconds in this step (a synchronous step's critical path)",
    "workers_lost": "workers holding shards of this run that left the cluster during this step",
})


class ShardGroup(ABC):
    """The resident shards of one chain and the operations on them.

    The synchronous schedule is :meth:`map` (a barrier). :meth:`submit` plus
    :meth:`as_completed` are the pieces an asynchronous schedule is built from: a shard's
    successive map functions run in submission order, whatever the others do.
    """

    def __init__(self, offsets: np.ndarray):
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self._comm = Comm()
        self._compute = np.zeros(self.n_shards)
        self._labels = None

    @property
    def n_shards(self) -> int:
        return len(self.offsets) - 1

    @property
    def sizes(self) -> np.ndarray:
        """Number of points of every shard as created (rows may move later, see ``Shard.ids``)."""
        return np.diff(self.offsets)

    # ---- communication counters ------------------------------------------------------
    def _count_sent(self, n_bytes: int, messages: int = 1):
        self._comm.bytes_sent += int(n_bytes)
        self._comm.messages += messages

    def _count_received(self, n_bytes: int, messages: int = 1):
        self._comm.bytes_received += int(n_bytes)
        self._comm.messages += messages

    def take_comm(self) -> dict:
        """``{"bytes_sent", "bytes_received", "messages"}`` since the last call; resets them."""
        out = self._comm.as_dict()
        self._comm = Comm()
        return out

    def _received(self, index: int, output: tuple):
        result, seconds, size = output
        self._count_received(size)
        self._compute[index] += seconds
        return result

    def take_stats(self) -> dict:
        """What a sharded sampler reports per step in ``state.info``, since the last call
        (resets it): the communication of :meth:`take_comm`; ``compute_s``, the seconds the
        map functions computed, summed over shards; ``compute_max_s``, the largest of the
        shards' sums (the critical path of a synchronous step); and the backend's events
        (``workers_lost``: workers holding shards of this group that left the cluster)."""
        compute, self._compute = self._compute, np.zeros(self.n_shards)
        return {**self.take_comm(), "compute_s": float(compute.sum()), "compute_max_s": float(compute.max(initial=0.0)),
                **self._take_events()}

    def _take_events(self) -> dict:
        return {"workers_lost": 0}

    # ---- the map -----------------------------------------------------------------------
    def submit(self, index: int, fn: Callable, payload, size: int | None = None) -> Pending:
        """Run ``fn(shard, payload)`` on shard ``index`` (in the background on Dask, right
        away in-process); collect the result with :meth:`results` or :meth:`as_completed`.

        ``size`` is the serialised size of ``(fn, payload)`` when the caller already knows it
        (a broadcast sends the same payload to every shard).
        """
        if not 0 <= index < self.n_shards:
            raise ValueError(f"shard index must be in 0..{self.n_shards - 1}, got {index}")
        size = wire_size((fn, payload)) if size is None else size
        self._count_sent(size)
        self._labels = None
        return Pending(index, self._submit(index, fn, payload, size))

    def results(self, pending: list[Pending]) -> list:
        """Wait for every submitted map function; their results in the order given."""
        return [self._received(p.index, output) for p, output in zip(pending, self._results(pending))]

    def as_completed(self, pending: list[Pending]) -> Iterator[tuple[int, Any]]:
        """``(shard index, result)`` of each submitted map function as soon as it finishes."""
        for index, output in self._as_completed(pending):
            yield index, self._received(index, output)

    def map(self, fn: Callable, payload) -> list:
        """Synchronous step: ``fn(shard, payload)`` on every shard; results in shard order."""
        size = wire_size((fn, payload))
        return self.results([self.submit(i, fn, payload, size) for i in range(self.n_shards)])

    def gather_labels(self) -> np.ndarray:
        """The full (N,) label vector in the original order of the points (cached until the
        next map; not counted as communication)."""
        if self._labels is None:
            parts = self._gather_labels()
            if any(isinstance(p, tuple) for p in parts):
                self._labels = self._place_moved_rows(parts)
            else:
                self._labels = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
        return self._labels

    def _place_moved_rows(self, parts) -> np.ndarray:
        """Labels of shards whose rows have moved (``(ids, labels)`` parts; a plain part is
        a shard that still holds its own block), each put at its point's position. Every
        point must be on exactly one shard: a lost or duplicated row is an error, never a
        silently wrong partition."""
        ids, labels = [], []
        for i, part in enumerate(parts):
            if isinstance(part, tuple):
                ids.append(np.asarray(part[0], dtype=np.int64))
                labels.append(part[1])
            else:
                ids.append(np.arange(self.offsets[i], self.offsets[i] + len(part)))
                labels.append(part)
        ids = np.concatenate(ids)
        N = int(self.offsets[-1])
        held = np.bincount(ids, minlength=N)
        if ids.size != N or len(held) != N or held.max(initial=1) > 1:
            raise RuntimeError(f"the shards hold {ids.size} rows for {N} points ({int((held[:N] == 0).sum())} "
                               f"missing, {int((held > 1).sum())} duplicated, {int(held[N:].sum())} unknown)")
        out = np.empty(N, dtype=np.int64)
        out[ids] = np.concatenate(labels)
        return out

    def close(self):
        """Release the shards."""

    # ---- what each backend implements --------------------------------------------------
    @abstractmethod
    def _submit(self, index: int, fn: Callable, payload, size: int):
        """Start ``fn(shard, payload)`` on shard ``index``; ``size`` is the serialised size of
        ``(fn, payload)``. Returns the backend's handle."""

    @abstractmethod
    def _results(self, pending: list[Pending]) -> list[tuple]:
        """The :func:`shard_output` triple of every pending map, in the order given."""

    @abstractmethod
    def _as_completed(self, pending: list[Pending]) -> Iterator[tuple[int, tuple]]:
        """``(shard index, shard_output triple)`` as each pending map finishes."""

    @abstractmethod
    def _gather_labels(self) -> list[np.ndarray]:
        ...


class Backend(ABC):
    """Where the shards of a sampler live and its map functions run.

    A backend is a handle to execution resources, shared by every chain built on it (a
    copy of a sampler shares its backend). Each chain gets its own :class:`ShardGroup`.
    """

    n_shards: int

    def distribute(self, X, labels, seed: int, static=None, n_points: int | None = None) -> ShardGroup:
        """Split ``X`` and ``labels`` into contiguous shards and create them.

        Parameters
        ----------
        X : (N, D) array or CSR matrix
            Validated data; shard ``i`` gets rows ``offsets[i]:offsets[i+1]``.
        labels : (N,) int array
            Initial labels.
        seed : int
            The run's seed; shard generators are spawned from it (:func:`shard_seeds`).
        static : object, optional
            Per-run constants every map function may read (``shard.static``).
        n_points : int, optional
            N, if ``len(X)`` is not it.

        Returns
        -------
        ShardGroup
            Its communication counters hold the cost of creating the shards.
        """
        N = X.shape[0] if n_points is None else n_points
        labels = np.asarray(labels, dtype=np.int64)
        if labels.shape != (N,):
            raise ValueError(f"labels must have shape ({N},), got {labels.shape}")
        offsets = split_offsets(N, self.n_shards)
        seeds = shard_seeds(seed, self.n_shards)
        specs = [(i, int(offsets[i]), X[offsets[i]:offsets[i + 1]], labels[offsets[i]:offsets[i + 1]], seeds[i],
                  static) for i in range(self.n_shards)]
        group = self._create(offsets, specs)
        for spec in specs:
            group._count_sent(wire_size((make_shard,) + spec))
        return group

    @abstractmethod
    def _create(self, offsets: np.ndarray, specs: list[tuple]) -> ShardGroup:
        """Create one shard per ``make_shard(*spec)``."""

    def describe(self) -> str:
        return repr(self)


class ShardedState(State):
    """State of a sampler whose labels live on shards.

    ``labels`` gathers them from the shards on first access after a step: the driver reads
    them only to score, between steps and off the sampler's clock, so the gather is never
    part of an iteration's time or traffic.
    """

    def __init__(self, X, shards: ShardGroup, rng: np.random.Generator, iteration: int = 0, info=None,
                 alpha: float = float("nan")):
        self.X = X
        self.shards = shards
        self.rng = rng
        self.iteration = iteration
        self.info = {} if info is None else info
        self.alpha = alpha

    @property
    def labels(self) -> np.ndarray:
        return self.shards.gather_labels()
