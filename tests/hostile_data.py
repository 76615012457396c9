"""Hostile-data cases run in a child interpreter by tests/test_hostile_data.py (through the
``isolated`` fixture): malformed sparse count matrices, extreme but finite values, crafted
dataset files. Each case function builds its input itself, so a case is named by plain
arguments (a sampler name, a kind of damage) and a crash kills only the child."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

#: vocabulary of the count matrices of the cases
VOCAB = 5

#: every kind of damage :func:`malformed_csr` can do, with a word its error message must hold
MALFORMED = {
    "index-too-large": "vocab_size",
    "index-far-too-large": "vocab_size",
    "index-negative": "negative",
    "indptr-decreasing": "indptr",
    "indptr-past-end": "indptr",
    "indptr-start": "indptr",
    "indptr-too-short": "indptr",
    "indptr-too-long": "indptr",
    "data-too-short": "data",
    "indices-too-short": "indices",
    "shape-rows": "indptr",
    "shape-columns": "vocab_size",
    "float-indices": "indices",
    "fractional-count": "fractional",
    "negative-count": "negative",
    "nan-count": "NaN",
    "inf-count": "inf",
    "complex-data": "complex",
    "huge-counts": "2**53",
}


def valid_triple():
    """(data, indices, indptr, shape) of a small valid 4 x VOCAB count matrix, canonical."""
    data = np.array([2.0, 1.0, 3.0, 1.0, 4.0, 1.0, 2.0])
    indices = np.array([0, 3, 1, 2, 4, 0, 4], dtype=np.int32)
    indptr = np.array([0, 2, 5, 5, 7], dtype=np.int32)
    return data, indices, indptr, (4, VOCAB)


def malformed_csr(kind: str):
    """The valid matrix with one kind of damage, as a ``csr_matrix`` whose arrays were replaced
    after construction (as a user can), so scipy's constructor checks never ran on them."""
    data, indices, indptr, shape = valid_triple()
    if kind == "index-too-large":
        indices[3] = VOCAB
    elif kind == "index-far-too-large":
        indices[3] = 10 ** 9
    elif kind == "index-negative":
        indices[3] = -3
    elif kind == "indptr-decreasing":
        indptr = np.array([0, 5, 2, 5, 7], dtype=np.int32)
    elif kind == "indptr-past-end":
        indptr = np.array([0, 2, 5, 5, 9000], dtype=np.int32)
    elif kind == "indptr-start":
        indptr = np.array([1, 2, 5, 5, 7], dtype=np.int32)
    elif kind == "indptr-too-short":
        indptr = indptr[:-1]
    elif kind == "indptr-too-long":
        indptr = np.append(indptr, 7).astype(np.int32)
    elif kind == "data-too-short":
        data = data[:-2]
    elif kind == "indices-too-short":
        indices = indices[:-2]
    elif kind == "shape-rows":
        shape = (40, VOCAB)
    elif kind == "shape-columns":
        shape = (4, VOCAB + 3)
    elif kind == "float-indices":
        indices = indices.astype(np.float64) + 0.5
    elif kind == "fractional-count":
        data[2] = 0.5
    elif kind == "negative-count":
        data[2] = -1.0
    elif kind == "nan-count":
        data[2] = np.nan
    elif kind == "inf-count":
        data[2] = np.inf
    elif kind == "complex-data":
        data = data + 1j
    elif kind == "huge-counts":
        data[:] = 1e300
    else:
        raise KeyError(kind)
    return hacked_csr(data, indices, indptr, shape)


def hacked_csr(data, indices, indptr, shape):
    """A ``csr_matrix`` holding exactly these arrays and shape, unchecked."""
    X = sp.csr_matrix((4, VOCAB))
    X.data, X.indices, X.indptr = np.asarray(data), np.asarray(indices), np.asarray(indptr)
    X._shape = tuple(shape)
    return X


def _counts_family():
    from dpmmbench.algorithms.families import DirichletMultinomial

    return DirichletMultinomial(0.5, VOCAB)


def init_and_step(name: str, kind: str):
    """``make(name).init(X)`` and one step on the malformed matrix ``kind``; returns the labels."""
    from dpmmbench import algorithms

    s = algorithms.make(name, family=_counts_family(), alpha=1.0, seed=0)
    state = s.init(malformed_csr(kind), init_clusters=2)
    return s.step(state).labels.tolist()


