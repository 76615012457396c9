"""DPMM inference algorithms behind one contract (see docs/design.md "Samplers").

>>> import numpy as np
>>> from dpmmbench import algorithms
>>> "gibbs" in algorithms.available()
True
>>> X = np.random.default_rng(0).normal(size=(50, 2))
>>> fam = algorithms.NormalInverseWishart.default_for(X)
>>> s = algorithms.make("gibbs", family=fam, alpha=1.0, seed=0)
>>> state = s.step(s.init(X))
>>> state.labels.shape
(50,)

Adding an algorithm = one module with a :class:`~dpmmbench.algorithms.base.Sampler` subclass
plus one line in ``_REGISTRY`` (``algorithms/_registry.py``). Peers (other libraries'
methods, :mod:`dpmmbench.algorithms.peers`) are entries too; those whose library is an
optional dependency go in ``_OPTIONAL`` there and are listed only where that library is
installed. Outside this repository, a package registers its sampler class in the entry-point
group ``dpmmbench.algorithms`` (``examples/plugin/``); :func:`plugins` lists what was found.
"""
from __future__ import annotations

import importlib

from ._registry import available, get, make, missing, plugins, refused_plugins
from .base import Sampler
from .families import DirichletMultinomial, NormalInverseWishart, NormalKnownCovariance
from .state import State

__all__ = ["available", "missing", "get", "make", "plugins", "refused_plugins", "Sampler", "State", "DPMM",
           "NormalInverseWishart", "NormalKnownCovariance", "DirichletMultinomial"]


def __getattr__(name):
    # the estimator imports scikit-learn (and this registry): loaded on first use
    if name == "DPMM":
        return importlib.import_module(f"{__name__}.estimator").DPMM
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
