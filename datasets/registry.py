"""Dataset names -> builders, and the parsing of ``name?key=value&...`` strings.

Adding a dataset = one module exposing a :class:`~datasets.base.Builder` as ``BUILDER``, plus
one entry in :data:`REGISTRY`. Outside this repository, a package registers its ``Builder`` in
the entry-point group ``dpmmbench.datasets`` (``examples/plugin/``); :func:`builders` holds both.
"""
from __future__ import annotations

import functools
from types import MappingProxyType

from dpmmbench.algorithms import plugin_discovery

from . import digits, mnist10k, reuters, synth_chang2013, synth_multinomial, synth_wang2017
from . import ap, fashion_mnist, mnist70k, nyt, uci_bow, wikipedia
from .base import Builder, Parameter

#: base name -> builder (read-only)
REGISTRY = MappingProxyType({
    b.name: b for b in (synth_chang2013.BUILDER, synth_wang2017.BUILDER, digits.BUILDER, synth_multinomial.BUILDER,
                        mnist10k.BUILDER, reuters.BUILDER,
                        fashion_mnist.BUILDER, wikipedia.BUILDER, nyt.BUILDER,
                        mnist70k.BUILDER, ap.BUILDER, *uci_bow.BUILDERS)
})


@functools.cache  # once per process: plugins are imported, and their problems logged, once
def _discovered() -> tuple[dict, dict]:
    return plugin_discovery.discover("datasets", REGISTRY, _builder_problem)


def _builder_problem(name: str, obj) -> str | None:
    """What keeps ``obj``, registered as ``name``, from being a dataset of the registry."""
    if not isinstance(obj, Builder):
        return "is not a dpmmbench.datasets.base.Builder"
    if obj.name != name:
        return f"is named {obj.name!r}, not its entry point's {name!r}"
    if not (isinstance(obj.parameters, tuple) and all(isinstance(p, Parameter) for p in obj.parameters)):
        return "has parameters that are not a tuple of dpmmbench.datasets.base.Parameter"
    if not (callable(obj.describe) and callable(obj.generate) and (obj.fetch is None or callable(obj.fetch))):
        return "has a describe, generate or fetch that is not callable"
    return None


def builders() -> dict[str, Builder]:
    """Every dataset: the built-ins (:data:`REGISTRY`), then those of installed plugins."""
    return {**REGISTRY, **{name: plugin.value for name, plugin in _discovered()[0].items()}}


def plugins() -> dict[str, str]:
    """Datasets registered by installed plugins: base name -> ``"distribution version"``."""
    return {name: plugin.distribution for name, plugin in _discovered()[0].items()}


def refused_plugins() -> dict[str, str]:
    """Dataset plugins left out: base name -> why (a line naming the plugin and its distribution)."""
    return dict(_discovered()[1])


def resolve(name: str) -> tuple[Builder, dict, str]:
    """Parse a full dataset name.

    Parameters
    ----------
    name : str
        ``"base"`` or ``"base?key=value&key=value"``.

    Returns
    -------
    builder : Builder
        The registered builder of the base name.
    params : dict
        Every parameter of the builder, parsed, defaults filled in.
    canonical : str
        The canonical name (keys sorted, defaults omitted).

    Raises
    ------
    ValueError
        Unknown base name, malformed query, unknown, repeated, badly typed or out-of-range
        parameter; the message names the culprit and lists what is valid.
    """
    every = builders()
    if not isinstance(name, str):
        raise ValueError(f"a dataset name must be a string, got {type(name).__name__}; "
                         f"available: {', '.join(every)}")
    base, _, query = name.partition("?")
    builder = every.get(base)
    if builder is None:
        if base in (refused := refused_plugins()):
            raise ValueError(f"dataset {base!r} is not available: {refused[base]}")
        raise ValueError(f"unknown dataset {base!r}; available: {', '.join(every)}")
    known = {p.name: p for p in builder.parameters}
    params = {p.name: p.default for p in builder.parameters}
    given = set()
    for item in query.split("&") if query else ():
        key, eq, text = item.partition("=")
        if not eq or not key:
            raise ValueError(f"malformed parameter {item!r} in dataset name {name!r}: expected key=value; "
                             f"valid parameters of {base!r}: {builder.usage()}")
        if key not in known:
            raise ValueError(f"unknown parameter {key!r} for dataset {base!r}; valid parameters: {builder.usage()}")
        if key in given:
            raise ValueError(f"parameter {key!r} given twice in dataset name {name!r}")
        try:
            params[key] = known[key].parse(text)
        except ValueError as exc:
            raise ValueError(f"parameter {key!r} of dataset {base!r} {exc}; "
                             f"valid parameters: {builder.usage()}") from None
        given.add(key)
    return builder, params, builder.canonical_name(params)