def init_and_step_triple(name: str, data, indices, indptr, shape, vocab: int):
    """``init`` and a step of sampler ``name`` on a CSR matrix holding these arrays, unchecked,
    then the log joint of the labels reached: (labels, log joint)."""
    from dpmmbench import algorithms
    from dpmmbench.algorithms.families import DirichletMultinomial
    from dpmmbench.reports.metrics import log_joint

    family = DirichletMultinomial(0.5, vocab)
    X = hacked_csr(data, indices, indptr, shape)
    s = algorithms.make(name, family=family, alpha=1.0, seed=0)
    labels = s.step(s.init(X)).labels
    return labels.tolist(), log_joint(X, labels, family, 1.0)


def score(kind: str, where: str):
    """The log joint (``where="log_joint"``) or the family's log marginal of matrix ``kind``."""
    X = malformed_csr(kind)
    if where == "log_joint":
        from dpmmbench.reports.metrics import log_joint

        return log_joint(X, np.arange(X.shape[0]) % 2, _counts_family(), 1.0)
    return _counts_family().log_marginal(X)


def other_format(kind: str, fmt: str):
    """``gibbs`` init and a step on a damaged matrix in another sparse format (COO or CSC)."""
    from dpmmbench import algorithms

    data, indices, indptr, shape = valid_triple()
    rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
    if fmt == "coo":
        X = sp.coo_matrix((data, (rows, indices)), shape=shape)
        if kind == "column-too-large":
            X.col[1] = VOCAB + 7
        elif kind == "row-too-large":
            X.row[1] = 99
        elif kind == "row-negative":
            X.row[1] = -1
    else:
        X = sp.csc_matrix(sp.csr_matrix((data, indices, indptr), shape=shape))
        if kind == "column-too-large":
            X.indptr = np.append(X.indptr, X.indptr[-1])
        elif kind == "row-too-large":
            X.indices[1] = 99
        elif kind == "row-negative":
            X.indices[1] = -1
    s = algorithms.make("gibbs", family=_counts_family(), alpha=1.0, seed=0)
    return s.step(s.init(X)).labels.tolist()


def dense_run(name: str, X, family: str, score_too: bool = True):
    """``init``, a step and (if ``score_too``) the log joint of dense ``X`` under a default
    Gaussian family (``"niw"`` or ``"normal"``) centred at 0 with unit scale."""
    from dpmmbench import algorithms
    from dpmmbench.algorithms.families import NormalInverseWishart, NormalKnownCovariance
    from dpmmbench.reports.metrics import log_joint

    X = np.asarray(X)
    D = X.shape[1] if X.ndim == 2 else 1
    fam = (NormalInverseWishart(np.zeros(D), 1.0, D + 2.0, np.eye(D)) if family == "niw"
           else NormalKnownCovariance(1.0, np.zeros(D), 1.0))
    s = algorithms.make(name, family=fam, alpha=1.0, seed=0)
    state = s.step(s.init(X))
    value = log_joint(X, state.labels, fam, 1.0) if score_too else None
    return state.labels.tolist(), value


def family_score(family: str, params: dict, X, alpha: float = 1.0):
    """Build ``family`` (``"niw"``, ``"normal"``, ``"dm"``) from ``params`` and score ``X`` with
    two clusters: (log joint, log marginal)."""
    from dpmmbench.algorithms.families import DirichletMultinomial, NormalInverseWishart, NormalKnownCovariance
    from dpmmbench.reports.metrics import log_joint

    cls = {"niw": NormalInverseWishart, "normal": NormalKnownCovariance, "dm": DirichletMultinomial}[family]
    fam = cls(**params)
    n = X.shape[0]
    return log_joint(X, np.arange(n) % 2, fam, alpha), fam.log_marginal(X)


def load_stored(path: str):
    """Load a dataset file through the store (the ``--data-file`` path) and run ``gibbs`` on it."""
    from pathlib import Path

    from dpmmbench import algorithms
    from dpmmbench.datasets.store import load_file

    ds = load_file(Path(path))
    s = algorithms.make("gibbs", family=ds.family, alpha=1.0, seed=0)
    return s.step(s.init(ds.X)).labels.tolist()


def driver_run(path: str, dataset: str):
    """``dpmmbench run --data-file`` in Python: the run driver on a stored dataset file."""
    from dpmmbench.workflows import driver

    trace, _ = driver.run(driver.RunSpec("gibbs", dataset, 1, seed=0, data_file=path))
    return len(trace)
