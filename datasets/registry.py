"""Dataset names -> builders, and the parsing of ``name?key=value&...`` strings.

Adding a dataset = one module exposing a :class:`~datasets.base.Builder` as ``BUILDER``, plus
one entry in :data:`REGISTRY`.
"""
from __future__ import annotations

from types import MappingProxyType

from . import digits, mnist10k, reuters, synth_chang2013, synth_multinomial, synth_wang2017
from . import ap, fashion_mnist, mnist70k, nyt, uci_bow, wikipedia
from .base import Builder

#: base name -> builder (read-only)
REGISTRY = MappingProxyType({
    b.name: b for b in (synth_chang2013.BUILDER, synth_wang2017.BUILDER, digits.BUILDER, synth_multinomial.BUILDER,
                        mnist10k.BUILDER, reuters.BUILDER,
                        fashion_mnist.BUILDER, wikipedia.BUILDER, nyt.BUILDER,
                        mnist70k.BUILDER, ap.BUILDER, *uci_bow.BUILDERS)
})


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
    if not isinstance(name, str):
        raise ValueError(f"a dataset name must be a string, got {type(name).__name__}; "
                         f"available: {', '.join(REGISTRY)}")
    base, _, query = name.partition("?")
    builder = REGISTRY.get(base)
    if builder is None:
        raise ValueError(f"unknown dataset {base!r}; available: {', '.join(REGISTRY)}")
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
