"""Third-party algorithms and datasets, found through entry points.

An installed distribution registers a sampler class in the entry-point group
``dpmmbench.algorithms`` and a dataset :class:`~dpmmbench.datasets.base.Builder` in
``dpmmbench.datasets``; the entry point's name is the registry name (see
``examples/plugin/pyproject.toml``). The registries ask :func:`discover` for them on first use.

A plugin is never allowed to break the suite: one that fails to import, registers an object of
the wrong kind, takes a name already in use (a built-in's or another plugin's) or a name that
cannot be a file name is left out, and the reason, naming the plugin and its distribution, is
logged once as one line (``logging`` prints a bare warning to stderr when nothing else is set up).
"""
from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata

#: entry-point groups, by registry
GROUPS = {"algorithms": "dpmmbench.algorithms", "datasets": "dpmmbench.datasets"}
#: what a registry name may be: it names folders of results/ and columns of the report
NAME = re.compile(r"[a-z0-9][a-z0-9-]*")

_log = logging.getLogger("dpmmbench.plugins")


@dataclass(frozen=True)
class Plugin:
    """A registered third-party object and where it came from."""

    name: str
    #: the loaded object (a Sampler subclass, a dataset Builder)
    value: object
    #: ``"distribution-name version"``
    distribution: str


def distribution_of(entry_point) -> str:
    """``"name version"`` of the distribution that declares ``entry_point``."""
    dist = getattr(entry_point, "dist", None)
    if dist is None:  # an entry point built by hand, not read from an installed distribution
        return "an unknown distribution"
    return f"{dist.metadata['Name']} {dist.version}"


def discover(registry: str, taken: Iterable[str], problem: Callable[[str, object], str | None],
             entry_points=None) -> tuple[dict[str, Plugin], dict[str, str]]:
    """Load the plugins of one registry.

    Parameters
    ----------
    registry : {"algorithms", "datasets"}
        Which group of :data:`GROUPS` to read.
    taken : iterable of str
        The built-in names; a plugin may not take one.
    problem : callable
        ``problem(name, obj)`` returns what is wrong with a loaded object as a phrase (e.g.
        ``"is not a Sampler subclass"``), or None when it is a valid entry.
    entry_points : iterable of importlib.metadata.EntryPoint, optional
        Instead of the installed distributions' (tests).

    Returns
    -------
    found : dict
        name -> :class:`Plugin`, in name order.
    refused : dict
        name -> the one-line reason it was left out (also logged).
    """
    group = GROUPS[registry]
    if entry_points is None:
        entry_points = metadata.entry_points(group=group)
    taken = set(taken)
    by_name: dict[str, list] = {}
    for ep in entry_points:
        by_name.setdefault(ep.name, []).append(ep)
    found, refused = {}, {}
    for name in sorted(by_name):
        eps = by_name[name]
        where = f"{registry[:-1]} plugin {name!r} ({', '.join(sorted(distribution_of(ep) for ep in eps))})"
        if len(eps) > 1:
            refused[name] = f"{where}: {len(eps)} distributions register this name; refused (uninstall all but one)"
        elif name in taken:
            refused[name] = f"{where}: clashes with the built-in {registry[:-1]} of that name; refused (rename it)"
        elif not NAME.fullmatch(name):
            refused[name] = (f"{where}: a name must be lower-case letters, digits and '-', starting with a "
                             "letter or digit; refused")
        else:
            try:
                value = eps[0].load()
            except (Exception, SystemExit) as exc:  # noqa: BLE001 -- any failure of third-party code leaves it out
                refused[name] = f"{where}: failed to import {eps[0].value!r}: {type(exc).__name__}: {_one_line(exc)}"
                continue
            why = problem(name, value)
            if why is None:
                found[name] = Plugin(name, value, distribution_of(eps[0]))
            else:
                refused[name] = f"{where}: {eps[0].value!r} {why}; left out"
    for reason in refused.values():
        _log.warning("dpmmbench: %s", reason)
    return found, refused


def _one_line(exc) -> str:
    return " ".join(str(exc).split()) or "(no message)"
