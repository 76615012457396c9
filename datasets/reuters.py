"""``reuters``: 395 real Reuters news documents over 4,258 words, bag of words (lda-c format),
carried by the PyPI package ``lda==3.0.2`` (``lda/tests/reuters.ldac``, MPL 2.0). Unlabelled.
Parameter ``drop_top``/``vocab`` prune the vocabulary as Daume 2007 did for NIPS (drop the most
frequent words, keep the next V)."""
from __future__ import annotations

import numpy as np

from algorithms.families import DirichletMultinomial

from .base import Builder, Parameter, make_meta
from .fetch import Source, fetch, parse_ldac

VOCAB = 4258
SOURCE = Source("pip", "lda==3.0.2", "lda-3.0.2-*.whl", {
    "lda/tests/reuters.ldac": "4bfe5b21ed263334ddf7af56f7b38632f6ccae7d9441c8b56071167841e71b5e"})


def describe(*, drop_top: int, vocab: int) -> dict:
    kept = min(vocab, VOCAB - drop_top) if vocab else VOCAB - drop_top
    return make_meta(
        source="PyPI wheel lda==3.0.2, lda/tests/reuters.ldac, sha256-checked",
        licence="MPL-2.0 (package); Reuters-21578 news texts",
        citation="D. D. Lewis, Reuters-21578 text categorization collection; A. Riddell, lda package",
        preprocessing=(f"dropped the {drop_top} most frequent words, kept the next {kept}; empty "
                       "documents removed"),
        substitute=False, n=395, dim=kept,
        description="395 real Reuters news stories, bag of words (a small real corpus; NIPS is not obtainable)")


def generate(*, drop_top: int, vocab: int):
    X = parse_ldac(fetch(SOURCE)["lda/tests/reuters.ldac"].decode(), VOCAB).tocsc()
    order = np.argsort(-np.asarray(X.sum(axis=0)).ravel(), kind="stable")
    keep = order[drop_top:drop_top + vocab] if vocab else order[drop_top:]
    X = X[:, np.sort(keep)].tocsr()
    X = X[np.asarray(X.sum(axis=1)).ravel() > 0]
    return X, None, DirichletMultinomial(0.5, X.shape[1])


BUILDER = Builder(
    name="reuters",
    parameters=(Parameter("drop_top", int, 0, low=0, high=VOCAB - 1), Parameter("vocab", int, 0, low=0, high=VOCAB)),
    describe=describe,
    generate=generate,
)
