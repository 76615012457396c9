"""Split-merge samplers: ``gibbs-sams`` (SAMS, docs/algorithms.md §1) and ``gibbs-splitmerge`` (Jain-Neal, §2).

The core check is docs/algorithms.md §9.2: at N = 5 every random choice of one move can be enumerated
(ordered anchor pairs x allocation orders x allocations for SAMS; pairs x launch states x
scan outcomes for Jain-Neal), so its exact transition matrix over the 52 partitions is
built -- from the library's own proposal functions, run in their forced mode -- and the
exact posterior must be stationary and in detailed balance. Known-wrong variants (built
here, in the test only) must fail the same check.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpmmbench import algorithms
from dpmmbench import datasets
from dpmmbench.algorithms._splitmerge_kernels import MoveContext, apply, pick_pair
from dpmmbench.algorithms.exact import exact_posterior
from dpmmbench.algorithms.families import NormalInverseWishart, NormalKnownCovariance
from dpmmbench.algorithms.partitions import enumerate_partitions, partition_key
from dpmmbench.algorithms.sams import sams_proposal
from dpmmbench.algorithms.splitmerge import jain_neal_proposal
from conftest import PROBLEMS
from dpmmbench.reports.metrics import vi


def appendix_a():
    """docs/algorithms.md Appendix A: 1-D known variance, prior N(0, 2^2), alpha = 1.3."""
    X = np.array([[-2.1], [-1.7], [0.1], [1.9], [2.4]])
    return X, NormalKnownCovariance(sigma=1.0, mu0=[0.0], sigma0=2.0), 1.3


def niw_five():
    """Five points of the shared 2-D NIW problem (two groups and an ambiguous point)."""
    X, fam, alpha = PROBLEMS["niw-2d"]()
    return X[:5], fam, alpha


def dirmult_five():
    """Five documents of the shared Dirichlet-multinomial problem (sparse input)."""
    X, fam, alpha = PROBLEMS["dirmult"]()
    return X[:5], fam, alpha


CASES = {"known-1d": appendix_a, "niw-2d": niw_five, "dirmult": dirmult_five}


# ---- exact transition matrices -----------------------------------------------------------

def others(z, i, j):
    """Sorted ids of the other points of the anchors' cluster(s)."""
    together = (z == z[i]) | (z == z[j])
    together[[i, j]] = False
    return np.flatnonzero(together)


def outcome(z, pairset, part):
    """The partition after accepting ``part`` on ``pairset``."""
    new = z.copy()
    apply(new, pairset, part, z.max() + 1)
    return new


def transition_matrix(case, outcomes):
    """Exact T over all partitions for one move; ``outcomes(ctx, z, i, j)`` yields
    ``(probability, log acceptance ratio, proposed labels)`` for every random choice after
    the (uniform, ordered) anchor pair."""
    X, fam, alpha = CASES[case]()
    ctx = MoveContext(fam, X, alpha)
    parts = np.array(list(enumerate_partitions(X.shape[0])))
    index = {partition_key(z): a for a, z in enumerate(parts)}
    pairs = list(itertools.permutations(range(X.shape[0]), 2))
    T = np.zeros((len(parts), len(parts)))
    for a, z in enumerate(parts):
        for i, j in pairs:
            for prob, log_accept, new in outcomes(ctx, z, i, j):
                acc = math.exp(min(0.0, log_accept))
                T[a, index[partition_key(new)]] += prob * acc / len(pairs)
                T[a, a] += prob * (1.0 - acc) / len(pairs)
    _, pi = exact_posterior(X, fam, alpha)
    return pi, T


def sams_outcomes(ctx, z, i, j):
    """SAMS: every allocation order, and for a split every allocation."""
    orders = list(itertools.permutations(others(z, i, j)))
    for order in orders:
        pairset = ctx.pairset(z, i, j, order)
        if pairset.split:
            for choice in itertools.product((0, 1), repeat=len(order)):
                prop = sams_proposal(pairset, target=(0, 1) + choice)
                yield math.exp(prop.log_q) / len(orders), prop.log_accept, outcome(z, pairset, prop.part)
        else:
            prop = sams_proposal(pairset)
            yield 1.0 / len(orders), prop.log_accept, outcome(z, pairset, prop.part)


def all_parts(m):
    return [np.array((0, 1) + c, dtype=np.int64) for c in itertools.product((0, 1), repeat=m - 2)]


def scan_matrix(pairset):
    """(2^s, 2^s) transition matrix of one restricted scan between the launch parts, from
    the scan kernel in forced mode."""
    parts = all_parts(len(pairset))
    M = np.array([[math.exp(pairset.scan(pairset.table(a), a.copy(), target=b)) for b in parts] for a in parts])
    np.testing.assert_allclose(M.sum(axis=1), 1.0, atol=1e-13)
    return parts, M


