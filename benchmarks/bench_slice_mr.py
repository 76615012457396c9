"""``slice-mr`` (Ge et al. map-reduce slice sampler) on Wang & Lin's synthetic set
(``synth-wang2017``: 50 unit-variance 2-D clusters, the known-variance model), started at
the true labels, on the serial backend with one shard.

The map step is what each Dask worker runs per iteration on its resident shard (relabel,
slices, every label among the components above its slice, per-component statistics); with
``M`` workers each runs it on ``N / M`` points. The issue's target: 2 workers at least 1.7x
faster per iteration than 1 on the full set.
"""
from __future__ import annotations

from dpmmbench import datasets
from dpmmbench.algorithms.backends import SerialBackend, run_on_shard
from dpmmbench.algorithms.backends.base import make_shard, shard_seeds
from dpmmbench.algorithms.slice_mr import slice_map

from . import common

_DATASETS = (["synth-wang2017"],)
_TINY = [("synth-wang2017?scale=0.01",)]  # for tests/test_benchmarks.py


class SliceMRMapStep:
    """The worker step alone, on the whole set as one shard, with the payload the master
    broadcasts after a step at the true labels (about 50 occupied components plus the new
    ones the slices need)."""

    params = _DATASETS
    param_names = ["dataset"]
    tiny_params = _TINY

    def setup(self, dataset):
        ds = datasets.load(dataset)
        chain = common.chain("slice-mr", ds.X, ds.labels, ds.family)
        self.payload, _ = chain.sampler.reduce(chain.state.shard_stats, chain.state.rng, chain.state.alpha)
        self.shard = make_shard(0, 0, chain.state.X, chain.state.labels, shard_seeds(common.SEED, 1)[0],
                                {"family": ds.family})
        run_on_shard(slice_map, self.shard, self.payload)  # JIT (or cache load) off the clock

    def time_map_step(self, dataset):
        # run_on_shard leaves its input untouched: every call does the same work
        run_on_shard(slice_map, self.shard, self.payload)

    def track_components(self, dataset):
        """Components in the payload (occupied + new from the prior)."""
        return float(len(self.payload.log_w))

    track_components.unit = "components"


class SliceMRStep:
    """One full iteration on the serial backend: the master's reduce, the map, and the
    serialisation that sizes the traffic a 1-worker Dask run would have."""

    params = _DATASETS
    param_names = ["dataset"]
    tiny_params = _TINY

    def setup(self, dataset):
        ds = datasets.load(dataset)
        self.chain = common.chain("slice-mr", ds.X, ds.labels, ds.family, backend=SerialBackend(1))

    def time_slice_mr_step(self, dataset):
        self.chain.step()

    def track_bytes_per_iteration(self, dataset):
        """Bytes sent plus received by the warm-up step (1 shard)."""
        info = self.chain.state.info
        return float(info["bytes_sent"] + info["bytes_received"])

    track_bytes_per_iteration.unit = "bytes"
