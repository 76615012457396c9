"""``ap``: Associated Press, 2,246 news articles over 10,473 words, from Blei's lda-c release
(``ap.tgz``: ``ap/ap.dat`` in lda-c format and ``ap/vocab.txt``), used by Chang & Fisher 2013.

Not reachable from the machines this suite is built on, and no checksum of ``ap.tgz`` is
published in a form that could be checked here: the user puts ``ap.tgz`` in the data folder
with its sha256 in ``ap.tgz.sha256`` (see :func:`datasets.fetch.fetch_file`); the shape is
then checked against the published 2,246 x 10,473."""
from __future__ import annotations

from . import text
from .base import Builder, make_meta
from .fetch import RemoteFile, fetch_file, read_members
from .formats import parse_ldac, parse_vocab
from .preprocessing import kept_vocabulary

DOCS, VOCAB = 2246, 10473
FILE = RemoteFile("http://www.cs.columbia.edu/~blei/lda-c/ap.tgz", "ap.tgz", sha256=None)
MEMBERS = ("ap/ap.dat", "ap/vocab.txt")


def describe(*, n: int, seed: int, drop_top: int, vocab: int) -> dict:
    """Metadata for the given parameters (nothing is downloaded or read)."""
    return make_meta(
        source=f"{FILE.url} (lda-c release), sha256 supplied by the user",
        licence="research use (D. Blei's lda-c distribution of TREC AP articles)",
        citation="D. M. Blei, A. Y. Ng, M. I. Jordan, Latent Dirichlet allocation, JMLR 3, 2003",
        preprocessing=text.preprocessing(drop_top, vocab, VOCAB, n=n, n_docs=DOCS, seed=seed),
        substitute=False, n=min(n, DOCS), dim=kept_vocabulary(VOCAB, drop_top, vocab),
        description="2,246 Associated Press articles, bag of words (Blei's AP corpus), unlabelled")


def generate(*, n: int, seed: int, drop_top: int, vocab: int):
    """Read ``ap.tgz`` from the data folder and prune it; returns ``(X, None, family, found)``."""
    members = read_members(fetch_file(FILE), list(MEMBERS))
    parse_vocab(members["ap/vocab.txt"].decode("latin-1"), "ap/vocab.txt", VOCAB)
    X = parse_ldac(members["ap/ap.dat"].decode("ascii"), VOCAB)
    if X.shape[0] != DOCS:
        raise ValueError(f"ap/ap.dat: {X.shape[0]} documents, expected {DOCS}")
    return text.finish(X, n=n, seed=seed, drop_top=drop_top, vocab=vocab)


BUILDER = Builder(
    name="ap",
    parameters=text.parameters(VOCAB, DOCS),
    seed_used=text.seed_used(DOCS),
    describe=describe,
    generate=generate,
    fetch=lambda: [fetch_file(FILE)],
)
