"""Trace files: the one place they are written and read.

A trace is one run's tidy table, one row per iteration (see :func:`trace_frame` for its
columns): ``algorithm`` is the run's registry name and ``name`` the run's name
(:func:`reports.runs.run_name`, e.g. ``gibbs-200it`` or ``search[beam=10]``). A trace written
before the ``name`` column held the run's name in ``algorithm`` and its registry name only in
the metadata (:func:`trace_names` reads both). It is stored as ``.parquet`` (the run metadata
as JSON in the schema metadata under :data:`META_KEY`) or ``.csv`` (the metadata in a JSON
sidecar ``<path>.meta.json``). Every write is atomic (:func:`atomic_write`): a reader, or
Snakemake, never sees a partial file.
A CSV and its sidecar are a pair: the sidecar records the SHA-256 of the CSV's bytes, and
:func:`read_trace` refuses a CSV its sidecar does not describe (see :func:`write_trace`).

The run driver writes traces and the reports read them; both import this module, which sits
in the lower of the two layers.

Example
-------
>>> import os, tempfile
>>> from dpmmbench.reports.traces import TRACE_COLUMNS, read_trace, trace_frame, write_trace
>>> row = dict.fromkeys(TRACE_COLUMNS, 0) | {"algorithm": "gibbs", "name": "gibbs", "dataset": "digits",
...                                          "log_joint": -512.3}
>>> trace = trace_frame([row])
>>> with tempfile.TemporaryDirectory() as tmp:
...     path = write_trace(trace, os.path.join(tmp, "gibbs.parquet"), {"algorithm": "gibbs"})
...     back, meta = read_trace(path)
>>> back.equals(trace), meta
(True, {'algorithm': 'gibbs'})
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import secrets
import time
import zlib
from contextlib import suppress
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

#: the fixed leading columns of every trace, in order (docs/design.md "Traces and runs")
TRACE_COLUMNS = ("algorithm", "name", "dataset", "seed", "workers", "iteration", "time_s", "log_joint",
                 "n_clusters", "vi", "bytes_sent", "bytes_received", "messages", "alpha", "nmi")
#: communication columns: a distributed sampler reports them per step in ``state.info``
COMM_COLUMNS = ("bytes_sent", "bytes_received", "messages")
#: trace file formats, by extension
TRACE_FORMATS = (".parquet", ".csv")
#: key of the run metadata (JSON) in the parquet schema metadata
META_KEY = b"dpmmbench"
#: key of a CSV sidecar holding the SHA-256 of the CSV's bytes (not part of the run metadata)
DIGEST_KEY = "csv_sha256"
#: marks the temporary files of :func:`atomic_write`: ``.<name>.dpmmbench-tmp-<pid>-<8 hex>``
TEMP_MARKER = "dpmmbench-tmp"
#: seconds without a write after which the temporary file of a dead process is stale: a live
#: writer (even on another host sharing the folder, whose process ids mean nothing here)
#: writes its file without pause and renames it within seconds
STALE_AFTER = 600.0

_INT_COLUMNS = ("seed", "workers", "iteration", "n_clusters") + COMM_COLUMNS
_FLOAT_COLUMNS = ("time_s", "log_joint", "vi", "alpha", "nmi")
_TEXT_COLUMNS = ("algorithm", "name", "dataset")


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
        Integer columns as int64 and ``time_s``, ``log_joint``, ``vi``, ``alpha``, ``nmi`` as float64, so that
        every trace of the suite concatenates without surprises.
    """
    extra = list(dict.fromkeys(key for row in rows for key in row if key not in TRACE_COLUMNS))
    df = pd.DataFrame.from_records(rows, columns=list(TRACE_COLUMNS) + extra)
    return df.astype({col: "int64" for col in _INT_COLUMNS} | {col: "float64" for col in _FLOAT_COLUMNS})


