"""The A*/beam MAP search (``search``, Daumé 2007; docs/algorithms.md §7, §9.4).

* A* (admissible heuristic, unbounded queue) returns the brute-force MAP for N <= 9 on all
  three families, under both partition priors; the gaps of beams and of the inadmissible
  heuristic are measured and reported (terminal output).
* "Admissible functions enqueue a lot, inadmissible enqueues almost nothing": states pushed
  per heuristic on the same data.
* Search vs collapsed Gibbs at equal CPU time on digits (PCA 50, 300 points).
* The compiled pieces (min-max heap, prior bounds) against plain-Python references, the
  workspace growth paths, labels in the original order, and the search as an initialiser.
"""
from __future__ import annotations

import math
import time
from collections import Counter
from functools import lru_cache

import numpy as np
import pytest
import scipy.sparse as sp

from dpmmbench import algorithms
from dpmmbench import datasets
from dpmmbench.algorithms import _search_kernels as sk
from dpmmbench.algorithms import search as search_module
from dpmmbench.algorithms.families import DirichletMultinomial, NormalInverseWishart, NormalKnownCovariance
from dpmmbench.algorithms.partitions import canonical, enumerate_partitions, log_crp_prior, partition_key
from dpmmbench.algorithms.search import HEURISTICS, log_esf_prior, log_posterior_score, map_search, search_order
from conftest import PROBLEMS
from dpmmbench.reports.metrics import log_joint



# ---- brute force ---------------------------------------------------------------------------

FAMILIES = ("niw", "known", "dirmult")


def random_problem(family: str, seed: int, n: int):
    """Three loose groups of ``n`` points for ``family`` ("niw", "known" or "dirmult")."""
    rng = np.random.default_rng([seed, n, FAMILIES.index(family)])
    z = rng.integers(0, 3, n)
    alpha = float(rng.choice([0.3, 1.0, 3.0]))
    if family == "dirmult":
        theta = rng.dirichlet(np.full(5, 0.5), size=3)
        X = sp.csr_matrix(np.array([rng.multinomial(6, theta[k]) for k in z], dtype=float))
        return X, DirichletMultinomial(0.6, 5), alpha
    centres = rng.normal(scale=2.0, size=(3, 2))
    X = centres[z] + rng.normal(scale=0.8, size=(n, 2))
    if family == "niw":
        return X, NormalInverseWishart(np.zeros(2), 0.3, 4.0, 0.8 * np.eye(2)), alpha
    return X[:, :1], NormalKnownCovariance(1.0, [0.0], 2.0), alpha


def brute_force(X, family, alpha, prior):
    """(best objective, set of keys of the partitions attaining it) over all partitions."""
    X = family.validate(X)
    N = family.n_points(X)
    subset_marginal = np.zeros(1 << N)  # L(S) of every subset S, as a bit mask
    for mask in range(1, 1 << N):
        inside = np.array([(mask >> i) & 1 == 0 for i in range(N)], dtype=np.int64)
        subset_marginal[mask] = family.log_marginal_stats(family.stats(X, inside, 2))[0]
    prior_of = log_crp_prior if prior == "eppf" else log_esf_prior
    weights = 1 << np.arange(N)
    scores, keys = [], []
    for z in enumerate_partitions(N):
        masks = np.bincount(z, weights=weights).astype(np.int64)
        scores.append(prior_of(z, alpha) + subset_marginal[masks].sum())
        keys.append(partition_key(z))
    scores = np.array(scores)
    best = scores.max()
    return best, {k for k, s in zip(keys, scores) if s >= best - 1e-9}


@pytest.fixture(scope="module")
def report(request):
    """Rows written to the terminal when the module's tests are done (the measured gaps)."""
    rows = []
    yield rows
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is None or capture is None or not rows:
        return
    with capture.global_and_fixture_disabled():  # module teardown output is captured otherwise
        reporter.write_line("")
        reporter.write_sep("-", "search: measured gaps (nats) to the brute-force MAP, states pushed, vs gibbs")
        for row in rows:
            reporter.write_line(row)


CASES = ([("conftest", name, 0) for name in sorted(PROBLEMS)]
         + [("random", fam, seed) for fam in FAMILIES for seed in range(3)])


def load_case(kind, name, seed):
    if kind == "conftest":
        return PROBLEMS[name]()
    return random_problem(name, seed, 9 if seed == 0 else 8)


