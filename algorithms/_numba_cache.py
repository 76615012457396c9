"""Invalidate numba's disk cache of this package's kernels when *any* kernel source changes.

numba checks a cached function only against the file that defines it. Our compiled loops call
kernels in other modules (the families' ``add``/``remove``/``logpred``, ``_numerics``), so after
editing a callee a caller's stale binary was loaded silently: it once cost a wrong posterior
(auxvar's exactness TV 0.89 instead of 0.08) in a long-edited tree. Here every cached function
of this package carries, beside numba's own stamp, a digest of all the package's modules that
use numba; an edit to any of them recompiles every kernel of the package once.

:func:`install` puts the locator first in numba's list. It must run before the first
``@njit(cache=True)`` of the package is decorated (numba picks the locator at decoration
time), which is why ``algorithms/__init__.py`` calls it before importing anything else.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from numba.core.caching import CacheImpl, _CacheLocator

_PACKAGE = Path(__file__).resolve().parent


@functools.cache
def package_digest() -> bytes:
    """SHA-256 over the sources of every module of the package that uses numba."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        text = path.read_bytes()
        if b"numba" in text:
            digest.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\0" + text)
    return digest.digest()


class PackageStampLocator(_CacheLocator):
    """Wraps the locator numba would have chosen; only the freshness stamp differs."""

    def __init__(self, inner):
        self._inner = inner

    def ensure_cache_path(self):
        self._inner.ensure_cache_path()

    def get_cache_path(self):
        return self._inner.get_cache_path()

    def get_disambiguator(self):
        return self._inner.get_disambiguator()

    def get_source_stamp(self):
        return (self._inner.get_source_stamp(), package_digest())

    @classmethod
    def from_function(cls, py_func, py_file):
        try:
            Path(py_file).resolve().relative_to(_PACKAGE)
        except ValueError:
            return None  # someone else's function: numba's own rules
        for locator_class in CacheImpl._locator_classes:
            if locator_class is not cls:
                inner = locator_class.from_function(py_func, py_file)
                if inner is not None:
                    return cls(inner)
        return None


def install() -> None:
    """Make :class:`PackageStampLocator` the first locator numba tries (idempotent)."""
    if PackageStampLocator not in CacheImpl._locator_classes:
        CacheImpl._locator_classes.insert(0, PackageStampLocator)
