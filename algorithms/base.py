"""The shared sampler loop: validation, initialisation and the ``init``/``step`` contract.

A sampler is one class with a registry ``name``, an ``exact`` flag, its declared ``options``
and two methods that do the real work, ``_init`` and ``_step``. Everything a user can get
wrong is checked here, once, for every algorithm.

Example
-------
>>> import numpy as np, algorithms
>>> from algorithms.families import NormalKnownCovariance
>>> X = np.array([[-2.0], [-1.8], [2.1], [2.3]])
>>> s = algorithms.make("gibbs", family=NormalKnownCovariance(0.5, [0.0], 3.0), alpha=1.0, seed=0)
>>> state = s.init(X, init_clusters=1)
>>> for _ in range(20):
...     state = s.step(state)
>>> state.labels.shape
(4,)
"""
from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from .backends import Backend, SerialBackend
from .constraints import Option, resolve_options
from .families import Family
from .families._base import check_labels
from .state import State


class Sampler(ABC):
    """Base class of every DPMM algorithm in the registry."""

    name: ClassVar[str]
    exact: ClassVar[bool]
    options: ClassVar[dict[str, Option]] = {}
    #: runs its map steps on an execution backend (:mod:`algorithms.backends`); the others
    #: compute in-process and refuse one
    supports_backend: ClassVar[bool] = False

    def __init__(self, family: Family, alpha: float = 1.0, seed: int = 0, backend=None, **options):
        if not isinstance(family, Family):
            raise TypeError(f"family must be an algorithms.families.Family instance, got {type(family).__name__}")
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not math.isfinite(alpha):
            raise TypeError(f"alpha must be a finite number, got {alpha!r}")
        if alpha <= 0:
            raise ValueError(f"alpha must be > 0, got {alpha}")
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        if self.supports_backend:
            if backend is None:
                backend = SerialBackend()
            elif not isinstance(backend, Backend):
                raise TypeError(f"backend must be an algorithms.backends.Backend, got {type(backend).__name__}")
        elif backend is not None:
            raise ValueError(f"{self.name!r} runs in-process only; backend={backend!r} is not supported")
        self.backend = backend
        self.family = family
        self.alpha = float(alpha)
        self.seed = int(seed)
        self.params = resolve_options(self.name, self.options, options)

    def __repr__(self):
        opts = "".join(f", {k}={v!r}" for k, v in self.params.items())
        return f"{self.name}(family={self.family!r}, alpha={self.alpha:g}, seed={self.seed}{opts})"

    # ---- the public contract -------------------------------------------------------
    def init(self, X, init_clusters: int = 1, labels=None) -> State:
        """Validate ``X`` and start a chain.

        Parameters
        ----------
        X : (N, D) float array, or CSR counts for the Dirichlet-multinomial family
        init_clusters : int
            Number of initial clusters (points dealt round-robin after a random shuffle);
            1 puts every point together, N makes every point a singleton.
        labels : (N,) int array, optional
            Initial partition (e.g. a search result); overrides ``init_clusters``.
        """
        X = self.family.validate(X)
        N = self.family.n_points(X)
        rng = np.random.default_rng(self.seed)
        if labels is None:
            if isinstance(init_clusters, bool) or not isinstance(init_clusters, numbers.Integral):
                raise TypeError(f"init_clusters must be an integer, got {init_clusters!r}")
            if not 1 <= init_clusters <= N:
                raise ValueError(f"init_clusters must be between 1 and N = {N}, got {init_clusters}")
            labels = np.empty(N, dtype=np.int64)
            labels[rng.permutation(N)] = np.arange(N) % init_clusters
        else:
            labels = check_labels(labels, N).copy()
        return self._init(X, labels, rng)

    def step(self, state: State) -> State:
        """One iteration (one sweep plus its moves); returns the new state."""
        state = self._step(state)
        state.iteration += 1
        return state

    # ---- what each algorithm implements --------------------------------------------
    @abstractmethod
    def _init(self, X, labels: np.ndarray, rng: np.random.Generator) -> State:
        ...

    @abstractmethod
    def _step(self, state: State) -> State:
        ...
