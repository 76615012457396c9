"""Trace files: the one place they are written and read.

A trace is one run's tidy table, one row per iteration (see :func:`trace_frame` for its
columns). It is stored as ``.parquet`` (the run metadata as JSON in the schema metadata under
:data:`META_KEY`) or ``.csv`` (the metadata in a JSON sidecar ``<path>.meta.json``). Every
write is atomic (:func:`atomic_write`): a reader, or Snakemake, never sees a partial file.

The run driver writes traces and the reports read them; both import this module, which sits
in the lower of the two layers.

Example
-------
>>> import pandas as pd
>>> from dpmmbench.reports.traces import read_trace, write_trace
>>> path = write_trace(trace, "results/traces/gibbs.parquet", {"algorithm": "gibbs"})  # doctest: +SKIP
>>> trace, meta = read_trace(path)                                                       # doctest: +SKIP
"""
from __future__ import annotations

import glob
import json
import os
import secrets
from contextlib import suppress
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

#: the fixed leading columns of every trace, in order (docs/design.md "Traces and runs")
TRACE_COLUMNS = ("algorithm", "dataset", "seed", "workers", "iteration", "time_s", "log_joint",
                 "n_clusters", "vi", "bytes_sent", "bytes_received", "messages")
#: communication columns: a distributed sampler reports them per step in ``state.info``
COMM_COLUMNS = ("bytes_sent", "bytes_received", "messages")
#: trace file formats, by extension
TRACE_FORMATS = (".parquet", ".csv")
#: key of the run metadata (JSON) in the parquet schema metadata
META_KEY = b"dpmmbench"

_INT_COLUMNS = ("seed", "workers", "iteration", "n_clusters") + COMM_COLUMNS
_FLOAT_COLUMNS = ("time_s", "log_joint", "vi")


def trace_frame(rows) -> pd.DataFrame:
    """The trace of a run from its rows, with the fixed columns first and fixed dtypes.

    Parameters
    ----------
    rows : list of dict
        One dict per iteration with at least the keys of :data:`TRACE_COLUMNS`; any other
        key becomes a column after them, in order of first appearance (NaN where a row
        lacks it).

    Returns
    -------
    pandas.DataFrame
        Integer columns as int64 and ``time_s``, ``log_joint``, ``vi`` as float64, so that
        every trace of the suite concatenates without surprises.
    """
    extra = list(dict.fromkeys(key for row in rows for key in row if key not in TRACE_COLUMNS))
    df = pd.DataFrame.from_records(rows, columns=list(TRACE_COLUMNS) + extra)
    return df.astype({col: "int64" for col in _INT_COLUMNS} | {col: "float64" for col in _FLOAT_COLUMNS})


def check_trace_path(path) -> Path:
    """Return ``path`` as a Path if its extension is a trace format, else raise ValueError.

    Parameters
    ----------
    path : str or os.PathLike
        Destination of a trace: ``.parquet`` or ``.csv``.
    """
    path = Path(path)
    if path.suffix.lower() not in TRACE_FORMATS:
        raise ValueError(f"unsupported trace format {path.suffix or '(no extension)'!r} for {str(path)!r}; "
                         f"use one of {', '.join(TRACE_FORMATS)}")
    return path


def write_trace(df, path, meta=None) -> Path:
    """Write a trace and its metadata atomically; return the path written.

    The data go to a temporary file in the destination directory, which is then renamed
    over ``path``: a reader (or Snakemake) never sees a partial trace.

    Parameters
    ----------
    df : pandas.DataFrame
        The trace.
    path : str or os.PathLike
        ``.parquet``: ``meta`` is stored as JSON in the schema metadata under
        :data:`META_KEY`. ``.csv``: ``meta`` goes to the sidecar ``<path>.meta.json``.
        Missing parent directories are created.
    meta : dict, optional
        JSON-serialisable run metadata (numpy scalars and arrays are converted).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ValueError
        Unsupported extension (raised before anything is written).
    """
    path = check_trace_path(path)
    # Serialise first: metadata that cannot be serialised fails before any file is touched.
    meta_json = json.dumps(meta or {}, default=_json_default, indent=1)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(df, preserve_index=False)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), META_KEY: meta_json.encode()})
        atomic_write(path, lambda f: pq.write_table(table, f))
    else:
        # Sidecar first: whoever sees the trace can rely on its metadata being there.
        atomic_write(_sidecar(path), lambda f: f.write(meta_json.encode()))
        atomic_write(path, lambda f: df.to_csv(f, index=False, encoding="utf-8"))
    return path


def read_trace(path):
    """Read a trace written by :func:`write_trace`.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.parquet`` or ``.csv`` trace.

    Returns
    -------
    trace : pandas.DataFrame
    meta : dict
        The run metadata ({} if none was stored).
    """
    path = check_trace_path(path)
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        raw = (table.schema.metadata or {}).get(META_KEY)
        return table.to_pandas(), json.loads(raw) if raw else {}
    sidecar = _sidecar(path)
    meta = json.loads(sidecar.read_text()) if sidecar.exists() else {}
    # Name columns stay strings: an empty dataset name must not come back as NaN.
    df = pd.read_csv(path, dtype={"algorithm": str, "dataset": str})
    for col in ("algorithm", "dataset"):
        if col in df:
            df[col] = df[col].fillna("")
    return df, meta


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".meta.json")


def atomic_write(path, write) -> None:
    """Write ``path`` through a temporary file in the same folder and ``os.replace``.

    Readers see the old file or the complete new one, never a partial one; an interrupted
    write (an exception, Ctrl-C) removes its temporary file.

    Parameters
    ----------
    path : str or os.PathLike
        Destination; its folder must exist.
    write : callable
        ``write(f)`` receives a binary file object and writes the contents.
    """
    path = Path(path)
    # A fresh name created with O_EXCL and mode 0o666 so the final file gets the usual
    # umask-based permissions (mkstemp would leave it private to the owner).
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def remove_stale_temporaries(path) -> list[Path]:
    """Delete the temporary files :func:`atomic_write` left next to ``path`` when a writer
    was killed mid-write (SIGKILL leaves no chance to clean up); return what was deleted.

    Call it only as the one owner of ``path`` (e.g. the job that produces it): a
    concurrent writer's temporary file would be deleted too.

    Parameters
    ----------
    path : str or os.PathLike
        A file written with :func:`atomic_write` (its CSV sidecar is covered as well).

    Returns
    -------
    list of pathlib.Path
    """
    path = Path(path)
    if not path.parent.is_dir():
        return []
    removed = []
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        with suppress(FileNotFoundError):
            stale.unlink()
            removed.append(stale)
    return removed


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, (Path, datetime)):
        return str(obj)
    raise TypeError(f"run metadata value {obj!r} of type {type(obj).__name__} is not JSON-serialisable")
