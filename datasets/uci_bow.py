"""``uci-enron`` and ``uci-nytimes``: the UCI "Bag of Words" collections Chang & Fisher 2013
use (Enron e-mails, 39,861 x 28,102; New York Times articles, 300,000 x 102,660), each a
``docword.NAME.txt.gz`` (header D, W, NNZ, then ``docID wordID count`` lines, 1-based) and a
``vocab.NAME.txt``.

Not reachable from the machines this suite is built on, and the repository publishes no
checksums: the user puts both files in the data folder with their sha256 in ``FILE.sha256``
(see :func:`datasets.fetch.fetch_file`); D and W are then checked against the published
sizes. Two builders, one per collection (:data:`BUILDERS`).
"""
from __future__ import annotations

from . import text
from .base import Builder, make_meta
from .fetch import RemoteFile, fetch_file
from .formats import parse_vocab, read_docword
from .preprocessing import kept_vocabulary

BASE_URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/bag-of-words/"
#: collection -> (documents D, vocabulary W, origin) as published with the data
COLLECTIONS = {"enron": (39_861, 28_102, "Enron e-mails"),
               "nytimes": (300_000, 102_660, "New York Times news articles")}


def files(collection: str) -> tuple[RemoteFile, RemoteFile]:
    """The docword and vocab files of a collection (no sha256 pinned: the user supplies it)."""
    return tuple(RemoteFile(BASE_URL + name, name) for name in
                 (f"docword.{collection}.txt.gz", f"vocab.{collection}.txt"))


#: collection -> its two files, as declared (what a check of the pins reads)
FILES = {c: files(c) for c in COLLECTIONS}


def make(collection: str) -> Builder:
    """The builder of ``uci-<collection>``."""
    docs, words, origin = COLLECTIONS[collection]

    def fetch_all():
        return [fetch_file(f) for f in files(collection)]

    def describe(*, n: int, seed: int, drop_top: int, vocab: int) -> dict:
        return make_meta(
            source=f"{BASE_URL} (docword.{collection}.txt.gz, vocab.{collection}.txt), sha256 supplied by the user",
            licence="CC BY 4.0 (UCI Machine Learning Repository)",
            citation="D. Newman, Bag of Words, UCI Machine Learning Repository, 2008",
            preprocessing=text.preprocessing(drop_top, vocab, words, n=n, n_docs=docs, seed=seed),
            substitute=False, n=min(n, docs), dim=kept_vocabulary(words, drop_top, vocab),
            description=f"{docs:,} {origin}, bag of words (UCI {collection}), unlabelled")

    def generate(*, n: int, seed: int, drop_top: int, vocab: int):
        docword, vocab_file = fetch_all()
        parse_vocab(vocab_file.read_text(encoding="latin-1"), vocab_file.name, words)
        X = read_docword(docword)
        if X.shape != (docs, words):
            raise ValueError(f"{docword.name}: {X.shape[0]} x {X.shape[1]}, expected {docs} x {words}")
        return text.finish(X, n=n, seed=seed, drop_top=drop_top, vocab=vocab)

    return Builder(name=f"uci-{collection}", parameters=text.parameters(words, docs), seed_used=text.seed_used(docs),
                   describe=describe,
                   generate=generate, fetch=fetch_all)


BUILDERS = tuple(make(c) for c in COLLECTIONS)
