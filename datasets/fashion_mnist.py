"""``fashion-mnist``: Fashion-MNIST (substitute for MNIST), 70,000 28x28 grayscale images of
clothing in 10 classes, from the Debian package ``dataset-fashion-mnist`` (MIT).

LeCun's MNIST cannot be reached from the machines this suite is built on; Fashion-MNIST has
the same format, shape and splits, so the papers' MNIST experiments (PCA to 50 dimensions;
Daume's 3k/12k/60k subsets, Chang & Fisher's 70k) run unchanged on it. It is reported as a
substitute and never called MNIST. The ``.deb`` is fetched with ``apt-get download`` and read
in Python: ``ar`` archive -> ``data.tar.xz`` -> the four gzipped IDX files, by name.
"""
from __future__ import annotations

from . import images
from .base import Builder, make_meta
from .fetch import Source, fetch, source_files

PACKAGE, VERSION = "dataset-fashion-mnist", "0.0~git20200523.55506a9-1"
FOLDER = "./usr/share/datasets/fashion-mnist/"
#: the .deb's sha256 (docs/datasets.md) and the sha256 of each IDX member inside it
SOURCE = Source("apt", f"{PACKAGE}={VERSION}", f"{PACKAGE}_{VERSION}_all.deb", {
    FOLDER + "train-images-idx3-ubyte.gz": "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7",
    FOLDER + "train-labels-idx1-ubyte.gz": "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056",
    FOLDER + "t10k-images-idx3-ubyte.gz": "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
    FOLDER + "t10k-labels-idx1-ubyte.gz": "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05",
}, sha256="39e172fe32dd318ebb3e512220c3beea2fa47d7e20bab348fb4e0922d6beefc0")


def describe(*, n: int, pca: int, seed: int) -> dict:
    """Metadata for the given parameters (nothing is downloaded or read)."""
    return make_meta(
        source=f"Debian package {PACKAGE} {VERSION} (the original gzipped IDX files), sha256-checked",
        licence="MIT (Zalando Research)",
        citation="H. Xiao, K. Rasul, R. Vollgraf, Fashion-MNIST: a novel image dataset for benchmarking "
                 "machine learning algorithms, arXiv:1708.07747, 2017",
        preprocessing=images.preprocessing(n, pca),
        substitute=True, n=n, dim=pca or images.N_PIXELS,
        description="Fashion-MNIST (substitute for MNIST): 28x28 grayscale images of clothing, 10 classes "
                    "(labels 0-9); same format and splits as MNIST, not MNIST")


def generate(*, n: int, pca: int, seed: int):
    """Read the four IDX files from the .deb; returns ``(X, labels, family)``."""
    members = fetch(SOURCE)
    return images.load({name[len(FOLDER):]: data for name, data in members.items()}, n=n, pca=pca, seed=seed)


BUILDER = Builder(
    name="fashion-mnist",
    parameters=images.parameters(),
    describe=describe,
    generate=generate,
    fetch=lambda: source_files(SOURCE),
)
