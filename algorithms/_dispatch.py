"""A family's collapsed kernels, reachable from compiled loops that numba can cache on disk.

A closure over a jitted function is never cached by numba (the function pickles with a
per-process id, and closures are cached under a hash of what they capture), so a loop that
captured a family's ``add``/``remove``/``logpred`` kernels recompiled in every process (about
a second per loop: every Snakemake job and Dask worker is a new process). The compiled loops
instead call the stubs below, which numba resolves at compile time from the types of
``(table, hyper, data)``: those types tell the three families apart, and :func:`register`
refuses two families it could not tell apart. A loop that captures only
:func:`fingerprint` (an int) is cached; the fingerprint changes when a family's kernel source
does, so an edited kernel recompiles the loop instead of loading a stale binary.

Usage: ``register(family.kernels, table, hyper, data)`` before the first call of a compiled
loop with arguments of those types, then call ``k_add(table, hyper, data, i, k)`` etc. inside it.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
from pathlib import Path

import numpy as np
from numba import typeof
from numba.extending import overload

# Process-wide registries (like numba's own dispatcher caches): numba types of
# (table, hyper, data) -> the family's CollapsedKernels, and the argument layouts already
# registered (so that numba's type inference runs once per layout, not once per call).
_KERNELS: dict = {}
_REGISTERED: set = set()


def register(kernels, table, hyper, data) -> None:
    """Make ``kernels`` (a family's ``CollapsedKernels``) the ones compiled loops use for
    arguments of the types of ``table``, ``hyper`` and ``data``.

    Raises
    ------
    TypeError
        Another family's kernels were registered for the same argument types.
    """
    layout = (kernels,) + tuple((a.dtype.str, a.ndim, a.flags.c_contiguous) if isinstance(a, np.ndarray)
                                else type(a) for a in (*table, *hyper, *data))
    if layout in _REGISTERED:
        return
    key = (typeof(table), typeof(hyper), typeof(data))
    known = _KERNELS.setdefault(key, kernels)
    if known is not kernels:
        raise TypeError(f"two families with identical kernel argument types cannot share compiled loops: {key}")
    _REGISTERED.add(layout)


@functools.cache
def fingerprint(kernels) -> int:
    """Hash of the source files defining a family's kernels and of this module (part of a
    loop's cache key)."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for path in sorted({inspect.getsourcefile(k.py_func) for k in kernels}):
        digest.update(Path(path).read_bytes())
    return int.from_bytes(digest.digest()[:7], "little")


def _kernel(table, hyper, data, which):
    kernels = _KERNELS.get((table, hyper, data))
    if kernels is None:
        raise TypeError(f"no family kernels registered for table {table}, hyper {hyper}, data {data}")
    return getattr(kernels, which)


def k_add(table, hyper, data, i, k):
    """Put point ``i`` into slot ``k`` (the family's ``add``)."""


def k_remove(table, hyper, data, i, k):
    """Take point ``i`` out of slot ``k`` (the family's ``remove``)."""


def k_undo_remove(table, hyper, data, i, k):
    """Put point ``i`` back into slot ``k`` right after ``k_remove`` (the family's ``undo_remove``)."""


def k_logpred(table, hyper, data, i, k):
    """log p(x_i | slot k) (the family's ``logpred``)."""


def _overload_of(which):
    def resolve(table, hyper, data, i, k):
        # The kernel's Python function is the implementation, compiled into the calling loop
        # where LLVM inlines it. A wrapper ``impl`` that called the jitted kernel stayed a
        # function call in the compiled sweep, once per (point, cluster) pair: the NIW sweep
        # ran 3.5x slower (100k x 2-D: 170 ms instead of 46 ms; tests/test_dispatch.py).
        return _kernel(table, hyper, data, which).py_func
    return resolve


for _stub, _which in ((k_add, "add"), (k_remove, "remove"), (k_undo_remove, "undo_remove"),
                      (k_logpred, "logpred")):
    overload(_stub)(_overload_of(_which))
