"""Numba kernels of the A*/beam search for the DPMM MAP (``algorithms.search``, docs/algorithms.md §7).

The whole search loop runs here; Python only orders the data, allocates the workspace and
enlarges it when the loop reports that something is full (the loop checks its capacities
before each pop, so it can always be resumed exactly where it stopped).

Representation
--------------
* Cluster statistics live in a *pool*: one family table (``family.kernel_table``) whose
  slots are shared between search states. A state refers to its K clusters by slot number;
  a child differs from its parent in one cluster only, so it shares the parent's other K - 1
  slots and owns one new slot (parent slot copied, then one rank-1 ``add``). Slots are
  reference counted and recycled. Slot 0 is the empty cluster (the prior), slots 1 and 2
  are scratch for the admissible heuristic.
* Children are *not* materialised when generated: a queue entry is (parent state, choice,
  score). Scoring a child needs only the parent's statistics (one ``logpred``); the child's
  slot is built only if the entry is popped, i.e. about once per point for a good heuristic.
* A parent stays alive while it has entries in the queue (``pending``); its slot references
  are released when the last one is popped or dropped.
* The queue is a min-max heap of entry ids: pop-max gives the best state, pop-min the worst,
  so a finite beam keeps exactly the B best entries (a new entry replaces the worst one only
  if it is better).
* Labels are recovered from an append-only path tree (one node per materialised state).

Scores are log probabilities (higher is better): ``f = data + log p_max + h``, where
``data`` = sum of the cluster log marginals of the assigned points (the chain rule: a child's
data term is its parent's plus one predictive), ``p_max`` the largest prior probability of
any completion and ``h`` the heuristic estimate of the remaining data term.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import literal_unroll, njit

from ._dispatch import k_add, k_logpred, k_remove
from .numba_cache import kernel

# ---- layout of the integer work arrays -----------------------------------------------------
#: counters (one int64 array shared by Python and the loop)
C_HEAP, C_SEQ, C_GENERATED, C_PUSHED, C_POPPED, C_QMAX = 0, 1, 2, 3, 4, 5
C_NODES, C_FREE_SLOTS, C_FREE_STATES, C_FREE_ENTRIES, C_MAXK = 6, 7, 8, 9, 10
C_GOAL_NODE, C_GOAL_CHOICE, C_PREDICTIVES = 11, 12, 13
N_COUNTERS = 14

#: memo entries per slot (see ``expand``)
MEMO_WAYS = 8

#: columns of the per-state integer array
S_DEPTH, S_K, S_NMAX, S_PENDING, S_NODE = 0, 1, 2, 3, 4
#: columns of the per-state float array: data term, sum_k lgamma(n_k)
S_DATA, S_LGSUM = 0, 1
#: columns of the per-entry arrays
E_PARENT, E_CHOICE, E_SEQ = 0, 1, 2
E_F, E_DATA = 0, 1

#: return codes of the loop: done, or which resource must grow before it can continue
DONE, NEED_SLOTS, NEED_STATES, NEED_K, NEED_NODES, NEED_ENTRIES = 0, 1, 2, 3, 4, 5

#: option codes
TRIVIAL, ADMISSIBLE, INADMISSIBLE = 0, 1, 2
EPPF, ESF = 0, 1

#: reserved pool slots
TEMPLATE, SCRATCH_A, SCRATCH_B, FIRST_FREE_SLOT = 0, 1, 2, 3


# ---- generic pool slot copy ------------------------------------------------------------------

@kernel
def copy_slot(table, src, dst):
    """Copy cluster slot ``src`` of a family table to ``dst``.

    A table is a tuple of arrays; the per-slot ones are those whose leading dimension is the
    capacity (``table[0]`` is always the sizes). The caller chooses capacities that no other
    array of the table has as its leading dimension (see ``algorithms.search``).
    """
    cap = table[0].shape[0]
    for arr in literal_unroll(table):
        if arr.shape[0] == cap:
            arr[dst] = arr[src]


# ---- min-max heap of entry ids, ordered by (score, earlier push wins ties) -------------------

@kernel(inline="always")
def _less(ef, eint, a, b):
    fa = ef[a, E_F]
    fb = ef[b, E_F]
    return fa < fb or (fa == fb and eint[a, E_SEQ] > eint[b, E_SEQ])


@kernel(inline="always")
def _on_min_level(i):
    level = 0
    j = i + 1
    while j > 1:
        j >>= 1
        level += 1
    return level % 2 == 0


@kernel(inline="always")
def _before(ef, eint, a, b, want_max):
    """True if entry ``a`` should sit above ``b`` on a min (max) level."""
    return _less(ef, eint, b, a) if want_max else _less(ef, eint, a, b)


@kernel
def _bubble_up(heap, i, ef, eint, want_max):
    while i > 2:
        g = ((i - 1) // 2 - 1) // 2
        if _before(ef, eint, heap[i], heap[g], want_max):
            heap[i], heap[g] = heap[g], heap[i]
            i = g
        else:
            return


@kernel
def _trickle_down(heap, size, i, ef, eint, want_max):
    while True:
        first = 2 * i + 1
        if first >= size:
            return
        m = first
        for c in (2 * i + 2, 4 * i + 3, 4 * i + 4, 4 * i + 5, 4 * i + 6):
            if c < size and _before(ef, eint, heap[c], heap[m], want_max):
                m = c
        if not _before(ef, eint, heap[m], heap[i], want_max):
            return
        heap[m], heap[i] = heap[i], heap[m]
        if m <= 2 * i + 2:  # a child: it is on the other kind of level, nothing below to fix
            return
        p = (m - 1) // 2
        if _before(ef, eint, heap[p], heap[m], want_max):
            heap[m], heap[p] = heap[p], heap[m]
        i = m


@kernel
def heap_push(heap, size, e, ef, eint):
    """Insert entry ``e`` into a heap holding ``size`` entries."""
    heap[size] = e
    i = size
    if i == 0:
        return
    p = (i - 1) // 2
    on_min = _on_min_level(i)
    if _before(ef, eint, heap[p], heap[i], not on_min):
        # e is beyond its parent (above it on a min level, below it on a max level): it
        # belongs on the parent's kind of level
        heap[p], heap[i] = heap[i], heap[p]
        _bubble_up(heap, p, ef, eint, on_min)
    else:
        _bubble_up(heap, i, ef, eint, not on_min)


@kernel
def heap_pop_min(heap, size, ef, eint):
    """Remove and return the worst entry (``size`` >= 1 entries before the call)."""
    e = heap[0]
    size -= 1
    if size > 0:
        heap[0] = heap[size]
        _trickle_down(heap, size, 0, ef, eint, False)
    return e


@kernel
def heap_pop_max(heap, size, ef, eint):
    """Remove and return the best entry (``size`` >= 1 entries before the call)."""
    if size <= 2:
        i = size - 1
    else:
        i = 1 if _less(ef, eint, heap[2], heap[1]) else 2
    e = heap[i]
    size -= 1
    if i < size:
        heap[i] = heap[size]
        _trickle_down(heap, size, i, ef, eint, i > 0)
    return e


# ---- prior bounds (log p_max) ----------------------------------------------------------------

@kernel
def eppf_bound(K, lgsum, nmax, R, log_alpha, lgam, const):
    """log of the largest EPPF prior of any completion (docs/algorithms.md §7.2): every remaining point opens
    a cluster, or every one joins the largest cluster (the join factors grow, so the optimum
    is one of the two extremes). ``lgsum`` = sum_k lgamma(n_k), ``lgam[j]`` = lgamma(j),
    ``const`` = lgamma(alpha) - lgamma(alpha + N)."""
    join = lgam[nmax + R] - lgam[nmax]
    new = R * log_alpha
    return const + K * log_alpha + lgsum + (join if join > new else new)


@kernel
def esf_bound_exact(hist, K, N, log_alpha, lgam, const, dp, dp2):
    """log of the largest ESF prior of any completion of the partial partition whose size
    counts are ``hist`` (``hist[s]`` = number of clusters of size s), exactly.

    A completion is any final multiset of sizes (total N) into which the existing clusters can
    grow, i.e. (Hall) for every s at least as many final clusters of size >= s as existing
    ones. Dynamic programme over final sizes s = N..1: state (final clusters so far, capped at
    K; mass used), choice b = number of final clusters of size s, whose ESF factor is
    ``b (log alpha - log s) - log b!``. O(K N^2 log N): used for small N only.
    ``dp``, ``dp2``: scratch of shape at least (K + 1, N + 1).
    """
    neg = -np.inf
    for t in range(K + 1):
        for u in range(N + 1):
            dp[t, u] = neg
    dp[0, 0] = 0.0
    at_least = 0
    for s in range(N, 0, -1):
        at_least += hist[s]
        for t in range(K + 1):
            for u in range(N + 1):
                dp2[t, u] = neg
        gain = log_alpha - math.log(s)
        for t in range(K + 1):
            for u in range(N + 1):
                v = dp[t, u]
                if v == neg:
                    continue
                b = 0
                while u + b * s <= N:
                    t2 = t + b if t + b < K else K
                    if t2 >= at_least:
                        w = v + b * gain - lgam[b + 1]
                        if w > dp2[t2, u + b * s]:
                            dp2[t2, u + b * s] = w
                    b += 1
        for t in range(K + 1):
            for u in range(N + 1):
                dp[t, u] = dp2[t, u]
    return const + dp[K, N]


@kernel
def esf_new_clusters_table(N, log_alpha, lgam, limit):
    """``G[T]`` = largest ESF factor of T points split into new clusters only, for
    T <= ``limit`` (knapsack over sizes), and ``G[limit + 1]`` = an upper bound valid for any
    T (every size at its unconstrained best multiplicity)."""
    neg = -np.inf
    G = np.full(limit + 2, neg)
    G[0] = 0.0
    work = np.empty(limit + 1)
    for s in range(1, limit + 1):
        gain = log_alpha - math.log(s)
        for T in range(limit + 1):
            work[T] = G[T]
        for T in range(limit + 1):
            if G[T] == neg:
                continue
            b = 1
            while T + b * s <= limit:
                w = G[T] + b * gain - lgam[b + 1]
                if w > work[T + b * s]:
                    work[T + b * s] = w
                b += 1
        for T in range(limit + 1):
            G[T] = work[T]
    unconstrained = 0.0
    for s in range(1, N + 1):
        gain = log_alpha - math.log(s)
        if gain <= 0.0:
            break
        best = 0.0
        b = 1
        while b * s <= N:
            w = b * gain - lgam[b + 1]
            if w > best:
                best = w
            b += 1
        unconstrained += best
    G[limit + 1] = max(unconstrained, 0.0)
    return G


@kernel
def esf_bound_decoupled(hist, K, N, R, log_alpha, lgam, const, G, cnt):
    """An upper bound on the ESF completion maximum, O(N): the existing clusters and the new
    ones are bounded separately ((a + b)! >= a! b! for equal final sizes), with R_E of the
    R remaining points growing existing clusters (best case: all into the largest, while
    breaking the most frequent ties in sizes) and R - R_E opening new ones (``G``).
    ``cnt``: int scratch of length >= N + 2, left zeroed."""
    base = K * log_alpha
    mult = 0.0
    nmax = 0
    maxm = 0
    for s in range(1, N + 1):
        m = hist[s]
        if m > 0:
            base -= m * math.log(s)
            mult += lgam[m + 1]
            nmax = s
            if m > maxm:
                maxm = m
            for j in range(2, m + 1):
                cnt[j] += 1
    limit = G.shape[0] - 2
    best = -np.inf
    removed = 0.0
    j = maxm
    used = 0
    for re in range(R + 1):
        if re > 0:
            while j >= 2 and used == cnt[j]:
                j -= 1
                used = 0
            if j >= 2:
                removed += math.log(j)
                used += 1
        T = R - re
        g = G[T] if T <= limit else G[limit + 1]
        v = base - math.log1p(re / nmax) - (mult - removed) + g
        if v > best:
            best = v
    for j in range(2, maxm + 1):
        cnt[j] = 0
    return const + best


# The family kernels are reached through ``algorithms._dispatch`` (k_add, k_remove, k_logpred),
# so that this loop is cached on disk like any other jitted function.


# ---- the search loop ----------------------------------------------------------------------------

@kernel
def release(s, states, pool):
    """Free state ``s`` and drop its slot references (a slot no state refers to is recycled)."""
    s_int, _, s_slots, free_states = states
    refcount, free_slots, counters = pool[0], pool[1], pool[2]
    for j in range(s_int[s, S_K]):
        r = s_slots[s, j]
        refcount[r] -= 1
        if refcount[r] == 0:
            free_slots[counters[C_FREE_SLOTS]] = r
            counters[C_FREE_SLOTS] += 1
    free_states[counters[C_FREE_STATES]] = s
    counters[C_FREE_STATES] += 1


@kernel
def offer(f, parent, choice, dchild, beam, expanding, states, queue, pool):
    """Put a child into the queue. With a full finite beam it replaces the worst entry if it
    is better, else it is dropped: the queue always holds the ``beam`` best entries."""
    s_int = states[0]
    heap, e_int, e_float, free_entries = queue
    counters = pool[2]
    size = counters[C_HEAP]
    if beam > 0 and size >= beam:
        worst = heap[0]
        if not f > e_float[worst, E_F]:
            return
        heap_pop_min(heap, size, e_float, e_int)
        size -= 1
        free_entries[counters[C_FREE_ENTRIES]] = worst
        counters[C_FREE_ENTRIES] += 1
        wp = e_int[worst, E_PARENT]
        s_int[wp, S_PENDING] -= 1
        if s_int[wp, S_PENDING] == 0 and wp != expanding:
            release(wp, states, pool)
    counters[C_FREE_ENTRIES] -= 1
    e = free_entries[counters[C_FREE_ENTRIES]]
    e_int[e, E_PARENT] = parent
    e_int[e, E_CHOICE] = choice
    e_int[e, E_SEQ] = counters[C_SEQ]
    counters[C_SEQ] += 1
    e_float[e, E_F] = f
    e_float[e, E_DATA] = dchild
    heap_push(heap, size, e, e_float, e_int)
    counters[C_HEAP] = size + 1
    counters[C_PUSHED] += 1
    if size + 1 > counters[C_QMAX]:
        counters[C_QMAX] = size + 1
    s_int[parent, S_PENDING] += 1


@njit(inline="always")
def greedy_bound(table, hyper, data, src, n, lo, N):
    """Greedy approximation of max_S log p(x_n | cluster ``src`` + points S), S among the
    unassigned points lo..N-1 other than n, scanned in order (docs/algorithms.md §7.3)."""
    copy_slot(table, src, SCRATCH_A)
    best = k_logpred(table, hyper, data, n, SCRATCH_A)
    for m in range(lo, N):
        if m == n:
            continue
        k_add(table, hyper, data, m, SCRATCH_A)
        cand = k_logpred(table, hyper, data, n, SCRATCH_A)
        if cand > best:
            best = cand
        else:
            k_remove(table, hyper, data, m, SCRATCH_A)
    return best


@njit(inline="always")
def admissible_terms(table, hyper, data, c, N, states, scratch):
    """The tighter heuristic of every child of state ``c``, into ``hchild``: the sum over the
    unassigned points of their greedy best predictive under any cluster of the child or a new
    one. Children differ in one cluster, so the parent's clusters are bounded once (keeping
    the best two per point) and only each child's changed cluster anew; the new-cluster
    bounds depend on the depth only and are cached per depth."""
    s_int, _, s_slots, _ = states
    bnew, bnew_done, best1, arg1, best2, hchild = scratch[4], scratch[5], scratch[6], scratch[7], scratch[8], scratch[9]
    d = s_int[c, S_DEPTH]
    K = s_int[c, S_K]
    lo = d + 1
    if lo >= N:
        for k in range(K + 1):
            hchild[k] = 0.0
        return
    if not bnew_done[lo]:
        for n in range(lo, N):
            bnew[lo, n] = greedy_bound(table, hyper, data, TEMPLATE, n, lo, N)
        bnew_done[lo] = True
    for n in range(lo, N):
        best1[n] = -np.inf
        best2[n] = -np.inf
        arg1[n] = -1
    for j in range(K):
        for n in range(lo, N):
            b = greedy_bound(table, hyper, data, s_slots[c, j], n, lo, N)
            if b > best1[n]:
                best2[n] = best1[n]
                best1[n] = b
                arg1[n] = j
            elif b > best2[n]:
                best2[n] = b
    for j in range(K + 1):
        copy_slot(table, s_slots[c, j] if j < K else TEMPLATE, SCRATCH_B)
        k_add(table, hyper, data, d, SCRATCH_B)
        h = 0.0
        for n in range(lo, N):
            b = greedy_bound(table, hyper, data, SCRATCH_B, n, lo, N)
            other = best2[n] if arg1[n] == j else best1[n]
            if other > b:
                b = other
            if bnew[lo, n] > b:
                b = bnew[lo, n]
            h += b
        hchild[j] = h


@njit(inline="always")
def expand(table, hyper, data, c, ints, floats, states, queue, pool, consts, scratch):
    """Score every child of state ``c`` (its next point joins one of its K clusters or a new
    one) and offer them to the queue; free ``c`` if none was kept."""
    N, beam, heuristic, prior, esf_exact = ints
    log_alpha, const = floats
    s_int, s_float, s_slots, _ = states
    lpp, suffix, lgam, G = consts
    hist, cnt, dp, dp2, hchild = scratch[0], scratch[1], scratch[2], scratch[3], scratch[9]
    counters, memo_point, memo_value = pool[2], pool[3], pool[4]
    sizes = table[0]
    d = s_int[c, S_DEPTH]
    K = s_int[c, S_K]
    nmax = s_int[c, S_NMAX]
    R = N - d - 1  # points left after the child's
    if heuristic == ADMISSIBLE:
        admissible_terms(table, hyper, data, c, N, states, scratch)
    else:
        h = suffix[d + 1] if heuristic == INADMISSIBLE else 0.0
        for k in range(K + 1):
            hchild[k] = h
    if prior == ESF:
        for k in range(K):
            hist[sizes[s_slots[c, k]]] += 1
    base = s_float[c, S_DATA]
    lgsum = s_float[c, S_LGSUM]
    for k in range(K + 1):
        if k < K:
            r = s_slots[c, k]
            nk = sizes[r]
            # states share most slots: each slot's predictive of point d once. States of a
            # few neighbouring depths are expanded in turn, so a slot remembers one point per
            # depth class (d mod MEMO_WAYS); with a single entry it would flip between them.
            w = d % MEMO_WAYS
            if memo_point[r, w] != d:
                memo_value[r, w] = k_logpred(table, hyper, data, d, r)
                memo_point[r, w] = d
                counters[C_PREDICTIVES] += 1
            dchild = base + memo_value[r, w]
        else:
            nk = 0
            dchild = base + lpp[d]
        Kc = K if k < K else K + 1
        if prior == EPPF:
            nm = nk + 1 if nk + 1 > nmax else nmax
            pb = eppf_bound(Kc, lgsum + (math.log(nk) if nk > 0 else 0.0), nm, R, log_alpha, lgam, const)
        else:
            if nk > 0:
                hist[nk] -= 1
            hist[nk + 1] += 1
            if esf_exact:
                pb = esf_bound_exact(hist, Kc, N, log_alpha, lgam, const, dp, dp2)
            else:
                pb = esf_bound_decoupled(hist, Kc, N, R, log_alpha, lgam, const, G, cnt)
            hist[nk + 1] -= 1
            if nk > 0:
                hist[nk] += 1
        counters[C_GENERATED] += 1
        offer(dchild + pb + hchild[k], c, k, dchild, beam, c, states, queue, pool)
    if prior == ESF:
        for k in range(K):
            hist[sizes[s_slots[c, k]]] = 0
    if s_int[c, S_PENDING] == 0:
        release(c, states, pool)


@njit(inline="always")
def new_state(table, hyper, data, parent, choice, dchild, states, pool, path):
    """Materialise the child of ``parent`` (-1: the root) whose next point went to cluster
    ``choice``: share the parent's slots, copy the changed one and add the point to it."""
    s_int, s_float, s_slots, free_states = states
    refcount, free_slots, counters, memo_point = pool[0], pool[1], pool[2], pool[3]
    node_parent, node_choice = path
    counters[C_FREE_STATES] -= 1
    c = free_states[counters[C_FREE_STATES]]
    counters[C_FREE_SLOTS] -= 1
    slot = free_slots[counters[C_FREE_SLOTS]]
    if parent < 0:
        d, K, nmax, lgsum, pnode = 0, 0, 0, 0.0, -1
    else:
        d = s_int[parent, S_DEPTH]
        K = s_int[parent, S_K]
        nmax = s_int[parent, S_NMAX]
        lgsum = s_float[parent, S_LGSUM]
        pnode = s_int[parent, S_NODE]
    for j in range(K):
        r = s_slots[parent, j]
        s_slots[c, j] = r
        if j != choice:
            refcount[r] += 1
    copy_slot(table, s_slots[parent, choice] if choice < K else TEMPLATE, slot)
    k_add(table, hyper, data, d, slot)
    memo_point[slot, :] = -1  # new contents: any memoised predictive is stale
    s_slots[c, choice] = slot
    refcount[slot] = 1
    nk = table[0][slot]
    if nk > 1:
        lgsum += math.log(nk - 1)
    Kc = K + 1 if choice == K else K
    node = counters[C_NODES]
    counters[C_NODES] += 1
    node_parent[node] = pnode
    node_choice[node] = choice
    s_int[c, S_DEPTH] = d + 1
    s_int[c, S_K] = Kc
    s_int[c, S_NMAX] = nk if nk > nmax else nmax
    s_int[c, S_PENDING] = 0
    s_int[c, S_NODE] = node
    s_float[c, S_DATA] = dchild
    s_float[c, S_LGSUM] = lgsum
    if Kc > counters[C_MAXK]:
        counters[C_MAXK] = Kc
    return c


