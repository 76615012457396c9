"""Compiled loops of the Wang & Lin (2017) consolidation samplers (docs/algorithms.md §8): the master's
arithmetic on statistics -- log marginals of a flattened statistics row, the merge-split ratio
``rho`` (docs/algorithms.md §0.3, §8.1), the sequential "restricted consolidation" split (Wang & Lin's
Algorithm 2) and the pooled-consolidation MCMC (docs/algorithms.md §8.3). (The workers' local sweep is
:func:`algorithms.collapsed.collapsed_sweep` with the global components in its first
``n_fixed`` slots.)

Statistics cross into these loops as *rows*: every field of a family's statistics
NamedTuple flattened per component and concatenated (``n`` first). Merging components adds
rows. A *model* ``(code, h, H)`` names the family and carries its hyperparameters:

=====  ==========================  ======================================  ============
code   family                      h                                       H
=====  ==========================  ======================================  ============
0      NormalKnownCovariance       kappa0, sigma^2, D                      unused
1      NormalInverseWishart        kappa0, nu0, D, log|Psi0|,              Psi0
                                   log Gamma_D(nu0 / 2)
2      DirichletMultinomial        gamma, B = V gamma, V, lgamma(gamma),   unused
                                   lgamma(B)
=====  ==========================  ======================================  ============

The formulas are those of the families' ``log_marginal_stats`` (docs/algorithms.md §0.4); the tests hold
the two to 1e-10.
"""
from __future__ import annotations

import math

import numpy as np

from .numba_cache import kernel
from ._numerics import mh_accept


ISO, NIW, DIRMULT = 0, 1, 2

_LOG_PI = math.log(math.pi)
_LOG_2PI = math.log(2.0 * math.pi)


# ---- log marginals of statistics rows ----------------------------------------------------

@kernel
def _lmvgamma(a, D):
    out = 0.25 * D * (D - 1) * _LOG_PI
    for j in range(D):
        out += math.lgamma(a - 0.5 * j)
    return out


@kernel
def log_marginal_row(model, row):
    """log m(x_C) of a component from its flattened statistics row (docs/algorithms.md §0.4)."""
    code, h, H = model
    n = row[0]
    if code == ISO:
        kappa0, var = h[0], h[1]
        D = int(h[2])
        kappa = kappa0 + n / var
        s2 = 0.0
        for d in range(D):
            s2 += row[1 + d] * row[1 + d]
        return (-0.5 * n * D * math.log(2.0 * math.pi * var) + 0.5 * D * math.log(kappa0 / kappa)
                - row[1 + D] / (2.0 * var) + s2 / (var * var) / (2.0 * kappa))
    if code == NIW:
        kappa0, nu0 = h[0], h[1]
        D = int(h[2])
        kappa = kappa0 + n
        nu = nu0 + n
        # Psi_n = Psi0 + S2 - kappa m m^T with m = s1 / kappa, then its Cholesky log-determinant
        psi = np.empty((D, D))
        for a in range(D):
            for b in range(D):
                psi[a, b] = H[a, b] + row[1 + D + a * D + b] - row[1 + a] * row[1 + b] / kappa
        logdet = 0.0
        for j in range(D):
            s = psi[j, j]
            for k in range(j):
                s -= psi[j, k] * psi[j, k]
            d = math.sqrt(s)
            psi[j, j] = d
            logdet += 2.0 * math.log(d)
            for i in range(j + 1, D):
                s = psi[i, j]
                for k in range(j):
                    s -= psi[i, k] * psi[j, k]
                psi[i, j] = s / d
        return (-0.5 * n * D * _LOG_PI + _lmvgamma(0.5 * nu, D) - h[4] + 0.5 * nu0 * h[3] - 0.5 * nu * logdet
                + 0.5 * D * (math.log(kappa0) - math.log(kappa)))
    gamma, B = h[0], h[1]
    V = int(h[2])
    total = 0.0
    out = 0.0
    for v in range(V):
        c = row[1 + v]
        if c != 0.0:
            total += c
            out += math.lgamma(gamma + c) - h[3]
    return out + h[4] - math.lgamma(B + total)


