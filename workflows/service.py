"""The workflow's run service: one Dask cluster serves every run of a workflow.

A workflow (``workflows/run.smk``) starts one service before its first run (:func:`start`)
and stops it when it ends (:func:`stop`); each run job, ``python -m
dpmmbench.workflows.service_client --spec JSON --out PATH``, finds it through
``$DPMMBENCH_SERVICE`` and hands it its run request (the run spec the workflow built from its
config, :func:`workflows._config.run_spec`, and the trace's path) instead of importing numpy,
numba and Dask and starting a cluster of its own; so does ``dpmmbench run`` when that
variable names a service. The service executes the spec exactly as
``dpmmbench run`` does (:func:`workflows.driver.execute`: the same checks, atomic trace write
and provenance; the same errors and exit codes, :mod:`workflows.errors`), in a thread, on
workers it reserves for the run on its one cluster (:class:`workflows.cluster.SharedCluster`),
and answers with the run's output line or error line and exit code. What stays warm between
runs: the worker processes (compiled kernels), each dataset (loaded once,
:class:`workflows.driver.RunCache`, and sent to the workers once) and the environment facts of
the provenance.

The cluster is started here, exactly as a run's embedded one, or is an existing one
(``--scheduler``, ``--scheduler-file``, ``$DASK_SCHEDULER_ADDRESS``), which the service never
stops. The service stops -- cancelling its runs, closing its client and the cluster it
started, removing its state folder -- on a stop request, on SIGTERM or SIGINT, and when its
parent process (the Snakemake that started it) is gone, whichever way it ended. A job
whose connection closes before its answer (the job was killed) has its run cancelled:
cooperatively, through the chain's callback (``cancelled`` of :func:`workflows.driver.run`),
so the chain stops at its next step; nobody waits for its trace, which is not written.

Protocol: one request per connection on a Unix domain socket in the service's state folder
(a fresh 0700 folder): a JSON line ``{"spec": {...}, "out": ..., "command": [...], "cwd":
..., "started": ...}`` (see :mod:`workflows.service_client`), answered, once the run has
ended, by a JSON line ``{"code": int, "stdout": str, "stderr": str}``; ``{"stop": true}``
is answered ``{"stopping": true}``. A Unix socket, not TCP: only its owner can reach it
(the folder's permissions), there is no port to pick, to collide on or to expose, and a
peer that goes away is seen at once. The state folder holds ``service.json`` (pid, socket,
scheduler address, whether the service owns the cluster), written atomically once the
service accepts, and the service's log. A SIGKILLed service cannot remove its folder: the
next :func:`start` of the same user removes the folders whose service is gone.

The job's side (:func:`workflows.service_client.forward`) is a module of its own, which
imports only the standard library.

Example
-------
Not run by the doctests (``+SKIP``): a service starts a cluster of worker processes.

>>> from dpmmbench.workflows import service, service_client
>>> state = service.start(workers=2, threads=1)               # doctest: +SKIP
>>> from dpmmbench.workflows.driver import RunSpec
>>> spec = RunSpec("gibbs", "synth-chang2013?n=300", 5, seed=0)
>>> request = {"spec": spec.to_dict(), "out": "t.parquet", "command": ["example"], "cwd": None}
>>> service_client.forward(request, state)[0]                   # doctest: +SKIP
0
>>> service.stop(state)                                        # doctest: +SKIP
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

from .errors import EXIT_CODES, classify, message, writable
from .service_client import SOCKET_NAME, receive, send

#: the service's description in its state folder (written once it accepts)
STATE_FILE = "service.json"
#: the name of a state folder begins so, in the system's temporary folder
STATE_PREFIX = "dpmmbench-run-"
#: its log (Dask's and its own messages), in its state folder
LOG_NAME = "service.log"
#: seconds between two looks at the parent process, the stop flag and a job's connection
WATCH_INTERVAL = 0.2
#: bytes a request may take (a run's arguments are a few hundred)
REQUEST_LIMIT = 1 << 20
#: the longest socket path accepted (the kernel's limit is 107 bytes on Linux, 103 on macOS)
SOCKET_PATH_LIMIT = 100
#: seconds :func:`start` waits for the service to accept
START_TIMEOUT = 120.0
#: seconds :func:`stop` waits for the service to end before it signals it
STOP_TIMEOUT = 60.0


# ---- starting and stopping it ------------------------------------------------------------------
def start(*, workers: int, threads: int, scheduler: str | None = None, scheduler_file: str | None = None,
          parent: int | None = None, timeout: float = START_TIMEOUT) -> str:
    """Start a run service, detached in a session of its own (Ctrl-C in the terminal reaches
    only its parent, whose end it then sees); return once it accepts.

    Parameters
    ----------
    workers, threads : int
        Size of the cluster it starts (``workers`` processes of ``threads`` threads).
    scheduler : str, optional
        Address of an existing scheduler to use instead (never stopped by the service).
    scheduler_file : str, optional
        A Dask scheduler file naming it, instead of ``scheduler``.
    parent : int, optional
        The process whose end stops the service; default this one.
    timeout : float
        Seconds to wait for it to accept.

    Returns
    -------
    str
        Its state folder (for ``$DPMMBENCH_SERVICE`` and :func:`stop`): a fresh 0700 folder
        under the system's temporary folder.

    Raises
    ------
    RuntimeError
        The service ended before accepting, or did not accept within ``timeout`` seconds;
        the message is the last line of its log.
    """
    remove_stale_states()
    state = tempfile.mkdtemp(prefix=STATE_PREFIX)  # mode 0700: only this user reaches the socket
    if len(os.fsencode(os.path.join(state, SOCKET_NAME))) > SOCKET_PATH_LIMIT:
        shutil.rmtree(state, ignore_errors=True)
        raise RuntimeError(f"the temporary folder {tempfile.gettempdir()!r} is too deep for a Unix socket "
                           f"(at most {SOCKET_PATH_LIMIT} bytes); set TMPDIR to a shorter one")
    cmd = [sys.executable, "-m", "dpmmbench.workflows.service", "serve", "--state", state, "--workers", str(workers),
           "--threads", str(threads), "--parent", str(os.getpid() if parent is None else parent)]
    if scheduler:
        cmd += ["--scheduler", scheduler]
    if scheduler_file:
        cmd += ["--scheduler-file", os.path.abspath(scheduler_file)]
    from .cluster import thread_environment

    # BLAS and OpenMP of the service itself (the master loops of sharded runs, the held-out
    # scoring) sized as a job's were by Snakemake: OpenBLAS left to size itself spun its
    # threads against the workers (a 2-D held-out scoring took 190 ms instead of 7 ms, measured);
    # numba's pool stays as it was in a job (see cluster._local_cluster on NUMBA_NUM_THREADS)
    env = dict(os.environ, **{name: value for name, value in thread_environment(threads).items()
                              if name != "NUMBA_NUM_THREADS"})
    with open(os.path.join(state, LOG_NAME), "ab") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                env=env)
    deadline = time.monotonic() + timeout
    while not os.path.exists(os.path.join(state, STATE_FILE)):
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            why = _last_line(os.path.join(state, LOG_NAME)) or f"exit code {proc.returncode}"
            shutil.rmtree(state, ignore_errors=True)
            raise RuntimeError(f"the run service did not start: {why}")
        time.sleep(0.02)
    return state


def stop(state_dir, timeout: float = STOP_TIMEOUT) -> None:
    """Stop the run service of ``state_dir`` and the cluster it started; return once its
    process has ended (signalled if it does not within ``timeout`` seconds). Nothing if it
    is gone already.

    Parameters
    ----------
    state_dir : str or os.PathLike
        What :func:`start` returned.
    timeout : float
    """
    state_dir = os.fspath(state_dir)
    info = read_state(state_dir)
    if info is None:
        shutil.rmtree(state_dir, ignore_errors=True)
        return
    pid = int(info["pid"])
    with contextlib.suppress(OSError, ValueError), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(info["socket"])
        send(sock, {"stop": True})
        receive(sock)
    for sig, wait in ((None, timeout), (signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        if sig is not None and _is_service(pid, state_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not _alive(pid):
            break
    shutil.rmtree(state_dir, ignore_errors=True)


def remove_stale_states() -> list[str]:
    """Remove the state folders of this user's services that are gone without removing them
    (a SIGKILL cannot be caught), in the system's temporary folder.

    A folder is stale when its ``service.json`` names a process that is no longer its
    service, or when it has none (a service that never started) and is older than
    :data:`START_TIMEOUT`; a service still starting or running is left alone.

    Returns
    -------
    list of str
        The folders removed.
    """
    removed = []
    for path in glob.glob(os.path.join(tempfile.gettempdir(), STATE_PREFIX + "*")):
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not os.path.isdir(path) or os.path.islink(path) or info.st_uid != os.getuid():
            continue
        state = read_state(path)
        if state is None:
            if time.time() - info.st_mtime < START_TIMEOUT:
                continue  # perhaps a service that is starting
        else:
            try:
                if _is_service(int(state["pid"]), path):
                    continue
            except (KeyError, TypeError, ValueError):
                pass  # not a service's description: the folder is no service's
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def read_state(state_dir) -> dict | None:
    """The ``service.json`` of a state folder, or None while there is none (or it is unreadable)."""
    try:
        with open(os.path.join(os.fspath(state_dir), STATE_FILE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:  # our child: reaped (a zombie would look alive)
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: the pid was reused
        return False
    with contextlib.suppress(OSError, IndexError):
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] != b"Z"  # a zombie has ended, unreaped
    return True


def _is_service(pid: int, state_dir: str) -> bool:
    """Whether ``pid`` is still the service of ``state_dir`` (not a reused pid)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return os.fsencode(state_dir) in f.read().split(b"\0")
    except FileNotFoundError:
        return not os.path.isdir("/proc") and _alive(pid)  # no /proc: trust the pid
    except OSError:
        return False


