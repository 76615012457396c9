"""``auxvar`` (Williamson, Dubey & Xing auxiliary-variable sampler) on Wang & Lin's synthetic
set (``synth-wang2017``: 50 unit-variance 2-D clusters, the known-variance model), started at
the true labels, on the serial backend with ``workers`` shards.

An iteration is the move (every worker hands over the rows of the clusters the master sent
elsewhere), the worker step (take in the arriving rows, one collapsed Gibbs sweep at
alpha / P over the worker's points) and the master's global step (a uniformly random worker
for every cluster). The worker step of worker ``j`` sweeps whatever clusters sit on ``j``:
its cost follows the load, which is unbalanced (whole clusters on random workers).
"""
from __future__ import annotations

import math

import numpy as np

from dpmmbench import datasets
from dpmmbench.algorithms.auxvar import LocalStep, local_step, place_clusters, send_away
from dpmmbench.algorithms.backends import SerialBackend, run_on_shard
from dpmmbench.algorithms.supercluster import reassign_clusters

from . import common

_PARAMS = (["synth-wang2017"], [1, 2])
_TINY = [("synth-wang2017?scale=0.01", 2)]  # for tests/test_benchmarks.py


def _chain(dataset, workers):
    ds = datasets.load(dataset)
    return common.chain("auxvar", ds.X, ds.labels, ds.family, backend=SerialBackend(workers))


class AuxVarWorker:
    """The two map steps of worker 0 in an iteration, alone: handing over its departing
    clusters, then its local step on the rows it keeps plus those that arrive."""

    params = _PARAMS
    param_names = ["dataset", "workers"]
    tiny_params = _TINY

    def setup(self, dataset, workers):
        chain = _chain(dataset, workers)
        state = chain.state
        shards = state.shards._shards  # the serial backend's shard objects
        moved = [run_on_shard(send_away, shard, relabel) for shard, relabel in zip(shards, state.relabel)]
        incoming = tuple(m.out[0] for m in moved if m.out[0] is not None)
        self.before, self.relabel = shards[0], state.relabel[0]
        self.after = moved[0]
        self.payload = LocalStep(incoming, math.log(chain.sampler.alpha / workers), 1)
        run_on_shard(local_step, self.after, self.payload)  # JIT (or cache load) off the clock

    def time_send_away(self, dataset, workers):
        # run_on_shard leaves its input untouched: every call does the same work
        run_on_shard(send_away, self.before, self.relabel)

    def time_local_step(self, dataset, workers):
        run_on_shard(local_step, self.after, self.payload)

    def track_load(self, dataset, workers):
        """Points worker 0 sweeps in this iteration."""
        return float(len(self.after.labels) + sum(len(r.ids) for r in self.payload.incoming))

    track_load.unit = "points"


class AuxVarGlobalStep:
    """The master's global step alone: a uniformly random worker for each of the K clusters
    and the new labels that name it (docs/algorithms.md §3.3; sizes only, no data)."""

    params = _PARAMS
    param_names = ["dataset", "workers"]
    tiny_params = _TINY

    def setup(self, dataset, workers):
        chain = _chain(dataset, workers)
        self.K = int(chain.state.info["n_clusters"])
        self.rng = np.random.default_rng(common.SEED)

    def time_global_step(self, dataset, workers):
        place_clusters(reassign_clusters(self.rng, self.K, workers), workers)


class AuxVarStep:
    """One full iteration on the serial backend (move, local steps, global step, and the
    serialisation that sizes the traffic a Dask run with that many workers would have)."""

    params = _PARAMS
    param_names = ["dataset", "workers"]
    tiny_params = _TINY

    def setup(self, dataset, workers):
        self.chain = _chain(dataset, workers)

    def time_auxvar_step(self, dataset, workers):
        self.chain.step()

    def track_bytes_per_iteration(self, dataset, workers):
        """Bytes sent plus received by the warm-up step (with one worker nothing moves: only
        the cluster sizes and the empty move cross)."""
        info = self.chain.state.info
        return float(info["bytes_sent"] + info["bytes_received"])

    track_bytes_per_iteration.unit = "bytes"

    def track_load_imbalance(self, dataset, workers):
        """Max / mean points per worker in the warm-up step (1 = even; the best speed-up
        over one worker is ``workers`` divided by this)."""
        return float(self.chain.state.info["load_imbalance"])

    track_load_imbalance.unit = "max/mean"
