"""The one way a run reaches Dask (docs/design.md "Dask clusters").

A run either joins an existing cluster -- the ``scheduler`` argument (the workflow passes its
config's ``dask.scheduler``), else ``$DASK_SCHEDULER_ADDRESS``, else dask's own
``scheduler-address`` setting -- or starts an embedded ``LocalCluster`` of worker processes
bound to the loopback interface (dashboard too) and shuts it down when the run ends, also
after an error or Ctrl-C.

Each embedded worker gets ``threads`` threads for Dask *and* for the numerical libraries in
it (numba, OpenMP, OpenBLAS, MKL), so ``workers x threads`` is all the cores a run uses: the
Nanny's defaults pin BLAS to one thread but leave numba at one thread per core, which
oversubscribes the machine as soon as there are two workers.

Example
-------
Not run by the doctests (``+SKIP``): starting worker processes takes seconds.

>>> from dpmmbench.workflows.cluster import dask_client
>>> with dask_client(workers=1, threads=1) as client:          # doctest: +SKIP
...     client.submit(sum, [1, 2]).result()
3
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from dpmmbench.algorithms.constraints import RUN_DEFAULTS, check_parameter

from .provenance import available_cores

#: seconds to wait for an existing scheduler before giving up (Dask config key
#: ``dpmmbench.scheduler-timeout`` overrides it, e.g. ``DASK_DPMMBENCH__SCHEDULER_TIMEOUT=20``)
SCHEDULER_TIMEOUT = 5.0
#: Dask config key of the scheduler timeout
SCHEDULER_TIMEOUT_KEY = "dpmmbench.scheduler-timeout"
#: bytes a Dask scheduler's greeting may take: its handshake is a small dict of settings
#: (a few hundred bytes); anything larger is not a Dask scheduler
GREETING_LIMIT = 1 << 16
#: environment variables that size the thread pools of a worker's numerical libraries
THREAD_VARIABLES = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
#: glibc malloc settings of an embedded worker (they replace dask's default): with the
#: Nanny's 64 kB trim threshold every large numpy temporary is a fresh mmap, returned to the
#: system when freed, and the next map pays the page faults again (slice-mr's map on 128k
#: points: 300 ms instead of ~130 ms, measured)
MALLOC_ENVIRONMENT = {"MALLOC_TRIM_THRESHOLD_": str(128 << 20), "MALLOC_MMAP_THRESHOLD_": str(32 << 20)}
#: an embedded cluster may claim at most this many threads (workers x threads) per core of the
#: machine: oversubscribing a little is how scaling is tried on a small machine, but a huge
#: value would spawn that many processes
OVERSUBSCRIPTION = 4


def scheduler_address(scheduler=None) -> str | None:
    """The address of the existing cluster a run should use, or None for an embedded one.

    Parameters
    ----------
    scheduler : str, optional
        An explicit address; wins over ``$DASK_SCHEDULER_ADDRESS`` and dask's
        ``scheduler-address`` setting, in that order.

    Returns
    -------
    str or None
    """
    if scheduler:
        return scheduler
    # The environment first: dask reads DASK_* variables into its config only once, at import.
    address = os.environ.get("DASK_SCHEDULER_ADDRESS")
    if address:
        return address
    import dask

    return dask.config.get("scheduler-address", None) or None


def check_address(address) -> str:
    """Return ``address`` if it is a well-formed Dask address, else raise.

    Raises
    ------
    TypeError
        Not a string.
    ValueError
        Unknown scheme or malformed host/port; the message names the address.
    """
    if not isinstance(address, str):
        raise TypeError(f"scheduler address must be a string, got {address!r}")
    from distributed.comm import get_address_host_port, parse_address
    from distributed.comm.registry import get_backend

    # Checked before building a Client: a Client given a malformed address hangs on shutdown
    # and prints a traceback from its destructor.
    try:
        scheme, _ = parse_address(address)
        get_backend(scheme)
        if scheme in ("tcp", "tls", "ws", "wss"):
            get_address_host_port(address)
    except ValueError as exc:
        raise ValueError(f"bad Dask scheduler address {address!r}: {exc}") from None
    return address


@contextmanager
def dask_client(workers=RUN_DEFAULTS["workers"], threads=RUN_DEFAULTS["threads"], scheduler=None):
    """A ``distributed.Client`` for one run: on an existing cluster, or on an embedded one.

    Parameters
    ----------
    workers : int
        Worker processes of an embedded cluster (>= 1). An existing cluster is used as it is.
    threads : int
        Threads per embedded worker (>= 1), for Dask tasks and for numba/OpenMP/BLAS.
    scheduler : str, optional
        Address of an existing scheduler, e.g. ``"tcp://10.0.0.5:8786"`` (see
        :func:`scheduler_address` for the fallbacks).

    Yields
    ------
    distributed.Client
        The default client while the run lasts (Dask's coordination helpers, e.g.
        ``as_completed``, ``Variable``, ``Queue``, find it without being handed it). Closed
        on exit; an embedded cluster is shut down with it (also when the body raises,
        KeyboardInterrupt included).

    Raises
    ------
    ValueError, TypeError
        Bad ``workers``, ``threads`` or address.
    ConnectionError
        The scheduler did not answer within :data:`SCHEDULER_TIMEOUT` seconds, or the
        address answered but is not a Dask scheduler (see :func:`connect`).
    """
    # A public entry point of its own (also used without the driver), so it checks its
    # arguments, against the same declarations as a run's.
    workers = check_parameter("workers", workers)
    threads = check_parameter("threads", threads)
    address = scheduler_address(scheduler)
    if address is not None:
        client = connect(address)
        try:
            yield client
        finally:
            client.close()
        return

    import distributed

    check_embedded(workers, threads)
    cluster = _local_cluster(workers, threads)
    try:
        client = distributed.Client(cluster)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


def connect(address: str, timeout: float | None = None):
    """A client of the scheduler at ``address`` (the default client until it is closed);
    ConnectionError if it does not answer, or is not a Dask scheduler.

    A TCP address is first probed (:func:`probe_scheduler`): ``distributed`` reads the first
    8 bytes a peer sends as the length of its handshake and allocates that much, so a web
    server's ``HTTP/1.1 400`` reply became a MemoryError, and a peer that says nothing
    hung the run.

    Parameters
    ----------
    address : str
        Dask scheduler address.
    timeout : float, optional
        Seconds to wait, for the probe and again for the connection; default the Dask
        config ``dpmmbench.scheduler-timeout``, else :data:`SCHEDULER_TIMEOUT`.
    """
    check_address(address)
    import dask
    import distributed

    from dpmmbench.algorithms.backends.dask_backend import timeout_seconds

    if timeout is None:
        timeout = timeout_seconds(dask.config.get(SCHEDULER_TIMEOUT_KEY, SCHEDULER_TIMEOUT), SCHEDULER_TIMEOUT_KEY)
    else:
        timeout = timeout_seconds(timeout, "timeout")
    probe_scheduler(address, timeout)
    try:
        return distributed.Client(address, timeout=timeout)
    except OSError as exc:  # distributed reports its connect timeout as a plain OSError
        raise ConnectionError(f"Dask scheduler at {address} did not answer within {timeout:g} s") from exc
    except Exception as exc:  # noqa: BLE001 - whatever a foreign protocol makes distributed raise
        raise ConnectionError(f"{address} answered but is not a Dask scheduler "
                              f"({type(exc).__name__}: {exc})") from exc


def probe_scheduler(address: str, timeout: float) -> None:
    """Check that the peer at a ``tcp://`` address greets like a Dask scheduler.

    Every Dask server sends its handshake as soon as it accepts a connection: an 8-byte
    length, then that many bytes of frames (a count, the frames' lengths, the frames).
    The probe reads it with a deadline and a size cap and checks that the framing adds
    up; it sends nothing, so a real scheduler only sees a connection closed before the
    handshake. Then, on a second connection, it asks the server's ``identity``: a worker
    or a nanny is a Dask server too, but no scheduler. Other schemes (``tls://``,
    ``inproc://``, ...) are left to ``distributed``.

    Parameters
    ----------
    address : str
        A well-formed Dask address (:func:`check_address`).
    timeout : float
        Seconds for the whole probe.

    Raises
    ------
    ConnectionError
        ``"Dask scheduler at ADDRESS did not answer within N s"`` (refused, unreachable),
        ``"no answer from ADDRESS within N s"`` (a silent peer, e.g. a web server waiting
        for a request) or ``"ADDRESS answered but is not a Dask scheduler"``.
    """
    import socket
    import struct
    import time

    from distributed.comm import get_address_host_port, parse_address

    scheme, _ = parse_address(address)
    if scheme != "tcp":
        return
    host, port = get_address_host_port(address)
    deadline = time.monotonic() + timeout

    received = []  #: the buffers read so far (a partial handshake is a foreign peer)

    def receive(sock, n):
        data = bytearray()
        received.append(data)
        while len(data) < n:
            sock.settimeout(max(deadline - time.monotonic(), 1e-3))
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise EOFError(f"it closed the connection after {len(data)} of {n} bytes")
            data += chunk
        return bytes(data)

    def foreign(why):
        return ConnectionError(f"{address} answered but is not a Dask scheduler ({why})")

    size = body = None
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            (size,) = struct.unpack("<Q", receive(sock, 8))
            if 16 <= size <= GREETING_LIMIT:
                body = receive(sock, size)
    except (TimeoutError, socket.timeout):
        got = sum(len(r) for r in received)
        if got:
            raise foreign(f"it sent {got} bytes of a Dask handshake, then nothing for {timeout:g} s") from None
        raise ConnectionError(f"no answer from {address} within {timeout:g} s: it accepted the connection but "
                              f"sent no Dask handshake (not a Dask scheduler?)") from None
    except EOFError as exc:
        raise foreign(str(exc)) from None
    except OSError as exc:
        raise ConnectionError(f"Dask scheduler at {address} did not answer within {timeout:g} s "
                              f"({type(exc).__name__}: {exc})") from exc
    if body is None:
        raise foreign(f"its first message would be {size} bytes long")
    (n_frames,) = struct.unpack_from("<Q", body)
    if not 1 <= n_frames <= (size - 8) // 8:
        raise foreign(f"its first message claims {n_frames} frames")
    lengths = struct.unpack_from(f"<{n_frames}Q", body, 8)
    if sum(lengths) != size - 8 * (1 + n_frames):
        raise foreign("its first message's frame lengths do not add up")
    # A Dask server: now distributed's own comm is safe to use, and says which kind it is
    # (a worker or nanny greets the same way but is no scheduler).
    try:
        identity = _identity(address, max(deadline - time.monotonic(), 0.5))
    except (TimeoutError, OSError) as exc:
        raise ConnectionError(f"Dask scheduler at {address} did not answer within {timeout:g} s "
                              f"({type(exc).__name__}: {exc})") from exc
    except Exception as exc:  # noqa: BLE001 - whatever a foreign protocol makes distributed raise
        raise foreign(f"{type(exc).__name__}: {exc}") from exc
    kind = identity.get("type") if isinstance(identity, dict) else None
    if kind != "Scheduler":
        raise foreign(f"it is a Dask {kind}" if isinstance(kind, str) else "it did not say what it is")


def _identity(address: str, timeout: float):
    """The reply of the Dask server at ``address`` to ``identity``, asked on a loop of its own
    (in a thread: the caller may be running an event loop, e.g. in a notebook)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from distributed.comm import connect as open_comm

    async def ask():
        comm = await open_comm(address, timeout=timeout)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await asyncio.wait_for(comm.read(), timeout)
        finally:
            comm.abort()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(ask())).result()


def describe(client, shared: bool = False) -> dict:
    """Where a run computed, for its provenance.

    Parameters
    ----------
    client : distributed.Client
    shared : bool
        The cluster serves many runs (the workflow's run service, :class:`SharedCluster`).

    Returns
    -------
    dict
        ``scheduler`` (address), ``dashboard`` (link or None), ``embedded`` (True if the
        cluster was started here: for this run, or by the run service for its workflow),
        ``shared`` (``shared``), ``n_workers`` and ``threads_per_worker`` (an int, or the
        sorted distinct values when the workers differ) of the whole cluster.
    """
    from dpmmbench.algorithms.backends.dask_backend import live_workers

    workers = live_workers(client)
    counts = sorted({int(w.get("nthreads", 0)) for w in workers.values()})
    try:
        dashboard = client.dashboard_link
    except (KeyError, AttributeError):  # a scheduler without a dashboard
        dashboard = None
    return {
        "scheduler": client.scheduler.address,
        "dashboard": dashboard,
        "embedded": client.cluster is not None,
        "shared": bool(shared),
        "n_workers": len(workers),
        "threads_per_worker": counts[0] if len(counts) == 1 else counts,
    }


def scheduler_file_address(path) -> str:
    """The scheduler address in a Dask scheduler file (``dask scheduler --scheduler-file PATH``).

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    str
        The address, checked by :func:`check_address`.

    Raises
    ------
    ConnectionError
        The file cannot be read, is not JSON or names no address (no scheduler to reach).
    """
    import json

    try:
        with open(path) as f:
            info = json.load(f)
    except (OSError, ValueError) as exc:
        raise ConnectionError(f"scheduler file {os.fspath(path)!r}: {exc}") from exc
    address = info.get("address") if isinstance(info, dict) else None
    if not isinstance(address, str):
        raise ConnectionError(f"scheduler file {os.fspath(path)!r} names no scheduler address")
    return check_address(address)


@dataclass(frozen=True)
class Place:
    """Where one run computes, while it holds it (what :meth:`OwnCluster.place` and
    :meth:`SharedCluster.place` yield): the ``client``, the workers reserved for the run
    (``reserved``: None on a cluster of its own, which is all the run's; on a shared cluster
    the reserved addresses, or None when it had no worker yet), whether the cluster is
    ``shared`` with other runs, and how the run's data are sent to the workers (:meth:`scatter`)."""

    client: object
    reserved: list | None
    shared: bool
    _scatter: object = field(repr=False)

    def scatter(self, key, data):
        """``data`` on the workers, as a future; ``key`` names data already sent to a shared
        cluster (see :meth:`SharedCluster.scatter`), and is ignored by a cluster of the run's own."""
        return self._scatter(key, data)


class OwnCluster:
    """A run's cluster of its own (:func:`dask_client`): an existing one at ``scheduler`` (or
    ``$DASK_SCHEDULER_ADDRESS``), or an embedded one of ``workers`` x ``threads``, opened for
    the run and closed after it. The address, or the embedded cluster's size against this
    machine, is checked when this object is made, before the run loads any data.

    Parameters
    ----------
    scheduler : str, optional
    workers, threads : int
    """

    def __init__(self, scheduler, workers: int, threads: int):
        self.address = scheduler_address(scheduler)
        if self.address is not None:
            check_address(self.address)
        else:
            check_embedded(workers, threads)
        self.workers, self.threads = workers, threads

    @contextmanager
    def place(self, n: int):
        """The run's :class:`Place` for the ``with`` block: the whole cluster (``n`` is its size
        already)."""
        with dask_client(workers=self.workers, threads=self.threads, scheduler=self.address) as client:
            yield Place(client, None, False, lambda key, data: client.scatter(data, hash=False))


def for_run(scheduler, workers: int, threads: int, client=None):
    """Where a run computes: a cluster of its own (:class:`OwnCluster`), or ``client``, a cluster
    shared with other runs (a :class:`SharedCluster`, or a plain ``distributed.Client``
    shared as it is). Both give the run a :class:`Place` through ``place(workers)``.

    Parameters
    ----------
    scheduler : str, optional
        The scheduler the run asks for; on a shared cluster it must be that cluster's.
    workers, threads : int
        The run's workers, and threads per worker of an embedded cluster.
    client : SharedCluster or distributed.Client, optional

    Returns
    -------
    OwnCluster or SharedCluster

    Raises
    ------
    ConnectionError
        ``scheduler`` is not the shared cluster's, or does not answer.
    ValueError
        A bad address, or an embedded cluster larger than this machine allows.
    """
    if client is None:
        return OwnCluster(scheduler, workers, threads)
    shared = client if isinstance(client, SharedCluster) else SharedCluster(client)
    if scheduler is not None and not shared.serves(check_address(scheduler)):
        raise ConnectionError(f"this run asks for the Dask scheduler at {scheduler}, but it runs on the "
                              f"shared cluster at {shared.address}")
    return shared


class SharedCluster:
    """One Dask cluster serving many runs, each on workers of its own while it computes.

    The workflow's run service (:mod:`workflows.service`) holds one for the whole workflow:
    started here (:meth:`start`, exactly the embedded cluster of :func:`dask_client`) or an
    existing one (:meth:`connect`), which :meth:`close` leaves running.

    Runs reserve workers (:meth:`reserve`) so that two runs never compute on one worker:
    Snakemake bounds the cores the runs claim together, and the cluster has as many worker
    slots as the workflow has cores, so the reservations honour the same bound as a
    cluster per run did (Dask alone would place a serial chain beside a sharded run's
    actor, whose calls do not count as the worker's load). Data sent through
    :meth:`scatter` go to every worker once and stay while this object lives.

    Parameters
    ----------
    client : distributed.Client
        A connected client (owned by this object: :meth:`close` closes it).
    cluster : distributed.LocalCluster, optional
        The cluster started for it, closed by :meth:`close`; None for an existing one.
    """

    def __init__(self, client, cluster=None, address=None):
        self.client = client
        self.cluster = cluster
        self._given = address  #: the address it was reached by, as the user wrote it
        self._cond = threading.Condition()
        self._busy: set[str] = set()  #: addresses reserved by a run
        self._scattered: dict = {}  #: key -> future of data on every worker

    @classmethod
    def start(cls, workers: int, threads: int) -> SharedCluster:
        """An embedded cluster of ``workers`` x ``threads`` on 127.0.0.1 (see :func:`dask_client`).

        Raises
        ------
        ValueError, TypeError
            Bad sizes, or larger than :func:`check_embedded` allows.
        """
        import distributed

        workers = check_parameter("workers", workers)
        threads = check_parameter("threads", threads)
        check_embedded(workers, threads)
        cluster = _local_cluster(workers, threads)
        try:
            return cls(distributed.Client(cluster), cluster)
        except BaseException:
            cluster.close()
            raise

    @classmethod
    def connect(cls, address: str) -> SharedCluster:
        """The existing cluster at ``address`` (:func:`connect`), never stopped by this object."""
        return cls(connect(address), address=address)

    @property
    def owns(self) -> bool:
        """Whether :meth:`close` stops the cluster (it was started here)."""
        return self.cluster is not None

    @property
    def address(self) -> str:
        """The scheduler's address."""
        return self.client.scheduler.address

    def serves(self, address: str) -> bool:
        """Whether ``address`` names this cluster (as its scheduler says, or as it was given)."""
        return address in (self.address, self._given)

    def describe(self) -> dict:
        """:func:`describe` of the cluster, ``shared`` true."""
        return describe(self.client, shared=True)

    @contextmanager
    def reserve(self, n: int):
        """``n`` workers no other run computes on, for the ``with`` block.

        Waits until that many are free; a cluster with fewer workers gives all it has (the
        run's own checks then say whether that is enough).

        Yields
        ------
        list of str
            The reserved workers' addresses (empty when the cluster has no worker yet).
        """
        from dpmmbench.algorithms.backends.dask_backend import live_workers

        with self._cond:
            while True:
                live = sorted(live_workers(self.client))
                free = [w for w in live if w not in self._busy]
                want = min(n, len(live))
                if len(free) >= want:
                    break
                self._cond.wait(0.5)  # woken by a release; the timeout sees workers come and go
            reserved = free[:want]
            self._busy.update(reserved)
        try:
            yield reserved
        finally:
            with self._cond:
                self._busy.difference_update(reserved)
                self._cond.notify_all()

    @contextmanager
    def place(self, n: int):
        """The run's :class:`Place` for the ``with`` block: ``n`` workers reserved
        (:meth:`reserve`), the cluster left running after it."""
        with self.reserve(n) as reserved:
            yield Place(self.client, list(reserved) or None, True, self.scatter)

    def scatter(self, key, data):
        """``data`` on the workers, as a future.

        Parameters
        ----------
        key : hashable or None
            What ``data`` are (e.g. a dataset's cache key and its split): data of a key seen
            before are not sent again, while the future still holds them; None sends them
            for this call only.
        data : object

        Returns
        -------
        distributed.Future
        """
        if key is None:
            return self.client.scatter(data, hash=False)
        with self._cond:
            future = self._scattered.get(key)
            if future is None or future.status != "finished":  # lost with every worker holding it
                future = self._scattered[key] = self.client.scatter(data, hash=False, broadcast=True)
            return future

    def close(self) -> None:
        """Close the client, and the cluster if it was started here (also after an error)."""
        with self._cond:
            self._scattered.clear()
        try:
            self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()


def thread_environment(threads: int) -> dict[str, str]:
    """The environment that gives a worker's numerical libraries ``threads`` threads (a count
    :func:`dask_client` has checked)."""
    return {name: str(threads) for name in THREAD_VARIABLES}


def check_embedded(workers: int, threads: int) -> None:
    """Refuse an embedded cluster larger than this machine can run.

    Raises
    ------
    ValueError
        ``workers * threads`` exceeds :data:`OVERSUBSCRIPTION` times the cores available to
        this process; the message says how large it may be, and that an existing cluster
        (``--scheduler``) takes any size.
    """
    cores = available_cores()
    limit = OVERSUBSCRIPTION * cores
    if workers * threads > limit:
        raise ValueError(f"an embedded cluster of {workers} workers x {threads} threads exceeds {limit} threads "
                         f"({OVERSUBSCRIPTION} per core of the {cores} available here); use fewer, or an existing "
                         "cluster (--scheduler ADDRESS) for more")


def _local_cluster(workers: int, threads: int):
    import dask
    import distributed

    env = thread_environment(threads)
    # BLAS and OpenMP read their variables when first loaded, and a spawned worker may load
    # numpy before the Nanny applies `env`: so the variables must also be in the parent's
    # environment at spawn time (the Nanny's "pre-spawn" environment). A variable already set
    # in the parent would override the pre-spawn config, hence the temporary os.environ edit.
    # The Nanny writes the pre-spawn variables into *this* process's environment, for good and
    # again at every restart of its worker: NUMBA_NUM_THREADS must stay out of it, since numba
    # re-reads it at every compilation here and refuses a value that differs from the size of
    # its running thread pool. Numba reads it when a worker first runs a parallel kernel,
    # long after the Nanny has applied `env`.
    spawn = {name: value for name, value in env.items() if name != "NUMBA_NUM_THREADS"}
    pre_spawn = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **MALLOC_ENVIRONMENT, **spawn}
    with _environ(spawn), dask.config.set({"distributed.nanny.pre-spawn-environ": pre_spawn}):
        return distributed.LocalCluster(
            n_workers=workers, threads_per_worker=threads, processes=True,
            host="127.0.0.1", dashboard_address="127.0.0.1:0",  # loopback only, any free port
            env=env)


@contextmanager
def _environ(values: dict[str, str]):
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                with suppress(KeyError):
                    del os.environ[name]
            else:
                os.environ[name] = value
