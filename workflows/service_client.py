"""The job's side of the workflow's run service (:mod:`workflows.service`): hand a run request
to the service and wait for its answer.

``dpmmbench run`` (:mod:`workflows.cli`) calls :func:`forward` when ``$DPMMBENCH_SERVICE``
names a service. Only the standard library is imported here, so that a run job starts and
hands over its run in a few hundredths of a second, without numpy, pandas or Dask.

The protocol: one request per connection on the service's Unix domain socket, a JSON line
``{"spec": {...}, "out": ..., "command": [...], "cwd": ..., "started": ...}`` (the run spec as
:meth:`workflows.driver.RunSpec.to_dict` writes it, where its trace goes, the command line
the metadata records, the folder relative paths are relative to, and when the job started),
answered once the run has ended by a JSON line ``{"code": int, "stdout": str, "stderr": str}``.
"""
from __future__ import annotations

import json
import os
import socket
import time

#: the environment variable naming a workflow's run service (its state folder or socket)
SERVICE_VARIABLE = "DPMMBENCH_SERVICE"
#: the service's socket, in its state folder
SOCKET_NAME = "run.sock"


class ServiceGone(ConnectionError):
    """The run service named by ``$DPMMBENCH_SERVICE`` does not answer (or stopped mid-run)."""


def socket_path(where) -> str:
    """The socket of the service ``where`` names: its state folder, or the socket itself."""
    where = os.fspath(where)
    return os.path.join(where, SOCKET_NAME) if os.path.isdir(where) else where


def forward(request, where) -> tuple[int, str, str]:
    """Have the run service ``where`` run ``request``; wait for the answer.

    Parameters
    ----------
    request : dict
        ``spec``, ``out``, ``command`` and ``cwd`` (see the module docstring;
        :func:`workflows.cli.run_request` makes one from ``dpmmbench run`` arguments).
    where : str or os.PathLike
        The service's state folder or socket (``$DPMMBENCH_SERVICE``).

    Returns
    -------
    (int, str, str)
        The run's exit code, standard output and standard error.

    Raises
    ------
    ServiceGone
        Nothing listens there, or the service closed the connection before answering.
    """
    path = socket_path(where)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(path)
        except OSError as exc:
            raise ServiceGone(f"the run service at {os.fspath(where)} does not answer ({exc.strerror or exc}): "
                              f"its workflow has ended? (unset {SERVICE_VARIABLE} to run on a cluster of the "
                              "run's own)") from None
        try:
            send(sock, {**request, "started": time.time()})
            reply = receive(sock)
        except OSError as exc:
            raise ServiceGone(f"the run service at {os.fspath(where)} failed mid-run ({exc})") from None
    if not isinstance(reply, dict) or not isinstance(reply.get("code"), int):
        raise ServiceGone(f"the run service at {os.fspath(where)} stopped before the run ended")
    return reply["code"], str(reply.get("stdout", "")), str(reply.get("stderr", ""))


def send(sock, message) -> None:
    """Send ``message`` (JSON-serialisable) on ``sock`` as one JSON line."""
    sock.sendall(json.dumps(message).encode() + b"\n")


def receive(sock, limit=None):
    """One JSON line from ``sock`` (None if it closes first); ValueError past ``limit`` bytes
    or on a line that is not JSON."""
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = sock.recv(1 << 16)
        if not chunk:
            return None
        data += chunk
        if limit is not None and len(data) > limit:
            raise ValueError(f"a request longer than {limit} bytes")
    return json.loads(data)
