"""Problem set-up shared by the asv benchmarks and ``benchmarks/report.py``.

Everything here builds data and warmed-up samplers; nothing here is timed by asv itself
(asv only times ``time_*``/``track_*`` methods, and this module defines none). Every builder
runs the hot code once before returning, so numba compilation (or loading it from the cache)
never lands inside a measurement.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from dpmmbench import algorithms
from dpmmbench import datasets
from dpmmbench.algorithms.families import NormalInverseWishart
from dpmmbench.algorithms.fsd import sample_labels

#: root seed of every generated problem: the same name always means the same data
SEED = 0

#: (N points, D dimensions, K components) of the FSD headline problems: Chang & Fisher's 2-D
#: set with a generous truncation, and a 50-D set where the label step is GEMM-shaped
FSD_SHAPES = ((100_000, 2, 100), (70_000, 50, 20))

#: the FSD shape whose label step is a matrix product ``X (N x D) @ W (D x K*D)``
GEMM_SHAPE = (70_000, 50, 20)

#: how many best-of repetitions the track_* benchmarks and the report take
BEST_OF = 5


def best_of(fn, repeat: int = BEST_OF, warmup: int = 1) -> float:
    """Smallest wall-clock time of ``fn()`` over ``repeat`` calls, in seconds.

    Parameters
    ----------
    fn : callable
        Called with no arguments.
    repeat : int
        Number of timed calls.
    warmup : int
        Untimed calls first (JIT, caches, page faults on fresh buffers).

    Returns
    -------
    float
        The minimum: on a shared 2-core box it is the least noisy estimate of the cost.
    """
    return min(timings(fn, repeat, warmup))


def timings(fn, repeat: int, warmup: int = 0) -> list[float]:
    """Wall-clock seconds of each of ``repeat`` calls of ``fn()``, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def gflops(flops: float, seconds: float) -> float:
    """Rate in GFLOP/s."""
    return flops / seconds / 1e9


# ---- data --------------------------------------------------------------------------------

def gaussian_blobs(n: int, dim: int, n_clusters: int, seed: int = SEED, spread: float = 10.0):
    """Well-separated unit-variance Gaussian clusters in ``dim`` dimensions.

    Centres are drawn from ``N(0, spread^2 I)``; in 50-D two centres are then ~140 noise
    widths apart, so the true labels are a sensible, stable starting partition.

    Returns
    -------
    X : (n, dim) float64
    labels : (n,) int64, every cluster non-empty when ``n >= n_clusters``
    family : NormalInverseWishart
        ``NormalInverseWishart.default_for(X)``.
    """
    rng = np.random.default_rng([seed, n, dim, n_clusters])
    centres = rng.normal(scale=spread, size=(n_clusters, dim))
    labels = rng.permutation(np.arange(n) % n_clusters)
    X = centres[labels] + rng.standard_normal((n, dim))
    return X, labels.astype(np.int64), NormalInverseWishart.default_for(X)


def clustered(n: int, dim: int, n_clusters: int):
    """Points from ``n_clusters`` full-covariance Gaussian clusters, with the NIW family.

    2-D problems use the project's ``synth-chang2013`` dataset (the papers' benchmark set and
    its generating prior); other dimensions use :func:`gaussian_blobs`.

    Returns
    -------
    X, labels, family
    """
    if dim == 2:
        ds = datasets.load(f"synth-chang2013?n={n}&n_clusters={n_clusters}")
        return ds.X, ds.labels, ds.family
    return gaussian_blobs(n, dim, n_clusters)


def fsd_data(n: int, dim: int, truncation: int):
    """Data for an FSD problem: 10 true clusters in 2-D (Chang & Fisher), 20 otherwise,
    never more than the truncation (so the true labels are a valid start)."""
    return clustered(n, dim, min(10 if dim == 2 else 20, truncation))


# ---- samplers ----------------------------------------------------------------------------

@dataclass
class Chain:
    """A sampler and its state, warmed up by one step; ``step()`` advances the chain.

    Repeated steps continue one chain started at the true labels, so the cost measured is
    the cost near the posterior mode (where long runs spend their time), not a burn-in cost.
    """

    sampler: algorithms.Sampler
    state: algorithms.State

    def step(self):
        self.state = self.sampler.step(self.state)
        return self.state


def chain(name: str, X, labels, family, **options) -> Chain:
    """Build sampler ``name`` started at ``labels`` and take one (untimed) step."""
    sampler = algorithms.make(name, family=family, alpha=1.0, seed=SEED, **options)
    c = Chain(sampler, sampler.init(X, labels=labels))
    c.step()
    return c


@contextmanager
def dask_chain(name: str, dataset: str, workers: int):
    """Sharded sampler ``name`` on a registered dataset, started at its true labels, with its
    shards on a fresh embedded Dask cluster of ``workers`` single-threaded worker processes
    (the workflow's own, :func:`workflows.cluster.dask_client`); one untimed step taken.
    The cluster is shut down on exit."""
    from dpmmbench.algorithms.backends import DaskBackend
    from dpmmbench.workflows.cluster import dask_client

    ds = datasets.load(dataset)
    with dask_client(workers=workers, threads=1) as client:
        c = chain(name, ds.X, ds.labels, ds.family, backend=DaskBackend(client, n_workers=workers))
        try:
            yield c
        finally:
            c.state.shards.close()


