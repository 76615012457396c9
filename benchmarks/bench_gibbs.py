"""One collapsed Gibbs sweep (``gibbs``), started at the true labels.

The sweep is sequential by nature; its cost is N x (occupied clusters) ``logpred`` calls plus
one rank-1 remove/add per point (see ``bench_families.NIWRankOneUpdate``).
"""
from __future__ import annotations

from . import common


class GibbsNIW:
    """Normal-inverse-Wishart, ``synth-chang2013`` (D = 2, 10 true clusters, so K = 10)."""

    params = ([10_000, 100_000],)
    param_names = ["N"]
    tiny_params = [(200,)]  # for tests/test_benchmarks.py

    def setup(self, N):
        self.chain = common.gibbs_chain(f"synth-chang2013?n={N}")

    def time_gibbs_step(self, N):
        self.chain.step()


class GibbsFamilies:
    """The other conjugate families: known isotropic covariance on ``synth-wang2017``
    (50 clusters, ~13k points at scale 0.1) and Dirichlet-multinomial on sparse documents."""

    params = (["synth-wang2017?scale=0.1",
               "synth-multinomial?n=5000&vocab=500&n_clusters=10"],)
    param_names = ["dataset"]
    tiny_params = [("synth-wang2017?scale=0.01",), ("synth-multinomial?n=100",)]

    def setup(self, dataset):
        self.chain = common.gibbs_chain(dataset)

    def time_gibbs_step(self, dataset):
        self.chain.step()