@functools.cache
def search_loop(fingerprint: int):
    """The compiled search loop for the family whose kernel sources hash to ``fingerprint``.

    The loop reaches the kernels through ``algorithms._dispatch`` (register them first); the
    fingerprint only makes it part of numba's cache key, so that editing a family's kernels
    recompiles the search instead of loading a stale binary.

    ``run(table, hyper, data, ints, floats, pool, states, queue, path, consts, scratch, goal)``
    returns :data:`DONE`, with the goal in ``counters`` (``pool[2]``) and its score in
    ``goal[0]``, or a ``NEED_*`` code when a work array must grow (nothing is half done:
    enlarge it and call again).

    ``ints`` = (N, beam (0 = unbounded), heuristic, prior, ESF bound exact?),
    ``floats`` = (log alpha, prior constant),
    ``pool`` = (slot reference counts, free slot stack, counters, memo point, memo value):
    the memo holds each slot's predictive of the last point of each depth class (d mod
    ``MEMO_WAYS``) it was evaluated for,
    ``states`` = (int fields, float fields, slot lists, free stack),
    ``queue`` = (min-max heap, entry int fields, entry float fields, free stack),
    ``path`` = (parent node, choice), ``consts`` = (log p(x_i) under the prior, its suffix
    sums, lgamma table, ESF new-cluster table), ``scratch`` = (hist, cnt, dp, dp2, bnew,
    bnew_done, best1, arg1, best2, hchild).
    """

    @kernel
    def run(table, hyper, data, ints, floats, pool, states, queue, path, consts, scratch, goal):
        if fingerprint == -1:  # never true: ties the cached binary to the kernels' source
            return -1
        N, beam = ints[0], ints[1]
        s_int, _, s_slots, _ = states
        heap, e_int, e_float, free_entries = queue
        counters = pool[2]
        lpp = consts[0]
        while True:
            # room for one pop and one expansion, checked before anything is touched
            if counters[C_FREE_SLOTS] < 1:
                return NEED_SLOTS
            if counters[C_FREE_STATES] < 1:
                return NEED_STATES
            if s_slots.shape[1] < counters[C_MAXK] + 2 or scratch[9].shape[0] < counters[C_MAXK] + 3:
                return NEED_K
            if counters[C_NODES] >= path[0].shape[0]:
                return NEED_NODES
            if beam == 0 and counters[C_FREE_ENTRIES] < counters[C_MAXK] + 2:
                return NEED_ENTRIES
            if counters[C_POPPED] == 0:  # the root: the first point alone
                p, choice, dchild = -1, 0, lpp[0]
            else:
                e = heap_pop_max(heap, counters[C_HEAP], e_float, e_int)
                counters[C_HEAP] -= 1
                free_entries[counters[C_FREE_ENTRIES]] = e
                counters[C_FREE_ENTRIES] += 1
                p = e_int[e, E_PARENT]
                choice = e_int[e, E_CHOICE]
                dchild = e_float[e, E_DATA]
                if s_int[p, S_DEPTH] + 1 == N:  # the first complete partition popped
                    counters[C_POPPED] += 1
                    counters[C_GOAL_NODE] = s_int[p, S_NODE]
                    counters[C_GOAL_CHOICE] = choice
                    goal[0] = e_float[e, E_F]
                    return DONE
            counters[C_POPPED] += 1
            c = new_state(table, hyper, data, p, choice, dchild, states, pool, path)
            if p >= 0:
                s_int[p, S_PENDING] -= 1
                if s_int[p, S_PENDING] == 0:
                    release(p, states, pool)
            expand(table, hyper, data, c, ints, floats, states, queue, pool, consts, scratch)

    return run
