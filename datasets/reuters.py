"""``reuters``: 395 real Reuters news documents over 4,258 words, bag of words (lda-c format),
carried by the PyPI package ``lda==3.0.2`` (``lda/tests/reuters.ldac``, MPL 2.0). Unlabelled.
Parameter ``drop_top``/``vocab`` prune the vocabulary as Daume 2007 did for NIPS (drop the most
frequent words, keep the next V)."""
from __future__ import annotations

from . import text
from .base import Builder, make_meta
from .fetch import Source, fetch, source_files
from .formats import parse_ldac
from .preprocessing import kept_vocabulary

VOCAB = 4258
DOCS = 395
#: one wheel, the same whatever this machine's platform (pip is told its tags; it is read as
#: an archive, never installed), pinned with the member read from it
SOURCE = Source("pip", "lda==3.0.2", "lda-3.0.2-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", {
    "lda/tests/reuters.ldac": "4bfe5b21ed263334ddf7af56f7b38632f6ccae7d9441c8b56071167841e71b5e"},
    sha256="5092577d2213890f0e1df4e6db02cc50955de97ca94bd57b3405dd53e21c1ab3")


def describe(*, n: int, seed: int, drop_top: int, vocab: int) -> dict:
    kept = kept_vocabulary(VOCAB, drop_top, vocab)
    return make_meta(
        source="PyPI wheel lda==3.0.2, lda/tests/reuters.ldac, sha256-checked",
        licence="MPL-2.0 (package); Reuters-21578 news texts",
        citation="D. D. Lewis, Reuters-21578 text categorization collection; A. Riddell, lda package",
        preprocessing=text.preprocessing(drop_top, vocab, VOCAB, n=n, n_docs=DOCS, seed=seed),
        substitute=False, n=min(n, DOCS), dim=kept,
        description="395 real Reuters news stories, bag of words (a small real corpus; NIPS is not obtainable)")


def generate(*, n: int, seed: int, drop_top: int, vocab: int):
    return text.finish(parse_ldac(fetch(SOURCE)["lda/tests/reuters.ldac"].decode(), VOCAB), n=n, seed=seed,
                       drop_top=drop_top, vocab=vocab)


BUILDER = Builder(
    name="reuters",
    parameters=text.parameters(VOCAB, DOCS),
    seed_used=text.seed_used(DOCS),
    describe=describe,
    generate=generate,
    fetch=lambda: source_files(SOURCE),
)
