"""A loaded dataset as one ``.npz`` file that loads without pickle (the workflow's
preprocessed data, ``data/processed/*.npz``).

The file holds only numeric and string arrays: the data (dense, or the three CSR arrays),
the labels, the recommended family's constructor arguments, the canonical name and the
metadata as JSON. :func:`load_file` reads it with ``allow_pickle=False``, so a file from
elsewhere cannot run code, and checks that it holds the dataset it is asked for.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from dpmmbench.algorithms.families import DirichletMultinomial, NormalInverseWishart, NormalKnownCovariance

from .base import Dataset
from .fetch import atomic_write

FORMAT = "dpmmbench-dataset/1"
#: family class -> the attributes its constructor takes, in order
FAMILY_ARGS = {NormalInverseWishart: ("mu0", "kappa0", "nu0", "psi0"),
               NormalKnownCovariance: ("sigma", "mu0", "sigma0"),
               DirichletMultinomial: ("gamma", "vocab_size")}
_FAMILIES = {cls.__name__: cls for cls in FAMILY_ARGS}


def save(ds: Dataset, path: Path) -> None:
    """Write ``ds`` to ``path`` (``.npz``) atomically.

    Parameters
    ----------
    ds : Dataset
        A loaded dataset; its family must be one of :data:`FAMILY_ARGS`.
    path : pathlib.Path
        Destination; a reader sees the old file or the complete new one.
    """
    family = type(ds.family)
    if family not in FAMILY_ARGS:
        raise TypeError(f"cannot store a dataset whose family is {family.__name__}")
    arrays = {"format": np.array(FORMAT), "name": np.array(ds.name), "meta": np.array(json.dumps(ds.meta)),
              "family": np.array(family.__name__)}
    arrays.update({f"family.{arg}": np.asarray(getattr(ds.family, arg)) for arg in FAMILY_ARGS[family]})
    if sp.issparse(ds.X):
        X = sp.csr_matrix(ds.X)
        arrays.update({"X.data": X.data, "X.indices": X.indices, "X.indptr": X.indptr, "X.shape": np.array(X.shape)})
    else:
        arrays["X"] = np.asarray(ds.X)
    if ds.labels is not None:
        arrays["labels"] = np.asarray(ds.labels)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    atomic_write(Path(path), buffer.getvalue())


def load_file(path: Path, name: str | None = None) -> Dataset:
    """Read a dataset written by :func:`save`, without pickle.

    Parameters
    ----------
    path : pathlib.Path
        The ``.npz`` file.
    name : str, optional
        The dataset the caller expects; its canonical form must be the one stored.

    Returns
    -------
    Dataset
        Bit-identical to the one saved.

    Raises
    ------
    ValueError
        Not a dataset file of this format, or a file holding another dataset than ``name``.
    FileNotFoundError
        No such file.
    """
    from . import canonical_name  # deferred: the package imports this module's siblings first

    with np.load(path, allow_pickle=False) as z:
        stored = {key: z[key] for key in z.files}
    if stored.get("format", np.array("")).item() != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} file")
    ds_name = str(stored["name"].item())
    if name is not None and canonical_name(name) != ds_name:
        raise ValueError(f"{path} holds dataset {ds_name!r}, not {canonical_name(name)!r}; preprocess it again")
    cls = _FAMILIES.get(str(stored["family"].item()))
    if cls is None:
        raise ValueError(f"{path}: unknown family {stored['family'].item()!r}")
    family = cls(*(_plain(stored[f"family.{arg}"]) for arg in FAMILY_ARGS[cls]))
    if "X" in stored:
        X = stored["X"]
    else:
        X = sp.csr_matrix((stored["X.data"], stored["X.indices"], stored["X.indptr"]),
                          shape=tuple(int(s) for s in stored["X.shape"]))
    return Dataset(name=ds_name, X=X, labels=stored.get("labels"), family=family,
                   meta=json.loads(str(stored["meta"].item())))


def _plain(value: np.ndarray):
    """A 0-d array as its Python scalar (constructors take floats and ints), else the array."""
    return value.item() if value.ndim == 0 else value
