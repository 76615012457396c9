"""The shared sampler loop: validation, initialisation and the ``init``/``step`` contract.

A sampler is one class with a registry ``name``, an ``exact`` flag, its declared ``options``
and per-step trace columns (``info_columns``, read from a step with ``step_info``), and two
methods that do the real work, ``_init`` and ``_step``. Everything a user can get wrong is
checked here, once, for every algorithm.

Example
-------
>>> import numpy as np
>>> from dpmmbench import algorithms
>>> from dpmmbench.algorithms.families import NormalKnownCovariance
>>> X = np.array([[-2.0], [-1.8], [2.1], [2.3]])
>>> s = algorithms.make("gibbs", family=NormalKnownCovariance(0.5, [0.0], 3.0), alpha=1.0, seed=0)
>>> state = s.init(X, init_clusters=1)
>>> for _ in range(20):
...     state = s.step(state)
>>> state.labels.shape
(4,)
"""
from __future__ import annotations

import numbers
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

import numpy as np

from .backends import Backend, SerialBackend
from .concentration import GammaPrior, escobar_west
from .constraints import RUN_DEFAULTS, Option, check_parameter, resolve_options
from .families import Family
from .families._base import check_labels
from .state import State

#: stands for a worker's (or shard's, super-cluster's) index in the name of an indexed family
#: of per-step columns, e.g. ``"load_{j}"`` declares ``load_0``, ``load_1``, ...
INDEX = "{j}"
#: the values of :attr:`Sampler.kind`
KINDS = ("sampler", "optimiser", "variational")


