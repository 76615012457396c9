"""bmcc's collapsed Gibbs sampler in C (``bmcc``).

Neal's Algorithm 3 for the DP mixture of Gaussians with a Normal-Wishart component model, in
bmcc's C core; one step is one sweep (``GibbsMixtureModel.iter``). It starts from the suite's
initial partition (``init_clusters`` or given labels), as our samplers do. The suite's
``alpha`` is the DPM's, held fixed (bmcc's empirical-Bayes update of alpha is turned off); the
Wishart has ``df`` = dimension and the scale bmcc sets from the data's covariance, not the
family's prior.

bmcc draws its random numbers from the C library's process-wide ``rand()``, which nothing
seeds: ``init`` seeds it (``srand``) from the chain's generator, so a chain is reproducible
from its seed as long as no other bmcc chain steps in the same process meanwhile (the driver
runs one chain per process). It builds from source with ``CFLAGS=-fcommon pip install
--no-deps --no-build-isolation bmcc`` (docs/design.md "Peers").
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from ..families import NormalInverseWishart, NormalKnownCovariance
from ..partitions import compact
from ..state import State
from ._base import Peer

#: bmcc stores cluster ids as uint16
_MAX_CLUSTERS = np.iinfo(np.uint16).max


@dataclass
class BmccState(State):
    model: object = None  #: bmcc's ``GibbsMixtureModel``


class BmccGibbs(Peer):
    """bmcc's collapsed Gibbs sampler (registry name ``bmcc``)."""

    name = "bmcc"
    families = (NormalInverseWishart, NormalKnownCovariance)
    starts_from_partition = True

    def settings(self) -> dict:
        from importlib.metadata import version

        return {"library": f"bmcc {version('bmcc')}", "method": "collapsed Gibbs (Neal's Algorithm 3) in C, one sweep "
                "per step", "alpha": self.alpha, "alpha_update": "none (bmcc's empirical Bayes turned off)",
                "component_prior": "Normal-Wishart, df = dimension, scale = inverse data covariance / df "
                                   "(bmcc's default)",
                "initialisation": "the suite's initial partition (init_clusters or labels); C rand() seeded from "
                                  "the chain's seed"}

    def _init(self, X, labels, rng):
        import bmcc

        N, D = X.shape
        if N < 2:
            raise ValueError(f"{self.name!r} needs at least 2 points (its scale matrix is the data's covariance), "
                             f"got {N}")
        labels, K = compact(labels)
        if K > _MAX_CLUSTERS:
            raise ValueError(f"{self.name!r} holds at most {_MAX_CLUSTERS} clusters (uint16 labels), got {K}")
        # bmcc's own scale, 1/df * inverse covariance, computed here so that one-dimensional
        # data (a 0-d covariance for numpy) work too and a singular covariance is a clear error
        try:
            s_chol = np.linalg.cholesky(np.linalg.inv(np.atleast_2d(np.cov(X.T))) / D)
        except np.linalg.LinAlgError:
            raise ValueError(f"{self.name!r} needs data whose covariance is positive definite (bmcc's "
                             "Wishart scale is its inverse)") from None
        if not np.isfinite(s_chol).all():
            raise ValueError(f"{self.name!r}: the data's covariance is too large or too small to invert")
        component = bmcc.NormalWishart(df=D)
        component.get_args = lambda data: {"df": float(D), "s_chol": s_chol}
        ctypes.CDLL(None).srand(ctypes.c_uint(int(rng.integers(2**32))))
        # a thinning past any run: bmcc would otherwise keep every sweep's labels
        model = bmcc.GibbsMixtureModel(np.ascontiguousarray(X, dtype=np.float64), component_model=component,
                                       mixture_model=bmcc.DPM(alpha=self.alpha, use_eb=False),
                                       assignments=labels.astype(np.uint16), thinning=2**62)
        state = BmccState(X, labels, rng, model=model)
        state.info = {"n_clusters": K}
        return state

    def _step(self, state):
        state.model.iter(1)
        state.labels, K = compact(state.model.assignments.astype(np.int64))
        state.info = {"n_clusters": K}
        return state
