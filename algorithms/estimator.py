"""A scikit-learn estimator over the samplers: :class:`DPMM` (docs/design.md "The estimator").

A thin layer: ``fit`` builds the sampler with :func:`algorithms.make` and runs its chains on
the suite's chain runner (:func:`algorithms.runner.run_sampler`); the log joint is
:func:`algorithms.joint.log_joint`; ``predict``, ``predict_proba`` and ``score_samples`` are the
posterior predictive of :mod:`algorithms.predictive` (docs/algorithms.md §0.8). Nothing is implemented twice.

Example
-------
>>> import numpy as np
>>> from dpmmbench import DPMM
>>> rng = np.random.default_rng(0)
>>> X = np.concatenate([rng.normal(-5, 1, (50, 2)), rng.normal(5, 1, (50, 2))])
>>> model = DPMM(n_iter=30, random_state=0).fit(X)
>>> model.n_clusters_
2
"""
from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from ._registry import make
from .constraints import RUN_PARAMETERS, Interval, OneOf, check_value
from .families import DirichletMultinomial, Family, NormalInverseWishart, NormalKnownCovariance
from .joint import log_joint
from .partitions import compact
from .predictive import assignment_log_proba, mean_log_predictive_density
from .runner import run_sampler

#: family names ``DPMM(family=...)`` takes; each builds the family's data-scaled default
FAMILIES = {
    "niw": NormalInverseWishart,
    "known-covariance": NormalKnownCovariance,
    "dirichlet-multinomial": DirichletMultinomial,
}

#: the constraints of the parameters ``fit`` checks itself. ``alpha``, ``alpha_prior`` and the
#: chains' seeds are checked where every sampler checks them (``Sampler.__init__``), the
#: algorithm name and ``options`` by :func:`algorithms.make`.
_CONSTRAINTS = {
    "family": [OneOf(tuple(FAMILIES)), None],
    "n_iter": RUN_PARAMETERS["iterations"].constraint,
    "time_budget": RUN_PARAMETERS["time_budget"].constraint,
    "n_chains": Interval(Integral, 1, None, closed="left"),
    "random_state": RUN_PARAMETERS["seed"].constraint,
}


