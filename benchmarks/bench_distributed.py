"""Whole iterations of the sharded samplers on a real Dask cluster: one or two worker
processes (one thread each) on this machine, loopback, on Wang & Lin's synthetic set
(``synth-wang2017``, ~128k points, 50 clusters), started at the true labels.

Everything a distributed iteration costs is in the time: the master's work, serialising and
shipping the global state to every worker, the workers' map steps on their resident shards
(in parallel with two workers), the replies and Dask's own per-task overhead. The issue's
target: with 2 workers, ``cons-prog`` and ``slice-mr`` iterations at least 1.7x faster than
with 1. ``DaskSpeedup`` measures that ratio directly, both worker counts in one run, in
alternating blocks, so the two are timed on the same machine state.
"""
from __future__ import annotations

import contextlib

import numpy as np

from . import common

_DATASETS = ["synth-wang2017"]
_ALGORITHMS = ["slice-mr", "cons-prog", "auxvar"]
#: iterations timed per worker count by DaskSpeedup (the median is kept)
SPEEDUP_ITERATIONS = 15


class DaskIteration:
    """One iteration with ``workers`` Dask workers (the chain continues across calls)."""

    params = (_DATASETS, _ALGORITHMS, [1, 2])
    param_names = ["dataset", "algorithm", "workers"]
    tiny_params = [("synth-wang2017?scale=0.01", "cons-prog", 2)]  # for tests/test_benchmarks.py
    timeout = 600

    def setup(self, dataset, algorithm, workers):
        self._stack = contextlib.ExitStack()
        self.chain = self._stack.enter_context(common.dask_chain(algorithm, dataset, workers))

    def teardown(self, dataset, algorithm, workers):
        self._stack.close()

    def time_iteration(self, dataset, algorithm, workers):
        self.chain.step()

    def track_kb_per_iteration(self, dataset, algorithm, workers):
        """Kilobytes sent plus received in one iteration (counted by serialising)."""
        info = self.chain.step().info
        return (info["bytes_sent"] + info["bytes_received"]) / 1e3

    track_kb_per_iteration.unit = "KB"


class DaskSpeedup:
    """Median iteration time with 1 worker divided by that with 2 workers."""

    params = (_DATASETS, _ALGORITHMS)
    param_names = ["dataset", "algorithm"]
    tiny_params = [("synth-wang2017?scale=0.01", "slice-mr")]  # for tests/test_benchmarks.py
    timeout = 900

    def setup(self, dataset, algorithm):
        pass

    def track_speedup_2_vs_1(self, dataset, algorithm):
        return float(speedup(dataset, algorithm, SPEEDUP_ITERATIONS))

    track_speedup_2_vs_1.unit = "x"


class MachineCeiling:
    """This machine's own ceiling for the ratio above: throughput of two single-threaded
    Dask workers computing pure arithmetic at once over one alone
    (:func:`workflows.probe.parallel_ceiling`), in the same asv run as ``DaskSpeedup``."""

    params = [SPEEDUP_ITERATIONS]
    param_names = ["reps"]
    tiny_params = [(2,)]  # for tests/test_benchmarks.py
    timeout = 300

    def setup(self, reps):
        pass

    def track_two_worker_scaling(self, reps):
        return float(ceiling(2, reps)["scaling"])

    track_two_worker_scaling.unit = "x"


def ceiling(workers: int, reps: int = SPEEDUP_ITERATIONS) -> dict:
    """:func:`workflows.probe.parallel_ceiling` on a fresh embedded cluster of ``workers``."""
    from dpmmbench.workflows.cluster import dask_client
    from dpmmbench.workflows.probe import parallel_ceiling

    with dask_client(workers=workers, threads=1) as client:
        return parallel_ceiling(client, reps=reps)


def paired_medians(dataset: str, algorithm: str, iterations: int, blocks: int = 3) -> tuple[float, float]:
    """Median wall seconds of an iteration of ``algorithm`` with 1 and with 2 workers, over
    ``iterations`` each (after the warm-up step of :func:`common.dask_chain`).

    The iterations are taken in ``blocks`` alternating blocks, each on a fresh cluster of
    that size: this machine's speed drifts by 20-40 % within a minute (a shared virtual
    machine), and alternating puts both worker counts in the same drift. (Stepping two live
    clusters in turn does too, but the idle cluster's processes then share the 2 cores.)"""
    times = {1: [], 2: []}
    for b in range(blocks):
        n = iterations * (b + 1) // blocks - iterations * b // blocks
        for workers in (1, 2):
            with common.dask_chain(algorithm, dataset, workers) as chain:
                times[workers] += common.timings(chain.step, n)
    return float(np.median(times[1])), float(np.median(times[2]))


def speedup(dataset: str, algorithm: str, iterations: int) -> float:
    """Iteration time with 1 worker over that with 2 (:func:`paired_medians`)."""
    one, two = paired_medians(dataset, algorithm, iterations)
    return one / two
