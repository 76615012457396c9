"""What the bag-of-words datasets share: the parameters (a seeded subset of the documents, the
vocabulary's pruning), their description, and the step from a raw count matrix to
``(X, labels, family, found)``."""
from __future__ import annotations

from dpmmbench.algorithms.families import DirichletMultinomial

from .base import Parameter
from .preprocessing import kept_vocabulary, prune_vocabulary, subset_indices

#: symmetric Dirichlet concentration of the recommended prior (as for Reuters)
GAMMA = 0.5


def parameters(vocab_size: int, n_docs: int) -> tuple[Parameter, ...]:
    """``n`` (a seeded subset of the ``n_docs`` documents, e.g. a corpus cut to another's size),
    ``seed`` (of that subset), ``drop_top`` (most frequent words removed) and ``vocab`` (words
    kept after them, 0 = all)."""
    return (Parameter("n", int, n_docs, low=1, high=n_docs), Parameter("seed", int, 0, low=0),
            Parameter("drop_top", int, 0, low=0, high=vocab_size - 1),
            Parameter("vocab", int, 0, low=0, high=vocab_size))


def seed_used(n_docs: int):
    """A builder's ``seed_used``: the seed picks the documents only when ``n`` is below ``n_docs``."""
    return lambda params: params["n"] < n_docs


def preprocessing(drop_top: int, vocab: int, vocab_size: int, removed: str = "", *, n: int, n_docs: int,
                  seed: int) -> str:
    """How the documents were chosen and the vocabulary pruned, in words (for
    ``meta["preprocessing"]``); ``removed`` says how many documents pruning left empty, once
    the data are read (e.g. ``"3 of 395"``)."""
    kept = kept_vocabulary(vocab_size, drop_top, vocab)
    docs = "" if n >= n_docs else f"seeded subset (seed {seed}) of {n:,} of the {n_docs:,} documents; "
    words = (f"dropped the {drop_top} most frequent words, kept the next {kept}" if drop_top or vocab
             else f"full vocabulary of {vocab_size} words")
    return f"{docs}{words}; documents left empty removed{': ' + removed if removed else ''}"


def finish(X, *, n: int, seed: int, drop_top: int, vocab: int):
    """Take the seeded subset of ``n`` documents of ``X``, prune it and return
    ``(X, None, family, found)`` for a builder's ``generate``.

    ``found`` holds the number of documents kept and how many pruning left empty. The subset
    comes first: the vocabulary's ranking by frequency is the subset's own.
    """
    n_docs, vocab_size = X.shape
    X = X[subset_indices(n_docs, n, seed)]
    n_raw = X.shape[0]
    X, _, docs = prune_vocabulary(X, drop_top, vocab)
    removed = n_raw - len(docs)
    if not len(docs):
        raise ValueError(f"pruning the vocabulary (drop_top={drop_top}, vocab={vocab}) left every document empty")
    found = {"n": X.shape[0], "preprocessing": preprocessing(drop_top, vocab, vocab_size, f"{removed} of {n_raw}",
                                                             n=n, n_docs=n_docs, seed=seed)}
    return X, None, DirichletMultinomial(GAMMA, X.shape[1]), found
