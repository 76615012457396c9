"""What a dataset module provides (a :class:`Builder`) and what loading yields (a :class:`Dataset`)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from dpmmbench.algorithms.families import Family
from dpmmbench.algorithms.families import check_labels

#: keys of ``Dataset.meta`` (and of ``datasets.describe``), in this order
META_KEYS = ("source", "licence", "citation", "preprocessing", "substitute", "n", "dim", "description")

#: symmetric Dirichlet concentration of the mixture weights of the synthetic mixtures: weights
#: vary around 1/K (sd ~ 0.3/K for K = 10) without leaving any cluster nearly empty
WEIGHT_CONCENTRATION = 10.0

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


@dataclass(frozen=True, eq=False)  # eq=False: fields are arrays, equality is identity
class Dataset:
    """A loaded dataset.

    Attributes
    ----------
    name : str
        Canonical full name: parameters sorted, defaults omitted (``"synth-chang2013?n=2000&seed=3"``).
        Loading it again gives bit-identical data.
    X : numpy.ndarray or scipy.sparse.csr_matrix
        ``(N, D)`` float64 points, or CSR float64 counts (documents x vocabulary) for text.
    labels : numpy.ndarray or None
        ``(N,)`` int64 ground-truth labels, ``None`` if unknown.
    family : algorithms.families.Family
        The recommended conjugate prior for this dataset.
    meta : dict
        ``source, licence, citation, preprocessing, substitute, n, dim, description``.
    """

    name: str
    X: Any
    labels: np.ndarray | None
    family: Family
    meta: dict

    def __post_init__(self):
        # Cheap consistency checks (the data themselves are checked by ``family.validate``
        # wherever they enter a sampler or the scorer, and by the store when a file is read).
        if not isinstance(self.name, str):
            raise TypeError(f"Dataset name must be a string, got {type(self.name).__name__}")
        if not isinstance(self.family, Family):
            raise TypeError(f"Dataset family must be an algorithms.families.Family, got {type(self.family).__name__}")
        if not isinstance(self.meta, dict):
            raise TypeError(f"Dataset meta must be a dict, got {type(self.meta).__name__}")
        shape = getattr(self.X, "shape", None)
        if shape is None or len(shape) != 2:
            raise ValueError(f"Dataset {self.name!r}: X must be a 2-D matrix, got shape {shape}")
        if self.labels is not None:
            check_labels(self.labels, int(shape[0]), name=f"Dataset {self.name!r} labels")


@dataclass(frozen=True)
class Parameter:
    """A parameter of a dataset name, with its type, default and allowed range.

    Bounds are inclusive unless ``open_low`` (then ``value > low``).
    """

    name: str
    kind: type  # int or float
    default: int | float
    low: float | None = None
    high: float | None = None
    open_low: bool = False

    def rule(self) -> str:
        """Human-readable type and range, e.g. ``"int >= 10"`` or ``"float in (0, 1]"``."""
        kind = self.kind.__name__
        low, high = (None if v is None else str(int(v)) if self.kind is int else f"{v:g}"
                     for v in (self.low, self.high))  # 10000000, not 1e+07, for an int
        if low is not None and high is not None:
            return f"{kind} in {'(' if self.open_low else '['}{low}, {high}]"
        if low is not None:
            return f"{kind} {'>' if self.open_low else '>='} {low}"
        return kind

    def parse(self, text: str) -> int | float:
        """The value written as ``text``; ``ValueError`` if it is badly typed or out of range."""
        if self.kind is int:
            if not _INT.fullmatch(text):
                raise ValueError(f"must be an integer, got {text!r}")
            value = int(text)
        else:
            if not _FLOAT.fullmatch(text):
                raise ValueError(f"must be a number, got {text!r}")
            value = float(text)
            if not np.isfinite(value):
                raise ValueError(f"must be a finite number, got {text!r}")
        too_low = self.low is not None and (value <= self.low if self.open_low else value < self.low)
        too_high = self.high is not None and value > self.high
        if too_low or too_high:
            raise ValueError(f"must be {self.rule()}, got {text!r}")
        return value

    def format(self, value) -> str:
        """Canonical text of ``value`` (``repr`` of the int or float)."""
        return repr(self.kind(value))


@dataclass(frozen=True)
class Builder:
    """How to describe and generate one named dataset (one per dataset module).

    ``describe(**params)`` returns the metadata dict (cheap, no data); ``generate(**params)``
    returns ``(X, labels, family)``, or ``(X, labels, family, found)`` where ``found`` updates
    metadata that only the data can tell (e.g. ``n`` after empty documents are dropped). Both
    receive every parameter, defaults filled in. ``fetch()``, for data that must be
    downloaded, fetches and verifies the raw files and returns their paths (``None``: the data
    are generated or bundled). ``seed_used(params)``, for a dataset whose ``seed`` only picks a
    subset, says whether these parameters' data depend on the seed (a seed of the whole set is
    no other draw of it); ``None``: the seed always matters.
    """

    name: str
    parameters: tuple[Parameter, ...]
    describe: Callable[..., dict]
    generate: Callable[..., tuple]
    fetch: Callable[[], list] | None = None
    seed_used: Callable[[dict], bool] | None = None

    def usage(self) -> str:
        """The valid parameters, e.g. ``"n (int >= 10, default 100000), seed (...)"``."""
        if not self.parameters:
            return "none"
        return ", ".join(f"{p.name} ({p.rule()}, default {p.default!r})" for p in self.parameters)

    def canonical_name(self, params: dict) -> str:
        """``name?key=value&...`` with keys sorted and default values left out."""
        parts = [f"{p.name}={p.format(params[p.name])}"
                 for p in sorted(self.parameters, key=lambda p: p.name) if params[p.name] != p.default]
        return self.name + ("?" + "&".join(parts) if parts else "")


def seeded_streams(seed: int, count: int) -> list[np.random.Generator]:
    """Independent random generators spawned from one seed.

    Separate streams keep, e.g., the cluster parameters of a seed the same whatever ``n``.

    Parameters
    ----------
    seed : int
        Non-negative seed (the dataset's ``seed`` parameter).
    count : int
        Number of streams.

    Returns
    -------
    list of numpy.random.Generator
        ``default_rng`` over ``SeedSequence(seed).spawn(count)``.
    """
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(count)]


def mixture_labels(rng: np.random.Generator, n: int, n_clusters: int) -> np.ndarray:
    """Labels of a finite mixture with random weights.

    The weights are drawn first, so for one ``rng`` state they do not depend on ``n``.

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of the weights and the labels.
    n : int
        Number of points.
    n_clusters : int
        Number of components K.

    Returns
    -------
    numpy.ndarray
        ``(n,)`` int64 labels, i.i.d. given weights ~ Dirichlet(WEIGHT_CONCENTRATION * 1_K).
    """
    weights = rng.dirichlet(np.full(n_clusters, WEIGHT_CONCENTRATION))
    return rng.choice(n_clusters, size=n, p=weights).astype(np.int64)


def make_meta(**fields) -> dict:
    """The metadata dict with exactly :data:`META_KEYS`, in order."""
    missing = set(META_KEYS) - set(fields)
    extra = set(fields) - set(META_KEYS)
    if missing or extra:
        raise TypeError(f"metadata keys: missing {sorted(missing)}, unexpected {sorted(extra)}")
    return {key: fields[key] for key in META_KEYS}