@kernel
def log_marginal_rows(model, rows):
    """:func:`log_marginal_row` of every row."""
    out = np.empty(rows.shape[0])
    for r in range(rows.shape[0]):
        out[r] = log_marginal_row(model, rows[r])
    return out


@kernel
def _union_L(model, ra, rb, tmp):
    for w in range(ra.shape[0]):
        tmp[w] = ra[w] + rb[w]
    return log_marginal_row(model, tmp)


@kernel
def _log_rho(log_alpha, na, La, nb, Lb, Lab):
    """log rho(A, B) from sizes and log marginals (docs/algorithms.md §0.3)."""
    return -log_alpha + math.lgamma(na + nb) - math.lgamma(na) - math.lgamma(nb) + Lab - La - Lb


@kernel
def log_rho_to_rows(model, log_alpha, rows, L, row, L_row, out):
    """``out[g] = log rho(rows[g], row)`` for every row of ``rows`` (log marginals ``L``)."""
    tmp = np.empty(row.shape[0])
    for g in range(rows.shape[0]):
        out[g] = _log_rho(log_alpha, rows[g, 0], L[g], row[0], L_row, _union_L(model, rows[g], row, tmp))


# ---- restricted consolidation (Wang & Lin's Algorithm 2) ------------------------------------

@kernel
def sequential_split(model, log_alpha, rows, L_atoms, atoms, r, sample, uniforms, assign, s1, s2, tmp):
    """Split the atoms ``atoms[:r]`` (in canonical order) into at most two groups.

    Group 1 starts as ``{atoms[0]}``; every later atom joins group 1 with weight
    ``rho(G1, a)`` or group 2 with weight ``rho(G2, a)`` (weight 1 while group 2 is empty).
    With ``sample`` the choices are drawn with ``uniforms[1:r]`` into ``assign[:r]``
    (0 = group 1, 1 = group 2); otherwise ``assign[:r]`` is taken as given. Returns the log probability of
    that sequence of choices, i.e. of the resulting split (``-inf`` if ``assign[0] != 0``).
    ``s1``, ``s2``, ``tmp`` are scratch rows.
    """
    W = rows.shape[1]
    first = atoms[0]
    if sample:
        assign[0] = 0
    elif assign[0] != 0:
        return -np.inf
    for w in range(W):
        s1[w] = rows[first, w]
        s2[w] = 0.0
    L1 = L_atoms[first]
    L2 = 0.0
    n1 = rows[first, 0]
    n2 = 0.0
    log_p = 0.0
    for t in range(1, r):
        a = atoms[t]
        na = rows[a, 0]
        L1a = _union_L(model, s1, rows[a], tmp)
        lr1 = _log_rho(log_alpha, n1, L1, na, L_atoms[a], L1a)
        L2a = L_atoms[a]
        lr2 = 0.0
        if n2 > 0.0:
            L2a = _union_L(model, s2, rows[a], tmp)
            lr2 = _log_rho(log_alpha, n2, L2, na, L_atoms[a], L2a)
        m = max(lr1, lr2)
        lse = m + math.log(math.exp(lr1 - m) + math.exp(lr2 - m))
        if sample:
            assign[t] = 0 if uniforms[t] < math.exp(lr1 - lse) else 1
        if assign[t] == 0:
            log_p += lr1 - lse
            for w in range(W):
                s1[w] += rows[a, w]
            L1, n1 = L1a, n1 + na
        else:
            log_p += lr2 - lse
            for w in range(W):
                s2[w] += rows[a, w]
            L2, n2 = L2a, n2 + na
    return log_p


# ---- pooled consolidation (docs/algorithms.md §8.3) -------------------------------------------------------
#
# Workspace ``ws`` = (GS, GL, M, S, L_atoms, idx, assign, s1, s2, tmp, r1, r2): group sums
# (at most A groups, W), their log marginals, the merge table M (log rho of every pair of groups, -inf on the
# diagonal), the split table S (-log beta, -inf for a group of one atom), the atoms' log
# marginals and scratch. ``labels`` (A,) holds every atom's group in 0..G-1.

