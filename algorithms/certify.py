"""A correctness certificate for a sampler: ``dpmmbench check ALGORITHM``.

The suite's own harness, run against one sampler (a registry name or a :class:`Sampler`
subclass), in three parts:

- **conformance** -- the ``init``/``step`` contract on every tiny problem its families take
  (labels of the right shape and type, the iteration counted, ``info`` a dict) and
  determinism (the same seed gives the same chain);
- **bad input** -- NaN or inf in the data, the wrong dimension, a 1-D array, a bad
  ``init_clusters`` or ``labels``, a bad ``alpha``, an unknown option, a family that is not
  one: each refused with an error that names the problem;
- **exactness** -- the total variation between its long-run partition frequencies and the
  posterior enumerated over every partition, against the calibrated threshold
  (:func:`algorithms.exact.check_against_exact`, docs/algorithms.md §9).

The verdict: "exact as declared", "not exact (declared approximate): distance d", or
"declares exact but is not" -- which, like a conformance or bad-input failure, makes
:attr:`Certificate.passed` false (the command exits 1).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ._registry import get
from .base import Sampler
from .exact import ExactnessResult, check_against_exact
from .families import DirichletMultinomial, NormalInverseWishart, NormalKnownCovariance


def niw_problem():
    """Six 2-D points in two groups and an ambiguous one (Normal-inverse-Wishart), alpha 1."""
    X = np.array([[-1.0, -0.8], [-1.3, -1.1], [1.1, 0.9], [0.8, 1.2], [0.1, 0.0], [1.4, 1.0]])
    fam = NormalInverseWishart(mu0=np.zeros(2), kappa0=0.5, nu0=4.0, psi0=0.6 * np.eye(2))
    return X, fam, 1.0


def known_problem():
    """Six 1-D points (Normal with known variance), alpha 1.3."""
    X = np.array([[-2.1], [-1.7], [0.1], [1.9], [2.4], [0.6]])
    return X, NormalKnownCovariance(sigma=1.0, mu0=[0.0], sigma0=2.0), 1.3


def multinomial_problem():
    """Six documents over four words (Dirichlet-multinomial), alpha 0.8."""
    X = sp.csr_matrix(np.array([[3, 1, 0, 0], [2, 2, 0, 1], [0, 0, 3, 1], [0, 1, 2, 2],
                                [1, 1, 1, 1], [4, 0, 0, 1]], dtype=float))
    return X, DirichletMultinomial(gamma=0.7, vocab_size=4), 0.8


#: the tiny problems: small enough to enumerate every partition, spread enough that the
#: posterior covers many of them (name -> builder of ``(X, family, alpha)``)
PROBLEMS = {"niw-2d": niw_problem, "known-1d": known_problem, "dirmult": multinomial_problem}
#: the default budget of the exactness check (thinned samples per chain, chains)
SAMPLES, CHAINS = 1500, 8


@dataclass(frozen=True)
class Finding:
    """One conformance or bad-input check: what was checked, whether it passed, and what
    happened instead."""

    check: str
    passed: bool
    detail: str = ""


@dataclass
class Certificate:
    """What :func:`certify` found."""

    algorithm: str
    exact: bool  #: what the sampler declares
    findings: list = field(default_factory=list)  #: :class:`Finding` of conformance and bad input
    exactness: dict = field(default_factory=dict)  #: problem -> :class:`ExactnessResult`

    @property
    def failures(self) -> list:
        return [f for f in self.findings if not f.passed]

    @property
    def inexact(self) -> list:
        """Problems on which the distance exceeds the calibrated threshold."""
        return [p for p, r in self.exactness.items() if not r.passed]

    @property
    def verdict(self) -> str:
        if self.exact and self.inexact:
            return f"declares exact but is not (on {', '.join(self.inexact)})"
        if not self.exactness:
            return "not checked for exactness: it fits none of the tiny problems"
        if self.exact:
            return "exact as declared"
        return f"not exact (declared approximate): distance {max(r.tv for r in self.exactness.values()):.3f}"

    @property
    def passed(self) -> bool:
        """No conformance or bad-input failure, and exact where it declares it."""
        return not self.failures and not (self.exact and self.inexact)


def _class(sampler) -> type[Sampler]:
    if isinstance(sampler, type) and issubclass(sampler, Sampler):
        return sampler
    if isinstance(sampler, str):
        return get(sampler)
    raise TypeError(f"sampler must be a registry name or a Sampler subclass, got {sampler!r}")


def _fits(cls, family) -> bool:
    return cls.families is None or isinstance(family, cls.families)


def _raises(check: str, call, error: type, text: str) -> Finding:
    """``call()`` must raise ``error`` with ``text`` in its message."""
    try:
        call()
    except error as exc:
        if text in str(exc):
            return Finding(check, True)
        return Finding(check, False, f"raised {type(exc).__name__} without naming {text!r}: {exc}")
    except Exception as exc:  # noqa: BLE001 -- any other error is the finding
        return Finding(check, False, f"raised {type(exc).__name__} instead of {error.__name__}: {exc}")
    return Finding(check, False, f"accepted it (expected {error.__name__} naming {text!r})")


def conformance(sampler) -> list:
    """The ``init``/``step`` contract and determinism on each tiny problem the sampler fits.

    Parameters
    ----------
    sampler : str or type
        A registry name or a :class:`Sampler` subclass.

    Returns
    -------
    list of Finding
    """
    cls = _class(sampler)
    found = []
    for problem, build in PROBLEMS.items():
        X, family, alpha = build()
        if not _fits(cls, family):
            continue
        check = f"contract on {problem}"
        try:
            chains = []
            for _ in range(2):
                s = cls(family, alpha=alpha, seed=7)
                state = s.init(X, init_clusters=2)
                for _ in range(5):
                    state = s.step(state)
                labels = np.asarray(state.labels)
                if labels.shape != (X.shape[0],) or labels.dtype != np.int64:
                    raise AssertionError(f"labels of shape {labels.shape} and type {labels.dtype}, "
                                         f"not ({X.shape[0]},) int64")
                if state.iteration != 5 or not isinstance(state.info, dict):
                    raise AssertionError(f"after 5 steps: iteration {state.iteration}, info a "
                                         f"{type(state.info).__name__}")
                chains.append(labels.copy())
            if not np.array_equal(*chains):
                raise AssertionError("the same seed gave two different chains")
            found.append(Finding(check, True))
        except Exception as exc:  # noqa: BLE001 -- any failure is the finding
            found.append(Finding(check, False, f"{type(exc).__name__}: {exc}"))
    return found


def bad_input(sampler) -> list:
    """Each kind of bad input refused with an error naming it (on 2-D Normal data, and on
    counts where the sampler fits the Dirichlet-multinomial); ``sampler`` and the returned
    :class:`Finding` list as for :func:`conformance`."""
    cls = _class(sampler)
    family = NormalInverseWishart(np.zeros(2), 1.0, 4.0, np.eye(2))
    if not _fits(cls, family):
        return [_raises("a family it does not fit", lambda: cls(family, alpha=1.0), ValueError, "NormalInverseWishart")]
    X = np.random.default_rng(0).normal(size=(10, 2))
    s = cls(family, alpha=1.0, seed=0)

    def with_value(value):
        bad = X.copy()
        bad[3, 1] = value
        return bad

    cases = [("NaN in the data", lambda: s.init(with_value(np.nan)), ValueError, "NaN"),
             ("inf in the data", lambda: s.init(with_value(np.inf)), ValueError, "inf"),
             ("the wrong dimension", lambda: s.init(np.zeros((10, 3))), ValueError, "dimension 3"),
             ("a 1-D array", lambda: s.init(np.zeros(10)), ValueError, "2-D"),
             ("init_clusters = 0", lambda: s.init(X, init_clusters=0), ValueError, "init_clusters"),
             ("more clusters than points", lambda: s.init(X, init_clusters=11), ValueError, "init_clusters"),
             ("a fractional init_clusters", lambda: s.init(X, init_clusters=1.5), TypeError, "init_clusters"),
             ("labels of the wrong length", lambda: s.init(X, labels=[0, 1]), ValueError, "labels"),
             ("alpha = 0", lambda: cls(family, alpha=0.0), ValueError, "alpha"),
             ("a negative alpha", lambda: cls(family, alpha=-1.0), ValueError, "alpha"),
             ("an unknown option", lambda: cls(family, no_such_option=3), TypeError, "unknown option"),
             ("a family that is not one", lambda: cls("niw"), TypeError, "family")]
    counts = DirichletMultinomial(0.5, 3)
    if _fits(cls, counts):
        c = cls(counts, alpha=1.0)
        cases += [("negative counts", lambda: c.init(sp.csr_matrix(np.array([[1.0, -1.0, 0.0]]))), ValueError,
                   "negative"),
                  ("fractional counts", lambda: c.init(sp.csr_matrix(np.array([[1.0, 0.5, 0.0]]))), ValueError,
                   "fractional"),
                  ("counts over too many words", lambda: c.init(sp.csr_matrix(np.ones((2, 4)))), ValueError, "vocab")]
    return [_raises(*case) for case in cases]


def certify(sampler, samples: int = SAMPLES, chains: int = CHAINS, seed: int = 0, progress=None) -> Certificate:
    """Conformance, bad input and exactness of ``sampler`` (see the module docstring).

    Parameters
    ----------
    sampler : str or type
        A registry name or a :class:`Sampler` subclass.
    samples, chains : int
        The exactness budget: thinned samples per chain and independent chains per problem
        (the threshold is calibrated to it: a smaller budget checks less finely, never
        more loosely).
    seed : int
        Seed of the first chain.
    progress : callable, optional
        ``progress(problem, chain, chains)`` after every chain.

    Returns
    -------
    Certificate
    """
    cls = _class(sampler)
    if not (isinstance(samples, int) and samples >= 50 and isinstance(chains, int) and chains >= 2):
        raise ValueError(f"the budget needs samples >= 50 and chains >= 2 (integers), got {samples!r} and {chains!r}")
    cert = Certificate(cls.name, bool(cls.exact), conformance(cls) + bad_input(cls))
    for problem, build in PROBLEMS.items():
        X, family, alpha = build()
        if not _fits(cls, family):
            continue
        tick = None if progress is None else (lambda c, p=problem: progress(p, c + 1, chains))
        cert.exactness[problem] = check_against_exact(cls, X, family, alpha, chains=chains, samples=samples,
                                                      seed=seed, on_chain=tick)
    return cert


__all__ = ["PROBLEMS", "Finding", "Certificate", "ExactnessResult", "conformance", "bad_input", "certify"]
