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

from dataclasses import dataclass

import numpy as np

from .partitions import enumerate_partitions, log_crp_prior, partition_key


def exact_posterior(X, family, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """All partitions of the points of ``X`` (rows: restricted growth strings) and their
    exact posterior probabilities under the DP mixture."""
    X = family.validate(X)
    N = family.n_points(X)
    parts = np.array(list(enumerate_partitions(N)))
    logp = np.empty(len(parts))
    for j, z in enumerate(parts):
        K = z.max() + 1
        logp[j] = log_crp_prior(z, alpha) + family.log_marginal_stats(family.stats(X, z, K)).sum()
    logp -= logp.max()
    p = np.exp(logp)
    return parts, p / p.sum()


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
    """Outcome of :func:`check_against_exact`."""

    algorithm: str
    tv: float  #: TV between pooled sampler frequencies and the exact posterior
    threshold: float  #: calibrated Monte-Carlo threshold for an exact sampler
    inflation: float  #: estimated variance inflation from autocorrelation (>= 1)
    n_samples: int
    frequencies: np.ndarray
    probs: np.ndarray

    @property
    def passed(self) -> bool:
        return self.tv <= self.threshold


def sample_frequencies(sampler_factory, X, parts, chains: int, burn: int, samples: int, thin: int,
                       inits=None) -> np.ndarray:
    """(chains, n_partitions) visit counts. ``sampler_factory(chain)`` returns a fresh
    sampler; chains cycle through ``inits`` (numbers of initial clusters; default: one
    cluster and all singletons, the most dispersed starts)."""
    index = {partition_key(z): j for j, z in enumerate(parts)}
    N = parts.shape[1]
    inits = (1, N) if inits is None else tuple(inits)
    counts = np.zeros((chains, len(parts)))
    for c in range(chains):
        s = sampler_factory(c)
        state = s.init(X, init_clusters=inits[c % len(inits)])
        for _ in range(burn):
            state = s.step(state)
        for _ in range(samples):
            for _ in range(thin):
                state = s.step(state)
            counts[c, index[partition_key(state.labels)]] += 1
    return counts


def check_against_exact(name: str, X, family, alpha: float, chains: int = 8, burn: int = 20,
                        samples: int = 1500, thin: int = 2, seed: int = 0, sampler_alpha: float | None = None,
                        options: dict | None = None, inits=None) -> ExactnessResult:
    """Run ``chains`` independent chains of registered sampler ``name`` and compare their
    partition frequencies with the exact posterior at ``alpha``.

    ``sampler_alpha`` (default ``alpha``) lets a test run a deliberately wrong sampler.
    """
    from dpmmbench import algorithms  # late import: the registry imports this package's modules

    parts, probs = exact_posterior(X, family, alpha)
    run_alpha = alpha if sampler_alpha is None else sampler_alpha

    def factory(c):
        return algorithms.make(name, family=family, alpha=run_alpha, seed=seed * 1000 + c, **(options or {}))

    counts = sample_frequencies(factory, X, parts, chains, burn, samples, thin, inits)
    freq = counts.sum(axis=0) / counts.sum()
    per_chain = counts / samples
    iid_var = (probs * (1 - probs) / samples).sum()
    obs_var = per_chain.var(axis=0, ddof=1).sum()
    inflation = max(1.0, obs_var / iid_var) if iid_var > 0 else 1.0
    n_total = chains * samples
    threshold = 1.5 * null_tv_quantile(probs, n_total / inflation)
    return ExactnessResult(name, tv_distance(freq, probs), threshold, inflation, n_total, freq, probs)


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