def workspace(rows, max_groups=None):
    """Buffers for the pooled-consolidation loops over ``rows`` (A atoms) with at most
    ``max_groups`` groups at any time (default A; :func:`pooled_mcmc` from G groups makes at
    most ``n_steps`` more). The group tables are sized by it: the merge table of every atom
    pair is most of the work of building the tables when there are many more atoms than groups."""
    A, W = rows.shape
    G = A if max_groups is None else max(1, min(A, int(max_groups)))
    return (np.zeros((G, W)), np.zeros(G), np.full((G, G), -np.inf), np.full(G, -np.inf), np.zeros(A),
            np.zeros(A, dtype=np.int64), np.zeros(A, dtype=np.int64), np.zeros(W), np.zeros(W), np.zeros(W),
            np.zeros(A), np.zeros(A))


@kernel
def _members(labels, g, idx):
    r = 0
    for a in range(labels.shape[0]):
        if labels[a] == g:
            idx[r] = a
            r += 1
    return r


@kernel
def _split_score(model, log_alpha, rows, labels, g, ws):
    """S(g) = -log beta(g): minus the log probability that the sequential split of g keeps
    it whole (-inf for a group of one atom: it cannot be split)."""
    _GS, _GL, _M, _S, L_atoms, idx, assign, s1, s2, tmp, _r1, _r2 = ws
    r = _members(labels, g, idx)
    if r < 2:
        return -np.inf
    for t in range(r):
        assign[t] = 0
    return -sequential_split(model, log_alpha, rows, L_atoms, idx, r, False, tmp, assign, s1, s2, tmp)


@kernel
def _group_rho(model, log_alpha, ws, i, j):
    GS, GL, _M, _S, _L_atoms, _idx, _assign, _s1, _s2, tmp, _r1, _r2 = ws
    return _log_rho(log_alpha, GS[i, 0], GL[i], GS[j, 0], GL[j], _union_L(model, GS[i], GS[j], tmp))


@kernel
def build_tables(model, log_alpha, rows, labels, G, ws):
    """Fill the workspace for the grouping ``labels`` (groups 0..G-1)."""
    GS, GL, M, S, L_atoms, _idx, _assign, _s1, _s2, _tmp, _r1, _r2 = ws
    A, W = rows.shape
    for a in range(A):
        L_atoms[a] = log_marginal_row(model, rows[a])
    GS[:] = 0.0
    for a in range(A):
        for w in range(W):
            GS[labels[a], w] += rows[a, w]
    for g in range(G):
        GL[g] = log_marginal_row(model, GS[g])
    M[:] = -np.inf
    for i in range(G):
        for j in range(i + 1, G):
            M[i, j] = M[j, i] = _group_rho(model, log_alpha, ws, i, j)
    S[:] = -np.inf
    for g in range(G):
        S[g] = _split_score(model, log_alpha, rows, labels, g, ws)


@kernel
def _lse_acc(m, s, v):
    """Online log-sum-exp: the state (max m, scaled sum s) after adding log value v."""
    if v == -np.inf:
        return m, s
    if v > m:
        return v, s * math.exp(m - v) + 1.0
    return m, s + math.exp(v - m)


@kernel
def merge_table_lse(M, G):
    """log of the sum of exp(M) over the unordered pairs of groups."""
    m, s = -np.inf, 0.0
    for i in range(G):
        for j in range(i + 1, G):
            m, s = _lse_acc(m, s, M[i, j])
    return m + math.log(s) if s > 0.0 else -np.inf


@kernel
def split_table_lse(S, G):
    """log of the sum of exp(S) over the splittable groups (-inf if there is none)."""
    m, s = -np.inf, 0.0
    for g in range(G):
        m, s = _lse_acc(m, s, S[g])
    return m + math.log(s) if s > 0.0 else -np.inf


