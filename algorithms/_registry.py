"""The registry of algorithms: name -> sampler class, imported on first use.

The built-ins are listed here; installed plugins add theirs through the entry-point group
``dpmmbench.algorithms`` (:mod:`.plugin_discovery`, docs/design.md "Plugins"). The package's
``__init__`` re-exports :func:`available`, :func:`missing`, :func:`get`, :func:`make`,
:func:`plugins` and :func:`refused_plugins`; modules of the package that need the registry (the exactness check, the
estimator) import it from here, never from the package's ``__init__``.

>>> from dpmmbench.algorithms import available, get
>>> "gibbs" in available()
True
>>> get("gibbs").exact
True
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
from types import MappingProxyType

from . import plugin_discovery
from .base import Sampler
from .families import Family

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
    # peers (docs/design.md "Peers")
    "sklearn-bgm": "dpmmbench.algorithms.peers.sklearn_bgm:SklearnBGM",
})

#: optional peers: registry name -> ("module:Class", the library's import name, how to install it)
_OPTIONAL = MappingProxyType({
    "bnpy-memovb": ("dpmmbench.algorithms.peers.bnpy_memovb:BnpyMemoVB", "bnpy",
                    "install it with pip install -e '.[peers]' && pip install --no-deps bnpy==0.1.7 "
                    "(bnpy pins a joblib that no longer installs; docs/design.md \"Peers\")"),
    "dpgmm": ("dpmmbench.algorithms.peers.dpgmm_gibbs:DpgmmGibbs", "dpgmm",
              "install it with pip install torch==2.13.0 && pip install dpgmm==0.2.0 (a CPU build of torch "
              "where one is at hand, e.g. --index-url https://download.pytorch.org/whl/cpu; docs/design.md \"Peers\")"),
    "bmcc": ("dpmmbench.algorithms.peers.bmcc_gibbs:BmccGibbs", "bmcc",
             "install it with CFLAGS=-fcommon pip install --no-deps --no-build-isolation bmcc==1.0.3 "
             "(a C extension built from source; docs/design.md \"Peers\")"),
})


def _installed(library: str) -> bool:
    # looks the library up without importing it (an import can take seconds)
    return importlib.util.find_spec(library) is not None


@functools.cache  # once per process: plugins are imported, and their problems logged, once
def _discovered() -> tuple[dict, dict]:
    return plugin_discovery.discover("algorithms", [*_REGISTRY, *_OPTIONAL], _sampler_problem)


def _sampler_problem(name: str, obj) -> str | None:
    """What keeps ``obj``, registered as ``name``, from being a sampler of the registry."""
    if not (isinstance(obj, type) and issubclass(obj, Sampler)):
        return "is not a subclass of dpmmbench.algorithms.Sampler"
    if inspect.isabstract(obj):
        return f"does not implement {', '.join(sorted(obj.__abstractmethods__))}"
    if getattr(obj, "name", None) != name:
        return f"declares name = {getattr(obj, 'name', None)!r}, not its entry point's {name!r}"
    if not isinstance(getattr(obj, "exact", None), bool):
        return "declares no exact = True or False"
    families = obj.families
    if families is not None and not (isinstance(families, tuple) and families
                                     and all(isinstance(f, type) and issubclass(f, Family) for f in families)):
        return f"declares families = {families!r}, not None or a tuple of Family classes"
    return None


def plugins() -> dict[str, str]:
    """Algorithms registered by installed plugins: registry name -> ``"distribution version"``."""
    return {name: plugin.distribution for name, plugin in _discovered()[0].items()}


def refused_plugins() -> dict[str, str]:
    """Plugins left out: registry name -> why (a line naming the plugin and its distribution)."""
    return dict(_discovered()[1])


def available(plugins: bool = True) -> list[str]:
    """Registry names of every implemented algorithm, with the optional peers whose library
    is installed, then (unless ``plugins=False``) the algorithms of installed plugins
    (:func:`plugins`)."""
    return (list(_REGISTRY) + [name for name, (_, library, _) in _OPTIONAL.items() if _installed(library)]
            + (list(_discovered()[0]) if plugins else []))


def missing() -> dict[str, str]:
    """Optional peers whose library is not installed: registry name -> how to install it."""
    return {name: hint for name, (_, library, hint) in _OPTIONAL.items() if not _installed(library)}


def get(name: str) -> type[Sampler]:
    """The sampler class registered as ``name``."""
    if isinstance(name, str) and name not in _REGISTRY and name not in _OPTIONAL:
        found, refused = _discovered()
        if name in found:
            return found[name].value
        if name in refused:
            raise ValueError(f"algorithm {name!r} is not available: {refused[name]}")
    if isinstance(name, str) and name in _OPTIONAL and not _installed(_OPTIONAL[name][1]):
        raise ValueError(f"algorithm {name!r} needs the {_OPTIONAL[name][1]!r} library, which is not installed; "
                         f"{_OPTIONAL[name][2]}")
    if not isinstance(name, str) or name not in (entries := {**_REGISTRY, **{k: v[0] for k, v in _OPTIONAL.items()}}):
        raise ValueError(f"unknown algorithm {name!r}; available: {', '.join(available())}")
    module, cls = entries[name].split(":")
    return getattr(importlib.import_module(module), cls)


def make(name: str, family, **kwargs) -> Sampler:
    """Build the sampler ``name`` for ``family``.

    Parameters
    ----------
    name : str
        Registry name (see :func:`available`).
    family : dpmmbench.algorithms.families.Family
        The conjugate family (the prior).
    **kwargs
        ``alpha`` (DP concentration), ``seed``, ``backend`` and the algorithm's options, as
        :class:`Sampler` takes them; the defaults and constraints of ``alpha`` and ``seed``
        are in :data:`dpmmbench.algorithms.constraints.RUN_PARAMETERS`.

    Unknown names and options raise with the list of valid ones.
    """
    return get(name)(family, **kwargs)
