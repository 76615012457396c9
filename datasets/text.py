"""What the bag-of-words datasets share: the pruning parameters, their description, and the
step from a raw count matrix to ``(X, labels, family, found)``."""
from __future__ import annotations

from dpmmbench.algorithms.families import DirichletMultinomial

from .base import Parameter
from .preprocessing import kept_vocabulary, prune_vocabulary

#: symmetric Dirichlet concentration of the recommended prior (as for Reuters)
GAMMA = 0.5


def parameters(vocab_size: int) -> tuple[Parameter, Parameter]:
    """``drop_top`` (most frequent words removed) and ``vocab`` (words kept after them, 0 = all)."""
    return (Parameter("drop_top", int, 0, low=0, high=vocab_size - 1),
            Parameter("vocab", int, 0, low=0, high=vocab_size))


def preprocessing(drop_top: int, vocab: int, vocab_size: int, removed: str = "") -> str:
    """How the vocabulary was pruned, in words (for ``meta["preprocessing"]``); ``removed``
    says how many documents that left empty, once the data are read (e.g. ``"3 of 395"``)."""
    kept = kept_vocabulary(vocab_size, drop_top, vocab)
    words = (f"dropped the {drop_top} most frequent words, kept the next {kept}" if drop_top or vocab
             else f"full vocabulary of {vocab_size} words")
    return f"{words}; documents left empty removed{': ' + removed if removed else ''}"


def finish(X, drop_top: int, vocab: int):
    """Prune ``X`` and return ``(X, None, family, found)`` for a builder's ``generate``.

    ``found`` holds the number of documents kept and how many pruning left empty.
    """
    n_raw, vocab_size = X.shape
    X, _, docs = prune_vocabulary(X, drop_top, vocab)
    removed = n_raw - len(docs)
    if not len(docs):
        raise ValueError(f"pruning the vocabulary (drop_top={drop_top}, vocab={vocab}) left every document empty")
    found = {"n": X.shape[0], "preprocessing": preprocessing(drop_top, vocab, vocab_size, f"{removed} of {n_raw}")}
    return X, None, DirichletMultinomial(GAMMA, X.shape[1]), found