class Sampler(ABC):
    """Base class of every DPMM algorithm in the registry."""

    name: ClassVar[str]
    exact: ClassVar[bool]
    options: ClassVar[dict[str, Option]] = {}
    #: runs its map steps on an execution backend (:mod:`algorithms.backends`); the others
    #: compute in-process and refuse one
    supports_backend: ClassVar[bool] = False
    #: its in-process steps share the per-point work among numba's threads: kernels compiled
    #: in a serial and a parallel variant, the parallel one taken from about
    #: ``_numerics.PARALLEL_MIN_WORK`` rows (:func:`~.runner.warm_up` compiles both)
    threaded: ClassVar[bool] = False
    #: a peer: another library's method behind this contract (:mod:`algorithms.peers`),
    #: scored by the suite but not part of its own samplers
    external: ClassVar[bool] = False
    #: what its chain of states is (one of :data:`KINDS`): ``"sampler"``, a Markov chain whose
    #: draws R-hat and ESS describe; ``"optimiser"``, a climb to one partition (search);
    #: ``"variational"``, iterations to a fixed point of a variational objective. R-hat and
    #: ESS are statistics of samplers: the reports give them as n/a, with this reason, for
    #: the others
    kind: ClassVar[str] = "sampler"
    #: the family classes it can fit (None: every family)
    families: ClassVar[tuple[type[Family], ...] | None] = None
    #: the per-step trace columns it reports in ``state.info``: column name -> one-line
    #: meaning. A name holding ``{j}`` declares one column per index (``"load_{j}"``:
    #: ``load_0``, ``load_1``, ...). The columns every trace has (the communication counts
    #: ``bytes_sent``, ``bytes_received``, ``messages``, and ``n_clusters``, which the trace
    #: scores from the labels) are not declared here. A plain dict given by a subclass is
    #: checked and frozen when the class is defined.
    info_columns: ClassVar[Mapping[str, str]] = MappingProxyType({})

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "info_columns" in cls.__dict__:
            cls.info_columns = _checked_columns(cls.__name__, cls.__dict__["info_columns"])
        if cls.kind not in KINDS:
            raise TypeError(f"{cls.__name__}.kind must be one of {KINDS}, got {cls.kind!r}")

    def __init__(self, family: Family, alpha: float = RUN_DEFAULTS["alpha"],
                 seed: int = RUN_DEFAULTS["seed"], backend=None, alpha_prior=RUN_DEFAULTS["alpha_prior"],
                 **options):
        if not isinstance(family, Family):
            raise TypeError(f"family must be an algorithms.families.Family instance, got {type(family).__name__}")
        if self.families is not None and not isinstance(family, self.families):
            raise ValueError(f"{self.name!r} fits only the families {', '.join(f.__name__ for f in self.families)}; "
                             f"got {type(family).__name__}")
        # The one check of alpha, alpha_prior and seed (constraints.RUN_PARAMETERS): the kernels
        # take them as they are.
        self.alpha = check_parameter("alpha", alpha)
        prior = check_parameter("alpha_prior", alpha_prior)
        #: Gamma prior of a learned alpha (docs/algorithms.md §0.7), or None: alpha fixed
        self.alpha_prior = None if prior is None else GammaPrior(*prior)
        self.seed = check_parameter("seed", seed)
        self.family = family
        self.params = resolve_options(self.name, self.options, options)
        self.backend = None
        if backend is not None:
            self.attach_backend(backend)
        elif self.supports_backend:
            self.backend = SerialBackend()

    def attach_backend(self, backend: Backend) -> Sampler:
        """Run the map steps of this sampler on ``backend`` from its next ``init`` on.

        The run driver builds a sampler (so every argument is checked) before it starts a
        cluster, then attaches the cluster's backend.

        Parameters
        ----------
        backend : algorithms.backends.Backend

        Returns
        -------
        Sampler
            ``self``.

        Raises
        ------
        ValueError
            The sampler computes in-process only (``supports_backend`` is False).
        TypeError
            ``backend`` is not a Backend.
        """
        if not self.supports_backend:
            raise ValueError(f"{self.name!r} runs in-process only; backend={backend!r} is not supported")
        if not isinstance(backend, Backend):
            raise TypeError(f"backend must be an algorithms.backends.Backend, got {type(backend).__name__}")
        self.backend = backend
        return self

    def __repr__(self):
        opts = "".join(f", {k}={v!r}" for k, v in self.params.items())
        prior = "" if self.alpha_prior is None else f", alpha_prior={tuple(self.alpha_prior)!r}"
        return f"{self.name}(family={self.family!r}, alpha={self.alpha:g}{prior}, seed={self.seed}{opts})"

    # ---- the public contract -------------------------------------------------------
    def init(self, X, init_clusters: int = RUN_DEFAULTS["init_clusters"], labels=None) -> State:
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
            # The one check of init_clusters; its upper bound is known only here.
            init_clusters = check_parameter("init_clusters", init_clusters)
            if init_clusters > N:
                raise ValueError(f"init_clusters must be between 1 and N = {N}, got {init_clusters}")
            labels = np.empty(N, dtype=np.int64)
            labels[rng.permutation(N)] = np.arange(N) % init_clusters
        else:
            labels = check_labels(labels, N).copy()
        state = self._init(X, labels, rng)
        state.alpha = self.alpha
        return state

    def step(self, state: State) -> State:
        """One iteration (one sweep plus its moves); returns the new state.

        With an ``alpha_prior`` the step first redraws ``state.alpha`` given the state, then
        runs the algorithm's moves at that value.
        """
        if self.alpha_prior is not None:
            state.alpha = self._resample_alpha(state)
        state = self._step(state)
        state.iteration += 1
        return state

    # ---- the per-step trace columns --------------------------------------------------
    def step_info(self, state: State) -> dict:
        """The declared per-step columns (:attr:`info_columns`) of ``state``'s last step.

        Parameters
        ----------
        state : State
            A state returned by :meth:`init` or :meth:`step`.

        Returns
        -------
        dict
            ``{column: value}`` for every declared column, in declaration order: an int
            (booleans become 0 or 1) or a float, NaN where the step did not report the column.
            An indexed family (``"load_{j}"``) gives one column per index the step reported,
            in index order. Keys of ``state.info`` that are not declared are left out.

        Raises
        ------
        TypeError
            The step reported a declared column with a value that is not a real number.

        Examples
        --------
        >>> import numpy as np
        >>> from dpmmbench import algorithms
        >>> from dpmmbench.algorithms.families import NormalKnownCovariance
        >>> s = algorithms.make("gibbs-splitmerge", family=NormalKnownCovariance(0.5, [0.0], 3.0), seed=0)
        >>> state = s.step(s.init(np.array([[-2.0], [-1.8], [2.1], [2.3]])))
        >>> sorted(s.step_info(state)) == sorted(s.info_columns)
        True
        """
        info = state.info or {}
        out = {}
        for column in self.info_columns:
            if INDEX in column:
                out.update((key, self._info_value(key, info[key])) for key in column_members(column, info))
            else:
                out[column] = self._info_value(column, info.get(column))
        return out

    @classmethod
    def declares(cls, column: str) -> bool:
        """Whether ``column`` is one of this sampler's declared per-step columns (a member of
        an indexed family such as ``load_3`` for ``"load_{j}"`` included)."""
        return any(column_members(name, (column,)) for name in cls.info_columns)

    def _info_value(self, column: str, value):
        if value is None:
            return float("nan")
        if isinstance(value, (bool, np.bool_)):
            return int(value)
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Real) and np.ndim(value) == 0:
            return float(value)
        raise TypeError(f"{self.name!r} reported its per-step column {column!r} as {value!r} "
                        f"({type(value).__name__}); a column holds one real number per step")

    # ---- learned concentration (docs/algorithms.md §0.7) ------------------------------
    def _resample_alpha(self, state: State) -> float:
        """A draw of alpha from its conditional given ``state``: Escobar & West given the
        number of clusters, exact wherever the rest of the state's law given the partition
        does not involve alpha. Samplers whose state does override this."""
        return escobar_west(state.alpha, self._n_clusters(state), self.family.n_points(state.X),
                            self.alpha_prior, state.rng)

    def _n_clusters(self, state: State) -> int:
        """Occupied clusters of ``state`` (sharded samplers count them from the statistics
        their master holds rather than gathering the labels)."""
        return int(np.count_nonzero(np.bincount(state.labels)))

    # ---- what each algorithm implements --------------------------------------------
    @abstractmethod
    def _init(self, X, labels: np.ndarray, rng: np.random.Generator) -> State:
        ...

    @abstractmethod
    def _step(self, state: State) -> State:
        ...


