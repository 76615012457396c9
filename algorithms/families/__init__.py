"""Conjugate families: the prior G0 and likelihood F of the DP mixture.

- :class:`NormalInverseWishart` (``niw.py``): full-covariance Gaussian.
- :class:`NormalKnownCovariance` (``normal_known.py``): isotropic Gaussian, known variance.
- :class:`DirichletMultinomial` (``dirichlet_multinomial.py``): bag-of-words counts.
"""
from ._base import CollapsedKernels, Family, check_labels
from .dirichlet_multinomial import DirichletMultinomial
from .niw import NormalInverseWishart
from .normal_known import NormalKnownCovariance

__all__ = ["Family", "CollapsedKernels", "NormalInverseWishart", "NormalKnownCovariance", "DirichletMultinomial",
           "check_labels"]
