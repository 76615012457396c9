"""Exactness by enumeration (docs/algorithms.md §9): the exact posterior over partitions of tiny data sets,
and a calibrated long-run-frequency check that any registered sampler can be put through.

For N <= ~8 every partition can be listed (Bell numbers), so p(z | x) is known exactly. A
sampler's partition frequencies are compared with it by total variation (TV). The threshold
is calibrated, not guessed: the TV that the same number of *independent* exact draws would
show (its 99th percentile, simulated) is scaled up for the chains' autocorrelation, which is
measured from the spread of the per-chain frequencies, then given a 1.5x margin (docs/algorithms.md §9.3).
The between-chain spread is computed around the chains' own mean, so a biased sampler does
not widen its own threshold.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import integrate, special, stats

from ._registry import get
from .concentration import GammaPrior
from .partitions import cluster_sizes, enumerate_partitions, log_crp_prior, partition_key


def exact_posterior(X, family, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """All partitions of the points of ``X`` (rows: restricted growth strings) and their
    exact posterior probabilities under the DP mixture."""
    parts, log_marginal = _enumerate(X, family)
    logp = log_marginal + np.array([log_crp_prior(z, alpha) for z in parts])
    return parts, _normalise(logp)


def exact_posterior_learned_alpha(X, family, alpha_prior) -> tuple[np.ndarray, np.ndarray, float]:
    """The exact posterior over partitions with alpha ~ Gamma(shape, rate) integrated out,
    and the exact posterior mean of alpha (docs/algorithms.md §9.7).

    ``p(z | X) ∝ prod_k Gamma(n_k) I_K prod_k m(x_k)``, where ``I_K`` is the integral of the
    DP's alpha-dependent factor against the prior (:func:`log_alpha_integrals`), and
    ``E[alpha | X] = sum_z p(z | X) E[alpha | K(z)]``.

    Parameters
    ----------
    X : array or CSR matrix
        A tiny data set (every partition is listed: N <= ~8).
    family : Family
    alpha_prior : (shape, rate)
        The Gamma prior on alpha (rate parameterisation).

    Returns
    -------
    parts : (B_N, N) int array
        Every partition, as restricted growth strings.
    probs : (B_N,) float array
        Their posterior probabilities.
    alpha_mean : float
        ``E[alpha | X]``.
    """
    prior = GammaPrior(*map(float, alpha_prior))
    parts, log_marginal = _enumerate(X, family)
    N = parts.shape[1]
    K = parts.max(axis=1) + 1
    log_i = log_alpha_integrals(N, prior, N + 1)  # index K - 1; K = N + 1 for the mean
    log_sizes = np.array([special.gammaln(cluster_sizes(z)).sum() for z in parts])
    probs = _normalise(log_marginal + log_sizes + log_i[K - 1])
    mean_given_k = np.exp(log_i[1:] - log_i[:-1])  # E[alpha | K] = I_{K+1} / I_K
    return parts, probs, float(probs @ mean_given_k[K - 1])


def log_alpha_integrals(n_points: int, prior, max_clusters: int | None = None) -> np.ndarray:
    """``log I_K`` for ``K = 1..max_clusters`` (default ``n_points``), where
    ``I_K = ∫ alpha^K Gamma(alpha) / Gamma(alpha + N) Gamma(alpha; shape, rate) d alpha``.

    Adaptive quadrature in ``u = log alpha``, where the log integrand is concave. It is
    scaled by its peak (found first), so that the integral is O(1) whatever ``K`` and ``N``,
    and integrated between the points on either side where it has fallen below ``exp(-40)``
    of the peak (concavity keeps it smaller beyond). Below ``alpha = 1e-14`` it is the
    exponential ``alpha^(K - 1 + shape) / Gamma(N)`` to a relative 1e-11, integrated in closed
    form: with a small shape and ``K = 1`` that tail decays too slowly to be cut off
    (docs/algorithms.md §9.7).

    Returns
    -------
    (max_clusters,) float array
    """
    from scipy.optimize import minimize_scalar

    a, b = GammaPrior(*map(float, prior))
    N = int(n_points)
    max_clusters = N if max_clusters is None else int(max_clusters)
    log_norm = a * math.log(b) - special.gammaln(a)
    u_tail = math.log(1e-14)
    steps = np.arange(1.0, N)
    out = np.empty(max_clusters)
    for K in range(1, max_clusters + 1):
        slope = K - 1.0 + a  # of the log integrand as alpha -> 0

        def log_f(u, slope=slope):
            # alpha^K Gamma(alpha) / Gamma(alpha + N) = alpha^(K-1) / prod_{0<j<N} (alpha + j):
            # finite as alpha -> 0, and no cancellation of large log-Gammas when alpha is large;
            # the Jacobian of u = log alpha turns the prior's alpha^(shape - 1) into alpha^shape
            x = math.exp(u)
            return slope * u - float(np.log(x + steps).sum()) - b * x

        # concave in u (second derivative -b alpha - sum_j alpha j / (alpha + j)^2 over j < N):
        # unimodal, so a bounded scalar search finds the peak
        res = minimize_scalar(lambda u: -log_f(u), bounds=(2.0 * u_tail, 30.0), method="bounded",
                              options={"xatol": 1e-10})
        peak, top = res.x, log_f(res.x)
        lo, hi = _drop(log_f, peak, top, -1.0), _drop(log_f, peak, top, +1.0)
        tail = 0.0
        if lo < u_tail:
            lo = min(u_tail, peak - 1.0)
            tail = math.exp(log_f(lo) - top) / slope
        scaled = lambda u: math.exp(log_f(u) - top)  # noqa: E731
        left, _ = integrate.quad(scaled, lo, peak, epsabs=0.0, epsrel=1e-12, limit=200)
        right, _ = integrate.quad(scaled, peak, hi, epsabs=0.0, epsrel=1e-12, limit=200)
        out[K - 1] = top + math.log(left + right + tail) + log_norm
    return out


def _drop(log_f, peak: float, top: float, direction: float, fall: float = 40.0) -> float:
    """A point on the side ``direction`` of ``peak`` where ``log_f`` is below ``top - fall``
    (or, below the peak, past ``alpha = 1e-300``, where the caller's closed-form tail takes over)."""
    step = 1.0 / 64.0
    while log_f(peak + direction * step) > top - fall:
        step *= 2.0
        if peak + direction * step < -690.0:
            break
    return peak + direction * step


def _enumerate(X, family) -> tuple[np.ndarray, np.ndarray]:
    """Every partition of the points of ``X`` and its log marginal likelihood
    ``sum_k log m(x_k)``."""
    X = family.validate(X)
    N = family.n_points(X)
    parts = np.array(list(enumerate_partitions(N)))
    log_marginal = np.array([family.log_marginal_stats(family.stats(X, z, z.max() + 1)).sum() for z in parts])
    return parts, log_marginal


def _normalise(logp: np.ndarray) -> np.ndarray:
    p = np.exp(logp - logp.max())
    return p / p.sum()


def tv_distance(p, q) -> float:
    return 0.5 * float(np.abs(np.asarray(p) - np.asarray(q)).sum())


def null_tv_quantile(probs, n_draws: float, q: float = 0.99, reps: int = 2000, seed: int = 12345) -> float:
    """Quantile ``q`` of the TV between ``probs`` and the frequencies of ``n_draws``
    independent draws from it (simulated)."""
    rng = np.random.default_rng(seed)
    n = max(int(round(n_draws)), 1)
    counts = rng.multinomial(n, probs, size=reps)
    tvs = 0.5 * np.abs(counts / n - probs).sum(axis=1)
    return float(np.quantile(tvs, q))


@dataclass
class ExactnessResult:
    """Outcome of :func:`check_against_exact`.

    With a learned alpha the pooled mean of the chains' alpha is checked too (the ``alpha_*``
    fields; NaN when alpha is fixed) and :attr:`passed` needs both checks.
    """

    algorithm: str
    tv: float  #: TV between pooled sampler frequencies and the exact posterior
    threshold: float  #: calibrated Monte-Carlo threshold for an exact sampler
    inflation: float  #: estimated variance inflation from autocorrelation (>= 1)
    n_samples: int
    frequencies: np.ndarray
    probs: np.ndarray
    alpha_mean: float = math.nan  #: pooled mean of alpha over the recorded samples
    alpha_exact: float = math.nan  #: exact posterior mean E[alpha | X]
    alpha_threshold: float = math.nan  #: calibrated bound on |alpha_mean - alpha_exact|

    @property
    def tv_passed(self) -> bool:
        return self.tv <= self.threshold

    @property
    def alpha_passed(self) -> bool:
        """The alpha-mean check (True when alpha is fixed: nothing to check)."""
        return math.isnan(self.alpha_exact) or abs(self.alpha_mean - self.alpha_exact) <= self.alpha_threshold

    @property
    def passed(self) -> bool:
        return self.tv_passed and self.alpha_passed


def sample_chains(sampler_factory, X, parts, chains: int, burn: int, samples: int, thin: int,
                  inits=None, on_chain=None) -> tuple[np.ndarray, np.ndarray]:
    """Run ``chains`` independent chains; return their (chains, n_partitions) visit counts
    and the (chains, samples) values of ``state.alpha`` at the recorded samples.

    ``sampler_factory(chain)`` returns a fresh sampler; chains cycle through ``inits``
    (numbers of initial clusters; default: one cluster and all singletons, the most
    dispersed starts); ``on_chain(chain)`` is called after each chain (a progress bar).
    """
    index = {partition_key(z): j for j, z in enumerate(parts)}
    N = parts.shape[1]
    inits = (1, N) if inits is None else tuple(inits)
    counts = np.zeros((chains, len(parts)))
    alphas = np.empty((chains, samples))
    for c in range(chains):
        s = sampler_factory(c)
        state = s.init(X, init_clusters=inits[c % len(inits)])
        for _ in range(burn):
            state = s.step(state)
        for t in range(samples):
            for _ in range(thin):
                state = s.step(state)
            counts[c, index[partition_key(state.labels)]] += 1
            alphas[c, t] = state.alpha
        if on_chain is not None:
            on_chain(c)
    return counts, alphas


def alpha_mean_threshold(alphas: np.ndarray, q: float = 0.995) -> float:
    """Calibrated bound on the error of the pooled mean of ``alphas`` (chains x samples) for
    an exact sampler (docs/algorithms.md §9.7).

    The chains are independent, so the spread of their means measures the Monte-Carlo error
    of the pooled mean, autocorrelation included; it is computed around the chains' own mean,
    so a biased sampler does not widen its own bound. The bound is the normal quantile ``q``
    (two-sided) of that error with the harness's 1.5x margin.
    """
    per_chain = alphas.mean(axis=1)
    std_error = per_chain.std(ddof=1) / math.sqrt(len(per_chain))
    return 1.5 * float(stats.norm.ppf(0.5 + q / 2.0)) * std_error


def check_against_exact(name, X, family, alpha: float, chains: int = 8, burn: int = 20,
                        samples: int = 1500, thin: int = 2, seed: int = 0, sampler_alpha: float | None = None,
                        options: dict | None = None, inits=None, alpha_prior=None,
                        sampler_alpha_prior=None, on_chain=None) -> ExactnessResult:
    """Run ``chains`` independent chains of registered sampler ``name`` (or of a
    :class:`~dpmmbench.algorithms.base.Sampler` subclass) and compare their partition
    frequencies with the exact posterior at ``alpha``.

    With ``alpha_prior=(shape, rate)`` alpha is learned: the chains run with that prior,
    starting at ``alpha``, and are compared with the posterior that integrates alpha out
    (:func:`exact_posterior_learned_alpha`), by TV and by the pooled mean of alpha
    (:func:`alpha_mean_threshold`).

    ``sampler_alpha`` (default ``alpha``) and ``sampler_alpha_prior`` (default
    ``alpha_prior``) let a test run a deliberately wrong sampler; ``on_chain(chain)`` is
    called after each chain.
    """
    cls = name if isinstance(name, type) else get(name)
    if alpha_prior is None:
        parts, probs = exact_posterior(X, family, alpha)
    else:
        parts, probs, alpha_exact = exact_posterior_learned_alpha(X, family, alpha_prior)
    run_alpha = alpha if sampler_alpha is None else sampler_alpha
    run_prior = alpha_prior if sampler_alpha_prior is None else sampler_alpha_prior
    learned = {} if run_prior is None else {"alpha_prior": run_prior}

    def factory(c):
        return cls(family, alpha=run_alpha, seed=seed * 1000 + c, **learned, **(options or {}))

    counts, alphas = sample_chains(factory, X, parts, chains, burn, samples, thin, inits, on_chain)
    freq = counts.sum(axis=0) / counts.sum()
    per_chain = counts / samples
    iid_var = (probs * (1 - probs) / samples).sum()
    obs_var = per_chain.var(axis=0, ddof=1).sum()
    inflation = max(1.0, obs_var / iid_var) if iid_var > 0 else 1.0
    n_total = chains * samples
    threshold = 1.5 * null_tv_quantile(probs, n_total / inflation)
    res = ExactnessResult(cls.name, tv_distance(freq, probs), threshold, inflation, n_total, freq, probs)
    if alpha_prior is not None:
        res.alpha_mean, res.alpha_exact = float(alphas.mean()), alpha_exact
        res.alpha_threshold = alpha_mean_threshold(alphas)
    return res


def gibbs_transition_matrix(family, X, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact transition matrix over partitions of the random-scan collapsed Gibbs update
    (pick a point uniformly, redraw its label), built from the compiled kernels' own
    conditional weights. Returns (partitions, T)."""
    import math

    from .collapsed import conditional_logweights, prior_predictive

    X = family.validate(X)
    N = family.n_points(X)
    parts = np.array(list(enumerate_partitions(N)))
    index = {partition_key(z): j for j, z in enumerate(parts)}
    weights = conditional_logweights(family.kernels)
    kdata, hyper = family.kernel_data(X), family.kernel_hyper()
    lpp = prior_predictive(family, X)
    T = np.zeros((len(parts), len(parts)))
    for a, z in enumerate(parts):
        K = z.max() + 1
        for i in range(N):
            labels = z.copy()
            table = family.kernel_table(X, labels, K + 1)
            logw = np.empty(K + 1)
            weights(kdata, hyper, table, labels, i, math.log(alpha), lpp, logw)
            p = np.exp(logw - logw.max())
            p /= p.sum()
            for k in np.flatnonzero(p > 0):
                new = labels.copy()
                new[i] = k
                T[a, index[partition_key(new)]] += p[k] / N
    return parts, T
