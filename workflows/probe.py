"""The machine's own parallel ceiling: how much faster ``k`` worker processes compute than one.

A speed-up measured on Dask workers (e.g. the 2-vs-1-worker target of the sharded samplers)
means little without the speed-up the machine itself allows: on a shared virtual machine two
processes computing at once each run slower than one alone (shared caches, frequency, the
hypervisor). :func:`parallel_ceiling` measures that on the cluster's own worker processes with
a loop of pure arithmetic (no memory traffic, no communication): the best any distributed
algorithm can do there.

Example
-------
Not run by the doctests (``+SKIP``): it starts two worker processes, and its result depends on
the machine.

>>> from dpmmbench.workflows.cluster import dask_client
>>> from dpmmbench.workflows.probe import parallel_ceiling
>>> with dask_client(workers=2, threads=1) as client:          # doctest: +SKIP
...     parallel_ceiling(client)["scaling"]
1.8
"""
from __future__ import annotations

import math
import time

import numba
import numpy as np

#: iterations of the probe loop per timed repetition (~50 ms here)
PROBE_ITERATIONS = 4_000_000


# Not disk-cached: compiling this loop takes a fraction of a second once per worker, and a
# cache would need a writable directory beside the code (a read-only install has none).
@numba.njit
def _arithmetic(n):
    # a dependent chain of exp/multiply-add in registers: the time is the core's alone
    x, s = 0.5, 0.0
    for i in range(n):
        x = math.exp(-x) * 0.999 + 1e-9 * i
        s += x
    return s


def probe_seconds(reps: int, n: int = PROBE_ITERATIONS) -> list[float]:
    """Wall seconds of each of ``reps`` runs of the probe loop in this process (after one
    untimed run, which also compiles it)."""
    _arithmetic(1000)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        _arithmetic(n)
        times.append(time.perf_counter() - start)
    return times


def parallel_ceiling(client, reps: int = 15, blocks: int = 3, n: int = PROBE_ITERATIONS) -> dict:
    """Throughput of all the cluster's workers computing at once, relative to one alone.

    The probe runs ``reps`` times on the first worker alone and ``reps`` times on every
    worker at once, in ``blocks`` alternating blocks (this machine's speed drifts within a
    minute; alternating puts both in the same drift).

    Parameters
    ----------
    client : distributed.Client
        A cluster of single-threaded workers (what the distributed benchmarks use).
    reps, blocks : int
        Timed repetitions in each mode, and the number of blocks they are split into.
    n : int
        Probe loop length.

    Returns
    -------
    dict
        ``workers``; ``alone_s`` and ``together_s``: median seconds of one probe run on a
        worker alone and while every worker runs it; ``alone_runs`` and ``together_runs``:
        how many runs each median is over (``reps`` and ``reps * workers``); ``scaling`` =
        ``workers * alone_s / together_s``, the speed-up ``workers`` processes can have over
        one on this machine.
    """
    from dpmmbench.algorithms.backends.dask_backend import live_workers

    workers = sorted(live_workers(client))
    if not workers:
        raise ValueError("parallel_ceiling: the cluster has no workers")
    client.gather([client.submit(probe_seconds, 1, n, workers=[w], pure=False) for w in workers])  # compile
    alone, together = [], []
    for b in range(blocks):
        k = reps * (b + 1) // blocks - reps * b // blocks
        alone += client.submit(probe_seconds, k, n, workers=[workers[0]], pure=False).result()
        for times in client.gather([client.submit(probe_seconds, k, n, workers=[w], pure=False) for w in workers]):
            together += times
    alone_s, together_s = float(np.median(alone)), float(np.median(together))
    return dict(workers=len(workers), alone_s=alone_s, together_s=together_s,
                alone_runs=len(alone), together_runs=len(together),
                scaling=len(workers) * alone_s / together_s)


@numba.njit(parallel=True)
def _arithmetic_copies(n, copies):
    # the probe's dependent chain once per thread: bound by latency, which a sibling hardware
    # thread of the same core hides
    out = np.empty(copies)
    for c in numba.prange(copies):
        out[c] = _arithmetic(n)
    return out


@numba.njit(parallel=True)
def _throughput_copies(n, copies):
    # independent multiply-adds over an array in the core's L1, once per thread: bound by the
    # core's arithmetic units, which sibling hardware threads share (as the label kernels are)
    out = np.empty(copies)
    for c in numba.prange(copies):
        a = np.arange(512) * 1e-3
        for _ in range(n):
            for j in range(512):
                a[j] = a[j] * 0.999 + 1e-3
        out[c] = a.sum()
    return out


def thread_ceiling(threads: int, reps: int = 5, n: int = PROBE_ITERATIONS) -> dict:
    """Throughput of ``threads`` numba threads of this process computing at once, relative
    to one alone, for two kinds of work: the probe loop (a dependent chain, bound by latency)
    and independent multiply-adds in L1 (bound by the arithmetic units), once per thread in
    one parallel region (the way the label kernels use the cores), best of ``reps`` each.

    On a machine whose cores are hardware threads of fewer physical cores the two differ:
    the chain scales with the thread count, the multiply-adds with the physical cores.

    Returns
    -------
    dict
        ``threads``; ``scaling`` (the chain) and ``scaling_throughput`` (the multiply-adds):
        ``threads * alone_s / together_s`` of each, the speed-up ``threads`` threads can have
        over one here.
    """
    previous = numba.get_num_threads()
    out = {"threads": threads}
    try:
        for key, probe, length in (("scaling", _arithmetic_copies, n), ("scaling_throughput", _throughput_copies,
                                                                         n // 8)):
            timings = {}
            for t in (1, threads):
                numba.set_num_threads(t)
                probe(10, t)  # compile, start the threads
                best = math.inf
                for _ in range(reps):
                    start = time.perf_counter()
                    probe(length, t)
                    best = min(best, time.perf_counter() - start)
                timings[t] = best
            out[key] = threads * timings[1] / timings[threads]
    finally:
        numba.set_num_threads(previous)
    return out
