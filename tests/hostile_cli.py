"""The real ``dpmmbench`` command in a child process, watched: what it printed, its exit code,
how long it took and whether it started any process of its own (an embedded Dask cluster's
scheduler-side workers, the multiprocessing resource tracker).

The child is the isolation: a crash of the command is an exit code, not a crash of the tests.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

#: seconds between two looks at the command's child processes
POLL = 0.02


@dataclass(frozen=True)
class Result:
    """What one command did."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    spawned: int  #: most child processes seen at once

    @property
    def stderr_lines(self) -> list[str]:
        return self.stderr.splitlines()


def run_cli(args, cwd, env=None, timeout=180.0, during=None) -> Result:
    """Run ``python -m dpmmbench.workflows.cli ARGS`` in ``cwd``; return what it did.

    Parameters
    ----------
    args : list of str
    cwd : path
    env : dict, optional
        Extra environment variables (``DASK_SCHEDULER_ADDRESS`` is removed unless given).
    timeout : float
        Seconds before the command counts as hung (it is killed, and AssertionError raised).
    during : callable, optional
        ``during(process, seconds)`` is called at every poll while the command runs, with
        its psutil.Process (e.g. to kill its worker).
    """
    full_env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    full_env.update(env or {})
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "dpmmbench.workflows.cli", *map(str, args)], cwd=cwd,
                            env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watched = psutil.Process(proc.pid)
    spawned = 0
    try:
        while proc.poll() is None:
            elapsed = time.perf_counter() - start
            if elapsed > timeout:
                proc.kill()
                raise AssertionError(f"dpmmbench {' '.join(map(str, args))} hung (> {timeout:g} s)")
            try:
                spawned = max(spawned, len(watched.children(recursive=True)))
            except psutil.NoSuchProcess:
                pass
            if during is not None:
                during(watched, elapsed)
            time.sleep(POLL)
        seconds = time.perf_counter() - start
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return Result(proc.returncode, out, err, seconds, spawned)


#: names a user might give files in an output folder, some of them like temporary files
USER_FILE_NAMES = ("notes.txt", "tmpk3j9x_2a.csv", "trace.csv.tmp", ".trace.csv.swp", "trace.csv~",
                   ".trace.csv.4242.0badc0de.tmp", ".trace.csv.dpmmbench-tmp-1-0badc0de.bak")


def plant_user_files(folder: Path) -> dict[str, bytes]:
    """Create the user's files in ``folder``, some with temporary-looking names; also one
    with this suite's temporary name whose writer (this process) is alive, last written an
    hour ago. Return their contents by name (see :func:`user_files_intact`)."""
    folder.mkdir(parents=True, exist_ok=True)
    names = [*USER_FILE_NAMES, f".trace.csv.dpmmbench-tmp-{os.getpid()}-0badc0de"]
    planted = {}
    for name in names:
        path = folder / name
        path.write_bytes(f"the user's {name}".encode())
        then = time.time() - 3600
        os.utime(path, (then, then))
        planted[name] = path.read_bytes()
    return planted


def user_files_intact(folder: Path, planted: dict[str, bytes]) -> bool:
    """Whether every planted file is still there with its contents."""
    return all((folder / name).is_file() and (folder / name).read_bytes() == data for name, data in planted.items())


def own_files(folder: Path, planted: dict[str, bytes]) -> list[str]:
    """The files in ``folder`` that are not the user's."""
    if not folder.exists():
        return []
    return sorted(p.name for p in folder.iterdir() if p.name not in planted)
