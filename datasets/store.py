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
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from dpmmbench.algorithms.families import DirichletMultinomial, NormalInverseWishart, NormalKnownCovariance

from .base import Dataset
from ._cache import atomic_write
from .registry import resolve

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
        Not a dataset file of this format, a file holding another dataset than ``name``, or
        a file whose contents are malformed: every array is checked (the family's arguments
        by its constructor, the data completely by ``family.validate`` -- CSR structure and
        bounds included -- and the labels against the number of points) before the dataset
        is returned.
    FileNotFoundError
        No such file.
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            stored = {key: z[key] for key in z.files}
    except FileNotFoundError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:  # not a zip, a truncated member, pickled
        raise ValueError(f"{path} is not a readable {FORMAT} file: {exc}") from None
    if "format" not in stored or _text(stored, "format", path, check=False) != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} file")
    ds_name = _text(stored, "name", path)
    if name is not None and (wanted := resolve(name)[2]) != ds_name:  # the canonical name
        raise ValueError(f"{path} holds dataset {ds_name!r}, not {wanted!r}; preprocess it again")
    cls = _FAMILIES.get(_text(stored, "family", path))
    if cls is None:
        raise ValueError(f"{path}: unknown family {stored['family'].item()!r}")
    try:
        family = cls(*(_plain(_array(stored, f"family.{arg}", path)) for arg in FAMILY_ARGS[cls]))
        try:
            meta = json.loads(_text(stored, "meta", path))
        except json.JSONDecodeError as exc:
            raise ValueError(f"'meta' is not valid JSON: {exc}") from None
        if "X" in stored:
            X = stored["X"]
            family.validate(X)  # complete: nothing may use data a sampler would refuse
        else:
            raw = _csr(stored, path)
            family.validate(raw)
            X = sp.csr_matrix((raw.data, raw.indices, raw.indptr), shape=raw.shape)  # checked: safe to build
        return Dataset(name=ds_name, X=X, labels=stored.get("labels"), family=family, meta=meta)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{path}: {exc}") from None


def _array(stored: dict, key: str, path) -> np.ndarray:
    if key not in stored:
        raise ValueError(f"{path}: {key!r} is missing")
    return stored[key]


def _text(stored: dict, key: str, path, check: bool = True) -> str:
    """The string stored under ``key`` (a 0-d string array)."""
    value = _array(stored, key, path)
    if value.ndim != 0 or value.dtype.kind != "U":
        if not check:
            return ""
        raise ValueError(f"{path}: {key!r} must be a string, got an array of dtype {value.dtype} and shape "
                         f"{value.shape}")
    return str(value.item())


def _csr(stored: dict, path) -> sp.csr_matrix:
    """The three stored arrays in a CSR matrix, unchecked: the caller checks them completely
    (``family.validate``) before anything uses them. scipy's constructor is not used here: it
    would silently truncate arrays longer than ``indptr`` says, hiding a malformed file."""
    shape = _array(stored, "X.shape", path)
    if shape.shape != (2,) or not np.issubdtype(shape.dtype, np.integer) or shape.min() < 0:
        raise ValueError(f"'X.shape' must be two non-negative integers, got {shape!r}")
    arrays = [_array(stored, f"X.{part}", path) for part in ("data", "indices", "indptr")]
    for part, a in zip(("data", "indices", "indptr"), arrays):
        if a.ndim != 1:
            raise ValueError(f"'X.{part}' must be 1-D, got shape {a.shape}")
    data, indices, indptr = arrays
    if not (np.issubdtype(indices.dtype, np.integer) and np.issubdtype(indptr.dtype, np.integer)):
        raise TypeError(f"'X.indices' and 'X.indptr' must be integer arrays, got {indices.dtype} and {indptr.dtype}")
    X = sp.csr_matrix((1, 1))
    X.data, X.indices, X.indptr = data, indices, indptr
    X._shape = (int(shape[0]), int(shape[1]))
    return X


def _plain(value: np.ndarray):
    """A 0-d array as its Python scalar (constructors take floats and ints), else the array."""
    return value.item() if value.ndim == 0 else value
