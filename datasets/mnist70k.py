"""``mnist70k``: LeCun's MNIST, 60,000 + 10,000 handwritten digits from the canonical IDX files
(Chang & Fisher 2013 and Daume 2007 use it with PCA to 50 dimensions).

The files are not reachable from the machines this suite is built on: put the four ``.gz``
files in the data folder (``$DPMMBENCH_DATA``, default ``data/raw``) to use them; they are
checked against the sha256 published with them by many independent mirrors (TensorFlow's,
PyTorch's). ``fashion-mnist`` is the substitute that can be fetched here.
"""
from __future__ import annotations

from . import images
from .base import Builder, make_meta
from .fetch import RemoteFile, fetch_file

BASE_URL = "https://yann.lecun.com/exdb/mnist/"
#: file name -> (sha256, bytes)
CHECKSUMS = {
    "train-images-idx3-ubyte.gz": ("440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609", 9_912_422),
    "train-labels-idx1-ubyte.gz": ("3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c", 28_881),
    "t10k-images-idx3-ubyte.gz": ("8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6", 1_648_877),
    "t10k-labels-idx1-ubyte.gz": ("f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6", 4_542),
}
FILES = tuple(RemoteFile(BASE_URL + name, name, *CHECKSUMS[name]) for name in images.file_names())


def fetch_all() -> list:
    """The four verified files in the data folder (downloaded if absent)."""
    return [fetch_file(f) for f in FILES]


def describe(*, n: int, pca: int, seed: int) -> dict:
    """Metadata for the given parameters (nothing is downloaded or read)."""
    return make_meta(
        source=f"{BASE_URL} (train/t10k images and labels, IDX), sha256-checked",
        licence="as published by Y. LeCun and C. Cortes (commonly cited as CC BY-SA 3.0)",
        citation="Y. LeCun, C. Cortes, C. J. C. Burges, The MNIST database of handwritten digits",
        preprocessing=images.preprocessing(n, pca),
        substitute=False, n=n, dim=pca or images.N_PIXELS,
        description="MNIST handwritten digits (LeCun's 60,000 training + 10,000 test images), labels 0-9")


def generate(*, n: int, pca: int, seed: int):
    """Read the four IDX files from the data folder; returns ``(X, labels, family)``."""
    raw = {path.name: path.read_bytes() for path in fetch_all()}
    return images.load(raw, n=n, pca=pca, seed=seed)


BUILDER = Builder(
    name="mnist70k",
    parameters=images.parameters(),
    describe=describe,
    generate=generate,
    fetch=fetch_all,
)
