"""dpmmbench: inference in Dirichlet process mixture models, checked and compared.

The distribution's one import package. ``pyproject.toml`` maps it onto the repository root,
so each top-level folder is a subpackage: ``dpmmbench.algorithms`` is ``algorithms/``,
``dpmmbench.datasets`` is ``datasets/``, ``dpmmbench.reports`` is ``reports/`` and
``dpmmbench.workflows`` is ``workflows/``. The layers point one way (each imports only those
before it)::

    algorithms  <-  datasets  <-  reports  <-  workflows

>>> from dpmmbench import algorithms, datasets                    # doctest: +SKIP
>>> ds = datasets.load("synth-chang2013?n=2000")                  # doctest: +SKIP
>>> s = algorithms.make("subc", family=ds.family, seed=0)           # doctest: +SKIP
>>> from dpmmbench import DPMM
>>> DPMM(n_iter=50, random_state=0).fit(ds.X).n_clusters_           # doctest: +SKIP

``dpmmbench.DPMM`` is the scikit-learn estimator over the samplers
(``dpmmbench.algorithms.estimator``).
"""
import importlib

__version__ = "0.1.0"

_SUBPACKAGES = ("algorithms", "datasets", "reports", "workflows")
__all__ = [*_SUBPACKAGES, "DPMM"]


def __getattr__(name):
    # Subpackages load on first use: ``import dpmmbench`` stays cheap (no numba, no Dask,
    # no scikit-learn).
    if name in _SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    if name == "DPMM":
        return importlib.import_module(f"{__name__}.algorithms.estimator").DPMM
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
