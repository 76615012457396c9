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

It also makes the package's cache entries safe to write from several processes at once (two
pytest-xdist processes, two Dask workers, parallel Snakemake jobs all compile the same loops
for different families after an edit). numba names a new data file by the first number its
index has not used and writes the index before the data, so two processes saving different
signatures at once could both take number 1: one process's index then pointed at the other's
binary, code compiled for other argument types (seen here: a wrong auxvar posterior, TV 0.077
against a threshold of 0.066, after an edit, under xdist). :func:`_save_entry` names the data
file by a hash of its key, so no two keys ever share a file, and writes the data before the
index, so an index never names a file not yet written. A lost index update between two
writers costs a recompilation, never a wrong binary.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from numba.core.caching import CacheImpl, IndexDataCacheFile, _CacheLocator

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


def _is_ours(cache_file) -> bool:
    stamp = cache_file._source_stamp
    return isinstance(stamp, tuple) and len(stamp) == 2 and stamp[1] == package_digest()


def _save_entry(cache_file, key, data) -> None:
    """Save one cache entry: the data file (named by a hash of ``key``) first, then the index."""
    name = cache_file._data_name_pattern.replace("{number:d}", hashlib.sha256(cache_file._dump(key)).hexdigest()[:20])
    cache_file._save_data(name, data)
    overloads = cache_file._load_index()  # re-read as late as possible: fewer lost updates
    overloads[key] = name
    cache_file._save_index(overloads)


def _make_save(numba_save):
    @functools.wraps(numba_save)
    def save(self, key, data):
        if _is_ours(self):
            _save_entry(self, key, data)
        else:
            numba_save(self, key, data)  # someone else's function: numba's own rules
    save.package_safe = True
    return save


def install() -> None:
    """Make :class:`PackageStampLocator` the first locator numba tries, and the package's cache
    entries safe to write concurrently (idempotent)."""
    if PackageStampLocator not in CacheImpl._locator_classes:
        CacheImpl._locator_classes.insert(0, PackageStampLocator)
    if not getattr(IndexDataCacheFile.save, "package_safe", False):
        IndexDataCacheFile.save = _make_save(IndexDataCacheFile.save)
