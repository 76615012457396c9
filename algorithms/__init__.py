"""DPMM inference algorithms behind one contract (see docs/design.md "Samplers").

>>> import algorithms
>>> algorithms.available()                                   # doctest: +SKIP
>>> s = algorithms.make("gibbs", family=fam, alpha=1.0, seed=0)  # doctest: +SKIP

Adding an algorithm = one module with a :class:`algorithms.base.Sampler` subclass plus one
line in ``_REGISTRY`` below.
"""
from __future__ import annotations

import importlib
from types import MappingProxyType

from .base import Sampler
from .families import DirichletMultinomial, NormalInverseWishart, NormalKnownCovariance
from .state import State

#: registry name -> "module:Class" (imported on first use)
_REGISTRY = MappingProxyType({
    "auxvar": "dpmmbench.algorithms.auxvar:AuxiliaryVariable",
    "cons-async": "dpmmbench.algorithms.consolidation:AsyncConsolidation",
    "cons-hung": "dpmmbench.algorithms.consolidation:HungarianConsolidation",
    "cons-pooled": "dpmmbench.algorithms.consolidation:PooledConsolidation",
    "cons-prog": "dpmmbench.algorithms.consolidation:ProgressiveConsolidation",
    "fsd": "dpmmbench.algorithms.fsd:FiniteSymmetricDirichlet",
    "gibbs": "dpmmbench.algorithms.gibbs:CollapsedGibbs",
    "gibbs-sams": "dpmmbench.algorithms.sams:GibbsSAMS",
    "gibbs-splitmerge": "dpmmbench.algorithms.splitmerge:GibbsSplitMerge",
    "gibbs-supercluster": "dpmmbench.algorithms.supercluster:SuperclusterGibbs",
    "search": "dpmmbench.algorithms.search:BeamSearch",
    "slice-mr": "dpmmbench.algorithms.slice_mr:SliceMapReduce",
    "subc": "dpmmbench.algorithms.subcluster:SubClusters",
    "subc-supc": "dpmmbench.algorithms.subcluster:SubClustersSuper",
    "subc-supc-approx": "dpmmbench.algorithms.subcluster:SubClustersSuperApprox",
})


def available() -> list[str]:
    """Registry names of every implemented algorithm."""
    return list(_REGISTRY)


def get(name: str) -> type[Sampler]:
    """The sampler class registered as ``name``."""
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ValueError(f"unknown algorithm {name!r}; available: {', '.join(available())}")
    module, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)


def make(name: str, family, **kwargs) -> Sampler:
    """Build the sampler ``name`` for ``family``.

    Parameters
    ----------
    name : str
        Registry name (see :func:`available`).
    family : algorithms.families.Family
        The conjugate family (the prior).
    **kwargs
        ``alpha`` (DP concentration), ``seed``, ``backend`` and the algorithm's options, as
        :class:`Sampler` takes them; the defaults and constraints of ``alpha`` and ``seed``
        are in :data:`algorithms.constraints.RUN_PARAMETERS`.

    Unknown names and options raise with the list of valid ones.
    """
    return get(name)(family, **kwargs)


__all__ = ["available", "get", "make", "Sampler", "State", "DPMM",
           "NormalInverseWishart", "NormalKnownCovariance", "DirichletMultinomial"]


def __getattr__(name):
    # the estimator imports scikit-learn (and this registry): loaded on first use
    if name == "DPMM":
        return importlib.import_module(f"{__name__}.estimator").DPMM
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
