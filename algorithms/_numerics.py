"""Small numerical helpers shared by families and samplers (log-space, sampling)."""
from __future__ import annotations

import functools
import math
import types

import numba
import numpy as np
from numba import prange
from scipy.special import gammaln

from .numba_cache import kernel

LOG_PI = math.log(math.pi)
LOG_2PI = math.log(2.0 * math.pi)


def take_rows(X, idx):
    """The rows ``idx`` (non-negative integer positions) of ``X``: for a dense array ``np.take``, or a
    compiled copy on every thread (below), where numpy's row fancy indexing is several times
    slower on narrow rows (numpy 2.4, 110,000 of 1,000,000 rows: 3.3 vs 0.25 ms at 2-D, 6.9 vs
    2.1 ms at 10-D); a sparse matrix indexes itself. Same values either way."""
    if not isinstance(X, np.ndarray):
        return X[idx]
    if (X.ndim == 2 and X.dtype == np.float64 and X.flags.c_contiguous and isinstance(idx, np.ndarray)
            and idx.dtype == np.int64 and idx.size * X.shape[1] >= PARALLEL_MIN_WORK and numba.get_num_threads() > 1):
        # np.take copies on one thread: 110,000 scattered rows of a million, 2-D, 0.97 ms on two
        # threads where this takes 0.61 (10-D: 1.39 against 0.68); on one thread np.take is as fast
        _check_positions(idx, len(X))
        out = np.empty((idx.size, X.shape[1]))
        _GATHER_ROWS(X, idx, out)
        return out
    return X.take(idx, axis=0)


def _gather_rows(X, idx, out):
    for i in prange(idx.shape[0]):
        for a in range(X.shape[1]):
            out[i, a] = X[idx[i], a]


def _put_at(out, idx, values):
    for i in prange(idx.shape[0]):
        out[idx[i]] = values[i]


def _out_of_range(idx, n):
    bad = 0
    for i in prange(idx.shape[0]):
        bad += 1 if idx[i] < 0 or idx[i] >= n else 0
    return bad


def _check_positions(idx, n):
    """IndexError unless every position in ``idx`` lies in ``0..n-1`` (before a compiled copy)."""
    if _OUT_OF_RANGE(idx, n):
        raise IndexError(f"position out of range for {n} rows")


def put_at(out: np.ndarray, idx: np.ndarray, values: np.ndarray) -> None:
    """``out[idx] = values`` for int64 arrays (``idx`` non-negative, without repeats), in place: in parallel
    from :data:`PARALLEL_MIN_WORK` positions (a restart's new sub-labels, 110,000 of a million:
    0.93 ms with numpy's assignment, 0.46 on one thread this way, 0.20 on two)."""
    if (out.dtype != np.int64 or idx.dtype != np.int64 or values.dtype != np.int64 or idx.shape != values.shape
            or idx.size < PARALLEL_MIN_WORK):
        out[idx] = values
    else:
        _check_positions(idx, len(out))
        _PUT_AT(out, idx, values)


@functools.cache
def _blas_libraries():
    """The process's BLAS libraries (threadpoolctl's controllers), found once: the search
    takes a millisecond."""
    from threadpoolctl import ThreadpoolController

    return tuple(c for c in ThreadpoolController().lib_controllers if c.user_api == "blas")


class one_blas_thread:  # noqa: N801 (used as a function: ``with one_blas_thread():``)
    """A context in which BLAS runs on the calling thread only. Around products that a numba
    parallel region follows (or holds): BLAS's own threads, still spinning after a product,
    stall that region's threads (a fused pass 20x slower; a subc isolate at a million 10-D
    points about twice as slow, the step after it too).

    Each library's count is read and set directly (~5 us with two libraries; threadpoolctl's
    ``limit`` builds every library's description each time, ~20 us, several times a step)."""

    __slots__ = ("_restore",)

    def __enter__(self):
        self._restore = []
        for lib in _blas_libraries():
            n = lib.get_num_threads()
            if n is not None and n != 1:
                lib.set_num_threads(1)
                self._restore.append((lib, n))
        return self

    def __exit__(self, *exc):
        for lib, n in self._restore:
            lib.set_num_threads(n)
        return False


def column_mean(X: np.ndarray) -> np.ndarray:
    """The mean of the rows of a dense ``X`` (at least one), as a product: numpy's column mean
    of a narrow array is ~20x slower (110,000 x 2: 1.6 vs 0.08 ms)."""
    return np.ones(len(X)) @ X / len(X)


def _centred(X, mean, out):
    for r in prange(X.shape[0]):
        for a in range(X.shape[1]):
            out[r, a] = X[r, a] - mean[a]


