"""One file at a canonical URL (LeCun's MNIST, UCI Bag of Words, Blei's AP), streamed over
HTTP and hashed as it arrives.

Where no checksum is published in a form that could be checked here, the file's sha256 is not
pinned and the user must supply it (see :func:`fetch_file`). A download is written in a
temporary folder inside the data folder, removed whatever happens, and renamed into place only
once its sha256 matches.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from http.client import HTTPException
from pathlib import Path
from urllib.request import Request, urlopen

from . import _cache  # its MAX_DOWNLOAD is read when used: one cap for every download
from ._cache import HEX64, DataUnavailable, cache_dir, check_filename, file_sha256, sidecar, user_sha256
from .formats import CHUNK


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
        check_filename(self.filename)
        if self.sha256 is not None and not (isinstance(self.sha256, str) and HEX64.fullmatch(self.sha256)):
            raise ValueError(f"{self.filename}: the sha256 pinned is {self.sha256!r}, not 64 lowercase hex digits")


class Truncated(OSError):
    """The server sent fewer bytes than it announced."""


class TooLarge(ValueError):
    """The server sent or announced more bytes than the cap."""


def http_get(url: str, target: Path, timeout: float, cap: int) -> str:
    """Stream ``url`` into ``target`` in :data:`~dpmmbench.datasets.formats.CHUNK` pieces, hashing as it
    goes; the hex sha256 of what arrived. ``Truncated`` if the body is shorter than its
    ``Content-Length``; ``TooLarge`` as soon as it is longer than ``cap`` bytes."""
    h, got = hashlib.sha256(), 0
    with urlopen(Request(url, headers={"User-Agent": "dpmmbench"}), timeout=timeout) as response, \
            open(target, "wb") as out:
        length = response.headers.get("Content-Length")
        if length is not None and length.isdigit() and int(length) > cap:
            raise TooLarge(f"{url} announces {int(length):,} bytes, over the cap of {cap:,}")
        while block := response.read(CHUNK):
            got += len(block)
            if got > cap:
                raise TooLarge(f"{url} sent more than {cap:,} bytes, over the cap")
            out.write(block)
            h.update(block)
    # http.client returns b"" at a premature end of a Content-Length body instead of raising
    if length is not None and length.isdigit() and got != int(length):
        raise Truncated(f"got {got} of {int(length)} bytes")
    return h.hexdigest()


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
        longer than ``remote.size`` (when known) or :data:`~dpmmbench.datasets._cache.MAX_DOWNLOAD`; a bad download is
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
            digest = http_get(remote.url, part, timeout, remote.size or _cache.MAX_DOWNLOAD)
        except TooLarge as exc:
            raise ValueError(f"download of {remote.filename} refused: {exc}; nothing was kept") from None
        except Truncated as exc:
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