def jain_neal_outcomes(t, order=None):
    """Jain-Neal with ``t`` intermediate scans: every launch state (random halves pushed
    through t scans) and every outcome of the final scan. ``order(z, i, j)`` overrides the
    canonical order of S (for the known-wrong variant)."""
    def outcomes(ctx, z, i, j):
        pairset = ctx.pairset(z, i, j, others(z, i, j) if order is None else order(z, i, j))
        parts, M = scan_matrix(pairset)
        launch = np.full(len(parts), 1.0 / len(parts)) @ np.linalg.matrix_power(M, t)
        for a, start in enumerate(parts):
            if pairset.split:
                for b, end in enumerate(parts):
                    prop = jain_neal_proposal(pairset, start, target=end)
                    assert prop.log_q == pytest.approx(math.log(M[a, b]), abs=1e-12)
                    yield launch[a] * M[a, b], prop.log_accept, outcome(z, pairset, prop.part)
            else:
                prop = jain_neal_proposal(pairset, start)
                yield launch[a], prop.log_accept, outcome(z, pairset, prop.part)
    return outcomes


def stationarity_residual(pi, T):
    np.testing.assert_allclose(T.sum(axis=1), 1.0, atol=1e-12)
    return np.abs(pi @ T - pi).sum()


def balance_residual(pi, T):
    flow = pi[:, None] * T
    return np.abs(flow - flow.T).max()


def stationary_tv(pi, T):
    """TV between the exact posterior and the actual stationary law of T."""
    w, v = np.linalg.eig(T.T)
    s = np.real(v[:, np.argmin(np.abs(w - 1.0))])
    return 0.5 * np.abs(s / s.sum() - pi).sum()


@pytest.mark.parametrize("case", sorted(CASES))
def test_sams_move_leaves_the_posterior_invariant(case):
    pi, T = transition_matrix(case, sams_outcomes)
    assert stationarity_residual(pi, T) < 1e-10
    assert balance_residual(pi, T) < 1e-12
    # SAMS alone is irreducible and moves (every partition is left with positive probability)
    assert (np.diag(T) < 1.0).all()


@pytest.mark.parametrize("t", [0, 1, 2])
@pytest.mark.parametrize("case", sorted(CASES))
def test_jain_neal_move_leaves_the_posterior_invariant(case, t):
    pi, T = transition_matrix(case, jain_neal_outcomes(t))
    assert stationarity_residual(pi, T) < 1e-10
    assert balance_residual(pi, T) < 1e-12


# ---- known-wrong variants (test-only) must fail the same check ---------------------------

def sams_imaginary_merge_outcomes(ctx, z, i, j):
    """The published bug (docs/algorithms.md §1): the merge's reverse probability is that of a freshly
    *sampled* imaginary split instead of the forced actual one."""
    if z[i] == z[j]:
        yield from sams_outcomes(ctx, z, i, j)
        return
    orders = list(itertools.permutations(others(z, i, j)))
    for order in orders:
        pairset = ctx.pairset(z, i, j, order)
        log_rho = pairset.log_merge_ratio(pairset.current)
        for choice in itertools.product((0, 1), repeat=len(order)):
            _, log_q_imaginary, _ = pairset.allocate(target=(0, 1) + choice)
            yield (math.exp(log_q_imaginary) / len(orders), log_rho + log_q_imaginary,
                   outcome(z, pairset, pairset.current))


def sams_wrong_alpha_outcomes(ctx, z, i, j):
    """Merges evaluated as if alpha were 1 (the -log alpha term dropped), splits correct."""
    if z[i] == z[j]:
        yield from sams_outcomes(ctx, z, i, j)
        return
    for prob, log_accept, new in sams_outcomes(ctx, z, i, j):
        yield prob, log_accept + math.log(ctx.alpha), new


def jain_neal_assembly_order(z, i, j):
    """Direction-dependent order (docs/algorithms.md §0.5): a merge scans "cluster of i, then cluster of
    j"; a split scans its cluster in sorted order."""
    rest = others(z, i, j)
    return np.concatenate([rest[z[rest] == z[i]], rest[z[rest] != z[i]]])


def test_wrong_sams_variants_fail_the_invariance_check():
    pi, T = transition_matrix("known-1d", sams_imaginary_merge_outcomes)
    assert stationarity_residual(pi, T) > 1e-3
    # docs/algorithms.md Appendix A measured TV 0.054 for this bug on this very problem
    assert stationary_tv(pi, T) == pytest.approx(0.054, abs=0.0015)
    pi, T = transition_matrix("known-1d", sams_wrong_alpha_outcomes)
    assert stationarity_residual(pi, T) > 1e-3


def test_direction_dependent_jain_neal_order_fails_the_invariance_check():
    pi, T = transition_matrix("known-1d", jain_neal_outcomes(0, order=jain_neal_assembly_order))
    assert stationarity_residual(pi, T) > 1e-4
    assert stationary_tv(pi, T) == pytest.approx(4e-3, rel=0.15)  # docs/algorithms.md Appendix A


# ---- the compiled loops agree with themselves ---------------------------------------------

