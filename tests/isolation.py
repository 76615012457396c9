"""Run untrusted-input cases in a child interpreter, so that a crash fails a test instead of
killing the test run.

A case is a function of the tests (``"module:function"``, importable from ``tests/``) and its
arguments. The child runs it and reports what came back or what was raised; if the child dies
(a segfault in compiled code, an abort) or does not answer in time (a hang), the case fails
with its arguments, and the next case gets a fresh child.
"""
from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parent

_CHILD = r"""
import importlib, pickle, struct, sys, traceback
sys.path.insert(0, sys.argv[1])
stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
def send(obj):
    data = pickle.dumps(obj)
    stdout.write(struct.pack("<Q", len(data)) + data)
    stdout.flush()
while True:
    head = stdin.read(8)
    if len(head) < 8:
        break
    target, args, kwargs = pickle.loads(stdin.read(struct.unpack("<Q", head)[0]))
    module, name = target.split(":")
    try:
        value = getattr(importlib.import_module(module), name)(*args, **kwargs)
        try:
            pickle.dumps(value)
        except Exception:
            value = repr(value)
        send(("returned", value, None))
    except BaseException as exc:
        send(("raised", type(exc), "".join(traceback.format_exception_only(type(exc), exc)).strip()))
"""


@dataclass(frozen=True)
class Outcome:
    """What a case did: ``returned`` a ``value``, or ``raised`` an exception of ``type``."""

    kind: str
    value: object = None
    type: type | None = None
    message: str = ""

    @property
    def clear_error(self) -> bool:
        """Raised ValueError or TypeError (the suite's error for bad input) with a message."""
        return self.kind == "raised" and issubclass(self.type, (ValueError, TypeError)) and bool(self.message)


class Isolated:
    """A child Python process that runs cases one at a time (see the module docstring).

    Parameters
    ----------
    timeout : float
        Seconds a case may take before it counts as a hang.
    env : dict, optional
        Extra environment variables of the child.
    """

    def __init__(self, timeout: float = 120.0, env: dict | None = None):
        self.timeout = timeout
        self.env = {**os.environ, **(env or {})}
        self._child = None

    def _start(self):
        self._child = subprocess.Popen([sys.executable, "-c", _CHILD, str(TESTS)], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env)

    def run(self, target: str, *args, **kwargs) -> Outcome:
        """Run ``target(*args, **kwargs)`` in the child; raise AssertionError if it crashed or hung."""
        if self._child is None or self._child.poll() is not None:
            self._start()
        data = pickle.dumps((target, args, kwargs))
        try:
            self._child.stdin.write(struct.pack("<Q", len(data)) + data)
            self._child.stdin.flush()
            head = self._read(8)
            kind, value, message = pickle.loads(self._read(struct.unpack("<Q", head)[0]))
        except (OSError, EOFError, TimeoutError) as exc:
            child, self._child = self._child, None
            hung = isinstance(exc, TimeoutError)
            child.kill()
            _, err = child.communicate()
            what = f"hung (> {self.timeout:g} s)" if hung else f"crashed the interpreter (exit {child.returncode})"
            raise AssertionError(f"{target}{_show(args, kwargs)} {what}; its stderr ends:\n"
                                 f"{err.decode(errors='replace')[-2000:]}") from None
        if kind == "returned":
            return Outcome("returned", value=value)
        return Outcome("raised", type=value, message=message)

    def _read(self, n: int) -> bytes:
        import selectors

        out, chunks, got = self._child.stdout, [], 0
        with selectors.DefaultSelector() as sel:
            sel.register(out, selectors.EVENT_READ)
            while got < n:
                if not sel.select(self.timeout):
                    raise TimeoutError
                chunk = os.read(out.fileno(), n - got)
                if not chunk:
                    raise EOFError
                chunks.append(chunk)
                got += len(chunk)
        return b"".join(chunks)

    def close(self):
        if self._child is not None:
            self._child.kill()
            self._child.communicate()
            self._child = None


def _show(args, kwargs) -> str:
    text = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
    return f"({text[:1500]})"
