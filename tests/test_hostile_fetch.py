"""Hostile raw data: decompression bombs and lying archive headers end in a clear error naming
the cap, with memory bounded; every artefact a dataset fetches is pinned by sha256; random
archive and stream bytes fed to the readers give a clear error or a valid result, never a
crash, a hang or a MemoryError. Each case runs in a child interpreter (tests/isolation.py)."""
from __future__ import annotations

import gzip
import io
import re
import sys
import tarfile
import zipfile
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpmmbench.datasets import _archives, _registry_packages, fetch, formats
from dpmmbench.datasets.fetch import RemoteFile, Source
from dpmmbench.datasets.registry import REGISTRY

#: the canonical files that have no published checksum: the user supplies it (NAME.sha256)
USER_SUPPLIED = {"ap.tgz", "docword.enron.txt.gz", "vocab.enron.txt", "docword.nytimes.txt.gz", "vocab.nytimes.txt"}
GIB = 1 << 30
#: peak memory a refused bomb may add (the in-memory cap is 128 MiB)
MEMORY_BOUND = 200 << 20


def _gzip_zeros(size: int) -> bytes:
    """A single gzip stream of ``size`` zero bytes, compressed as it is made (~1 MB per GiB)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    block, parts = bytes(1 << 20), []
    for _ in range(size // len(block)):
        parts.append(c.compress(block))
    return b"".join(parts) + c.flush()


@pytest.fixture(scope="module")
def bomb(tmp_path_factory):
    """1 GiB of zeros, gzip-compressed to about 1 MB, with the trailer's stated size (ISIZE)
    altered to claim 1,000 bytes."""
    data = bytearray(_gzip_zeros(GIB))
    data[-4:] = (1000).to_bytes(4, "little")
    path = tmp_path_factory.mktemp("bomb") / "train-images-idx3-ubyte.gz"
    path.write_bytes(bytes(data))
    assert path.stat().st_size < 2 << 20
    return path


@pytest.fixture
def fresh():
    """A child interpreter of its own: its peak memory is that of one case."""
    from isolation import Isolated

    runner = Isolated()
    yield runner
    runner.close()


def _tar(members: dict, mode: str = "w:gz") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _zip(members: dict) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buffer.getvalue()


# ---- decompression bombs -----------------------------------------------------------------------
def test_gzip_bomb_is_refused_at_the_cap_with_bounded_memory(bomb, fresh):
    message, growth = fresh.run("hostile_fetch:peak_rss_growth", "hostile_fetch:gunzip_file", str(bomb)).value
    assert f"more than the cap of {formats.MAX_MEMBER:,} bytes" in message and bomb.name in message
    assert growth < MEMORY_BOUND, f"peak memory grew by {growth / 2**20:.0f} MiB"


def test_docword_stream_past_its_cap_is_refused(tmp_path, isolated):
    # 32 MiB of lines behind a header that claims them all: the streamed-text cap (2 GiB, too
    # large to build here, so lowered to 16 MiB in the child) stops the parser
    lines = 2_000_000
    body = f"100000\n100000\n{lines}\n".encode() + b"100000 100000 1\n" * lines
    path = tmp_path / "docword.bomb.txt.gz"
    path.write_bytes(gzip.compress(body, compresslevel=1))
    outcome = isolated.run("hostile_fetch:read_docword_small_text", str(path), 16 << 20)
    assert outcome.clear_error and "docword.bomb.txt.gz" in outcome.message
    assert f"more than the cap of {16 << 20:,} bytes" in outcome.message
    # a header claiming more entries than such a file can hold is refused before reading on
    outcome = isolated.run("hostile_fetch:read_docword_small_text", str(path), 1 << 20)
    assert outcome.clear_error and "is impossible" in outcome.message
    # a header that claims fewer entries: reading stops one row past them
    path.write_bytes(gzip.compress(b"3\n5\n2\n" + b"1 1 1\n" * lines, compresslevel=1))
    outcome = isolated.run("hostile_fetch:read_docword_file", str(path))
    assert outcome.clear_error and "NNZ = 2 entries, found 3" in outcome.message


def test_tar_member_declaring_more_than_the_cap_is_refused_before_reading(tmp_path, isolated):
    info = tarfile.TarInfo("package/big.json")
    info.size = 10 * GIB  # no data follows: a reader that trusted the header would try to read it
    path = tmp_path / "pkg-1.0.tgz"
    path.write_bytes(gzip.compress(info.tobuf(format=tarfile.GNU_FORMAT)))
    outcome = isolated.run("hostile_fetch:read_members_file", str(path), ["package/big.json"])
    assert outcome.clear_error, outcome
    assert f"declares {10 * GIB:,} bytes, over the cap of {formats.MAX_MEMBER:,}" in outcome.message
    assert str(path) in outcome.message


def test_tar_stream_expanding_past_its_cap_is_refused(tmp_path, isolated):
    # the wanted member comes after 64 MiB of zeros that must be read through to reach it
    path = tmp_path / "pkg-1.0.tgz"
    path.write_bytes(_tar({"package/filler": bytes(64 << 20), "package/a.json": b"{}"}))
    assert path.stat().st_size < 1 << 20
    outcome = isolated.run("hostile_fetch:read_members_small_expanded", str(path), ["package/a.json"], 16 << 20)
    assert outcome.clear_error and f"more than the cap of {16 << 20:,} bytes" in outcome.message
    assert "its tar stream" in outcome.message
    ok = isolated.run("hostile_fetch:read_members_small_expanded", str(path), ["package/a.json"], 128 << 20)
    assert ok.value == {"package/a.json": 2}


def test_zip_member_with_a_bomb_ratio_is_refused(tmp_path, isolated):
    path = tmp_path / "pkg-1.0-py3-none-any.whl"
    path.write_bytes(_zip({"pkg/zeros.bin": bytes(64 << 20)}))  # ~1000:1
    outcome = isolated.run("hostile_fetch:read_members_file", str(path), ["pkg/zeros.bin"])
    assert outcome.clear_error and f"over the cap of {_archives.MAX_RATIO} times" in outcome.message


def test_zip_member_whose_header_understates_its_size_gives_no_more(tmp_path, isolated):
    data = bytearray(_zip({"pkg/data.txt": b"0123456789" * 100_000}))
    # central directory and local header both claim 1,000 bytes instead of 1,000,000
    for signature, offset in ((b"PK\x01\x02", 24), (b"PK\x03\x04", 22)):
        at = data.index(signature) + offset
        data[at:at + 4] = (1000).to_bytes(4, "little")
    path = tmp_path / "lying.whl"
    path.write_bytes(bytes(data))
    outcome = isolated.run("hostile_fetch:read_members_file", str(path), ["pkg/data.txt"])
    # it stops at the stated size, whose CRC then does not match: never more than it said
    assert outcome.clear_error and "not a readable archive" in outcome.message and "CRC" in outcome.message


# ---- every fetched artefact is pinned ---------------------------------------------------------
def _declarations():
    """(module name, Source or RemoteFile) of every dataset module in the registry, from their
    module-level values (also inside tuples and dicts)."""
    modules = {sys.modules[b.generate.__module__] for b in REGISTRY.values() if b.fetch is not None}
    found = []

    def visit(module, value):
        if isinstance(value, (Source, RemoteFile)):
            found.append((module.__name__, value))
        elif isinstance(value, (tuple, list)):
            for item in value:
                visit(module, item)
        elif isinstance(value, dict):
            for item in value.values():
                visit(module, item)

    for module in modules:
        for value in vars(module).values():
            visit(module, value)
    return modules, found


def test_every_fetch_source_is_pinned_by_sha256():
    modules, found = _declarations()
    assert {m.__name__ for m in modules} == {name for name, _ in found}  # each fetching module declares its files
    hex64 = re.compile(r"[0-9a-f]{64}")
    for module, item in found:
        if isinstance(item, Source):
            assert hex64.fullmatch(item.sha256), (module, item.spec)
            assert item.members and all(hex64.fullmatch(h) for h in item.members.values()), (module, item.spec)
            assert not set(item.filename) & set("*?["), (module, item.filename)  # one exact file
        elif item.filename in USER_SUPPLIED:
            assert item.sha256 is None, item.filename  # the user's NAME.sha256 pins it
        else:
            assert item.sha256 is not None and hex64.fullmatch(item.sha256), (module, item.filename)
    assert {item.filename for _, item in found if isinstance(item, RemoteFile) and item.sha256 is None} == USER_SUPPLIED


def test_a_source_without_a_pin_is_refused():
    with pytest.raises(TypeError):
        Source("npm", "pkg@1.0", "pkg-1.0.tgz", {})
    with pytest.raises(ValueError, match="pkg@1.0: the sha256 pinned for archive is None"):
        Source("npm", "pkg@1.0", "pkg-1.0.tgz", {}, None)
    with pytest.raises(ValueError, match="pinned for a.json is 'abc'"):
        Source("npm", "pkg@1.0", "pkg-1.0.tgz", {"a.json": "abc"}, "0" * 64)
    with pytest.raises(ValueError, match="not 64 lowercase hex"):
        RemoteFile("http://127.0.0.1/x", "x", "X" * 64)
    for name in ("pkg-*.tgz", "../pkg.tgz", "a/b", "..", ""):
        with pytest.raises(ValueError, match="not a plain file name"):
            Source("npm", "pkg@1.0", name, {}, "0" * 64)
        with pytest.raises(ValueError, match="not a plain file name"):
            RemoteFile("http://127.0.0.1/x", name)


def test_wheel_options_select_the_pinned_wheel():
    assert _registry_packages._wheel_options("lda-3.0.2-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl") == [
        "--implementation", "cp", "--python-version", "3.11", "--abi", "cp311",
        "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64"]
    assert _registry_packages._wheel_options("pkg-1.0-py3-none-any.whl") == ["--implementation", "py", "--python-version", "3"]
    with pytest.raises(ValueError, match="not a wheel file name"):
        _registry_packages._wheel_options("pkg-1.0.tar.gz")


# ---- random bytes fed to the readers ----------------------------------------------------------
def _deb(members: dict) -> bytes:
    out = b"!<arch>\n"
    for name, data in (("debian-binary", b"2.0\n"), ("data.tar.xz", _tar(members, "w:xz"))):
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}".encode() + b"`\n" + data
        out += b"\n" if len(data) % 2 else b""
    return out


_MEMBERS = {"a/x.txt": b"hello " * 50, "a/y.bin": bytes(range(256)) * 4}
_VALID = {".tgz": _tar(_MEMBERS), ".tar": _tar(_MEMBERS, "w"), ".tar.xz": _tar(_MEMBERS, "w:xz"),
          ".tar.bz2": _tar(_MEMBERS, "w:bz2"), ".whl": _zip(_MEMBERS), ".deb": _deb(_MEMBERS)}
_NAMES = st.lists(st.sampled_from([*_MEMBERS, "a", "../a/x.txt", "", "a/x.txt/", "\x00"])
                  | st.text(max_size=20), min_size=1, max_size=3)


@st.composite
def _damaged(draw):
    """A valid archive with a few bytes changed, a cut, or bytes appended."""
    suffix = draw(st.sampled_from(sorted(_VALID)))
    data = bytearray(_VALID[suffix])
    for _ in range(draw(st.integers(0, 4))):
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    cut = draw(st.integers(0, len(data)))
    tail = draw(st.binary(max_size=64))
    return suffix, bytes(data[:cut] if draw(st.booleans()) else data) + tail


def _assert_clear_or_valid(outcome):
    assert outcome.kind == "returned" or outcome.clear_error, outcome


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_damaged(), names=_NAMES)
def test_damaged_archives_give_a_clear_error_or_valid_members(isolated, case, names):
    suffix, data = case
    outcome = isolated.run("hostile_fetch:read_members_bytes", data, names, suffix)
    _assert_clear_or_valid(outcome)
    if outcome.kind == "returned":
        assert set(outcome.value) == set(names)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=600), names=_NAMES,
       suffix=st.sampled_from([".tgz", ".whl", ".deb", ""]),
       magic=st.sampled_from([b"", b"!<arch>\n", b"PK\x03\x04", b"\x1f\x8b\x08", b"\xfd7zXZ\x00", b"BZh9"]))
def test_random_archive_bytes_give_a_clear_error(isolated, data, names, suffix, magic):
    _assert_clear_or_valid(isolated.run("hostile_fetch:read_members_bytes", magic + data, names, suffix))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300) | st.builds(lambda b, n: gzip.compress(b)[:n], st.binary(max_size=300),
                                                  st.integers(0, 400)))
def test_random_gzip_and_idx_bytes_give_a_clear_error(isolated, data):
    _assert_clear_or_valid(isolated.run("hostile_fetch:gunzip_bytes", data))
    _assert_clear_or_valid(isolated.run("hostile_fetch:parse_idx_bytes", data))


_DOCWORD = st.lists(st.sampled_from(["3", "5", "2", "1 1 2", "3 5 1", "-1", "99999999999999999999", "1 1",
                                     "x", "", " ", "1 2 3 4", "0 0 0", "2 2 2"]), max_size=8)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=_DOCWORD, gz=st.booleans(), tail=st.binary(max_size=20))
def test_random_docword_files_give_a_clear_error_or_a_matrix(isolated, lines, gz, tail):
    body = ("\n".join(lines) + "\n").encode() + tail
    _assert_clear_or_valid(isolated.run("hostile_fetch:read_docword_bytes", gzip.compress(body) if gz else body, gz))


def test_nothing_read_from_disk_is_unpickled():
    """Every ``np.load`` of the package passes ``allow_pickle=False``, and nothing else that
    unpickles (``pickle.load``, ``pandas.read_pickle``, ``joblib``) is used on files."""
    import ast
    from pathlib import Path

    root = Path(fetch.__file__).resolve().parents[1]
    calls = []
    layers = ("algorithms", "datasets", "reports", "workflows")
    for path in (p for layer in layers for p in (root / layer).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                name = node.func.attr
                where = f"{path.relative_to(root)}:{node.lineno}"
                if name == "load" and getattr(node.func.value, "id", None) in ("np", "numpy"):
                    keywords = {k.arg: k.value for k in node.keywords}
                    flag = keywords.get("allow_pickle")
                    assert isinstance(flag, ast.Constant) and flag.value is False, f"{where}: np.load may unpickle"
                    calls.append(where)
                assert not (name in ("load", "loads") and getattr(node.func.value, "id", None) in ("pickle", "joblib")
                            ), f"{where}: unpickles"
                assert name != "read_pickle", f"{where}: unpickles"
    assert calls  # the dataset store's reader is among them
