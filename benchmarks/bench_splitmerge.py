"""One step of the split-merge samplers (``gibbs-sams``, ``gibbs-splitmerge``) during burn-in.

A step is one collapsed Gibbs sweep plus 10 split-merge moves. The moves cost a linear pass
over the one or two clusters involved (SAMS: one sequential allocation; Jain-Neal: a launch
state plus ``intermediate_scans + 1`` restricted scans), so they matter most early on, when
clusters are large: the chain is started from a single cluster and timed after a few steps.
"""
from __future__ import annotations

import copy
import dataclasses

from dpmmbench import algorithms
from dpmmbench import datasets

from . import common

#: steps taken before timing: compiles (or loads) the kernels and leaves the single-cluster
#: start, while clusters are still large
WARMUP_STEPS = 3


class SplitMergeBurnIn:
    """Normal-inverse-Wishart, ``synth-chang2013`` (D = 2, 10 true clusters), from one cluster."""

    params = (["gibbs-sams", "gibbs-splitmerge"], [10_000])
    param_names = ["algorithm", "N"]
    tiny_params = [("gibbs-sams", 200), ("gibbs-splitmerge", 200)]  # for tests/test_benchmarks.py

    def setup(self, algorithm, N):
        ds = datasets.load(f"synth-chang2013?n={N}")
        self.sampler = algorithms.make(algorithm, family=ds.family, alpha=1.0, seed=common.SEED)
        state = self.sampler.init(ds.X, init_clusters=1)
        for _ in range(WARMUP_STEPS):
            state = self.sampler.step(state)
        self.state = state

    def time_step(self, algorithm, N):
        # every call takes the same step (same partition, same random stream), so repeats
        # measure the same work instead of a chain drifting towards the posterior mode
        state = dataclasses.replace(self.state, labels=self.state.labels.copy(), rng=copy.deepcopy(self.state.rng))
        self.sampler.step(state)

    def track_clusters_at_timed_step(self, algorithm, N):
        """Number of clusters of the partition the timed step starts from."""
        return float(self.state.info["n_clusters"])

    track_clusters_at_timed_step.unit = "clusters"