def centred_rows(X: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """``X - mean`` for a dense float64 ``X`` (rows) and ``mean`` (one row), the same floats:
    numpy's broadcast over narrow rows runs its inner loop a row at a time (110,000 x 2: 0.7
    against 0.15 ms on one thread)."""
    out = np.empty(X.shape)
    _CENTRED[X.size >= PARALLEL_MIN_WORK](X, np.asarray(mean, dtype=np.float64), out)
    return out


#: rows per chunk of :func:`rows_where`
_WHERE_CHUNK = 1 << 14


@kernel(inline="always")
def _is_row(z, zs, r, k, h):
    return 1 if z[r] == k and (h < 0 or zs[r] == h) else 0


def _rows_where(z, k, zs, h, table):
    N = z.shape[0]
    C = (N + _WHERE_CHUNK - 1) // _WHERE_CHUNK
    found = np.empty(N, dtype=np.int64)
    ends = np.zeros(C + 1, dtype=np.int64)
    for c in prange(C):
        # every row written to the chunk's next free slot and kept only if it matches: one
        # pass, no branch on the test (taken at random, as labels come)
        start, stop = c * _WHERE_CHUNK, min(N, (c + 1) * _WHERE_CHUNK)
        j = start
        if table.shape[0] == 0:
            for r in range(start, stop):
                found[j] = r
                j += _is_row(z, zs, r, k, h)
        else:
            for r in range(start, stop):
                found[j] = r
                j += table[z[r]] | table[zs[r]]
        ends[c + 1] = j - start
    for c in range(C):
        ends[c + 1] += ends[c]
    out = np.empty(ends[C], dtype=np.int64)
    for c in prange(C):
        for i in range(ends[c + 1] - ends[c]):
            out[ends[c] + i] = found[c * _WHERE_CHUNK + i]
    return out


_NO_TABLE = np.zeros(0, dtype=np.int64)


def rows_where(z: np.ndarray, k: int, zs: np.ndarray | None = None, h: int = -1) -> np.ndarray:
    """``np.flatnonzero(z == k)``, or with ``zs`` and ``h`` ``np.flatnonzero((z == k) & (zs ==
    h))``, for int64 labels: on every thread from :data:`PARALLEL_MIN_WORK` rows (the sub-cluster
    moves look up one cluster's points among all of them: a million labels, 1.5-1.8 ms with
    numpy, 1.0-1.2 ms on two threads), with numpy's vectorised scan on one."""
    if len(z) < PARALLEL_MIN_WORK or numba.get_num_threads() == 1:
        hit = z == k
        if zs is not None and h >= 0:
            hit &= zs == h
        return np.flatnonzero(hit)
    return _ROWS_WHERE(z, int(k), z if zs is None else zs, int(h), _NO_TABLE)


def rows_touching(a: np.ndarray, b: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """``np.flatnonzero(wanted[a] | wanted[b])`` for int64 labels ``a``, ``b`` and a 0/1 int64
    table ``wanted`` longer than every label, in one pass on every thread (numpy's below
    :data:`PARALLEL_MIN_WORK` rows)."""
    if len(a) < PARALLEL_MIN_WORK:
        return np.flatnonzero(wanted[a] | wanted[b])
    return _ROWS_WHERE(a, -1, b, -1, wanted)


def log_multigamma(a, dim: int):
    """log Gamma_D(a), vectorised over ``a``."""
    a = np.asarray(a, dtype=np.float64)
    j = np.arange(dim, dtype=np.float64)
    return dim * (dim - 1) / 4.0 * LOG_PI + gammaln(a[..., None] - j / 2.0).sum(axis=-1)


def log_gamma_variates(rng: np.random.Generator, shape) -> np.ndarray:
    """log of Gamma(shape, 1) draws, accurate for tiny shapes.

    A plain Gamma(0.01) draw underflows to 0 most of the time; for shape < 1 we use
    Gamma(a) = Gamma(a + 1) * U**(1/a) and stay in log space.
    """
    shape = np.asarray(shape, dtype=np.float64)
    small = shape < 1.0
    g = rng.gamma(np.where(small, shape + 1.0, shape))
    out = np.log(g)
    if np.any(small):
        u = rng.random(shape.shape)
        out = np.where(small, out + np.log(u) / np.where(small, shape, 1.0), out)
    return out


def log_dirichlet(rng: np.random.Generator, concentration) -> np.ndarray:
    """log of a Dirichlet draw (rows of ``concentration`` are independent draws)."""
    lg = log_gamma_variates(rng, concentration)
    m = lg.max(axis=-1, keepdims=True)
    return lg - (m + np.log(np.exp(lg - m).sum(axis=-1, keepdims=True)))


def logsumexp_rows(a: np.ndarray) -> np.ndarray:
    m = a.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return (m + np.log(np.exp(a - m).sum(axis=-1, keepdims=True)))[..., 0]


#: weights this many nats below the largest are taken as 0 by :func:`sample_log_weights`. The
#: largest is 1, so the total is >= 1; a skipped weight (< exp(-60) = 9e-27) spans a stretch of
#: the running sum far narrower than the spacing of ``u * total`` (>= 2**-53 = 1.1e-16, a
#: double uniform's), so skipping moves at most ``n * 2**-53`` of probability: the size of the
#: round-off already in the running sum. Skipped on well-separated clusters, most exps go.
NEGLIGIBLE_LOG_RATIO = 60.0


@kernel(inline="always")
def right_side(d, u):
    """A sub-label drawn with the uniform ``u`` from ``d``, the log odds of the left sub-component
    against the right: 1 (right) with probability ``1 / (1 + e^d)``, taken as 0 past ``d = 700``
    (where ``e^d`` overflows)."""
    p_right = 1.0 / (1.0 + math.exp(d)) if d < 700.0 else 0.0
    return 1 if u < p_right else 0


@kernel(inline="always")
def sample_log_weights(logw, n, u):
    """Index drawn from the first ``n`` entries of ``logw`` (log weights), using the
    uniform ``u``; ``logw`` serves as scratch (it may be left holding unnormalised weights)."""
    m = -np.inf
    top = 0
    for k in range(n):
        if logw[k] > m:
            m = logw[k]
            top = k
    floor = m - NEGLIGIBLE_LOG_RATIO
    near = 0
    for k in range(n):
        near += logw[k] > floor
    if near == 1:
        # every other weight is skipped (below): the total is 1 and the running sum passes
        # u * 1 at the largest whatever u, so the draw is known without an exp; on
        # well-separated clusters most rows end here
        return top
    total = 0.0
    for k in range(n):
        # the exp dominates the cost; weights below exp(-60) of the largest (empty slots'
        # -inf included) are skipped, see NEGLIGIBLE_LOG_RATIO
        w = math.exp(logw[k] - m) if logw[k] > floor else 0.0
        logw[k] = w
        total += w
    target = u * total
    acc = 0.0
    last = 0
    for k in range(n):
        if logw[k] > 0.0:
            acc += logw[k]
            last = k
            if acc > target:
                return k
    return last


@kernel(inline="always")
def mh_accept(u, log_ratio):
    """The Metropolis-Hastings accept/reject decision of every sampler: accept when
    ``log u < log_ratio``.

    Compiled, so numba loops inline it and Python callers get the same arithmetic
    (``log 0 = -inf`` accepts instead of raising).

    Parameters
    ----------
    u : float
        A uniform draw on [0, 1] (``rng.random()``, or its complement ``1 - rng.random()``,
        which is exact for numpy's doubles).
    log_ratio : float
        log of the Hastings ratio (before ``min(1, .)``).

    Returns
    -------
    bool
        Whether the proposal is accepted.
    """
    return math.log(u) < log_ratio


#: below this many (rows x components) entries, thread start-up costs more than it saves
PARALLEL_MIN_WORK = 1 << 15

#: rows per chunk of the fused label kernels: each chunk draws its uniforms from its own seeded
#: stream and keeps its own partial statistics, summed in chunk order, so a draw depends on the
#: seed and the rows only, never on how many threads share the chunks
FUSED_CHUNK = 2048


def chunk_seeds(rng: np.random.Generator, n_rows: int) -> np.ndarray:
    """One 32-bit seed per chunk of :data:`FUSED_CHUNK` rows, from ``rng``."""
    return rng.integers(0, 2 ** 32, size=max(1, -(-n_rows // FUSED_CHUNK)), dtype=np.int64)


def parallel_variants(py_func):
    """(serial, parallel) compiled versions of a kernel written with ``prange``.

    The serial one is compiled from a renamed copy: numba names cache files after the
    function, and two variants of one function would overwrite each other's cache entries.
    """
    serial = types.FunctionType(py_func.__code__, py_func.__globals__, py_func.__name__ + "_serial",
                                py_func.__defaults__, py_func.__closure__)
    serial.__qualname__ = py_func.__qualname__ + "_serial"
    return kernel(serial), kernel(parallel=True)(py_func)


def _sample_rows(loglik, log_weights, uniforms, out):
    N, K = loglik.shape
    for r in prange(N):
        row = loglik[r]
        for k in range(K):
            row[k] += log_weights[k]
        out[r] = sample_log_weights(row, K, uniforms[r])


_SAMPLE_ROWS = parallel_variants(_sample_rows)
_CENTRED = parallel_variants(_centred)
_GATHER_ROWS = kernel(parallel=True)(_gather_rows)
_PUT_AT = kernel(parallel=True)(_put_at)
_OUT_OF_RANGE = kernel(parallel=True)(_out_of_range)
_ROWS_WHERE = kernel(parallel=True)(_rows_where)


def sample_rows(loglik, log_weights, uniforms, out, parallel=True):
    """out[r] ~ Cat(exp(loglik[r] + log_weights)), drawn with ``uniforms[r]``.

    Rows are independent, so the result does not depend on the number of threads.
    ``loglik`` is overwritten. ``parallel=False`` right after a multi-threaded BLAS call:
    BLAS threads still spinning stall a numba parallel region.
    """
    _SAMPLE_ROWS[parallel and loglik.size >= PARALLEL_MIN_WORK](loglik, log_weights, uniforms, out)
