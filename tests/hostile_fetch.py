"""Cases of tests/test_hostile_fetch.py, run in a child interpreter (tests/isolation.py): hostile
archives and compressed streams fed to the readers of raw data."""
from __future__ import annotations

import resource
import tempfile
from pathlib import Path


def peak_rss_growth(target: str, *args) -> tuple[str, int]:
    """Run ``target(*args)`` (``"module:function"``), which must raise ``ValueError``; its
    message and how much the peak resident memory of this process grew meanwhile, in bytes.

    Only meaningful in a fresh child: ``ru_maxrss`` is the peak over the process's life.
    """
    import importlib

    module, name = target.split(":")
    function = getattr(importlib.import_module(module), name)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        function(*args)
    except ValueError as exc:
        message = str(exc)
    else:
        raise AssertionError(f"{target} returned instead of refusing")
    return message, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024  # KiB on Linux


def gunzip_file(path: str) -> int:
    """Decompress the gzip file at ``path`` in memory; its decompressed size."""
    from dpmmbench.datasets.formats import gunzip

    return len(gunzip(Path(path).read_bytes(), Path(path).name))


def read_docword_file(path: str) -> tuple:
    """Shape of the docword file at ``path``."""
    from dpmmbench.datasets.formats import read_docword

    return read_docword(Path(path)).shape


def read_members_file(path: str, names: list) -> dict:
    """Sizes of the named members of the archive at ``path``."""
    from dpmmbench.datasets.fetch import read_members

    return {name: len(data) for name, data in read_members(Path(path), list(names)).items()}


def read_members_bytes(data: bytes, names: list, suffix: str) -> dict:
    """Sizes of the named members of the archive ``data`` (written to a temporary file)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"archive{suffix}"
        path.write_bytes(data)
        return read_members_file(str(path), names)


def read_members_small_expanded(path: str, names: list, cap: int) -> dict:
    """:func:`read_members_file` with the cap on a decompressed tar stream lowered to ``cap``
    (building an archive that expands past the real 1 GiB cap would take the test minutes)."""
    from dpmmbench.datasets import _archives

    saved, _archives.MAX_EXPANDED = _archives.MAX_EXPANDED, cap
    try:
        return read_members_file(path, names)
    finally:
        _archives.MAX_EXPANDED = saved


def read_docword_small_text(path: str, cap: int) -> tuple:
    """:func:`read_docword_file` with the cap on streamed text lowered to ``cap``."""
    from dpmmbench.datasets import formats

    saved, formats.MAX_TEXT = formats.MAX_TEXT, cap
    try:
        return read_docword_file(path)
    finally:
        formats.MAX_TEXT = saved


def gunzip_bytes(data: bytes) -> int:
    """Decompressed size of ``data`` through :func:`datasets.formats.gunzip`."""
    from dpmmbench.datasets.formats import gunzip

    return len(gunzip(data, "random.gz"))


def parse_idx_bytes(data: bytes) -> tuple:
    """Shape of the IDX array in ``data``."""
    from dpmmbench.datasets.formats import parse_idx

    return parse_idx(data, "random.idx").shape


def read_docword_bytes(data: bytes, gz: bool) -> tuple:
    """Shape of the docword file ``data`` (gzipped if ``gz``)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("docword.x.txt.gz" if gz else "docword.x.txt")
        path.write_bytes(data)
        return read_docword_file(str(path))
