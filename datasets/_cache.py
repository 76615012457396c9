"""The data folder: where raw files live, how a file in it is verified, written and listed.

A file enters the data folder (:func:`cache_dir`) only once its sha256 is checked; a file
there is checked again each time it is used (:func:`check_file`). Where no sha256 can be
pinned in the code, the user supplies one next to the file (:func:`sidecar`,
:func:`user_sha256`).
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path

from .formats import CHUNK

#: bytes of one downloaded file (the largest, UCI NYTimes' docword, is 224 MB)
MAX_DOWNLOAD = 1 << 30
#: a pinned sha256: 64 lowercase hex digits
HEX64 = re.compile(r"[0-9a-f]{64}")


class DataUnavailable(RuntimeError):
    """The data cannot be obtained from here; the message says what to download and where
    to put it."""


def check_filename(name: str) -> None:
    """``ValueError`` unless ``name`` is a plain file name: it is joined to the data folder."""
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name \
            or "\0" in name or set(name) & set("*?["):
        raise ValueError(f"{name!r} is not a plain file name (no folder, no wildcard)")


def cache_dir() -> Path:
    """``$DPMMBENCH_DATA`` or ``data/raw`` below the working directory."""
    return Path(os.environ.get("DPMMBENCH_DATA", "data/raw"))


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in :data:`~dpmmbench.datasets.formats.CHUNK` blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def check_file(path: Path, expected: str, what: str, advice: str) -> None:
    """``ValueError`` naming ``what`` unless ``path`` has at most :data:`MAX_DOWNLOAD` bytes and
    the sha256 ``expected`` (hashed in :data:`~dpmmbench.datasets.formats.CHUNK` pieces)."""
    size = path.stat().st_size
    if size > MAX_DOWNLOAD:
        raise ValueError(f"{what} has {size:,} bytes, over the cap of {MAX_DOWNLOAD:,}; {advice}")
    digest = file_sha256(path)
    if digest != expected:
        raise ValueError(f"checksum mismatch for {what}: sha256 {digest}, expected {expected}; {advice}")


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``:
    readers see the old file or the complete new one, never a partial one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it owner-only; a data file is meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sidecar(path: Path) -> Path:
    """Where the user puts the sha256 of ``path`` when none is pinned: ``path`` + ``.sha256``."""
    return path.with_name(path.name + ".sha256")


def user_sha256(path: Path) -> str | None:
    """The sha256 the user supplied for ``path`` (first field of ``path.sha256``, the format
    ``sha256sum`` writes), or ``None`` if there is no such file."""
    try:
        text = sidecar(path).read_text()
    except FileNotFoundError:
        return None
    digest = (text.split() or [""])[0].lower()
    if not HEX64.fullmatch(digest):
        raise ValueError(f"{sidecar(path)} should start with a 64-digit hex sha256, got {text[:70]!r}")
    return digest


def write_manifest(files: list[Path], out: Path) -> None:
    """Write ``sha256  name`` lines (the ``sha256sum`` format, names relative to their folder)
    for ``files`` to ``out``, atomically."""
    lines = "".join(f"{file_sha256(f)}  {Path(f).name}\n" for f in files)
    atomic_write(out, lines.encode())