def gibbs_chain(dataset: str) -> Chain:
    """Collapsed Gibbs on a registered dataset, started at its true labels."""
    ds = datasets.load(dataset)
    return chain("gibbs", ds.X, ds.labels, ds.family)


def subcluster_chain(problem: str) -> Chain:
    """``subc`` on a registered dataset, or on ``blobs-<N>x<D>-K<K>`` (:func:`gaussian_blobs`),
    started at the true labels."""
    if problem.startswith("blobs-"):
        shape, k = problem[len("blobs-"):].split("-K")
        n, dim = (int(v) for v in shape.split("x"))
        X, labels, family = gaussian_blobs(n, dim, int(k))
    else:
        ds = datasets.load(problem)
        X, labels, family = ds.X, ds.labels, ds.family
    return chain("subc", X, labels, family)


def fsd_chain(n: int, dim: int, truncation: int) -> Chain:
    """FSD blocked Gibbs with ``truncation`` components on :func:`fsd_data`."""
    X, labels, family = fsd_data(n, dim, truncation)
    return chain("fsd", X, labels, family, truncation=truncation)


# ---- the FSD label step and the GEMM it is compared with ---------------------------------

@dataclass
class LabelStep:
    """Inputs of one FSD label step (every point x every component, then a draw per point)."""

    family: object
    X: np.ndarray
    params: object
    log_weights: np.ndarray
    uniforms: np.ndarray

    @property
    def flops(self) -> int:
        """Nominal work ``2 N D^2 K``: the multiply-adds of the K quadratic forms per point
        (what a GEMM-based implementation does); exp/log and the draw are not counted."""
        N, D = self.X.shape
        return 2 * N * D * D * len(self.log_weights)

    def run(self) -> np.ndarray:
        return sample_labels(self.family, self.X, self.params, self.log_weights, self.uniforms)


def label_step(n: int, dim: int, n_components: int) -> LabelStep:
    """A warmed-up label step on :func:`fsd_data` with ``n_components`` components.

    Component parameters are one posterior draw given the true labels (components beyond
    the true clusters are prior draws, as in a real FSD step); weights are uniform.
    """
    X, labels, family = fsd_data(n, dim, n_components)
    rng = np.random.default_rng([SEED, n, dim, n_components])
    params = family.sample_params(family.stats(X, labels, n_components), rng)
    problem = LabelStep(family, X, params, np.full(n_components, -np.log(n_components)), rng.random(n))
    problem.run()
    return problem


@dataclass
class Gemm:
    """``X (N x D) @ W (D x K*D)``: the matrix product inside the label step, alone.

    Its flop count equals :attr:`LabelStep.flops` for the same (N, D, K), so the ratio of
    the two times is the fraction of the machine's GEMM rate the label step achieves.
    """

    X: np.ndarray
    W: np.ndarray
    out: np.ndarray = field(repr=False)

    @property
    def flops(self) -> int:
        (N, D), M = self.X.shape, self.W.shape[1]
        return 2 * N * D * M

    def run(self) -> np.ndarray:
        # writing into a preallocated buffer: a fresh 560 MB result would mostly time page
        # faults (about 2x slower here), not the GEMM
        rows = self.out.shape[0]
        for a in range(0, self.X.shape[0], rows):  # one product, or row blocks into one buffer
            b = min(a + rows, self.X.shape[0])
            np.matmul(self.X[a:b], self.W, out=self.out[:b - a])
        return self.out


def same_work_gemm(chain: Chain, rows: int = 4096) -> Gemm:
    """The GEMM with the multiply-adds of a Gaussian ``subc`` step's cluster likelihoods as
    quadratic forms, ``N D^2 K`` (K its clusters), on the chain's own points, in ``rows``-row
    blocks: what a step is measured against (issue 32's goal: a step within 1.5x of it)."""
    X = chain.state.X
    return gemm(X.shape[0], X.shape[1], int(np.unique(chain.state.labels).size), X=X, rows=rows)


def gemm(n: int, dim: int, n_components: int, X: np.ndarray | None = None, rows: int | None = None) -> Gemm:
    """A warmed-up :class:`Gemm` of shape ``(n x dim) @ (dim x n_components*dim)``.

    ``X`` defaults to standard normal data; pass the label step's data to use the very same
    left operand. ``rows``: the product in blocks of this many rows written into one buffer
    (a million-row product would otherwise time the writing of gigabytes, not the arithmetic).
    """
    rng = np.random.default_rng([SEED, n, dim, n_components, 1])
    X = rng.standard_normal((n, dim)) if X is None else np.ascontiguousarray(X)
    W = rng.standard_normal((dim, n_components * dim))
    problem = Gemm(X, W, np.empty((min(n, rows or n), n_components * dim)))
    problem.run()
    return problem
