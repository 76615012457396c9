"""One step of collapsed Gibbs with super-clusters (``gibbs-supercluster``), started at the
true labels.

Each super-cluster is swept by its own thread (the compiled sweep releases the GIL), so with
``P`` super-clusters the step can use up to ``P`` cores; the speed-up is capped by the load
imbalance (max / mean points per super-cluster), because whole clusters sit on uniformly
random super-clusters. ``P = 1`` is plain collapsed Gibbs and the baseline to compare with.
"""
from __future__ import annotations

from dpmmbench import datasets

from . import common


class SuperclusterNIW:
    """Normal-inverse-Wishart, ``synth-chang2013`` (D = 2, 10 true clusters)."""

    params = ([100_000], [1, 2])
    param_names = ["N", "n_superclusters"]
    tiny_params = [(200, 2)]  # for tests/test_benchmarks.py

    def setup(self, N, n_superclusters):
        ds = datasets.load(f"synth-chang2013?n={N}")
        self.chain = common.chain("gibbs-supercluster", ds.X, ds.labels, ds.family,
                                  n_superclusters=n_superclusters)

    def time_supercluster_step(self, N, n_superclusters):
        self.chain.step()

    def track_load_imbalance(self, N, n_superclusters):
        """Max / mean points per super-cluster in the warm-up step (1 = even load; the
        best wall-clock speed-up over ``P = 1`` is ``P`` divided by this)."""
        return float(self.chain.state.info["load_imbalance"])

    track_load_imbalance.unit = "max/mean"
