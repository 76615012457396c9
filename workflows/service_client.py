"""The job's side of the workflow's run service (:mod:`workflows.service`): hand a run request
to the service and wait for its answer.

A workflow's run job is ``python -m dpmmbench.workflows.service_client --spec JSON --out
PATH`` (:func:`main`): the spec the workflow built from its config
(:func:`workflows._config.run_spec`) goes to the service as it is, no command line parsed on
the way. ``dpmmbench run`` (:mod:`workflows.cli`) also hands its run over (:func:`relay`)
when ``$DPMMBENCH_SERVICE`` names a service. Only the standard library is imported here (and
:mod:`workflows.errors`, which imports nothing else), so that a run job starts and hands over
its run in a few hundredths of a second, without numpy, pandas or Dask.

The protocol: one request per connection on the service's Unix domain socket, a JSON line
``{"spec": {...}, "out": ..., "command": [...], "cwd": ..., "started": ...}`` (the run spec as
:meth:`workflows.driver.RunSpec.to_dict` writes it, where its trace goes, the command line
the metadata records, the folder relative paths are relative to, and when the job started),
answered once the run has ended by a JSON line ``{"code": int, "stdout": str, "stderr": str}``.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

from .errors import EXIT_CODES

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


def relay(request, where) -> int:
    """Have the run service ``where`` run ``request``, write its output here and return its
    exit code, as ``dpmmbench run`` ends (:mod:`workflows.errors`).

    Parameters
    ----------
    request : dict
        See :func:`forward`.
    where : str or os.PathLike
        The service's state folder or socket (``$DPMMBENCH_SERVICE``).

    Returns
    -------
    int
        The run's exit code; the cluster class's for a service that does not answer, and
        the interrupted one on Ctrl-C (the service sees the connection close and cancels the run).
    """
    try:
        code, out, err = forward(request, where)
    except ServiceGone as exc:
        print(f"dpmmbench: error: {exc}", file=sys.stderr)
        return EXIT_CODES["cluster"]
    except KeyboardInterrupt:  # the service sees the connection close and cancels the run
        print("dpmmbench: interrupted", file=sys.stderr)
        return EXIT_CODES["interrupted"]
    sys.stdout.write(out)
    sys.stderr.write(err)
    return code


def main(argv=None) -> int:
    """A workflow's run job, ``python -m dpmmbench.workflows.service_client --spec JSON --out PATH``.

    The spec (as :meth:`workflows.driver.RunSpec.to_json` writes it) goes to the run service
    named by ``$DPMMBENCH_SERVICE`` unparsed: the service builds, and so checks, the
    :class:`~workflows.driver.RunSpec`. The trace records the command ``dpmmbench run --spec
    JSON --out PATH``, which runs the same spec by hand.

    Parameters
    ----------
    argv : list of str, optional
        The job's ``--spec JSON --out PATH`` (default: this process's).

    Returns
    -------
    int
        The run's exit code (:func:`relay`); the usage class's for a spec that is not a JSON
        object, the cluster class's when no service is named (a job that runs without one is
        ``dpmmbench run --spec``: ``workflows/common.smk`` makes it so).
    """
    parser = argparse.ArgumentParser(prog="python -m dpmmbench.workflows.service_client",
                                     description="A workflow's run job: hand a run spec to the workflow's run service.")
    parser.add_argument("--spec", required=True, metavar="JSON", help="the run spec, as RunSpec.to_json writes it")
    parser.add_argument("--out", required=True, metavar="PATH", help="trace file: .parquet or .csv")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        spec = json.loads(args.spec)
    except ValueError as exc:
        spec = exc
    if not isinstance(spec, dict):
        print(f"dpmmbench: error: --spec is not a JSON object: {spec}", file=sys.stderr)
        return EXIT_CODES["usage"]
    where = os.environ.get(SERVICE_VARIABLE)
    if not where:
        print(f"dpmmbench: error: no run service (${SERVICE_VARIABLE} is not set); run the spec on a cluster "
              "of its own with `dpmmbench run --spec JSON --out PATH`", file=sys.stderr)
        return EXIT_CODES["cluster"]
    command = ["dpmmbench", "run", "--spec", args.spec, "--out", args.out]
    return relay({"spec": spec, "out": args.out, "command": command, "cwd": os.getcwd()}, where)


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


if __name__ == "__main__":
    sys.exit(main())
