"""DPMM inference algorithms behind one contract (see DESIGN.md "Samplers").

>>> import algorithms
>>> algorithms.available()                                   # doctest: +SKIP
>>> s = algorithms.make("gibbs", family=fam, alpha=1.0, seed=0)  # doctest: +SKIP

Adding an algorithm = one module with a :class:`algorithms.base.Sampler` subclass plus one
line in ``_REGISTRY`` below.
"""
from __future__ import annotations

import importlib
from types import MappingProxyType

from . import _numba_cache

_numba_cache.install()  # before any kernel module is imported (see _numba_cache)

from .base import Sampler, State  # noqa: E402
from .families import DirichletMultinomial, NormalInverseWishart, NormalKnownCovariance

#: registry name -> "module:Class" (imported on first use)
_REGISTRY = MappingProxyType({
    "auxvar": "algorithms.auxvar:AuxiliaryVariable",
    "cons-async": "algorithms.consolidation:AsyncConsolidation",
    "cons-hung": "algorithms.consolidation:HungarianConsolidation",
    "cons-pooled": "algorithms.consolidation:PooledConsolidation",
    "cons-prog": "algorithms.consolidation:ProgressiveConsolidation",
    "fsd": "algorithms.fsd:FiniteSymmetricDirichlet",
    "gibbs": "algorithms.gibbs:CollapsedGibbs",
    "gibbs-sams": "algorithms.sams:GibbsSAMS",
    "gibbs-splitmerge": "algorithms.splitmerge:GibbsSplitMerge",
    "gibbs-supercluster": "algorithms.supercluster:SuperclusterGibbs",
    "search": "algorithms.search:BeamSearch",
    "slice-mr": "algorithms.slice_mr:SliceMapReduce",
    "subc": "algorithms.subcluster:SubClusters",
    "subc-supc": "algorithms.subcluster:SubClustersSuper",
    "subc-supc-approx": "algorithms.subcluster:SubClustersSuperApprox",
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


def make(name: str, family, alpha: float = 1.0, seed: int = 0, backend=None, **options) -> Sampler:
    """Build the sampler ``name`` for ``family`` with concentration ``alpha`` and ``seed``.

    Unknown names and options raise with the list of valid ones.
    """
    return get(name)(family, alpha=alpha, seed=seed, backend=backend, **options)


__all__ = ["available", "get", "make", "Sampler", "State",
           "NormalInverseWishart", "NormalKnownCovariance", "DirichletMultinomial"]