@kernel
def merge_log_acceptance(model, log_alpha, rows, labels, G, ws, i, j, lse_M):
    """log of the MH ratio of merging groups i and j (before ``min(1, .)``), and S(i u j).

    ``l2 - l1 + l3 + l4`` with ``l1`` the log probability of proposing the pair, ``l2 = log
    rho``, ``l3`` that of drawing the merged group from the post-merge split table and
    ``l4`` that of the sequential split returning exactly the two groups (docs/algorithms.md §8.3).
    """
    _GS, _GL, M, S, L_atoms, idx, assign, s1, s2, tmp, _r1, _r2 = ws
    l2 = M[i, j]
    l1 = l2 - lse_M
    r = 0
    for a in range(labels.shape[0]):
        if labels[a] == i or labels[a] == j:
            idx[r] = a
            r += 1
    first = labels[idx[0]]
    for t in range(r):
        assign[t] = 0 if labels[idx[t]] == first else 1
    l4 = sequential_split(model, log_alpha, rows, L_atoms, idx, r, False, tmp, assign, s1, s2, tmp)
    for t in range(r):
        assign[t] = 0
    s_merged = -sequential_split(model, log_alpha, rows, L_atoms, idx, r, False, tmp, assign, s1, s2, tmp)
    m, s = _lse_acc(-np.inf, 0.0, s_merged)
    for g in range(G):
        if g != i and g != j:
            m, s = _lse_acc(m, s, S[g])
    l3 = s_merged - (m + math.log(s))
    return l2 - l1 + l3 + l4, s_merged


@kernel
def split_log_acceptance(model, log_alpha, rows, labels, G, ws, g, r, log_path, lse_S):
    """log of the MH ratio of splitting group g into the atoms ``idx[:r]`` with
    ``assign[:r] == 0`` and the others (the split the sequential proposal made, with log
    probability ``log_path``). ``l4 + l3 - l1 - l2`` with ``l1`` the log probability of
    choosing g from the split table, ``l2 = log_path``, ``l3`` that of proposing the pair
    from the post-split merge table and ``l4 = -log rho`` of the two parts (docs/algorithms.md §8.3).
    Leaves the parts' sums in ``s1``, ``s2`` and their log rho with every other group in
    ``r1``, ``r2``; returns (log ratio, log rho of the parts, L(part 1), L(part 2)).
    """
    GS, GL, M, S, _L_atoms, idx, assign, s1, s2, tmp, r1, r2 = ws
    W = rows.shape[1]
    l1 = S[g] - lse_S
    s1[:] = 0.0
    s2[:] = 0.0
    for t in range(r):
        target = s1 if assign[t] == 0 else s2
        for w in range(W):
            target[w] += rows[idx[t], w]
    L1 = log_marginal_row(model, s1)
    L2 = log_marginal_row(model, s2)
    r12 = _log_rho(log_alpha, s1[0], L1, s2[0], L2, _union_L(model, s1, s2, tmp))
    m, s = _lse_acc(-np.inf, 0.0, r12)
    for k in range(G):
        if k == g:
            continue
        r1[k] = _log_rho(log_alpha, s1[0], L1, GS[k, 0], GL[k], _union_L(model, s1, GS[k], tmp))
        r2[k] = _log_rho(log_alpha, s2[0], L2, GS[k, 0], GL[k], _union_L(model, s2, GS[k], tmp))
        m, s = _lse_acc(m, s, r1[k])
        m, s = _lse_acc(m, s, r2[k])
        for l in range(k + 1, G):
            if l != g:
                m, s = _lse_acc(m, s, M[k, l])
    l3 = r12 - (m + math.log(s))
    return -r12 + l3 - l1 - log_path, r12, L1, L2


@kernel
def _apply_merge(model, log_alpha, rows, labels, G, ws, i, j, s_merged):
    """Merge group j into i (i < j); the last group takes j's place. Returns the new G."""
    GS, GL, M, S, _L_atoms, _idx, _assign, _s1, _s2, _tmp, _r1, _r2 = ws
    W = rows.shape[1]
    for a in range(labels.shape[0]):
        if labels[a] == j:
            labels[a] = i
    for w in range(W):
        GS[i, w] += GS[j, w]
    GL[i] = log_marginal_row(model, GS[i])
    S[i] = s_merged
    last = G - 1
    if j != last:
        for a in range(labels.shape[0]):
            if labels[a] == last:
                labels[a] = j
        for w in range(W):
            GS[j, w] = GS[last, w]
        GL[j] = GL[last]
        S[j] = S[last]
        for k in range(last):
            M[j, k] = M[k, j] = M[last, k]
        M[j, j] = -np.inf
    for k in range(last + 1):
        M[last, k] = M[k, last] = -np.inf
    S[last] = -np.inf
    G = last
    for k in range(G):
        if k != i:
            M[i, k] = M[k, i] = _group_rho(model, log_alpha, ws, i, k)
    return G