def trace_names(trace: pd.DataFrame, meta: dict) -> tuple[str, str]:
    """The registry name and the run's name of a trace, in today's vocabulary.

    A trace with a ``name`` holds the registry name in ``algorithm``. An older trace has no
    ``name`` column (or an empty one, as rows built without it give): its ``algorithm``
    column held the run's name, and its registry name is the metadata's ``algorithm``, or the
    column's where the metadata has none.

    Parameters
    ----------
    trace : pandas.DataFrame
        A trace with at least one row.
    meta : dict
        Its metadata.

    Returns
    -------
    (str, str)
        ``(algorithm, name)`` as the trace's first row records them.

    Examples
    --------
    >>> import pandas as pd
    >>> from dpmmbench.reports.traces import trace_names
    >>> trace_names(pd.DataFrame({"algorithm": ["search"], "name": ["search-decreasing"]}), {})
    ('search', 'search-decreasing')
    >>> trace_names(pd.DataFrame({"algorithm": ["search-decreasing"]}), {"algorithm": "search"})
    ('search', 'search-decreasing')
    """
    first = trace.iloc[0]
    name, column = first.get("name"), str(first["algorithm"])
    if isinstance(name, str) and name:
        return column, name
    return str(meta.get("algorithm") or column), column


#: how :func:`encode_partition` stores a partition in a run's metadata (``final_partition``)
PARTITION_ENCODING = "zlib-base64-uint32-first-appearance"


def encode_partition(labels) -> dict:
    """A partition as a small JSON value for a run's metadata (its final state's labels).

    The labels are renumbered in order of first appearance (a partition, not its names), stored
    as little-endian uint32, zlib-compressed and base64-encoded: 9,000 points in 15 clusters
    take a few kB, 90,000 points in 10 clusters some tens of kB.

    Parameters
    ----------
    labels : array_like of int
        One label per point.

    Returns
    -------
    dict
        ``{"encoding": PARTITION_ENCODING, "n": points, "data": text}``.

    Examples
    --------
    >>> from dpmmbench.reports.traces import decode_partition, encode_partition
    >>> decode_partition(encode_partition([7, 7, 3, 9, 3])).tolist()
    [0, 0, 1, 2, 1]
    """
    z = np.asarray(labels).ravel()
    _, first, inverse = np.unique(z, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.uint32)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first), dtype=np.uint32)
    packed = zlib.compress(rank[inverse].astype("<u4").tobytes(), 6)
    return {"encoding": PARTITION_ENCODING, "n": int(len(z)), "data": base64.b64encode(packed).decode("ascii")}


def decode_partition(value) -> np.ndarray | None:
    """The labels :func:`encode_partition` stored, or None when ``value`` is missing (a trace
    from before partitions were recorded).

    Raises
    ------
    ValueError
        When ``value`` is not an encoded partition of this kind, or its data do not decode to
        the number of points it states.
    """
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("encoding") != PARTITION_ENCODING:
        raise ValueError(f"final_partition must be a partition encoded as {PARTITION_ENCODING!r}, got "
                         f"{str(value)[:80]!r}")
    try:
        labels = np.frombuffer(zlib.decompress(base64.b64decode(value["data"], validate=True)), dtype="<u4")
    except (KeyError, ValueError, zlib.error) as exc:
        raise ValueError(f"final_partition does not decode: {exc}") from None
    if len(labels) != value.get("n"):
        raise ValueError(f"final_partition holds {len(labels)} labels, states {value.get('n')!r}")
    return labels.astype(np.int64)


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


