"""Wang & Lin's consolidation samplers (``cons-*``) on their synthetic set (``synth-wang2017``:
50 unit-variance 2-D clusters, the known-variance model), started at the true labels on
two serial shards, so the master holds about 50 global components made of about 100
atoms (each worker's share of each cluster).

The worker step is what each Dask worker runs per cycle on its resident shard (relabel,
one collapsed sweep against the global statistics, local statistics); with ``M`` workers
each runs it on ``N / M`` points. The consolidation steps run on the master between
cycles: progressive and Hungarian consolidation of a few new local components into the
global set, and the pooled-consolidation MCMC (its tables, and the 100 steps of one
iteration). The issue's target: ``cons-prog`` with 2 workers at least 1.7x faster per
iteration than with 1 on the full set.
"""
from __future__ import annotations

import copy
import math

import numpy as np

from dpmmbench import datasets
from dpmmbench.algorithms import _consolidation_kernels as ck
from dpmmbench.algorithms.backends import SerialBackend, run_on_shard
from dpmmbench.algorithms.backends.base import make_shard, shard_seeds
from dpmmbench.algorithms.consolidation import POOLED_BATCH, worker_cycle

from . import common

_DATASETS = (["synth-wang2017"],)
_TINY = [("synth-wang2017?scale=0.01",)]  # for tests/test_benchmarks.py

#: local components that play "new" in the consolidation benchmarks (a few per worker)
N_NEW = 4


def _chain(name, dataset, **options):
    ds = datasets.load(dataset)
    return common.chain(name, ds.X, ds.labels, ds.family, backend=SerialBackend(2), **options)


def _with_new_components(chain):
    """A copy of the chain's master state in which worker 1's first ``N_NEW`` atoms are new
    (unconsolidated) local components: what the master holds right before consolidating."""
    state = copy.copy(chain.state)
    state.atoms = copy.deepcopy(chain.state.atoms)
    a = state.atoms
    new = np.flatnonzero(a.worker == 1)[:N_NEW]
    a.gid[new] = -1
    state.rng = np.random.default_rng(common.SEED)
    return state


class ConsWorkerStep:
    """The worker's cycle alone, on the whole set as one shard, with the payload the master
    sends after a step at the true labels."""

    params = _DATASETS
    param_names = ["dataset"]
    tiny_params = _TINY

    def setup(self, dataset):
        ds = datasets.load(dataset)
        chain = common.chain("cons-prog", ds.X, ds.labels, ds.family, backend=SerialBackend(1))
        [(self.payload, _)] = chain.sampler._payloads(chain.state, [0])
        local = chain.state.shards.gather_labels()
        self.shard = make_shard(0, 0, chain.state.X, local, shard_seeds(common.SEED, 1)[0], {"family": ds.family})
        run_on_shard(worker_cycle, self.shard, self.payload)  # JIT (or cache load) off the clock

    def time_worker_cycle(self, dataset):
        # run_on_shard leaves its input untouched: every call does the same work
        run_on_shard(worker_cycle, self.shard, self.payload)

    def track_global_components(self, dataset):
        """Global components in the payload."""
        return float(len(self.payload.stats.n))

    track_global_components.unit = "components"


class ConsConsolidationStep:
    """The master's consolidation of ``N_NEW`` new local components into about 50 global
    components: progressive (Wang & Lin's Algorithm 1) and Hungarian matching."""

    params = _DATASETS
    param_names = ["dataset"]
    tiny_params = _TINY

    def setup(self, dataset):
        self.prog = _chain("cons-prog", dataset)
        self.hung = _chain("cons-hung", dataset)
        self.time_progressive(dataset)
        self.time_hungarian(dataset)

    def time_progressive(self, dataset):
        self.prog.sampler._consolidate(_with_new_components(self.prog), 1)

    def time_hungarian(self, dataset):
        self.hung.sampler._consolidate(_with_new_components(self.hung), 1)

    def track_global_components(self, dataset):
        """Global components the new ones are weighed against."""
        return float(len(np.unique(self.prog.state.atoms.gid)))

    track_global_components.unit = "components"


class ConsPooledStep:
    """Pooled consolidation over about 100 atoms in about 50 groups: the merge and split
    tables (built once per iteration) and one iteration's 100 MCMC steps, tables included."""

    params = _DATASETS
    param_names = ["dataset"]
    tiny_params = _TINY

    def setup(self, dataset):
        self.chain = _chain("cons-pooled", dataset)
        a = self.chain.state.atoms
        gids, index, _ = a.groups()
        self.rows, self.labels, self.G = a.rows, index, len(gids)
        self.ws = ck.workspace(self.rows)
        self.model, self.log_alpha = self.chain.sampler.model, math.log(self.chain.state.alpha)
        self.time_tables(dataset)
        self.time_mcmc_100_steps(dataset)

    def time_tables(self, dataset):
        ck.build_tables(self.model, self.log_alpha, self.rows, self.labels, self.G, self.ws)

    def time_mcmc_100_steps(self, dataset):
        ck.pooled_mcmc(self.model, self.log_alpha, self.rows, self.labels.copy(), self.G, 100,
                       np.random.default_rng(common.SEED), self.ws)

    def track_atoms(self, dataset):
        """Atoms the MCMC groups."""
        return float(len(self.rows))

    track_atoms.unit = "atoms"


class ConsStep:
    """One full ``cons-prog`` and ``cons-pooled`` iteration on two serial shards: both
    workers' cycles, consolidation, and the serialisation that sizes the traffic of a
    2-worker Dask run."""

    params = _DATASETS
    param_names = ["dataset"]
    tiny_params = _TINY

    def setup(self, dataset):
        self.prog = _chain("cons-prog", dataset)
        self.pooled = _chain("cons-pooled", dataset)

    def time_cons_prog_step(self, dataset):
        self.prog.step()

    def time_cons_pooled_step(self, dataset):
        self.pooled.step()

    def track_bytes_per_iteration(self, dataset):
        """Bytes sent plus received by the warm-up step of ``cons-prog`` (2 workers)."""
        info = self.prog.state.info
        return float(info["bytes_sent"] + info["bytes_received"])

    track_bytes_per_iteration.unit = "bytes"


class ConsMasterSixteenWorkers:
    """The master's own work in one iteration with 16 workers, the serial part that grows
    with the workers: the 16 payloads (one grouping of the ~650 atoms), and one
    ``cons-async`` batch of pooled steps over those atoms (its tables rebuilt, then
    :data:`~dpmmbench.algorithms.consolidation.POOLED_BATCH` steps; an iteration makes
    ``mcmc_steps / POOLED_BATCH`` such batches)."""

    params = _DATASETS
    param_names = ["dataset"]
    tiny_params = _TINY

    def setup(self, dataset):
        ds = datasets.load(dataset)
        self.chain = common.chain("cons-async", ds.X, ds.labels, ds.family, backend=SerialBackend(16))
        self.time_payloads(dataset)
        self.time_pooled_batch(dataset)

    def time_payloads(self, dataset):
        self.chain.sampler._payloads(self.chain.state, range(16))

    def time_pooled_batch(self, dataset):
        # the state moves on as in a chain: every call starts from the last grouping
        self.chain.sampler._pooled(self.chain.state, POOLED_BATCH)

    def track_atoms(self, dataset):
        """Atoms the master holds."""
        return float(len(self.chain.state.atoms.gid))

    track_atoms.unit = "atoms"
