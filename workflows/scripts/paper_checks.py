"""Run a paper's small measurements (``reports/papers/<paper>/checks.py``: the claims that need
a measurement of their own rather than the config's chains) and keep each result, with its
commit, machine and measured time, in ``docs/reproductions/<paper>/checks.json``, which
``python -m dpmmbench.reports.reproductions render`` reads.

Usage::

    python -m dpmmbench.workflows.scripts.paper_checks chang2013            # every measurement
    python -m dpmmbench.workflows.scripts.paper_checks chang2013 --only sharding

A measurement rerun replaces its own record only; the others keep theirs (each names its commit),
also those that another run of the command on the same paper writes meanwhile: the file is read
again, under a lock, when each measurement ends.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from dpmmbench.reports.papers import PAPERS
from dpmmbench.reports.reproductions import ROOT_DIR
from dpmmbench.reports.traces import atomic_write
from dpmmbench.workflows.provenance import environment


def measurements(paper: str) -> dict:
    """name -> measurement function of ``paper`` (a key of :data:`reports.papers.PAPERS`)."""
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; known: {sorted(PAPERS)}")
    try:
        module = importlib.import_module(f"{PAPERS[paper].__name__}.checks")
    except ModuleNotFoundError:
        raise ValueError(f"{paper} has no measurements of its own") from None
    return module.MEASUREMENTS


def run(paper: str, only=(), out=None) -> Path:
    """Run ``paper``'s measurements (``only``: these names) and update its ``checks.json``.

    Parameters
    ----------
    paper : str
        A key of :data:`reports.papers.PAPERS`.
    only : iterable of str
        Names of the measurements to run; empty: all.
    out : path, optional
        The record folder (default ``docs/reproductions/<paper>``).

    Returns
    -------
    pathlib.Path
        The ``checks.json`` written.
    """
    found = measurements(paper)
    unknown = sorted(set(only) - set(found))
    if unknown:
        raise ValueError(f"unknown measurement(s) {unknown}; {paper} has {sorted(found)}")
    path = Path(out or ROOT_DIR / paper) / "checks.json"
    env = environment()  # the commit and machine of every measurement run now
    for name, measure in found.items():
        if only and name not in only:
            continue
        wall, cpu = time.perf_counter(), time.process_time()
        result = measure()
        kept = {"result": result, "wall_s": round(time.perf_counter() - wall, 2),
                "cpu_s": round(time.process_time() - cpu, 2), "git_commit": env["git_commit"],
                "git_dirty": env["git_dirty"], "cpu_model": env["cpu_model"], "cores": env["cores_available"],
                "versions": env["versions"], "finished_utc": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        _keep(path, name, kept)
        print(f"{paper} {name}: {kept['wall_s']} s", flush=True)
    return path


def _keep(path: Path, name: str, kept: dict) -> None:
    """Put ``kept`` under ``name`` in the record at ``path``, read as it is now (a measurement
    takes minutes; another run may have kept one meanwhile) and replaced atomically."""
    with _locked(path.with_name(path.name + ".lock")):
        record = json.loads(path.read_text()) if path.is_file() else {}
        record[name] = kept
        text = json.dumps(record, indent=1, sort_keys=True) + "\n"
        atomic_write(path, lambda f: f.write(text.encode()))


@contextlib.contextmanager
def _locked(lock: Path):
    """An exclusive lock on ``lock`` (created) where the system has ``fcntl``; elsewhere none,
    and the read-then-replace window is the only race left."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpmmbench.workflows.scripts.paper_checks",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("paper", help=f"one of {sorted(PAPERS)}")
    parser.add_argument("--only", action="append", default=[], help="run this measurement only (repeatable)")
    parser.add_argument("--out", help="the record folder (default docs/reproductions/PAPER)")
    args = parser.parse_args(argv)
    try:
        print(run(args.paper, args.only, args.out))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