def check_writable(path) -> Path:
    """Return ``path`` as a Path if a file can be created there, else raise OSError.

    The nearest existing folder of ``path`` (its parent, or an ancestor for folders still to
    be created) gets a temporary file, removed at once: a destination that cannot be written
    fails before any work, and nothing is created or left behind.

    Parameters
    ----------
    path : str or os.PathLike
        A destination file.

    Raises
    ------
    OSError
        ``path`` is a folder, or a component of it is not a folder, or the folder is not
        writable; the message names the path.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{str(path)!r} is a folder, not a file")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise NotADirectoryError(f"cannot create {str(path)!r}: {str(folder)!r} is not a folder")
    try:
        fd, probe = _create_temporary(folder / path.name)
    except OSError as exc:
        raise type(exc)(f"cannot write to folder {str(folder)!r} ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)
    return path


def write_trace(df, path, meta=None) -> Path:
    """Write a trace and its metadata atomically; return the path written.

    The data go to a temporary file in the destination directory, which is then renamed
    over ``path``: a reader (or Snakemake) never sees a partial trace.

    A CSV and its sidecar are written as a pair: both are complete in temporary files before
    either is renamed; the sidecar records the SHA-256 of the CSV's bytes and is renamed
    first. If the CSV's rename fails (an exception, Ctrl-C), the old sidecar is put back (or
    the new one removed when there was none): the old pair, or nothing, remains. If the
    process is killed between the two renames, the new sidecar does not describe the old
    CSV and :func:`read_trace` refuses the pair.

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
        Unsupported extension, or ``meta`` uses the reserved key :data:`DIGEST_KEY` of a
        CSV sidecar (raised before anything is written).
    """
    path = check_trace_path(path)
    meta = dict(meta or {})
    if path.suffix.lower() == ".csv" and DIGEST_KEY in meta:
        raise ValueError(f"run metadata key {DIGEST_KEY!r} is reserved for the CSV sidecar's digest")
    # Serialise first: metadata that cannot be serialised fails before any file is touched.
    meta_json = json.dumps(meta, default=_json_default, indent=1)
    if path.suffix.lower() == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(df, preserve_index=False)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), META_KEY: meta_json.encode()})
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda f: pq.write_table(table, f))
    else:
        buffer = io.BytesIO()
        df.to_csv(buffer, index=False, encoding="utf-8")
        data = buffer.getvalue()
        sidecar_json = json.dumps({**meta, DIGEST_KEY: hashlib.sha256(data).hexdigest()},
                                  default=_json_default, indent=1).encode()
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_pair(path, data, _sidecar(path), sidecar_json)
    return path


def _write_pair(path: Path, data: bytes, sidecar: Path, sidecar_data: bytes) -> None:
    """Write a CSV and its sidecar so that the old pair or the new one remains (see
    :func:`write_trace`)."""
    try:
        old_sidecar = sidecar.read_bytes()
    except FileNotFoundError:
        old_sidecar = None
    csv_tmp = _temporary(path, lambda f: f.write(data))
    try:
        atomic_write(sidecar, lambda f: f.write(sidecar_data))
        try:
            os.replace(csv_tmp, path)
        except BaseException:
            # The new sidecar must not outlive the failed CSV: put the old one back.
            if old_sidecar is None:
                with suppress(FileNotFoundError):
                    os.unlink(sidecar)
            else:
                atomic_write(sidecar, lambda f: f.write(old_sidecar))
            raise
    finally:
        with suppress(FileNotFoundError):
            os.unlink(csv_tmp)


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

    Raises
    ------
    ValueError
        A CSV whose sidecar records another digest than its bytes' (a write of the pair was
        interrupted, or one of the two was edited or replaced), or a sidecar that is not a
        JSON object.
    """
    path = check_trace_path(path)
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        raw = (table.schema.metadata or {}).get(META_KEY)
        return table.to_pandas(), json.loads(raw) if raw else {}
    data = path.read_bytes()
    sidecar = _sidecar(path)
    meta = {}
    if sidecar.exists():
        try:
            meta = json.loads(sidecar.read_bytes())
        except ValueError as exc:
            raise ValueError(f"trace sidecar {str(sidecar)!r} is not valid JSON ({exc})") from None
        if not isinstance(meta, dict):
            raise ValueError(f"trace sidecar {str(sidecar)!r} holds a {type(meta).__name__}, not a JSON object")
        # A sidecar written before digests were recorded has none and is taken as it is.
        expected = meta.pop(DIGEST_KEY, None)
        digest = hashlib.sha256(data).hexdigest()
        if expected is not None and expected != digest:
            raise ValueError(f"trace {str(path)!r} does not match its sidecar {sidecar.name!r} (sha256 {digest[:12]}..., "
                             f"the sidecar expects {str(expected)[:12]}...): the pair was not written completely "
                             "or was edited; write the trace again")
    # Name columns stay strings: an empty dataset name must not come back as NaN.
    df = pd.read_csv(io.BytesIO(data), dtype=dict.fromkeys(_TEXT_COLUMNS, str))
    for col in _TEXT_COLUMNS:
        if col in df:
            df[col] = df[col].fillna("")
    return df, meta


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".meta.json")


