"""scikit-learn's ``BayesianGaussianMixture`` with the Dirichlet-process prior (``sklearn-bgm``).

Truncated mean-field variational inference (Blei & Jordan's stick-breaking approximation):
``n_components`` components with full covariances. One step is one variational iteration
(an E-step and an M-step, through ``warm_start`` with ``max_iter=1``); ``init`` is the
library's own seeded initialisation (``init_params``) followed by one iteration. The labels
are the components of largest responsibility, compacted. The suite's ``alpha`` is the
stick-breaking concentration (``weight_concentration_prior``: ``Beta(1, alpha)`` sticks, the
same DP); the Gaussian priors are scikit-learn's data-dependent defaults unless
``priors="family"`` maps the Normal-inverse-Wishart family's ``mu0, kappa0, nu0, psi0`` onto
them. The evidence lower bound of every iteration is the ``peer_objective`` trace column
(docs/design.md "Peers").
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from numbers import Real

import numpy as np

from ..constraints import Interval, OneOf, Option
from ..families import NormalInverseWishart, NormalKnownCovariance
from ..partitions import compact
from ..state import State
from ._base import Peer


@dataclass
class BGMState(State):
    model: object = None  #: the fitted ``BayesianGaussianMixture`` (its variational parameters)


class SklearnBGM(Peer):
    """scikit-learn's variational DP Gaussian mixture (registry name ``sklearn-bgm``)."""

    name = "sklearn-bgm"
    kind = "variational"
    info_columns = {
        "peer_objective": "scikit-learn's evidence lower bound after this iteration (lower_bound_)",
        "peer_converged": "1 once scikit-learn considers the fit converged (converged_)",
    }
    families = (NormalInverseWishart, NormalKnownCovariance)
    options = {
        "n_components": Option(20, Interval(int, 1), "truncation: number of variational components "
                                                    "(at most the number of points)"),
        "init_params": Option("kmeans", OneOf(("kmeans", "k-means++", "random", "random_from_data")),
                              "scikit-learn's initialisation of the responsibilities"),
        "tol": Option(1e-3, Interval(Real, 0, None, closed="neither"),
                      "change of the lower bound below which scikit-learn calls it converged"),
        "priors": Option("sklearn", OneOf(("sklearn", "family")),
                         "Gaussian priors: scikit-learn's defaults, or the NIW family's hyperparameters"),
    }

    def __init__(self, family, **kwargs):
        super().__init__(family, **kwargs)
        if self.params["priors"] == "family" and not isinstance(family, NormalInverseWishart):
            raise ValueError(f"{self.name!r} option priors='family' needs the NormalInverseWishart family "
                             f"(full covariances), got {type(family).__name__}")

    def settings(self) -> dict:
        import sklearn

        p = self.params
        family = self.family
        priors = ({"mean_prior": family.mu0.tolist(), "mean_precision_prior": float(family.kappa0),
                   "degrees_of_freedom_prior": float(family.nu0), "covariance_prior": family.psi0.tolist()}
                  if p["priors"] == "family" else "scikit-learn defaults (data-dependent)")
        return {"library": f"scikit-learn {sklearn.__version__}", "method": "BayesianGaussianMixture, "
                "mean-field variational (one E- and M-step per step)",
                "weight_concentration_prior_type": "dirichlet_process", "weight_concentration_prior": self.alpha,
                "n_components": p["n_components"], "covariance_type": "full", "init_params": p["init_params"],
                "tol": p["tol"], "reg_covar": 1e-6, "gaussian_priors": priors,
                "initialisation": f"scikit-learn's {p['init_params']!r}, seeded from the chain's seed "
                                  "(init_clusters is not used)"}

    def _model(self, n_points: int, seed: int):
        from sklearn.mixture import BayesianGaussianMixture

        p = self.params
        priors = {}
        if p["priors"] == "family":
            family = self.family
            priors = {"mean_prior": family.mu0, "mean_precision_prior": family.kappa0,
                      "degrees_of_freedom_prior": family.nu0, "covariance_prior": family.psi0}
        # scikit-learn needs a point per component
        return BayesianGaussianMixture(
            n_components=min(p["n_components"], n_points), covariance_type="full", tol=p["tol"], max_iter=1,
            init_params=p["init_params"], weight_concentration_prior_type="dirichlet_process",
            weight_concentration_prior=self.alpha, random_state=seed, warm_start=True, **priors)

    def _init(self, X, labels, rng):
        if len(X) < 2:
            raise ValueError(f"{self.name!r} needs at least 2 points (scikit-learn's minimum), got {len(X)}")
        # one seed for scikit-learn, drawn from the chain's generator: the same seed, the same chain
        model = self._model(len(X), int(rng.integers(2**31 - 1)))
        return self._iterate(BGMState(X, labels, rng, model=model))

    def _step(self, state):
        return self._iterate(state)

    def _iterate(self, state):
        from sklearn.exceptions import ConvergenceWarning

        with warnings.catch_warnings():
            # every one-iteration fit "did not converge"; convergence is read from the model
            warnings.simplefilter("ignore", ConvergenceWarning)
            labels = state.model.fit_predict(state.X)
        state.labels, K = compact(labels)
        state.info = {"n_clusters": K, "peer_objective": float(state.model.lower_bound_),
                      "peer_converged": bool(state.model.converged_)}
        return state
