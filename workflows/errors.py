"""What can go wrong with a run, in classes the user can act on: the one place that maps an
exception to a class of mistake, its exit code and its one-line message.

The command line (:mod:`workflows.cli`) and the workflow's run service
(:mod:`workflows.service`) both end a run's mistake here, so that a run through the service
ends exactly as ``dpmmbench run`` ends it. Only the standard library is imported: a run job
that hands its run to the service reads its exit codes from here without numpy or Dask.

Examples
--------
>>> from dpmmbench.workflows.errors import DataError, classify, message
>>> classify(DataError("dataset 'x': no such file")), classify(ValueError("unknown algorithm"))
('data', 'usage')
>>> message(ValueError("a\\n  b"), "usage")
'error: a b'
>>> classify(ZeroDivisionError()) is None  # a bug: its traceback is shown
True
"""
from __future__ import annotations

#: exit codes by class of mistake; :func:`classify` maps exceptions to their keys
EXIT_CODES = {
    "usage": 2,        # unknown command, algorithm or option, a missing or invalid option value
    "data": 3,         # a bad dataset name or parameters, a data or trace file missing, unreadable, corrupt
    "output": 4,       # --out cannot be written
    "cluster": 5,      # the Dask scheduler did not answer, a worker or a shard was lost
    "interrupted": 130,
}


class DataError(ValueError):
    """A run's data cannot be used: a bad dataset name or parameters, a data file that is
    missing, unreadable, corrupt or of another dataset, data that do not fit in memory or
    that the dataset's family refuses (e.g. NaN)."""


class OutputError(OSError):
    """The destination of a command's output cannot be written."""


class Cancelled(Exception):
    """A run was cancelled (its job went away, or the workflow ended) and stopped at its next
    step; raised by the chain's callback, so the rows recorded so far are kept."""


def classify(exc: BaseException) -> str | None:
    """The class of mistake of ``exc`` (a key of :data:`EXIT_CODES`), or None for a bug.

    Library code reports bad input as ValueError/TypeError (unknown names and options, bad
    values), LookupError (registries), a :class:`DataError` (data that cannot be used),
    ConnectionError or TimeoutError (the scheduler; a shard whose workers keep failing) or
    distributed's own exceptions (a worker that died running a task).

    Parameters
    ----------
    exc : BaseException

    Returns
    -------
    str or None
    """
    if isinstance(exc, (KeyboardInterrupt, Cancelled)):
        return "interrupted"
    if isinstance(exc, OutputError):
        return "output"
    if isinstance(exc, DataError):
        return "data"
    if isinstance(exc, (ConnectionError, TimeoutError)) or _from_dask(exc):
        return "cluster"
    if isinstance(exc, (ValueError, TypeError, LookupError)):
        return "usage"
    if isinstance(exc, OSError):  # data and output are wrapped where they are read and written
        return "cluster"
    return None


def message(exc: BaseException, kind: str) -> str:
    """One line saying what went wrong (without the program's name).

    Parameters
    ----------
    exc : BaseException
    kind : str
        Its class, from :func:`classify`.

    Returns
    -------
    str
    """
    if kind == "interrupted":
        return "interrupted"
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
    text = " ".join(str(text).split()) or type(exc).__name__
    if _from_dask(exc):
        text = f"the Dask cluster failed ({type(exc).__name__}): {text}"
    return f"error: {text}"


def writable(out, trace=False):
    """``out`` if a file can be created there (:func:`reports.traces.check_writable`), else
    :class:`OutputError` naming it as ``--out``; checked before any work.

    Parameters
    ----------
    out : str or os.PathLike
    trace : bool
        ``out`` is a run's trace: first checked as a trace path
        (:func:`reports.traces.check_trace_path`: ``.parquet`` or ``.csv``, else ValueError).

    Returns
    -------
    pathlib.Path
    """
    from dpmmbench.reports.traces import check_trace_path, check_writable

    if trace:
        out = check_trace_path(out)
    try:
        return check_writable(out)
    except OSError as exc:
        raise OutputError(f"--out {str(out)!r}: {exc}") from exc


def write_to(out, write):
    """``write()``, an OSError from it being an :class:`OutputError` naming ``out``.

    Parameters
    ----------
    out : str or os.PathLike
    write : callable
    """
    try:
        return write()
    except OSError as exc:
        raise OutputError(f"--out {str(out)!r}: could not write it ({exc})") from exc


def _from_dask(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] in ("distributed", "tornado")
