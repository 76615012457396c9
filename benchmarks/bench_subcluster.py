"""Chang & Fisher sub-cluster sampler (``subc``): one iteration on their benchmark shape
(N = 1,000,000, D = 2, K = 6), started at the true labels; the million-point 10-D set with
K = 20 of the peers' ``scale`` measurement; and the 70k x 50-D GEMM-shaped problem with K = 20. The anchor: Chang & Fisher's C++/OpenMP code ran 100 iterations of the
1M problem in 76.9 s on 1 core and 13.0 s on 8 cores (issue 3); target here < 10 s on 2 cores.
"""
from __future__ import annotations

import numpy as np

from dpmmbench import algorithms, datasets
from dpmmbench.algorithms._subcluster_clusters import Clusters
from dpmmbench.algorithms.labelstep import draw_keeping_clusters_with_sublabels

from . import common


class SubclusterStep:
    """One ``subc`` step (labels, sub-labels, statistics, splits, random merges)."""

    params = (["synth-chang2013?n=1000000&n_clusters=6", "synth-chang2013?n=1000000&n_clusters=20&dim=10",
               "blobs-70000x50-K20"],)
    param_names = ["problem"]
    tiny_params = [("synth-chang2013?n=300&n_clusters=6",)]
    timeout = 300

    def setup(self, problem):
        self.chain = common.subcluster_chain(problem)

    def time_subc_step(self, problem):
        self.chain.step()


class SubclusterGEMMRatio:
    """A ``subc`` step on the million-point 10-D set (20 clusters) against the GEMM with the
    same multiply-adds (:func:`common.same_work_gemm`), both best-of in one process, so machine
    load affects both; issue 32's goal is <= 1.5."""

    params = (["synth-chang2013?n=1000000&n_clusters=20&dim=10"],)
    param_names = ["problem"]
    tiny_params = [("synth-chang2013?n=2000&n_clusters=20&dim=10",)]
    timeout = 300

    def setup(self, problem):
        self.chain = common.subcluster_chain(problem)
        self.gemm = common.same_work_gemm(self.chain)

    def track_step_per_same_work_gemm(self, problem):
        return common.best_of(self.chain.step) / common.best_of(self.gemm.run, warmup=0)

    track_step_per_same_work_gemm.unit = "ratio"


class SubclusterMoves:
    """The master's moves that read every point's label (``subc`` in process), on one cluster of
    the million-point 2-D set at its true partition: finding its points, a restart from its
    principal axis, isolating its worst-explained point. They run between the label passes, so
    what they do not do on every thread caps the speed-up of an iteration (issue 32)."""

    params = (["synth-chang2013?n=1000000&n_clusters=6"],)
    param_names = ["problem"]
    tiny_params = [("synth-chang2013?n=300&n_clusters=6",)]
    timeout = 300

    def setup(self, problem):
        chain = common.subcluster_chain(problem)
        sampler, state = chain.sampler, chain.state
        params = sampler.family.sample_params(sampler.family.sum_pairs(state.sub_stats), np.random.default_rng(0))
        sub = sampler.family.take_stats(state.sub_stats, np.arange(len(state.sub_stats.n)))  # a copy
        self.clusters = Clusters(sampler.family, state.X, state.labels.copy(), state.sublabels.copy(), sub,
                                 state.history.copy(), state.splittable.copy(), principal=True,
                                 params=params)
        self.rng = np.random.default_rng(0)

    def time_members(self, problem):
        self.clusters.members(0)

    def time_restart(self, problem):
        self.clusters.restart(0, self.rng)

    def time_isolate(self, problem):
        self.clusters.isolate(0)


class SubclusterLabelStep:
    """``subc``'s restricted label step (labels, sub-labels and statistics, no cluster emptied)
    on Chang & Fisher's 100k set at its true partition, plus an outlier's one-point cluster whose
    point the parallel draw takes elsewhere: the step then keeps it there (before 2026-11-28 such
    a draw was discarded and every label drawn again, one iteration in three of ``subc`` on this
    set)."""

    params = (["synth-chang2013"],)
    param_names = ["problem"]
    tiny_params = [("synth-chang2013?n=300",)]

    def setup(self, problem):
        ds = datasets.load(problem)
        fam, X = ds.family, ds.X
        labels = ds.labels.copy()
        labels[np.argmax(((X - X.mean(axis=0)) ** 2).sum(axis=1))] = labels.max() + 1
        K = int(labels.max()) + 1
        self.rng = np.random.default_rng(0)
        sub = fam.stats(X, 2 * labels + self.rng.integers(0, 2, len(labels)), 2 * K)
        st, draw = algorithms.make("subc", family=fam, alpha=1.0)._draw_params(sub, self.rng, 1.0)
        self.args = (fam, X, draw.theta, draw.log_pi, draw.stheta, draw.log_spi, labels)
        self.sizes = st.n  # given, as subc's step gives them

    def time_label_step(self, problem):
        draw_keeping_clusters_with_sublabels(*self.args, self.rng, sizes=self.sizes)