class DPMM(ClusterMixin, BaseEstimator):
    """Dirichlet process mixture model fitted by one of the suite's samplers.

    Parameters
    ----------
    algorithm : str, default="subc"
        Registry name of the sampler (:func:`algorithms.available`).
    family : None, str or algorithms.families.Family, default=None
        The conjugate prior. None: the data-scaled default, ``NormalInverseWishart.default_for``
        for dense ``X`` and ``DirichletMultinomial.default_for`` for sparse counts; a name
        (``"niw"``, ``"known-covariance"``, ``"dirichlet-multinomial"``): that family's
        ``default_for(X)``; or a family instance, used as given.
    alpha : float, default=1.0
        DP concentration (the starting value when ``alpha_prior`` is given).
    alpha_prior : (shape, rate) or None, default=None
        Gamma prior on alpha, which is then resampled every iteration (docs/algorithms.md §0.7).
    n_iter : int, default=100
        Sampler steps per chain.
    time_budget : float or None, default=None
        Seconds of sampler time (``init`` and ``step`` calls) per chain; a chain stops before its
        next step once it has used them.
    n_chains : int, default=1
        Independent chains, run one after the other.
    random_state : None, int or numpy.random.RandomState, default=None
        Entropy of one ``numpy.random.SeedSequence`` whose children seed the chains: an int is
        that entropy; a RandomState (None: NumPy's global one, as in scikit-learn) gives one
        draw from it. A fixed int fixes every chain.
    options : dict or None, default=None
        The sampler's options (as :func:`algorithms.make` takes them).

    Attributes
    ----------
    labels_ : (n_samples,) ndarray of int64
        Clusters of the training points under the kept chain's final state, numbered
        ``0..n_clusters_-1`` (by their order in that state).
    n_clusters_ : int
    alpha_ : float
        The kept chain's final alpha.
    log_joint_ : (n_iter_ + 1,) ndarray
        The kept chain's log joint ``log p(x, z)`` after ``init`` and after every step, at that
        step's alpha (docs/algorithms.md §0.3).
    n_iter_ : int
        Steps the kept chain took (fewer than ``n_iter`` when the time budget ran out).
    family_ : algorithms.families.Family
        The family the chains were fitted under.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` had string column names.

    Notes
    -----
    The kept chain, which ``labels_``, ``predict`` and ``predict_proba`` describe, is the one
    whose final state has the highest log joint. ``score_samples`` averages the predictive
    density over the final states of all chains instead: a Monte-Carlo estimate of the
    posterior predictive.
    """

    def __init__(self, algorithm="subc", family=None, alpha=1.0, alpha_prior=None, n_iter=100,
                 time_budget=None, n_chains=1, random_state=None, options=None):
        self.algorithm = algorithm
        self.family = family
        self.alpha = alpha
        self.alpha_prior = alpha_prior
        self.n_iter = n_iter
        self.time_budget = time_budget
        self.n_chains = n_chains
        self.random_state = random_state
        self.options = options

    # ---- fitting ---------------------------------------------------------------------------
    def fit(self, X, y=None):
        """Run the chains on ``X`` and keep the one with the highest final log joint.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features), or sparse counts
            Dense data for the Gaussian families; a scipy.sparse count matrix for the
            Dirichlet-multinomial family.
        y : None
            Ignored.

        Returns
        -------
        DPMM
            ``self``, fitted.

        Raises
        ------
        TypeError, ValueError
            A bad parameter (the message names it) or bad data for the family.
        """
        n_iter = check_value("n_iter", self.n_iter, _CONSTRAINTS["n_iter"])
        time_budget = check_value("time_budget", self.time_budget, _CONSTRAINTS["time_budget"])
        n_chains = check_value("n_chains", self.n_chains, _CONSTRAINTS["n_chains"])
        if self.options is not None and not isinstance(self.options, Mapping):
            raise TypeError(f"options must be a dict of the sampler's options or None, got {self.options!r}")
        seeds = self._chain_seeds(n_chains)
        X = validate_data(self, X, accept_sparse=self._accepts_sparse() and "csr")
        family = self._resolve_family(X)
        X = family.validate(X)

        chains = []
        for seed in seeds:
            sampler = make(self.algorithm, family, alpha=self.alpha, alpha_prior=self.alpha_prior, seed=seed,
                           **(self.options or {}))
            chains.append(_run_chain(sampler, X, n_iter, time_budget))
        # the first of equals on a tie: np.argmax
        kept = chains[int(np.argmax([c[2][-1] for c in chains]))]
        labels, alpha, joint = kept

        self.family_ = family
        self.labels_, self.n_clusters_ = compact(labels)
        self.alpha_ = alpha
        self.log_joint_ = np.asarray(joint)
        self.n_iter_ = len(joint) - 1
        self._X_fit = X
        self._final_draws = [(z, a) for z, a, _ in chains]
        return self

    def _chain_seeds(self, n_chains: int) -> list[int]:
        """One seed per chain, the children of one SeedSequence (see ``random_state``)."""
        state = self.random_state
        if state is None or isinstance(state, np.random.RandomState):
            entropy = int(check_random_state(state).randint(np.iinfo(np.int64).max, dtype=np.int64))
        elif isinstance(state, (Integral, float)) and not isinstance(state, bool):
            entropy = check_value("random_state", state, _CONSTRAINTS["random_state"])
        else:
            raise TypeError(f"random_state must be None, a non-negative int or a numpy.random.RandomState, "
                            f"got {state!r}")
        # a Sampler's seed is a non-negative int64: drop the top bit of each 64-bit word
        return [int(child.generate_state(1, np.uint64)[0] >> np.uint64(1))
                for child in np.random.SeedSequence(entropy).spawn(n_chains)]

    def _accepts_sparse(self) -> bool:
        """Sparse input is counts: taken by the Dirichlet-multinomial family (also as the default)."""
        return self.family is None or self.family == "dirichlet-multinomial" or isinstance(
            self.family, DirichletMultinomial)

    def _resolve_family(self, X) -> Family:
        """The family instance for ``X`` (see the ``family`` parameter)."""
        if isinstance(self.family, Family):
            return self.family
        if self.family is not None and not isinstance(self.family, str):
            raise TypeError(f"family must be None, a family name or an algorithms.families.Family instance, "
                            f"got {type(self.family).__name__}")
        name = check_value("family", self.family, _CONSTRAINTS["family"])
        if name is not None:
            return FAMILIES[name].default_for(X)
        if not sp.issparse(X):
            return NormalInverseWishart.default_for(X)
        try:
            DirichletMultinomial.default_for(X).validate(X)
        except (TypeError, ValueError) as exc:
            # say why counts were expected: sparse data that are not counts were most likely
            # meant for a Gaussian family
            raise type(exc)(f"sparse X is modelled as counts (the Dirichlet-multinomial family) when family "
                            f"is None, but {exc}; pass dense data for a Gaussian family") from exc
        return DirichletMultinomial.default_for(X)

    # ---- using the fit ---------------------------------------------------------------------
    def _check_new(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse=isinstance(self.family_, DirichletMultinomial) and "csr",
                          reset=False)
        return X

    def predict_proba(self, X):
        """Probability that each point belongs to each fitted cluster, under the kept chain's
        final state (docs/algorithms.md §0.8): the predictive restricted to the clusters.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features), or sparse counts

        Returns
        -------
        (n_samples, n_clusters_) ndarray
            Rows sum to 1; column ``k`` is the cluster ``labels_ == k``.
        """
        return np.exp(self._assignment_log_proba(X))

    def predict(self, X):
        """The most probable fitted cluster of each point (the argmax of :meth:`predict_proba`).

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features), or sparse counts

        Returns
        -------
        (n_samples,) ndarray of int64
        """
        return np.argmax(self._assignment_log_proba(X), axis=1).astype(np.int64)

    def _assignment_log_proba(self, X):
        X = self._check_new(X)
        return assignment_log_proba(self.family_, self._X_fit, self.labels_, X)

    def score_samples(self, X):
        """Log posterior predictive density of each point, averaged over the final states of all
        chains (docs/algorithms.md §0.8).

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features), or sparse counts

        Returns
        -------
        (n_samples,) ndarray
            For the Dirichlet-multinomial family without the multinomial coefficients.
        """
        X = self._check_new(X)
        return mean_log_predictive_density(self.family_, self._X_fit, self._final_draws, X)

    def score(self, X, y=None):
        """Mean log posterior predictive density per point (:meth:`score_samples` averaged).

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features), or sparse counts
        y : None
            Ignored.

        Returns
        -------
        float
        """
        return float(np.mean(self.score_samples(X)))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = isinstance(self.family, DirichletMultinomial) or self.family == "dirichlet-multinomial"
        return tags


def _run_chain(sampler, X, n_iter: int, time_budget: float | None):
    """Run one chain on the suite's chain runner; return its final labels, final alpha and the
    log joint after ``init`` and after each step (scored off the clock). Only ``init`` and
    ``step`` count against ``time_budget``."""
    joint = []

    def score(iteration, state, seconds):
        joint.append(log_joint(X, state.labels, sampler.family, state.alpha))

    state = run_sampler(sampler, X, iterations=n_iter, time_budget=time_budget, callback=score).state
    return np.array(state.labels, dtype=np.int64), float(state.alpha), joint