@pytest.mark.parametrize("prior", ["eppf", "esf"])
@pytest.mark.parametrize("kind,name,seed", CASES)
def test_astar_returns_the_brute_force_map(kind, name, seed, prior, report):
    X, fam, alpha = load_case(kind, name, seed)
    X = fam.validate(X)
    best, argmax = brute_force(X, fam, alpha, prior)
    heuristics = ["admissible"] + (["trivial"] if isinstance(fam, DirichletMultinomial) else [])
    for heuristic in heuristics:
        res = map_search(X, fam, alpha, heuristic=heuristic, beam=0, prior=prior)
        assert partition_key(res.labels) in argmax, (heuristic, best - res.score)
        # the incremental score is the objective of the returned partition
        assert res.score == pytest.approx(log_posterior_score(X, res.labels, fam, alpha, prior), abs=1e-8)
    gaps = []
    for heuristic, beam in (("inadmissible", 0), ("inadmissible", 1), ("inadmissible", 3), ("admissible", 1),
                            ("admissible", 3)):
        res = map_search(X, fam, alpha, heuristic=heuristic, beam=beam, prior=prior)
        gap = best - log_posterior_score(X, res.labels, fam, alpha, prior)
        assert gap >= -1e-9
        gaps.append(f"{heuristic[:5]}/B={beam or 'inf'}: {gap:.3f}")
    report.append(f"gap {kind}:{name}:{seed} N={fam.n_points(X)} {prior}: " + ", ".join(gaps))


def test_astar_stays_exact_with_the_decoupled_esf_bound(monkeypatch):
    """Beyond ESF_EXACT_MAX_N points the ESF completion maximum is replaced by a looser
    upper bound: A* must still return the MAP (forced here on small data)."""
    monkeypatch.setattr(search_module, "ESF_EXACT_MAX_N", 0)
    for fam_name in ("niw", "dirmult"):
        X, fam, alpha = random_problem(fam_name, 5, 8)
        best, argmax = brute_force(X, fam, alpha, "esf")
        res = map_search(X, fam, alpha, heuristic="admissible", beam=0, prior="esf")
        assert partition_key(res.labels) in argmax


# ---- the prior bounds ------------------------------------------------------------------------

def esf_log(sizes, alpha):
    m = Counter(sizes)
    return (len(sizes) * math.log(alpha) - sum(math.log(s) for s in sizes)
            - sum(math.lgamma(c + 1) for c in m.values()))


@lru_cache(None)
def esf_completion_max(sizes, R, alpha):
    """max over every completion (R more points, anywhere) of the unnormalised ESF."""
    if R == 0:
        return esf_log(sizes, alpha)
    best = esf_completion_max(tuple(sorted(sizes + (1,))), R - 1, alpha)
    for j in range(len(sizes)):
        grown = list(sizes)
        grown[j] += 1
        best = max(best, esf_completion_max(tuple(sorted(grown)), R - 1, alpha))
    return best


def integer_partitions(n, largest=None):
    largest = n if largest is None else largest
    if n == 0:
        yield ()
        return
    for v in range(min(n, largest), 0, -1):
        for rest in integer_partitions(n - v, v):
            yield (v,) + rest


def eppf_completion_max(sizes, R, alpha):
    """max over completions of the EPPF, by brute force over the sizes of the result."""
    best = -np.inf
    for extra in integer_partitions(R) if R else [()]:
        # pieces of the R points: each piece joins one existing cluster or is a new one
        for assign in np.ndindex(*([len(sizes) + 1] * len(extra))):
            final = list(sizes)
            new = []
            used = set()
            ok = True
            for piece, a in zip(extra, assign):
                if a < len(sizes):
                    if a in used:
                        ok = False
                        break
                    used.add(a)
                    final[a] += piece
                else:
                    new.append(piece)
            if ok:
                z = np.repeat(np.arange(len(final) + len(new)), final + new)
                best = max(best, log_crp_prior(z, alpha))
    return best


def test_prior_bounds_match_exhaustive_completion():
    """EPPF closed form and exact ESF programme = the best completion; the O(N) ESF bound is
    never below it. (The reference code's greedy ESF completion can be: it is not a bound.)"""
    for alpha in (0.3, 1.0, 3.0):
        for n in range(1, 6):
            for sizes in integer_partitions(n):
                for R in range(0, 5):
                    N = n + R
                    lgam = np.full(N + 2, np.inf)
                    lgam[1:] = [math.lgamma(j) for j in range(1, N + 2)]
                    const_e = math.lgamma(alpha) - math.lgamma(alpha + N)
                    lgsum = sum(math.lgamma(s) for s in sizes)
                    got = sk.eppf_bound(len(sizes), lgsum, max(sizes), R, math.log(alpha), lgam, const_e)
                    assert got == pytest.approx(eppf_completion_max(sizes, R, alpha), abs=1e-9)
                    hist = np.zeros(N + 2, dtype=np.int64)
                    for s in sizes:
                        hist[s] += 1
                    want = esf_completion_max(tuple(sorted(sizes)), R, alpha)
                    dp = np.empty((N + 1, N + 1))
                    exact = sk.esf_bound_exact(hist, len(sizes), N, math.log(alpha), lgam, 0.0, dp, dp.copy())
                    assert exact == pytest.approx(want, abs=1e-9)
                    G = sk.esf_new_clusters_table(N, math.log(alpha), lgam, N)
                    cnt = np.zeros(N + 2, dtype=np.int64)
                    loose = sk.esf_bound_decoupled(hist, len(sizes), N, R, math.log(alpha), lgam, 0.0, G, cnt)
                    assert loose >= want - 1e-9
                    assert not cnt.any()


