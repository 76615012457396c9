"""Cases and helpers of tests/test_hostile_cluster.py: hostile peers where a Dask scheduler
should be, map functions that fail deterministically, samplers that fail mid-run.

Functions here are imported by the Dask workers (map functions) and by the isolated child
interpreter (the ``connect_*`` cases), so they live in a module, not in the test file.
"""
from __future__ import annotations

import os
import socket
import socketserver
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from dpmmbench.algorithms.gibbs import CollapsedGibbs
from dpmmbench.algorithms.slice_mr import SliceMapReduce

#: points of the data set the failing samplers run on (more than the driver's warm-up uses,
#: so that only the timed chain fails)
N_POINTS = 300  #: the failing runs hold nothing out (test_fraction=0), so the chain sees all of them
#: the iteration whose step fails
FAIL_AT = 3


# ---- map functions --------------------------------------------------------------------
def kill_worker_on_shard(shard, payload):
    """A map function that kills its worker process when it runs on shard ``payload[0]``
    (a crash in native code, say), after appending a line to the file ``payload[1]``."""
    victim, marker = payload
    if shard.index == victim:
        with open(marker, "a") as f:
            f.write(f"{os.getpid()}\n")
        os._exit(13)
    return shard.index


def raise_on_shard(shard, victim):
    """A map function that raises on shard ``victim``."""
    if shard.index == victim:
        raise ArithmeticError(f"deterministic failure on shard {shard.index}")
    return shard.index


# ---- samplers that fail mid-run (registered nowhere) ---------------------------------------
class ShardKillingSliceMR(SliceMapReduce):
    """``slice-mr``, whose step :data:`FAIL_AT` first runs :func:`kill_worker_on_shard` on
    shard 1 (only on the :data:`N_POINTS` of the timed chain, not the driver's warm-up)."""

    marker = None  #: the file kill_worker_on_shard appends to (set by the test)

    def step(self, state):
        if state.iteration + 1 == FAIL_AT and state.shards.offsets[-1] == N_POINTS:
            state.shards.map(kill_worker_on_shard, (1, self.marker))
        return super().step(state)


class FailingGibbs(CollapsedGibbs):
    """``gibbs`` (a serial sampler, whose chain runs as one task in a worker), whose step
    :data:`FAIL_AT` raises."""

    def step(self, state):
        if state.iteration + 1 == FAIL_AT and len(state.labels) == N_POINTS:
            raise ArithmeticError("the step failed on purpose")
        return super().step(state)


# ---- hostile peers ------------------------------------------------------------------------
class _Quiet(BaseHTTPRequestHandler):
    def log_message(self, *args):  # no access log on the test's stderr
        pass

    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"hello")


def http_server():
    """A web server on the loopback interface, in a daemon thread; ``(server, address)``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"tcp://127.0.0.1:{server.server_address[1]}"


class _Sender(socketserver.BaseRequestHandler):
    def handle(self):
        greeting = self.server.greeting
        if greeting is None:  # accept, say nothing, hold the connection open a while
            time.sleep(self.server.hold)
            return
        try:
            self.request.sendall(greeting)
            # a web server's manner: it also reads what the client sent, then closes
            self.request.settimeout(self.server.hold)
            self.request.recv(1 << 16)
        except OSError:
            pass


class _TCPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def raw_server(greeting: bytes | None, hold: float = 30.0):
    """A TCP server on the loopback interface that sends ``greeting`` to every connection
    (None: nothing, and keeps it open ``hold`` seconds); ``(server, address)``."""
    server = _TCPServer(("127.0.0.1", 0), _Sender)
    server.greeting, server.hold = greeting, hold
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"tcp://127.0.0.1:{server.server_address[1]}"


#: what a hostile peer may send first: a web server's reply, a length prefix of 2**62
#: bytes, a plausible length with garbage frames, an empty message, a lone byte
GREETINGS = {
    "http-reply": b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
    "huge-length": struct.pack("<Q", 1 << 62) + b"x" * 64,
    "garbage-frames": struct.pack("<Q", 32) + b"\xff" * 32,
    "zero-length": struct.pack("<Q", 0),
    "one-byte": b"\x01",
    "silence": None,
}


def connect_case(address: str, timeout: float):
    """In the isolated child: open a run's client to ``address``, with the scheduler timeout
    set through its Dask config key; ``(outcome, message, seconds)``."""
    import dask

    from dpmmbench.workflows.cluster import dask_client

    start = time.perf_counter()
    with dask.config.set({"dpmmbench.scheduler-timeout": timeout}):
        try:
            with dask_client(scheduler=address):
                pass
        except ConnectionError as exc:
            return "ConnectionError", str(exc), time.perf_counter() - start
    return "connected", "", time.perf_counter() - start


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
