"""Provenance of a run: where, with what and in which process it ran.

The run driver stores these facts in every trace's metadata (see
:mod:`dpmmbench.reports.traces`), so that a result can be traced back to its machine, its
package versions and its commit.
"""
from __future__ import annotations

import os
import platform
import subprocess
from contextlib import suppress
from importlib import metadata
from pathlib import Path

#: the packages whose versions a run records, besides Python
_VERSIONED = ("numpy", "scipy", "numba", "dask", "distributed", "pandas", "pyarrow")


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def environment() -> dict:
    """Where and with what a run ran: package versions, CPU, platform and git commit.

    Returns
    -------
    dict
        Keys ``versions`` (python, numpy, scipy, numba, dask, distributed, pandas, pyarrow;
        None when not installed), ``cpu_model``, ``cores``, ``cores_available``,
        ``platform``, ``hostname``, ``git_commit`` and ``git_dirty`` (None outside a git
        checkout).
    """
    versions = {"python": platform.python_version()}
    for package in _VERSIONED:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    commit, dirty = _git_state()
    return {
        "versions": versions,
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "cores_available": available_cores(),
        "platform": platform.platform(),
        "hostname": platform.node(),
        "git_commit": commit,
        "git_dirty": dirty,
    }


def process_facts() -> dict:
    """The process a chain ran in.

    Returns
    -------
    dict
        ``address`` (the Dask worker's, None outside a worker), ``pid``, ``numba_threads``,
        and how many of the package's disk-cached numba kernels were loaded from the cache
        (``numba_cache_hits``) or had to be compiled (``numba_cache_misses``); kernels
        compiled without the disk cache are not counted.
    """
    import numba

    from dpmmbench.algorithms.numba_cache import kernels

    try:
        from distributed import get_worker

        address = get_worker().address
    except (ImportError, ValueError):  # not in a Dask worker (the master of a sharded run)
        address = None
    hits = misses = 0
    # every kernel the package built here, factories' included (not a heap scan: see kernels())
    for obj in kernels():
        if obj.stats.cache_path is not None:
            hits += sum(obj.stats.cache_hits.values())
            misses += sum(obj.stats.cache_misses.values())
    return {"address": address, "pid": os.getpid(), "numba_threads": numba.get_num_threads(),
            "numba_cache_hits": hits, "numba_cache_misses": misses}


def _cpu_model():
    with suppress(OSError):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or None


def _git_state():
    repo = Path(__file__).resolve().parent.parent

    def git(*args):
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
    except (OSError, subprocess.SubprocessError):
        return None, None
    try:
        # --no-optional-locks: reading the status must never write to the repository.
        dirty = bool(git("--no-optional-locks", "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        dirty = None
    return commit, dirty