@pytest.mark.parametrize("problem_name", sorted(PROBLEMS))
def test_sampled_choices_have_the_forced_probability_and_marginals_match(problem_name):
    """Drawing an allocation/scan and then forcing the drawn choices give the same log
    probability; the chain-rule log marginals equal the family's closed forms."""
    X, fam, alpha = PROBLEMS[problem_name]()
    ctx = MoveContext(fam, X, alpha)
    rng = np.random.default_rng(3)
    z = np.zeros(fam.n_points(X), dtype=np.int64)
    for _ in range(10):
        i, j = rng.choice(len(z), 2, replace=False)
        pairset = ctx.pairset(z, i, j, rng.permutation(others(z, i, j)))
        u = rng.random(len(pairset))
        part, log_q, log_rho = pairset.allocate(uniforms=u)
        _, log_q_forced, log_rho_forced = pairset.allocate(target=part)
        assert log_q == pytest.approx(log_q_forced, abs=1e-12)
        assert log_rho == pytest.approx(log_rho_forced, abs=1e-12)
        assert log_rho == pytest.approx(pairset.log_merge_ratio(part), abs=1e-10)
        sub = np.full(len(z), 2)
        sub[pairset.members] = part
        L = fam.log_marginal_stats(fam.stats(X, sub, 3))
        L_union = fam.log_marginal_stats(fam.stats(X, (sub == 2).astype(np.int64), 2))[0]
        n1 = int(part.sum())
        n0 = len(part) - n1
        closed = (-math.log(alpha) + math.lgamma(n0 + n1) - math.lgamma(n0) - math.lgamma(n1)
                  + L_union - L[0] - L[1])
        assert log_rho == pytest.approx(closed, abs=1e-9)
        start = part.copy()
        table = pairset.table(start)
        log_q = pairset.scan(table, start, uniforms=rng.random(len(pairset)))
        assert log_q == pytest.approx(pairset.scan(pairset.table(part), part.copy(), target=start), abs=1e-12)


def test_anchor_pairs_are_uniform_over_ordered_pairs():
    """The matrices above weigh every ordered pair by 1 / (N (N - 1)), as the samplers draw them."""
    rng = np.random.default_rng(0)
    n, draws = 4, 24_000
    counts = np.zeros((n, n))
    for _ in range(draws):
        counts[pick_pair(rng, n)] += 1
    assert np.trace(counts) == 0
    off = counts[~np.eye(n, dtype=bool)] / draws
    assert np.abs(off - 1 / (n * (n - 1))).max() < 0.01


# ---- the samplers ------------------------------------------------------------------------

SAMPLERS = ["gibbs-sams", "gibbs-splitmerge"]


@pytest.mark.parametrize("name", SAMPLERS)
def test_recovers_the_ten_synthetic_clusters_from_one(name):
    """Chang & Fisher's synthetic set from a single cluster: accepted splits take the chain
    to the ten generating clusters within a few dozen steps. (At n = 2000 the smallest true
    cluster has 41 points, hence "clusters of >= 30 points"; the posterior may also carry a
    few small extra clusters where true ones overlap.)"""
    ds = datasets.load("synth-chang2013?n=2000")
    assert np.bincount(ds.labels).min() >= 30
    s = algorithms.make(name, family=ds.family, alpha=1.0, seed=0)
    state = s.init(ds.X, init_clusters=1)
    accepted_splits = 0
    for _ in range(30):
        state = s.step(state)
        assert set(state.info) >= {"n_clusters", "proposed_splits", "accepted_splits",
                                   "proposed_merges", "accepted_merges"}
        accepted_splits += state.info["accepted_splits"]
    sizes = np.bincount(state.labels)
    assert (sizes >= 30).sum() >= 10, sizes
    assert vi(state.labels, ds.labels) < 0.3
    assert accepted_splits > 0


@pytest.mark.parametrize("name", SAMPLERS)
def test_options_are_declared_and_checked(name):
    fam = NormalInverseWishart(np.zeros(2), 1.0, 4.0, np.eye(2))
    s = algorithms.make(name, family=fam, moves=3, sweeps=0)
    assert s.params["moves"] == 3 and s.params["sweeps"] == 0
    with pytest.raises(ValueError, match="moves"):
        algorithms.make(name, family=fam, moves=-1)
    with pytest.raises(TypeError, match="sweeps"):
        algorithms.make(name, family=fam, sweeps=1.5)
    if name == "gibbs-splitmerge":
        assert s.params["intermediate_scans"] == 5
        with pytest.raises(ValueError, match="intermediate_scans"):
            algorithms.make(name, family=fam, intermediate_scans=-1)


@pytest.mark.parametrize("name", SAMPLERS)
def test_moves_alone_reach_both_extremes(name):
    """Without Gibbs sweeps the moves alone split a single cluster and merge singletons;
    labels stay compact int64."""
    X, fam, alpha = PROBLEMS["known-1d"]()
    s = algorithms.make(name, family=fam, alpha=alpha, seed=1, sweeps=0, moves=5)
    seen = set()
    for init, accepted in ((1, "accepted_splits"), (len(X), "accepted_merges")):
        state = s.init(X, init_clusters=init)
        total = 0
        for _ in range(50):
            state = s.step(state)
            seen.add(state.info["n_clusters"])
            total += state.info[accepted]
            assert state.labels.dtype == np.int64
            assert state.labels.max() + 1 == state.info["n_clusters"] == len(np.unique(state.labels))
        assert total > 0
    assert {2, 3, 4} <= seen