def _checked_columns(owner: str, columns) -> Mapping[str, str]:
    """``columns`` as a read-only mapping, after checking that it maps column names to
    one-line meanings."""
    if not isinstance(columns, Mapping):
        raise TypeError(f"{owner}.info_columns must be a mapping of column name -> meaning, "
                        f"got {type(columns).__name__}")
    for name, meaning in columns.items():
        if not (isinstance(name, str) and name.replace(INDEX, "0", 1).isidentifier()
                and name.count(INDEX) <= 1):
            raise ValueError(f"{owner}.info_columns: {name!r} is not a column name (an identifier, "
                             f"with at most one {INDEX} for an indexed family)")
        if not (isinstance(meaning, str) and meaning.strip() and "\n" not in meaning):
            raise ValueError(f"{owner}.info_columns[{name!r}] must be a one-line meaning, got {meaning!r}")
    return MappingProxyType(dict(columns))


def column_members(column: str, names) -> list[str]:
    """The names among ``names`` (e.g. a trace's columns) that hold the declared per-step
    column ``column``.

    Parameters
    ----------
    column : str
        A key of some :attr:`Sampler.info_columns`.
    names : iterable
        Candidate names; those that are not strings are skipped.

    Returns
    -------
    list of str
        ``[column]`` if it is among ``names``; for an indexed family (``"load_{j}"``) its
        members among ``names`` in index order (``load_2`` before ``load_10``).

    Examples
    --------
    >>> from dpmmbench.algorithms.base import column_members
    >>> column_members("load_{j}", ["load_10", "time_s", "load_2", "load_imbalance"])
    ['load_2', 'load_10']
    """
    if INDEX not in column:
        return [column] if column in names else []
    head, tail = column.split(INDEX, 1)
    pattern = re.compile(f"{re.escape(head)}([0-9]+){re.escape(tail)}")
    found = sorted((int(m.group(1)), name) for name in names
                   if isinstance(name, str) and (m := pattern.fullmatch(name)))
    return [name for _, name in found]
