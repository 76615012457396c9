"""Conjugate families checked against scipy.stats and against each other."""
import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats
from scipy.special import gammaln

from dpmmbench.algorithms.families import DirichletMultinomial, NormalInverseWishart, NormalKnownCovariance

RNG = np.random.default_rng(42)


def _niw(D=3):
    A = RNG.normal(size=(D, D))
    return NormalInverseWishart(mu0=RNG.normal(size=D), kappa0=0.7, nu0=D + 2.5, psi0=A @ A.T + D * np.eye(D))


@pytest.mark.parametrize("natural", [True, False])  # linear in the features, or triangular solves
def test_niw_predictive_is_multivariate_t(natural, monkeypatch):
    from dpmmbench.algorithms.families import niw

    if not natural:
        monkeypatch.setattr(niw, "NATURAL_MAX_MAGNITUDE", -1.0)
    fam = _niw(3)
    X = RNG.normal(size=(80, 3)) * 2
    labels = RNG.integers(0, 8, 80)  # 8 clusters: as many as the natural parameters need
    st = fam.stats(X, labels, 8)
    Y = RNG.normal(size=(7, 3))
    got = fam.log_predictive(Y, st)
    for k in range(8):
        Xk = X[labels == k]
        n = len(Xk)
        kn, nun = fam.kappa0 + n, fam.nu0 + n
        xbar = Xk.mean(axis=0)
        mn = (fam.kappa0 * fam.mu0 + n * xbar) / kn
        C = (Xk - xbar).T @ (Xk - xbar)
        psin = fam.psi0 + C + fam.kappa0 * n / kn * np.outer(xbar - fam.mu0, xbar - fam.mu0)
        dof = nun - 3 + 1
        want = stats.multivariate_t(loc=mn, shape=psin * (kn + 1) / (kn * dof), df=dof).logpdf(Y)
        np.testing.assert_allclose(got[:, k], want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("make", ["niw", "known", "dirmult"])
def test_log_marginal_is_chain_of_predictives(make):
    if make == "niw":
        fam, X = _niw(2), RNG.normal(size=(6, 2))
    elif make == "known":
        fam, X = NormalKnownCovariance(0.8, [0.5, -0.2], 3.0), RNG.normal(size=(6, 2))
    else:
        fam = DirichletMultinomial(0.3, 5)
        X = sp.csr_matrix(RNG.integers(0, 4, size=(6, 5)).astype(float))
    total = 0.0
    for i in range(6):
        st = fam.stats(X[:i], np.zeros(i, dtype=int), 1) if i else fam.empty_stats(1)
        total += fam.log_predictive(X[i:i + 1], st)[0, 0]
    assert fam.log_marginal(X) == pytest.approx(total, rel=1e-10, abs=1e-9)


@pytest.mark.parametrize("D", [1, 2, 7])
def test_niw_marginals_of_many_clusters_at_once_are_each_clusters_own(D):
    """The compiled log marginal scores a stack of clusters as it scores each alone, and says
    which input it cannot factor instead of returning a number."""
    from dpmmbench.algorithms.families.niw import GaussianStats

    fam = _niw(D)
    X = RNG.normal(size=(60, D)) * 3
    labels = RNG.integers(0, 5, 60)
    st = fam.stats(X, labels, 5)
    alone = [fam.log_marginal(X[labels == k]) for k in range(5)]
    np.testing.assert_allclose(fam.log_marginal_stats(st), alone, rtol=1e-12)
    broken = GaussianStats(np.ones(1), np.zeros((1, D)), -1e6 * np.eye(D)[None])
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        fam.log_marginal_stats(broken)


def test_known_covariance_marginal_matches_joint_gaussian():
    fam = NormalKnownCovariance(sigma=0.7, mu0=[1.0, -2.0], sigma0=2.5)
    X = RNG.normal(size=(5, 2))
    # per dimension the n points are jointly N(mu0 1, sigma^2 I + sigma0^2 11^T)
    cov = 0.7 ** 2 * np.eye(5) + 2.5 ** 2 * np.ones((5, 5))
    want = sum(stats.multivariate_normal(np.full(5, fam.mu0[d]), cov).logpdf(X[:, d]) for d in range(2))
    assert fam.log_marginal(X) == pytest.approx(want, rel=1e-12)


def test_niw_marginal_single_point_is_prior_t():
    fam = _niw(2)
    x = RNG.normal(size=(1, 2))
    dof = fam.nu0 - 1
    want = stats.multivariate_t(fam.mu0, fam.psi0 * (fam.kappa0 + 1) / (fam.kappa0 * dof), df=dof).logpdf(x[0])
    assert fam.log_marginal(x) == pytest.approx(want, rel=1e-12)


def test_dirichlet_multinomial_matches_scipy_without_coefficient():
    fam = DirichletMultinomial(0.4, 6)
    x = np.array([3, 0, 1, 0, 5, 2])
    coeff = gammaln(x.sum() + 1) - gammaln(x + 1).sum()
    want = stats.dirichlet_multinomial(np.full(6, 0.4), x.sum()).logpmf(x) - coeff
    assert fam.log_marginal(sp.csr_matrix(x[None, :].astype(float))) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("make", ["niw", "known", "dirmult"])
def test_statistics_are_additive(make):
    if make == "niw":
        fam, X = _niw(3), RNG.normal(size=(30, 3))
    elif make == "known":
        fam, X = NormalKnownCovariance(1.0, np.zeros(3), 2.0), RNG.normal(size=(30, 3))
    else:
        fam = DirichletMultinomial(0.5, 7)
        X = sp.csr_matrix(RNG.integers(0, 3, size=(30, 7)).astype(float))
    labels = RNG.integers(0, 4, 30)
    parts = fam.stats(X, labels, 4)
    union = fam.stats(X, np.zeros(30, dtype=int), 1)
    for a, b in zip(parts, union):
        np.testing.assert_allclose(np.asarray(a).sum(axis=0), np.asarray(b)[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("D", [2, 12])
@pytest.mark.parametrize("natural", [True, False])  # linear in the features, or quadratic forms
def test_niw_params_loglik_and_sampling(D, natural, monkeypatch):
    from dpmmbench.algorithms.families import niw

    if not natural:
        monkeypatch.setattr(niw, "NATURAL_MAX_MAGNITUDE", -1.0)
    fam = _niw(D)
    X = RNG.normal(size=(200, D))
    st = fam.stats(X, RNG.integers(0, 8, 200), 8)  # 8 components: as many as the natural parameters need
    params = fam.sample_params(st, np.random.default_rng(0))
    sig = params.sigma
    ll = fam.loglik(X[:9], params)
    for k in range(8):
        want = stats.multivariate_normal(params.mu[k], sig[k]).logpdf(X[:9])
        np.testing.assert_allclose(ll[:, k], want, rtol=1e-9)
        np.testing.assert_allclose(params.logdet_sigma[k], np.linalg.slogdet(sig[k])[1], rtol=1e-10)


def test_niw_posterior_draws_match_inverse_wishart_moments():
    D = 2
    fam = NormalInverseWishart(np.zeros(D), 2.0, 7.0, np.array([[2.0, 0.5], [0.5, 1.0]]))
    st = fam.empty_stats(1)
    rng = np.random.default_rng(1)
    draws = [fam.sample_params(st, rng) for _ in range(4000)]
    sig = np.array([p.sigma[0] for p in draws])
    mu = np.array([p.mu[0] for p in draws])
    want = stats.invwishart(df=7.0, scale=fam.psi0).mean()
    np.testing.assert_allclose(sig.mean(axis=0), want, atol=0.05)
    # mu | Sigma ~ N(0, Sigma / kappa0)  =>  Cov(mu) = E[Sigma] / kappa0
    np.testing.assert_allclose(np.cov(mu.T), want / 2.0, atol=0.05)


def test_known_covariance_and_categorical_loglik():
    fam = NormalKnownCovariance(0.5, np.zeros(2), 4.0)
    X = RNG.normal(size=(5, 2))
    p = fam.sample_params(fam.empty_stats(3), np.random.default_rng(0))
    want = np.stack([stats.multivariate_normal(p.mu[k], 0.25 * np.eye(2)).logpdf(X) for k in range(3)], axis=1)
    np.testing.assert_allclose(fam.loglik(X, p), want, rtol=1e-10)
    dm = DirichletMultinomial(0.5, 4)
    C = sp.csr_matrix(np.array([[1, 0, 2, 0], [0, 3, 0, 1]], dtype=float))
    q = dm.sample_params(dm.empty_stats(2), np.random.default_rng(0))
    np.testing.assert_allclose(dm.loglik(C, q), C.toarray() @ q.log_theta.T)
    np.testing.assert_allclose(np.exp(q.log_theta).sum(axis=1), 1.0)


@pytest.mark.parametrize("make", ["niw", "known", "dirmult"])
def test_divergence_is_a_symmetric_nonnegative_matrix(make):
    rng = np.random.default_rng(3)
    fam = {"niw": _niw(3), "known": NormalKnownCovariance(1.0, np.zeros(3), 3.0),
           "dirmult": DirichletMultinomial(0.5, 6)}[make]
    p = fam.sample_params(fam.empty_stats(4), rng)
    J = fam.divergence(p)
    np.testing.assert_allclose(J, J.T, atol=1e-9)
    np.testing.assert_allclose(np.diag(J), 0.0, atol=1e-9)
    assert (J[~np.eye(4, dtype=bool)] > 0).all()


@pytest.mark.parametrize("make", ["niw", "known", "dirmult"])
def test_collapsed_kernels_agree_with_numpy(make):
    """Random adds/removes through the numba kernels leave the same table as a rebuild,
    and the kernel predictive equals the numpy one."""
    rng = np.random.default_rng(5)
    if make == "niw":
        fam, X = _niw(3), rng.normal(size=(25, 3))
    elif make == "known":
        fam, X = NormalKnownCovariance(0.9, np.ones(3), 2.0), rng.normal(size=(25, 3))
    else:
        fam = DirichletMultinomial(0.6, 8)
        X = sp.csr_matrix(rng.integers(0, 4, size=(25, 8)).astype(float))
    X = fam.validate(X)
    labels = rng.integers(0, 3, 25)
    table = fam.kernel_table(X, labels, 5)
    data, hyper = fam.kernel_data(X), fam.kernel_hyper()
    add, remove, logpred, undo_remove = fam.kernels
    for _ in range(60):
        i = int(rng.integers(25))
        before = [np.array(a, copy=True) for a in table]
        remove(table, hyper, data, i, labels[i])
        undo_remove(table, hyper, data, i, labels[i])
        for a, b in zip(table[:5], before[:5]):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
        remove(table, hyper, data, i, labels[i])
        labels[i] = int(rng.integers(5))
        add(table, hyper, data, i, labels[i])
    fresh = fam.kernel_table(X, labels, 5)
    for a, b in zip(table, fresh):
        if np.ndim(a) and a.shape == b.shape and a.dtype == b.dtype and a.ndim >= 1 and a.shape[0] == 5:
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)
    st = fam.stats(X, labels, 5)
    want = fam.log_predictive(X, st)
    for i in range(25):
        k = labels[i]
        remove(table, hyper, data, i, k)
        st_minus = fam.stats(X, np.where(np.arange(25) == i, 5, labels), 6)
        ref = fam.log_predictive(X[i:i + 1], st_minus)[0]
        for j in range(5):
            assert logpred(table, hyper, data, i, j) == pytest.approx(ref[j], rel=1e-9, abs=1e-9)
        add(table, hyper, data, i, k)
    assert want.shape == (25, 5)


def test_default_priors_are_valid():
    X = RNG.normal(size=(50, 4)) * [1, 10, 0, 3]  # one constant column
    fam = NormalInverseWishart.default_for(X)
    assert np.isfinite(fam.log_marginal(X))
    assert np.isfinite(NormalKnownCovariance.default_for(X).log_marginal(X))
    C = sp.csr_matrix(RNG.integers(0, 3, size=(10, 6)).astype(float))
    assert np.isfinite(DirichletMultinomial.default_for(C).log_marginal(C))


def test_the_draw_is_the_categorical_inverse_cdf_with_or_without_its_shortcut():
    """``sample_log_weights`` returns the first index whose running sum of weights (those within
    NEGLIGIBLE_LOG_RATIO nats of the largest) passes ``u`` times their total; where one weight
    is alone within that range it answers without the sums, and must answer the same."""
    from dpmmbench.algorithms._numerics import NEGLIGIBLE_LOG_RATIO, sample_log_weights

    def reference(logw, u):
        m = np.max(logw, initial=-np.inf, where=~np.isnan(logw))
        with np.errstate(invalid="ignore"):
            w = np.where(logw > m - NEGLIGIBLE_LOG_RATIO, np.exp(logw - m), 0.0)
        total, acc, last = 0.0, 0.0, 0
        for x in w:  # summed in index order, as the draw adds them
            total += x
        for k in np.flatnonzero(w > 0):
            acc, last = acc + w[k], k
            if acc > u * total:
                return k
        return last

    rng = np.random.default_rng(5)
    rows = [rng.normal(scale=s, size=12) for s in (1.0, 30.0, 300.0) for _ in range(300)]
    alone = np.full(12, -500.0)
    alone[7] = 0.0
    near = alone.copy()
    near[3] = -NEGLIGIBLE_LOG_RATIO + 1.0  # a second weight just inside the range
    tie = alone.copy()
    tie[2] = 0.0
    nan = alone.copy()
    nan[0] = np.nan
    rows += [alone, near, tie, nan, np.full(12, -np.inf), np.where(np.arange(12) == 5, 0.0, -np.inf)]
    shortcut = 0
    for logw in rows:
        for u in (0.0, 0.5, 1.0 - 2.0 ** -53, rng.random()):
            assert sample_log_weights(logw.copy(), 12, u) == reference(logw, u), (logw, u)
        shortcut += (logw > np.nanmax(logw) - NEGLIGIBLE_LOG_RATIO).sum() == 1
    assert 100 <= shortcut <= len(rows) - 100  # both ways were taken, each many times
    assert sample_log_weights(near.copy(), 12, 0.0) == 3 and sample_log_weights(near.copy(), 12, 0.5) == 7


@pytest.mark.parametrize("D", [6, 10, 30])
def test_the_fused_pass_skips_only_weights_the_draw_skips_anyway(D):
    """The fused sub-cluster pass computes a point's quadratic forms only for the clusters its
    distance bounds keep (``_likely_clusters``): every cluster whose weight reaches
    exp(-NEGLIGIBLE_LOG_RATIO) of the largest (the draw's own cut-off) is kept, and on spread-out
    clusters with anisotropic covariances most of the others go."""
    from dpmmbench.algorithms._numerics import NEGLIGIBLE_LOG_RATIO
    from dpmmbench.algorithms.families import niw

    rng = np.random.default_rng([11, D])
    K, N = 40, 400
    # precisions with eigenvalues from 0.2 to 5 (condition numbers up to 25, as on Chang & Fisher's
    # 10-D recipe): the bounds are loose along some directions
    Q = np.linalg.qr(rng.normal(size=(K, D, D)))[0]
    P = Q @ (np.exp(rng.uniform(np.log(0.2), np.log(5.0), size=(K, D)))[:, :, None] * np.swapaxes(Q, 1, 2))
    W = np.linalg.cholesky(P)
    params = niw.GaussianParams(mu=rng.normal(scale=10.0, size=(K, D)), W=W,
                                logdet_sigma=-2.0 * np.log(np.diagonal(W, axis1=1, axis2=2)).sum(axis=1))
    log_w = np.log(rng.dirichlet(np.ones(K)))
    # points near one cluster, and between two
    pairs = rng.integers(0, K, size=(N, 2))
    t = np.where(np.arange(N) % 2, rng.uniform(0.3, 0.7, N), 0.0)[:, None]
    X = (1 - t) * params.mu[pairs[:, 0]] + t * params.mu[pairs[:, 1]] + rng.normal(scale=1.5, size=(N, D))
    logw = niw.gaussian_loglik(X, params) + log_w
    base = -0.5 * D * np.log(2 * np.pi) - 0.5 * params.logdet_sigma + log_w
    lam_lo, lam_hi = niw._precision_range(params)
    groups = np.zeros(K, dtype=np.int64)
    keep, dist, kept, shared = np.empty(K, dtype=np.bool_), np.empty(K), 0, 0
    for i in range(N):
        niw._likely_clusters(X, i, X @ params.mu.T, (params.mu ** 2).sum(axis=1), base, lam_lo, lam_hi, groups, 0, dist,
                             keep)
        needed = logw[i] > logw[i].max() - NEGLIGIBLE_LOG_RATIO
        assert keep[needed].all(), (i, np.flatnonzero(needed & ~keep))
        kept += keep.sum()
        shared += needed.sum() > 1
    # it has teeth: points shared between clusters, and many clusters skipped (all but a few for
    # the points near one cluster; measured 45-51 % skipped over all points)
    assert shared >= 10 and kept < 0.6 * N * K, (shared, kept)


@pytest.mark.parametrize("D, settings", [
    (2, {}), (10, {}), (18, {}),  # natural parameters (18-D: statistics after the pass)
    # quadratic forms: by rows, by products
    (2, {"NATURAL_MAX_MAGNITUDE": -1.0}), (10, {"NATURAL_MAX_MAGNITUDE": -1.0}),
    (24, {}),  # the likely clusters' bounds (24-D: statistics after the pass)
    (10, {"PRUNE_MIN_D": 0, "PRUNED_MAX_SHARE": 0.0}),  # ... their forms by products
    (10, {"PRUNE_MIN_D": 0, "PRUNED_MAX_SHARE": 1.0}), (24, {"PRUNED_MAX_SHARE": 1.0})])  # ... by rows
@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("far", [0, 5])  # clusters whose weights the pass may skip (< e^-60 of the largest)
def test_fused_subcluster_pass_draws_the_exact_conditionals(D, settings, grouped, far, monkeypatch):
    """The compiled sub-cluster label step (``fused_gaussian_subcluster_draw``) against the
    conditionals computed apart (``gaussian_loglik``): each of three rows, repeated 4,000 times,
    takes cluster k with probability prop. to pi_k N(x | mu_k, Sigma_k) (within its old cluster's
    group when grouped) and sub-label h prop. to pi_kh N(x | mu_kh, Sigma_kh); the statistics
    returned are those of the labels drawn."""
    from scipy.stats import binom

    from dpmmbench.algorithms.families import niw
    from dpmmbench.algorithms.families.niw import (GaussianParams, fused_gaussian_subcluster_draw,
                                                    gaussian_loglik, grouped_gaussian_stats)

    for name, value in settings.items():
        monkeypatch.setattr(niw, name, value)
    rng = np.random.default_rng([7, D])
    K, reps = 3 + far, 4000

    def params(k, at=1.0):
        A = rng.normal(size=(k, D, D)) / np.sqrt(D) + 0.5 * np.eye(D)
        W = np.linalg.cholesky(A @ np.swapaxes(A, 1, 2))  # precision factors
        logdet_sigma = -2.0 * np.log(np.diagonal(W, axis1=1, axis2=2)).sum(axis=1)
        return GaussianParams(mu=at * rng.normal(size=(k, D)) / np.sqrt(D), W=W, logdet_sigma=logdet_sigma)

    near, away = params(3), params(far, at=40.0)
    P = GaussianParams(*(np.concatenate(pair) for pair in zip(near, away)))
    S = params(2 * K)
    log_w, sub_log_w = np.log(rng.dirichlet(np.ones(K))), np.log(rng.dirichlet(np.ones(2 * K)))
    rows = rng.normal(size=(3, D)) / np.sqrt(D)
    X = np.repeat(rows, reps, axis=0)
    groups, old = np.array([0, 0, 1] + [k % 2 for k in range(far)]), np.repeat([1, 2, 0], reps)
    shift = rows.mean(axis=0)
    z, zs, (n, s1, s2) = fused_gaussian_subcluster_draw(X, shift, P, log_w, S, sub_log_w, np.random.default_rng(0),
                                                        (old, groups) if grouped else None)
    cluster = gaussian_loglik(rows, P) + log_w
    sub = gaussian_loglik(rows, S) + sub_log_w
    likely = 0
    for i in range(3):
        allowed = groups == groups[old[i * reps]] if grouped else np.ones(K, bool)
        p_k = np.where(allowed, np.exp(cluster[i] - cluster[i][allowed].max()), 0.0)
        p_k /= p_k.sum()
        p_h = np.exp(sub[i].reshape(K, 2) - sub[i].reshape(K, 2).max(axis=1, keepdims=True))
        p = (p_k[:, None] * p_h / p_h.sum(axis=1, keepdims=True)).ravel()
        drawn = np.bincount(2 * z[i * reps:(i + 1) * reps] + zs[i * reps:(i + 1) * reps], minlength=2 * K)
        # each outcome's count inside its binomial's central 1 - 6e-7 (the level of five standard
        # errors, which for a rare outcome the normal approximation misplaces: once in 4,000 at
        # p = 6e-6 is a 2 % event, five standard errors called it a failure)
        tails = np.minimum(binom.cdf(drawn, reps, p), binom.sf(drawn - 1, reps, p))
        assert np.all(tails > 3e-7), (i, drawn / reps, p)
        likely += int((p > 0.02).sum())
    assert likely >= 5  # the comparison has teeth: several likely outcomes
    expected = grouped_gaussian_stats(X, 2 * z + zs, 2 * K, shift)
    np.testing.assert_allclose(n, expected.n)
    np.testing.assert_allclose(s1, expected.s1, atol=1e-9)
    np.testing.assert_allclose(s2, expected.s2, atol=1e-9)


@pytest.mark.parametrize("D", [2, 10])
def test_natural_parameters_keep_their_precision_and_give_way_to_far_means(D, monkeypatch):
    """The natural-parameter pass expands each quadratic form, which cancels where a mean lies
    far out in its precision's metric. Up to :data:`NATURAL_MAX_MAGNITUDE` its log weights and
    sub-label log odds, for points around each cluster, stay within 1e-8 nats of the quadratic
    forms; past it the pass is not used, and both passes draw the same labels from one seed."""
    from dpmmbench.algorithms.families import niw
    from dpmmbench.algorithms.families.niw import GaussianParams, fused_gaussian_subcluster_draw, gaussian_loglik

    rng = np.random.default_rng([11, D])
    K = 4

    def params(mu, scale):
        W = np.repeat(np.eye(D)[None] / scale, len(mu), axis=0)
        return GaussianParams(mu=mu, W=W, logdet_sigma=np.full(len(mu), 2.0 * D * np.log(scale)))

    def draw(P, S, X, shift):
        calls = []
        natural = niw._NATURAL_SUBCLUSTER_DRAW
        monkeypatch.setattr(niw, "_NATURAL_SUBCLUSTER_DRAW",
                            tuple(lambda *a, f=f: calls.append(1) or f(*a) for f in natural))
        out = fused_gaussian_subcluster_draw(X, shift, P, np.log(np.full(K, 1.0 / K)), S,
                                             np.log(np.full(2 * K, 0.5)), np.random.default_rng(3))
        monkeypatch.setattr(niw, "_NATURAL_SUBCLUSTER_DRAW", natural)
        return out, bool(calls)

    for distance, used in ((0.9 * np.sqrt(niw.NATURAL_MAX_MAGNITUDE), True),
                           (1.1 * np.sqrt(niw.NATURAL_MAX_MAGNITUDE), False)):
        # unit-precision clusters whose means lie `distance` from the centre, sub-clusters a
        # little to either side; points around each cluster
        directions = rng.normal(size=(K, D))
        mu = distance * directions / np.linalg.norm(directions, axis=1, keepdims=True)
        P = params(mu, 1.0)
        S = params(np.repeat(mu, 2, axis=0) + rng.normal(scale=0.5, size=(2 * K, D)), 1.2)
        X = np.repeat(mu, 500, axis=0) + rng.normal(size=(K * 500, D))
        shift = np.zeros(D)
        theta, shift_c, Sf, s0, far = niw._natural_forms(P, S, *niw._sublabel_forms(S, np.zeros(2 * K), shift), shift)
        assert (far <= niw.NATURAL_MAX_MAGNITUDE) == used
        a, b = np.tril_indices(D)
        Phi = np.concatenate([X, X[:, a] * X[:, b]], axis=1)
        c = -0.5 * D * np.log(2 * np.pi) - 0.5 * P.logdet_sigma
        expanded, exact = Phi @ theta + shift_c + c, gaussian_loglik(X, P)
        own = np.repeat(np.arange(K), 500)
        error = np.abs(expanded - exact)[np.arange(len(X)), own]
        sub = gaussian_loglik(X, S)[np.arange(len(X)), 2 * own] - gaussian_loglik(X, S)[np.arange(len(X)), 2 * own + 1]
        sub_error = np.abs(np.einsum("if,if->i", Phi, Sf[own]) + s0[own] - sub)
        if used:
            assert error.max() < 1e-8 and sub_error.max() < 1e-8, (error.max(), sub_error.max())
        (z, zs, stats), took_natural = draw(P, S, X, shift)
        assert took_natural == used
        monkeypatch.setattr(niw, "NATURAL_MAX_MAGNITUDE", -1.0)
        (z_forms, zs_forms, _), took_natural = draw(P, S, X, shift)
        monkeypatch.undo()
        assert not took_natural
        # the same labels: the clusters are far apart, the sub-labels' odds computed alike
        np.testing.assert_array_equal(z, z_forms)
        assert np.mean(zs == zs_forms) > 0.999


@pytest.mark.parametrize("D", [2, 10, 50])
def test_fused_label_draw_is_the_composed_draw(D, monkeypatch):
    """The NIW family's one-pass label draw (``natural_label_draw``) takes, from the same uniforms,
    the labels ``sample_rows`` draws from ``gaussian_loglik`` as quadratic forms (rounding aside);
    with a mean too far out for it, or fewer than ``NATURAL_MIN_K`` components, it declines and
    the caller composes the draw."""
    from dpmmbench.algorithms._numerics import sample_rows
    from dpmmbench.algorithms.families import niw
    from dpmmbench.algorithms.labelstep import take_params

    rng = np.random.default_rng([3, D])
    fam = _niw(D)
    X = np.concatenate([rng.normal(loc=3.0 * rng.normal(size=D), size=(3000, D)) for _ in range(4)])
    params = fam.sample_params(fam.stats(X, np.repeat(np.arange(4), 3000), 8), rng)  # 4 drawn from the prior
    log_w, uniforms = np.log(rng.dirichlet(np.ones(8))), rng.random(len(X))
    fused = fam.fused_label_draw(X, params, log_w, uniforms)
    assert fam.fused_label_draw(X, take_params(params, np.arange(niw.NATURAL_MIN_K - 1)), log_w[1:], uniforms) is None
    monkeypatch.setattr(niw, "NATURAL_MAX_MAGNITUDE", -1.0)
    assert fam.fused_label_draw(X, params, log_w, uniforms) is None
    composed = np.empty(len(X), dtype=np.int64)
    sample_rows(niw.gaussian_loglik(X, params), log_w, uniforms, composed)
    assert np.mean(fused == composed) > 0.999
    assert len(np.unique(composed)) >= 4  # it has teeth: points of every cluster


@pytest.mark.parametrize("D", [2, 10, 24])
def test_fused_sublabel_draw_is_the_composed_draw(D, monkeypatch):
    """The NIW family's one-pass sub-label draw (``natural_sublabel_draw``, each row scored against
    its own cluster's two sub-clusters) takes, from the same uniforms, the sub-labels the composed
    draw takes from ``gaussian_loglik`` of all 2K sub-clusters (rounding aside); from
    ``PRUNE_MIN_D`` dimensions, or with a sub-cluster mean too far out for it, it declines and the
    caller composes the draw."""
    from dpmmbench.algorithms import labelstep
    from dpmmbench.algorithms.families import niw

    rng = np.random.default_rng([5, D])
    fam = _niw(D)
    K = 4
    X = np.concatenate([rng.normal(loc=3.0 * rng.normal(size=D), size=(2500, D)) for _ in range(K)])
    labels = np.repeat(np.arange(K), 2500)
    halves = 2 * labels + (X[:, 0] > np.repeat([X[labels == k, 0].mean() for k in range(K)], 2500))
    sub_params = fam.sample_params(fam.stats(X, halves, 2 * K), rng)
    sub_log_w, uniforms = np.log(rng.dirichlet(np.ones(2 * K))), rng.random(len(X))
    fused = fam.fused_sublabel_draw(X, labels, sub_params, sub_log_w, uniforms)
    monkeypatch.setattr(type(fam), "fused_sublabel_draw", lambda *args: None)
    composed = labelstep.sample_sublabels(fam, X, labels, sub_params, sub_log_w, uniforms)
    monkeypatch.undo()
    if D >= niw.PRUNE_MIN_D:
        assert fused is None
        return
    assert np.mean(fused == composed) > 0.999
    assert 0.2 < composed.mean() < 0.8  # it has teeth: both sides of every cluster taken
    np.testing.assert_array_equal(labelstep.sample_sublabels(fam, X, labels, sub_params, sub_log_w, uniforms), fused)
    monkeypatch.setattr(niw, "NATURAL_MAX_MAGNITUDE", -1.0)
    assert fam.fused_sublabel_draw(X, labels, sub_params, sub_log_w, uniforms) is None
