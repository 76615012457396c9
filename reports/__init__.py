"""Metrics, figures and the HTML report. The scorer lives in :mod:`reports.metrics`."""
from .metrics import ari, log_joint, n_clusters, nmi, vi

__all__ = ["log_joint", "vi", "nmi", "ari", "n_clusters"]