def atomic_write(path, write) -> None:
    """Write ``path`` through a temporary file in the same folder and ``os.replace``.

    Readers see the old file or the complete new one, never a partial one; an interrupted
    write (an exception, Ctrl-C) removes its temporary file, and one left by a killed
    process is found by :func:`remove_stale_temporaries`.

    Parameters
    ----------
    path : str or os.PathLike
        Destination; its folder must exist.
    write : callable
        ``write(f)`` receives a binary file object and writes the contents.
    """
    path = Path(path)
    tmp = _temporary(path, write)
    try:
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _create_temporary(path: Path):
    """A fresh temporary file next to ``path``, named after this process (see
    :data:`TEMP_MARKER`); return ``(fd, tmp path)``."""
    # O_EXCL and mode 0o666 so the final file gets the usual umask-based permissions
    # (mkstemp would leave it private to the owner).
    tmp = path.with_name(f".{path.name}.{TEMP_MARKER}-{os.getpid()}-{secrets.token_hex(4)}")
    return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp


def _temporary(path: Path, write) -> Path:
    """The temporary file of ``path`` with ``write(f)``'s contents on disk; removed if writing fails."""
    fd, tmp = _create_temporary(path)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def remove_stale_temporaries(path, stale_after: float = STALE_AFTER) -> list[Path]:
    """Delete the temporary files :func:`atomic_write` left next to ``path`` when a writer
    was killed mid-write (SIGKILL leaves no chance to clean up); return what was deleted.

    Only this suite's temporaries of ``path`` (or of its CSV sidecar) are candidates: the
    name ``.<name>.dpmmbench-tmp-<pid>-<8 hex digits>``, exactly. Of those, a file is removed
    only if the process ``<pid>`` is not running here and the file was last modified more
    than ``stale_after`` seconds ago, so a live writer's file (here or on another host
    sharing the folder) is never touched, nor any file of the user's.

    Parameters
    ----------
    path : str or os.PathLike
        A file written with :func:`atomic_write` (its CSV sidecar is covered as well).
    stale_after : float
        Seconds since the last modification after which a dead writer's file is stale.

    Returns
    -------
    list of pathlib.Path
    """
    path = Path(path)
    if not path.parent.is_dir():
        return []
    names = "|".join(re.escape(f".{name}") for name in (path.name, _sidecar(path).name))
    pattern = re.compile(rf"(?:{names})\.{re.escape(TEMP_MARKER)}-(\d+)-[0-9a-f]{{8}}")
    removed = []
    now = time.time()
    for candidate in path.parent.iterdir():
        match = pattern.fullmatch(candidate.name)
        if match is None or _alive(int(match.group(1))):
            continue
        with suppress(FileNotFoundError):
            if candidate.is_file() and not candidate.is_symlink() and now - candidate.stat().st_mtime > stale_after:
                candidate.unlink()
                removed.append(candidate)
    return removed


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (a process of another user counts)."""
    if pid <= 0:
        return True  # not a process id a writer can have: leave the file alone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


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