def test_log_esf_prior_is_the_ewens_formula():
    z = np.array([0, 0, 1, 2, 2, 3, 4, 4, 4])  # sizes 2, 1, 2, 1, 3
    alpha = 1.7
    N, m = 9, {1: 2, 2: 2, 3: 1}
    rising = math.lgamma(alpha + N) - math.lgamma(alpha)
    want = (math.lgamma(N + 1) - rising
            + sum(c * (math.log(alpha) - math.log(s)) - math.lgamma(c + 1) for s, c in m.items()))
    assert log_esf_prior(z, alpha) == pytest.approx(want)
    # the Ewens formula sums to one over size-count vectors
    total = sum(math.exp(log_esf_prior(np.repeat(np.arange(len(p)), p), alpha)) for p in integer_partitions(7))
    assert total == pytest.approx(1.0)


# ---- the min-max heap --------------------------------------------------------------------------

def test_min_max_heap_against_a_sorted_reference():
    rng = np.random.default_rng(0)
    for _ in range(50):
        Q = 40
        ef, ei = np.zeros((Q, 2)), np.zeros((Q, 3), dtype=np.int64)
        heap = np.zeros(Q, dtype=np.int64)
        free, live, size, seq = list(range(Q)), {}, 0, 0
        for _ in range(300):
            r = rng.random()
            if size == 0 or (r < 0.5 and size < Q):
                e = free.pop()
                ef[e, sk.E_F] = rng.integers(0, 10)  # many ties: broken by push order
                ei[e, sk.E_SEQ] = seq
                sk.heap_push(heap, size, e, ef, ei)
                live[e] = (ef[e, sk.E_F], -seq)
                seq += 1
                size += 1
            else:
                pop, pick = (sk.heap_pop_max, max) if r < 0.75 else (sk.heap_pop_min, min)
                want = pick(live.values())
                e = pop(heap, size, ef, ei)
                assert live.pop(e) == want
                free.append(e)
                size -= 1


# ---- states pushed per heuristic ---------------------------------------------------------------

@pytest.mark.parametrize("dataset", ["synth-multinomial?n=10&vocab=20&n_clusters=3&doc_length=20",
                                     "synth-chang2013?n=12&n_clusters=3"])
def test_admissible_heuristics_enqueue_more(dataset, report):
    """Daumé's slides: admissible functions enqueue a lot, inadmissible almost nothing."""
    ds = datasets.load(dataset)
    pushed = {}
    for heuristic in ("trivial", "admissible", "inadmissible"):
        res = map_search(ds.X, ds.family, 1.0, heuristic=heuristic, beam=0)
        pushed[heuristic] = res.states_pushed
    report.append(f"states pushed, A*, {dataset}: {pushed}")
    assert pushed["trivial"] >= pushed["admissible"] >= pushed["inadmissible"]
    assert pushed["inadmissible"] <= 3 * ds.X.shape[0]  # about two children kept per point


# ---- contract details ------------------------------------------------------------------------

def test_labels_come_back_in_the_original_order():
    """Ordering by L({n}) is a function of the point set, so permuting the data permutes the
    result (labels are in the caller's order, not the search order)."""
    ds = datasets.load("synth-chang2013?n=200&n_clusters=4")
    res = map_search(ds.X, ds.family, 1.0)
    perm = np.random.default_rng(3).permutation(len(ds.X))
    res_perm = map_search(ds.X[perm], ds.family, 1.0)
    np.testing.assert_array_equal(canonical(res.labels[perm]), res_perm.labels)
    assert res.score == pytest.approx(log_joint(ds.X, res.labels, ds.family, 1.0), rel=1e-12, abs=1e-8)


def test_orders():
    lpp = np.array([0.5, -1.0, 0.5, 2.0])
    np.testing.assert_array_equal(search_order(lpp, "given"), [0, 1, 2, 3])
    np.testing.assert_array_equal(search_order(lpp, "increasing"), [1, 0, 2, 3])
    np.testing.assert_array_equal(search_order(lpp, "decreasing"), [3, 0, 2, 1])
    r = search_order(lpp, "random", np.random.default_rng(0))
    assert sorted(r) == [0, 1, 2, 3]


