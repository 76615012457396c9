"""dpmmbench: inference in Dirichlet process mixture models, checked and compared.

The distribution's one import package. ``pyproject.toml`` maps it onto the repository root,
so each top-level folder is a subpackage: ``dpmmbench.algorithms`` is ``algorithms/``,
``dpmmbench.datasets`` is ``datasets/``, ``dpmmbench.reports`` is ``reports/`` and
``dpmmbench.workflows`` is ``workflows/``. The layers point one way (each imports only those
before it)::

    algorithms  <-  datasets  <-  reports  <-  workflows

>>> from dpmmbench import algorithms, datasets
>>> ds = datasets.load("synth-chang2013?n=500")
>>> s = algorithms.make("subc", family=ds.family, seed=0)
>>> state = s.init(ds.X)
>>> for _ in range(20):
...     state = s.step(state)
>>> state.labels.shape
(500,)
>>> from dpmmbench import DPMM
>>> model = DPMM(n_iter=20, random_state=0).fit(ds.X)
>>> model.labels_.shape, model.n_clusters_ > 1
((500,), True)

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
