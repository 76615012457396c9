"""numba's disk cache for this package's kernels, kept correct across modules and processes.

Every compiled kernel of the package is built by :func:`kernel` (not ``numba.njit(cache=True)``),
which gives that one dispatcher a disk cache of the class built here. Nothing of numba's is
changed: functions outside the package keep numba's own cache.

Why not numba's own cache:

- numba checks a cached function only against the file that defines it. Our compiled loops call
  kernels in other modules (the families' ``add``/``remove``/``logpred``, ``_numerics``), so after
  editing a callee a caller's stale binary was loaded silently: it once cost a wrong posterior
  (auxvar's exactness TV 0.89 instead of 0.08) in a long-edited tree. Here every cached kernel's
  freshness stamp is numba's own plus a digest of all the package's modules that use numba; an
  edit to any of them recompiles every kernel of the package once.
- numba names a new data file by the first number its index has not used and writes the index
  before the data, so two processes saving different signatures at once (two pytest-xdist
  processes, two Dask workers, parallel Snakemake jobs after an edit) could both take number 1:
  one process's index then pointed at the other's binary, code compiled for other argument types
  (seen here: a wrong auxvar posterior, TV 0.077 against a threshold of 0.066, under xdist). Here
  a data file is named by a hash of its key, so no two keys ever share a file, and the data is
  written before the index, so an index never names a file not yet written. A lost index update
  between two writers costs a recompilation, never a wrong binary.

numba has no public hook for either (a cache locator can only be added to a class-wide list,
and the cache file class is fixed), so this module subclasses numba's private cache classes. It
does so only on the numba versions it was checked on (:data:`VERIFIED_NUMBA`); on any other the
kernels are compiled in every process, with one warning: slower start, same results.

Where no cache directory is writable (a read-only install with an unwritable home, and no
``NUMBA_CACHE_DIR``) numba refuses to cache; the kernel is then compiled in every process, with
one warning, rather than cached in a temporary directory: a shared temporary directory lets
another user plant a cache file that numba would unpickle (run) in our process, and a private one
dies with the process, saving nothing. Setting ``NUMBA_CACHE_DIR`` to a writable directory turns
the cache back on.
"""
from __future__ import annotations

import functools
import hashlib
import re
import threading
import warnings
import weakref
from pathlib import Path

import numba

_PACKAGE = Path(__file__).resolve().parent

#: [first, last) numba (major, minor) versions whose private cache classes (numba.core.caching,
#: ``Dispatcher._cache``) this module was checked against
VERIFIED_NUMBA = ((0, 60), (0, 69))


@functools.cache
def package_digest() -> bytes:
    """SHA-256 over the sources of every module of the package that uses numba."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        text = path.read_bytes()
        if b"numba" in text:
            digest.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\0" + text)
    return digest.digest()


def numba_verified(version: str) -> bool:
    """Whether numba ``version`` (e.g. ``"0.61.2"``) is in :data:`VERIFIED_NUMBA`."""
    found = re.match(r"(\d+)\.(\d+)", version)
    return found is not None and VERIFIED_NUMBA[0] <= (int(found[1]), int(found[2])) < VERIFIED_NUMBA[1]


#: every dispatcher :func:`kernel` built in this process, held weakly, so that a run's provenance
#: can count cache hits without scanning the heap: ``gc.get_objects()`` hands out tuples that
#: another thread is still building, and that thread's ``tuple()`` then fails with SystemError
#: (seen in the run service, which runs several runs in threads)
_KERNELS = weakref.WeakSet()
_KERNELS_LOCK = threading.Lock()


def kernels() -> list:
    """The package's compiled kernels alive in this process (built by :func:`kernel`)."""
    with _KERNELS_LOCK:
        return list(_KERNELS)


@functools.cache
def _warn_once(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=2)


def kernel(function=None, **options):
    """``numba.njit`` for the package's kernels, disk-cached by this module's rules.

    Parameters
    ----------
    function : callable, optional
        The Python function to compile. Without it, returns a decorator (``@kernel(nogil=True)``).
    **options
        Options of ``numba.njit`` (``cache`` excepted: the cache is this module's).

    Returns
    -------
    numba.core.registry.CPUDispatcher or callable
        The compiled function (lazily compiled per signature, as with ``numba.njit``), or the
        decorator making one.
    """
    if "cache" in options:
        raise TypeError("kernel() caches on disk by itself; drop cache=")

    def build(py_func):
        dispatcher = numba.njit(**options)(py_func)
        cache = _disk_cache(py_func)
        if cache is not None:
            dispatcher._cache = cache  # what numba's own Dispatcher.enable_caching() sets
        with _KERNELS_LOCK:
            _KERNELS.add(dispatcher)
        return dispatcher

    return build if function is None else build(function)


def _disk_cache(py_func):
    """This module's disk cache for ``py_func``, or None to compile it in every process."""
    cache_class = _cache_class()
    if cache_class is None:
        return None
    try:
        return cache_class(py_func)
    except RuntimeError as error:  # numba found no writable cache directory
        if "no locator available" not in str(error):
            raise
        _warn_once("dpmmbench: no writable numba cache directory (set NUMBA_CACHE_DIR to one); "
                   "kernels are compiled in every process")
        return None


class _StampedLocator:
    """The cache locator numba chose for a function, with the package digest added to its
    freshness stamp (everything else, e.g. the cache directory, is numba's)."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def get_source_stamp(self):
        return (self._inner.get_source_stamp(), package_digest())


@functools.cache
def _cache_class():
    """The package's subclass of numba's ``FunctionCache``, or None (one warning) on a numba
    outside :data:`VERIFIED_NUMBA`, whose private classes may differ."""
    if not numba_verified(numba.__version__):
        low, high = (".".join(map(str, v)) for v in VERIFIED_NUMBA)
        _warn_once(f"dpmmbench: numba {numba.__version__} is outside the versions its kernel cache was "
                   f"checked on (>={low}, <{high}); kernels are compiled in every process")
        return None
    from numba.core.caching import CompileResultCacheImpl, FunctionCache, IndexDataCacheFile

    class PackageCacheImpl(CompileResultCacheImpl):
        def __init__(self, py_func):
            super().__init__(py_func)  # numba's choice of locator; raises when none is writable
            self._locator = _StampedLocator(self._locator)

    class PackageCacheFile(IndexDataCacheFile):
        def save(self, key, data):
            """Save one entry: the data file (named by a hash of ``key``) first, then the index."""
            digest = hashlib.sha256(self._dump(key)).hexdigest()[:20]
            name = self._data_name_pattern.replace("{number:d}", digest)
            self._save_data(name, data)
            overloads = self._load_index()  # re-read as late as possible: fewer lost updates
            overloads[key] = name
            self._save_index(overloads)

    class PackageCache(FunctionCache):
        _impl_class = PackageCacheImpl

        def __init__(self, py_func):
            super().__init__(py_func)
            self._cache_file = PackageCacheFile(cache_path=self._cache_path,
                                                filename_base=self._impl.filename_base,
                                                source_stamp=self._impl.locator.get_source_stamp())

    return PackageCache