def test_result_does_not_depend_on_the_initial_capacities(monkeypatch):
    """Every work array starts at (almost) nothing and must grow: same search, same answer."""
    X, fam, alpha = random_problem("niw", 1, 9)
    big = {(h, b): map_search(X, fam, alpha, heuristic=h, beam=b) for h in HEURISTICS for b in (0, 4)}
    monkeypatch.setattr(search_module._Workspace, "INITIAL",
                        {"slots": 1, "states": 1, "clusters": 1, "entries": 1, "nodes": 1})
    for (h, b), want in big.items():
        got = map_search(X, fam, alpha, heuristic=h, beam=b)
        np.testing.assert_array_equal(got.labels, want.labels)
        assert (got.score, got.states_pushed, got.states_popped) == (want.score, want.states_pushed,
                                                                    want.states_popped)



def test_sampler_contract_and_trace_columns():
    ds = datasets.load("synth-multinomial?n=60&vocab=20")
    s = algorithms.make("search", family=ds.family, alpha=1.0, seed=0, beam=10, order="random", prior="esf")
    state = s.step(s.init(ds.X))
    info = state.info
    for key in ("states_pushed", "states_popped", "queue_max", "search_time"):
        assert key in info
    assert 0 < info["queue_max"] <= 10 and info["states_popped"] >= 60 and info["search_time"] >= 0.0
    labels = state.labels.copy()
    state = s.step(state)  # later steps keep the result and do no work
    np.testing.assert_array_equal(state.labels, labels)
    assert state.info["states_popped"] == 0 and state.iteration == 2


def test_bad_options_name_the_option():
    fam = NormalKnownCovariance(1.0, [0.0], 1.0)
    with pytest.raises(ValueError, match="heuristic"):
        algorithms.make("search", family=fam, heuristic="optimistic")
    with pytest.raises(ValueError, match="order"):
        algorithms.make("search", family=fam, order="sideways")
    with pytest.raises(ValueError, match="prior"):
        algorithms.make("search", family=fam, prior="pitman-yor")
    with pytest.raises(ValueError, match="beam"):
        algorithms.make("search", family=fam, beam=-1)
    with pytest.raises(TypeError, match="beam"):
        algorithms.make("search", family=fam, beam=2.5)
    X = np.arange(4.0)[:, None]
    for bad in ({"heuristic": "optimistic"}, {"beam": -1}, {"order": "sideways"}, {"prior": "py"}, {"alpha": 0.0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            map_search(X, fam, **{"alpha": 1.0, **bad})


@pytest.mark.parametrize("name", ["gibbs", "fsd"])
def test_search_result_initialises_a_sampler(name):
    """The paper's suggestion: search first, then sample from its answer."""
    ds = datasets.load("synth-chang2013?n=500&n_clusters=5")
    searcher = algorithms.make("search", family=ds.family, alpha=1.0)
    start = searcher.step(searcher.init(ds.X)).labels
    s = algorithms.make(name, family=ds.family, alpha=1.0, seed=0)
    state = s.init(ds.X, labels=start)
    assert partition_key(state.labels) == partition_key(start)
    for _ in range(3):
        state = s.step(state)
    score = log_joint(ds.X, state.labels, ds.family, 1.0)
    assert score > log_joint(ds.X, start, ds.family, 1.0) - 0.01 * abs(score)


# ---- against Gibbs -------------------------------------------------------------------------------

def test_search_beats_gibbs_at_equal_cpu_time_on_digits(report):
    """search (inadmissible, beam 100) vs collapsed Gibbs from one cluster, given the same CPU
    time, on 300 digits (PCA 50): the search is ahead by ~2,800 nats (all of 5 Gibbs seeds).
    This does not hold at every size: measured, Gibbs is ahead by 60-200 nats on the first
    150-200 digits, and by 3,700 (900 digits) and 14,700 nats (all 1,797) in an earlier full
    reproduction (a script since retired for the daume2007 config), where the search's sequential
    assignment leaves ~420 small clusters that it never revisits."""
    ds = datasets.load("digits?pca=50")
    X = ds.X[:300]
    warm = ds.X[:40]  # compile (or load) both kernels off the clock
    map_search(warm, ds.family, 1.0)
    g = algorithms.make("gibbs", family=ds.family, alpha=1.0, seed=0)
    g.step(g.init(warm))
    s = algorithms.make("search", family=ds.family, alpha=1.0, heuristic="inadmissible", beam=100)
    start = time.process_time()
    found = s.step(s.init(X)).labels
    budget = time.process_time() - start
    state = g.init(X)
    start = time.process_time()
    sweeps = 0
    while time.process_time() - start < budget or sweeps == 0:
        state = g.step(state)
        sweeps += 1
    ls, lg = log_joint(X, found, ds.family, 1.0), log_joint(X, state.labels, ds.family, 1.0)
    report.append(f"digits 300 x 50: search {budget:.2f} s CPU log_joint {ls:.1f}; gibbs {sweeps} sweeps "
                  f"{time.process_time() - start:.2f} s log_joint {lg:.1f}")
    assert ls >= lg