@kernel
def _apply_split(model, log_alpha, rows, labels, G, ws, g, r, r12, L1, L2):
    """Group g keeps the atoms with ``assign == 0``, the others form group G. Returns G + 1."""
    GS, GL, M, S, _L_atoms, idx, assign, s1, s2, _tmp, r1, r2 = ws
    W = rows.shape[1]
    for t in range(r):
        if assign[t] == 1:
            labels[idx[t]] = G
    for w in range(W):
        GS[g, w] = s1[w]
        GS[G, w] = s2[w]
    GL[g], GL[G] = L1, L2
    for k in range(G):
        if k != g:
            M[g, k] = M[k, g] = r1[k]
            M[G, k] = M[k, G] = r2[k]
    M[g, G] = M[G, g] = r12
    M[G, G] = -np.inf
    S[g] = _split_score(model, log_alpha, rows, labels, g, ws)
    S[G] = _split_score(model, log_alpha, rows, labels, G, ws)
    return G + 1


@kernel(nogil=True)  # the master's Dask event loop takes replies in while it runs
def pooled_mcmc(model, log_alpha, rows, labels, G, n_steps, rng, ws):
    """``n_steps`` merge-or-split MH steps over groupings of the atoms ``rows`` (docs/algorithms.md §8.3).

    Target: ``prod_g alpha Gamma(n_g) m(x_g)`` over the groupings of the atoms. Each step
    proposes, with probability 1/2 each, a merge of a pair of groups drawn with probability
    proportional to ``rho`` or a split of a group drawn proportional to ``1 / beta`` by the
    sequential split; accepted with the exact MH ratio. ``labels`` (groups 0..G-1, atoms in
    canonical order) is updated in place. Returns (G, accepted merges, accepted splits).
    """
    _GS, _GL, M, S, L_atoms, idx, assign, s1, s2, tmp, r1, _r2 = ws
    build_tables(model, log_alpha, rows, labels, G, ws)
    merges = 0
    splits = 0
    for _ in range(n_steps):
        if rng.random() < 0.5:
            if G < 2:
                continue
            lse_M = merge_table_lse(M, G)
            target = rng.random()
            # draw a pair with probability exp(M - lse_M)
            acc = 0.0
            pi, pj = -1, -1
            for i in range(G):
                for j in range(i + 1, G):
                    if M[i, j] > -np.inf:
                        acc += math.exp(M[i, j] - lse_M)
                        pi, pj = i, j
                        if acc > target:
                            break
                if acc > target:
                    break
            log_a, s_merged = merge_log_acceptance(model, log_alpha, rows, labels, G, ws, pi, pj, lse_M)
            if mh_accept(rng.random(), log_a):
                G = _apply_merge(model, log_alpha, rows, labels, G, ws, pi, pj, s_merged)
                merges += 1
        else:
            lse_S = split_table_lse(S, G)
            if lse_S == -np.inf:
                continue
            target = rng.random()
            acc = 0.0
            g = -1
            for k in range(G):
                if S[k] > -np.inf:
                    acc += math.exp(S[k] - lse_S)
                    g = k
                    if acc > target:
                        break
            r = _members(labels, g, idx)
            for t in range(1, r):
                r1[t] = rng.random()  # r1 is free until split_log_acceptance fills it
            log_path = sequential_split(model, log_alpha, rows, L_atoms, idx, r, True, r1, assign, s1, s2, tmp)
            whole = True
            for t in range(r):
                if assign[t] != 0:
                    whole = False
            if whole:
                continue
            log_a, r12, L1, L2 = split_log_acceptance(model, log_alpha, rows, labels, G, ws, g, r, log_path, lse_S)
            if mh_accept(rng.random(), log_a):
                G = _apply_split(model, log_alpha, rows, labels, G, ws, g, r, r12, L1, L2)
                splits += 1
    return G, merges, splits