def _last_line(path) -> str:
    with contextlib.suppress(OSError):
        with open(path, errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
        return lines[-1] if lines else ""
    return ""


# ---- the service ------------------------------------------------------------------------------
class _Service:
    """The state of a serving process: its cluster (started in the background at once), its
    cache, its runs in flight."""

    def __init__(self, state_dir, workers, threads, address, debug):
        from . import driver

        self.state_dir, self.workers, self.threads, self.address = state_dir, workers, threads, address
        self.debug = debug
        self.socket = os.path.join(state_dir, SOCKET_NAME)
        self.stopping = threading.Event()
        self.cache = driver.RunCache()
        self._lock = threading.Lock()
        self._shared = None
        self._error = None  #: why the cluster could not be had
        self._runs: set[threading.Event] = set()  #: the cancel flags of the runs in flight

    # the cluster
    def shared(self):
        """The cluster (started or connected on the first call; the error of that call again)."""
        from . import cluster

        with self._lock:
            if self._shared is None and self._error is None:
                if self.stopping.is_set():
                    raise ConnectionError("the run service is stopping")
                try:
                    self._shared = (cluster.SharedCluster.connect(self.address) if self.address else
                                    cluster.SharedCluster.start(self.workers, self.threads))
                except Exception as exc:  # noqa: BLE001 - every run is told why
                    self._error = exc
                    print(f"dpmmbench service: no cluster: {type(exc).__name__}: {exc}", file=sys.stderr)
                else:
                    self.write_state()
            if self._error is not None:
                raise self._error
            return self._shared

    def write_state(self):
        shared = self._shared
        info = {"pid": os.getpid(), "socket": self.socket, "cwd": os.getcwd(),
                "scheduler": None if shared is None else shared.address,
                "owns_cluster": None if shared is None else shared.owns}
        temporary = os.path.join(self.state_dir, f".{STATE_FILE}.tmp")
        with open(temporary, "w") as f:
            json.dump(info, f)
        os.replace(temporary, os.path.join(self.state_dir, STATE_FILE))

    # one connection
    def handle(self, conn):
        with conn:
            try:
                request = receive(conn, REQUEST_LIMIT)
            except (OSError, ValueError):
                return
            if not isinstance(request, dict):
                return
            if request.get("stop"):
                with contextlib.suppress(OSError):
                    send(conn, {"stopping": True})
                self.stopping.set()
                return
            if not _well_formed(request):
                with contextlib.suppress(OSError):
                    send(conn, {"code": EXIT_CODES["usage"], "stdout": "",
                                 "stderr": "dpmmbench: error: the run service got a malformed request\n"})
                return
            outcome, cancel = {}, threading.Event()
            what = " ".join(request["command"])
            run = threading.Thread(target=self.execute, args=(request, cancel, outcome), daemon=True,
                                   name=f"run {what[:200]}")
            with self._lock:
                self._runs.add(cancel)
            run.start()
            while run.is_alive():
                run.join(WATCH_INTERVAL)
                if run.is_alive() and not cancel.is_set() and (self.stopping.is_set() or _closed(conn)):
                    cancel.set()  # its job was killed, or the workflow ended: the chain stops at its next step
            with self._lock:
                self._runs.discard(cancel)
            queued = time.time() - request.get("started", time.time())
            print(f"dpmmbench service: {what[:300]}: exit code {outcome.get('code')}"
                  f"{' (cancelled)' if cancel.is_set() else ''}; {queued:.3g} s since the job started", file=sys.stderr)
            if not cancel.is_set():
                with contextlib.suppress(OSError):
                    send(conn, outcome)

    def execute(self, request, cancel, outcome):
        """Execute the run ``request`` in this thread as ``dpmmbench run`` does
        (:func:`workflows.driver.execute`), until ``cancel`` is set; its output line, or its
        error line, and exit code into ``outcome``."""
        from . import driver

        try:
            shared = self.shared()
        except Exception as exc:  # noqa: BLE001 - told as the command tells a cluster error
            outcome.update(_failed(exc, "cluster"))
            return
        try:
            spec, out, cwd = dict(request["spec"]), request["out"], request.get("cwd")
            if cwd is not None and os.path.realpath(cwd) != os.path.realpath(os.getcwd()):
                out = os.path.join(cwd, out)  # an absolute path stays as it is
                if spec.get("data_file") is not None:
                    spec["data_file"] = os.path.join(cwd, spec["data_file"])
            out = writable(out, trace=True)
            spec = driver.RunSpec.from_dict(spec)
            line = driver.execute(spec, out, client=shared, cache=self.cache, command=request["command"],
                                  cancelled=cancel.is_set)
        except Exception as exc:  # noqa: BLE001 - every outcome is the job's answer
            outcome.update(_failed(exc))
        else:
            outcome.update(code=0, stdout=line + "\n", stderr="")

    def shutdown(self):
        """Cancel every run, close the client and the cluster started here."""
        self.stopping.set()
        with self._lock:
            runs = list(self._runs)
        for cancel in runs:
            cancel.set()
        with self._lock:  # waits for a cluster start in progress
            shared, self._shared = self._shared, None
            self._error = ConnectionError("the run service is stopping")
        if shared is not None:
            with contextlib.suppress(Exception):  # noqa: BLE001 - stopping whatever happens
                shared.close()


def _failed(exc, kind=None) -> dict:
    """The answer to a run that raised ``exc``: its class's exit code and one line, as the
    command ends it (:mod:`workflows.errors`), else a bug's traceback and 1; ``kind`` is the
    class of an exception that has none."""
    kind = classify(exc) or kind
    if kind is None:
        return {"code": 1, "stdout": "", "stderr": "".join(traceback.format_exception(exc))}
    return {"code": EXIT_CODES[kind], "stdout": "", "stderr": f"dpmmbench: {message(exc, kind)}\n"}


def _well_formed(request) -> bool:
    """Whether ``request`` is a run request (see :mod:`workflows.service_client`)."""
    command, cwd = request.get("command"), request.get("cwd")
    return (isinstance(request.get("spec"), dict) and isinstance(request.get("out"), str)
            and isinstance(command, list) and all(isinstance(word, str) for word in command)
            and (cwd is None or isinstance(cwd, str)))


def _closed(conn) -> bool:
    """Whether the job at the other end of ``conn`` has gone (it sends nothing more)."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _parent_gone(parent):
    """A function telling whether process ``parent`` has ended."""
    if parent is None:
        return lambda: False
    if os.getppid() == parent:
        # its child: re-parented the moment it ends (a pid test would see it as a zombie)
        return lambda: os.getppid() != parent
    return lambda: not _alive(parent)


def serve(state_dir, *, workers: int, threads: int, scheduler: str | None = None, scheduler_file: str | None = None,
          parent: int | None = None, debug: bool = False) -> int:
    """Serve runs on one cluster until stopped (see the module docstring); the process's exit code.

    Parameters
    ----------
    state_dir : str
        An existing folder, only its owner's (where :func:`start` puts the socket and
        ``service.json``); removed when the service stops.
    workers, threads : int
        Size of the cluster to start.
    scheduler, scheduler_file : str, optional
        An existing cluster to use instead, never stopped; else ``$DASK_SCHEDULER_ADDRESS``.
    parent : int, optional
        Stop when this process has ended.
    debug : bool
        Keep Dask's log lines (else errors only).

    Returns
    -------
    int
    """
    import logging

    from . import cluster

    address = cluster.scheduler_file_address(scheduler_file) if scheduler_file else cluster.scheduler_address(scheduler)
    service = _Service(os.fspath(state_dir), workers, threads, address, debug)
    if not debug:
        # once for the process, before any run: Dask's log lines and the resource tracker's
        # warnings about a dead worker's semaphores go nowhere (a run's errors are its answer)
        logging.disable(logging.ERROR)
        sys.warnoptions.append("ignore::UserWarning:multiprocessing.resource_tracker")
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: service.stopping.set())
    gone = _parent_gone(parent)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(service.socket)
        server.listen(64)
        server.settimeout(WATCH_INTERVAL)
        service.write_state()
        # the cluster starts now, while Snakemake schedules: the first run waits for it only if it comes first
        threading.Thread(target=_quietly, args=(service.shared,), daemon=True, name="cluster start").start()
        try:
            while not service.stopping.is_set():
                if gone():
                    print("dpmmbench service: its parent process has ended", file=sys.stderr)
                    break
                try:
                    conn, _ = server.accept()
                except (socket.timeout, InterruptedError):
                    continue
                conn.settimeout(None)
                threading.Thread(target=service.handle, args=(conn,), daemon=True, name="connection").start()
        finally:
            service.shutdown()
            shutil.rmtree(service.state_dir, ignore_errors=True)
    return 0


def _quietly(fn):
    """``fn()``, whose error is kept and told elsewhere (the cluster start, told to each run)."""
    with contextlib.suppress(Exception):
        fn()


def main(argv=None) -> int:
    """``python -m dpmmbench.workflows.service serve|stop ...``; the exit code."""
    parser = argparse.ArgumentParser(prog="python -m dpmmbench.workflows.service",
                                     description="The workflow's run service: one Dask cluster for every run.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve_ = sub.add_parser("serve", help="serve runs until stopped")
    serve_.add_argument("--state", required=True, help="state folder (socket, service.json, log)")
    serve_.add_argument("--workers", type=int, required=True)
    serve_.add_argument("--threads", type=int, required=True)
    where = serve_.add_mutually_exclusive_group()
    where.add_argument("--scheduler", help="existing Dask scheduler to use (never stopped)")
    where.add_argument("--scheduler-file", help="Dask scheduler file naming it")
    serve_.add_argument("--parent", type=int, help="stop when this process has ended")
    serve_.add_argument("--debug", action="store_true", help="keep Dask's log lines")
    stop_ = sub.add_parser("stop", help="stop a service")
    stop_.add_argument("state", help="its state folder")
    args = parser.parse_args(argv)
    if args.command == "stop":
        stop(args.state)
        return 0
    try:
        code = serve(args.state, workers=args.workers, threads=args.threads, scheduler=args.scheduler,
                     scheduler_file=args.scheduler_file, parent=args.parent, debug=args.debug)
    except Exception as exc:  # noqa: BLE001 - start() shows this last line of the log
        print(f"dpmmbench service: {type(exc).__name__}: {exc}", file=sys.__stderr__)
        code = 1
    # Daemon threads may still be inside Dask (a cancelled run): the process ends now, its
    # cluster closed; the interpreter's exit would wait for Dask's thread pools.
    for stream in (sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
