"""Wang & Lin (2017) distributed samplers: delayed synchronisation, local creation of new
components and their consolidation at the master (docs/algorithms.md §8): ``cons-prog``,
``cons-pooled``, ``cons-hung`` and ``cons-async``.

Every worker holds a shard of the data. One *cycle* of a worker (docs/algorithms.md §8.2):

1. it receives the global version: the statistics of every global component (all workers'
   points) and which of its own local components make up each of them;
2. it relabels its points to the global components (local components of one global
   component are merged), and runs one collapsed Gibbs sweep (Neal's Algorithm 3) over its
   points in a table holding the *global* statistics: the other workers' points count but
   stay frozen (delayed synchronisation). New components may be created; the concentration
   is ``alpha / M`` in a worker's first cycle (M workers start new components at the same
   time) and ``alpha`` afterwards;
3. it returns the statistics of every local component: its share of each global component
   and the new ones.

The master keeps the returned local components as *atoms* (statistics, worker, local id)
and a grouping of the atoms into global components. A worker's share of global component
``g`` replaces its previous atoms of ``g``; its new components are consolidated:

* ``cons-prog`` -- progressive consolidation: each new component, worker by worker, joins
  existing component ``g`` with weight ``rho(g, c)`` or starts a new one with weight 1
  (the merge-split ratio of docs/algorithms.md §0.3, Wang & Lin's Eq. 8);
* ``cons-pooled`` -- progressive consolidation, then ``mcmc_steps`` (default 100) steps of
  pooled consolidation: merge/split Metropolis-Hastings over the groupings of all atoms,
  splits proposed by Wang & Lin's *restricted consolidation* (docs/algorithms.md §8.3); this kernel alone
  is exact for its target (tested by enumeration, docs/algorithms.md §9.2);
* ``cons-hung`` -- Hungarian matching (Campbell et al. 2015; docs/algorithms.md §8.4): each worker's new
  components are matched one-to-one to the existing components or to "new" by
  ``scipy.optimize.linear_sum_assignment`` with cost ``-log rho``;
* ``cons-async`` -- the asynchronous schedule (Wang & Lin §4.3): workers are not waited for
  as a group; each worker's deltas are integrated (and its new components consolidated
  progressively) as soon as they arrive, the worker pulls the latest global version and
  continues at once with its next cycle, and the master runs pooled-consolidation steps
  while the workers sweep. One iteration is ``cycles`` cycles of every worker, and ends
  when all of them are integrated, so that every trace row is a consistent snapshot and
  no worker computes while the driver scores (``time_s`` stays honest).

The synchronous variants (everything but ``cons-async``) give the same trace for the same
seed and worker count, on the serial and the Dask backend alike. All four are approximate
(``exact = False``): the sweep conditions on other workers' statistics from the start of
the cycle, and progressive consolidation and Hungarian matching are not MH-corrected.

Each step's ``state.info``: ``n_clusters`` (global components), ``n_atoms``,
``n_new_components`` (created locally in this iteration), ``n_merges`` (new components
merged into existing ones, plus accepted pooled merges), ``n_splits`` (accepted pooled
splits; pooled and async), and the backend's ``bytes_sent``, ``bytes_received``,
``messages``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.special import gammaln

from . import _consolidation_kernels as ck
from . import _dispatch as dispatch
from ._numerics import log_multigamma, sample_log_weights, take_rows
from .backends import ShardedState
from .backends.base import SHARD_INFO_COLUMNS
from .base import Sampler
from .collapsed import collapsed_sweep, prior_predictive
from .constraints import Interval, Option
from .families import DirichletMultinomial, NormalInverseWishart, NormalKnownCovariance
from .partitions import compact


# ---- the family, as the compiled master loops see it ------------------------------------------

def family_model(family) -> tuple:
    """The ``(code, h, H)`` description of ``family`` the compiled master loops read (see
    :mod:`algorithms._consolidation_kernels`).

    Raises
    ------
    TypeError
        For a family the consolidation samplers do not know.
    """
    if isinstance(family, NormalKnownCovariance):
        return ck.ISO, np.array([family.kappa0, family.var, family.dim], dtype=np.float64), np.zeros((1, 1))
    if isinstance(family, NormalInverseWishart):
        D = family.dim
        logdet = np.linalg.slogdet(family.psi0)[1]
        h = np.array([family.kappa0, family.nu0, D, logdet, float(log_multigamma(family.nu0 / 2.0, D))])
        return ck.NIW, h, np.ascontiguousarray(family.psi0, dtype=np.float64)
    if isinstance(family, DirichletMultinomial):
        h = np.array([family.gamma, family.B, family.vocab_size, gammaln(family.gamma), gammaln(family.B)])
        return ck.DIRMULT, h, np.zeros((1, 1))
    raise TypeError(f"the consolidation samplers support NormalKnownCovariance, NormalInverseWishart and "
                    f"DirichletMultinomial families, got {type(family).__name__}")


# ---- the worker's cycle (map functions: run where the shards are) ---------------------------

class CyclePayload(NamedTuple):
    """What the master sends a worker for one cycle."""

    stats: Any  #: statistics of the G global components (every worker's points)
    remap: np.ndarray  #: (C,) global component of each of the worker's local labels (-1: unused)
    log_alpha: float  #: log concentration of this cycle's new components


class CycleResult(NamedTuple):
    """What a worker sends back: its occupied local components."""

    slots: np.ndarray  #: (R,) their local ids; ids below the payload's G continue global components
    stats: Any  #: their statistics


def _occupied(family, X, labels, capacity) -> CycleResult:
    if labels.shape[0] == 0:
        return CycleResult(np.zeros(0, dtype=np.int64), family.empty_stats(0))
    st = family.stats(X, labels, capacity)
    slots = np.flatnonzero(np.asarray(st.n) > 0)
    return CycleResult(slots, family.take_stats(st, slots))


def shard_components(shard, _payload=None) -> CycleResult:
    """The statistics of the shard's occupied components, its labels as they are (init)."""
    labels = shard.labels
    return _occupied(shard.static["family"], shard.X, labels, int(labels.max()) + 1 if labels.size else 0)


def sweep_with_globals(family, X, labels, global_stats, uniforms, log_alpha: float, log_prior=None,
                       free_slots: int | None = None) -> int:
    """One collapsed Gibbs sweep over the rows of ``X`` in their order, in a table whose
    first G slots hold ``global_stats`` (which include these rows: ``labels`` in 0..G-1
    say where) and whose other slots take the components created on the way.

    ``log_prior`` is log p(x_i) under the prior for every row (computed if not given);
    ``free_slots`` the initial number of slots for new components (default ``max(8, G / 8)``:
    near convergence a sweep creates a few).
    ``labels`` is updated in place (new components get ids >= G); returns the final number
    of slots. When the free slots run out the table is rebuilt, larger, from the global
    statistics corrected by the rows that moved.
    """
    G = len(global_stats.n)
    kdata = family.kernel_data(X)
    if log_prior is None:
        log_prior = prior_predictive(family, X)
    hyper = family.kernel_hyper()
    capacity = G + (max(8, G // 8) if free_slots is None else free_slots)
    table = family.kernel_table_from_stats(family.pad_stats(global_stats, capacity))
    dispatch.register(family.kernels, table, hyper, kdata)
    sweep = collapsed_sweep(family.kernels)
    order = np.arange(labels.shape[0])
    start_labels = labels.copy()
    pos = 0
    while True:
        pos = sweep(kdata, hyper, table, labels, order, uniforms, log_alpha, log_prior, G, pos, np.empty(capacity))
        if pos == labels.shape[0]:
            return capacity
        capacity = G + 2 * (capacity - G)
        now = family.stats(X, labels, capacity)
        before = family.stats(X, start_labels, capacity)
        current = []
        for g, a, b in zip(family.pad_stats(global_stats, capacity), now, before):
            current.append(g + np.asarray(a, dtype=np.float64) - b)
        current[0] = np.rint(current[0])
        empty = current[0] == 0
        for a in current[1:]:
            a[empty] = 0.0  # an emptied slot is exactly the prior, no round-off left behind
        table = family.kernel_table_from_stats(type(global_stats)(*current))


def _log_prior_predictive(shard) -> np.ndarray:
    """log p(x_i) under the prior for the shard's rows, computed on the shard's first cycle
    and kept in ``shard.static`` (shared by every version of the shard; a memo of a pure
    function of its rows, so replaying a step stays pure). Keyed by shard, because the
    serial backend hands every shard the same ``static``."""
    memo = shard.static.setdefault("log_prior_predictive", {})
    key = (shard.index, shard.offset, shard.labels.shape[0])
    if key not in memo:
        memo[key] = prior_predictive(shard.static["family"], shard.X)
    return memo[key]


def worker_cycle(shard, payload: CyclePayload) -> CycleResult:
    """A worker's cycle (see the module docstring): relabel to the global components, one
    random-scan collapsed sweep against the global statistics, statistics of every local
    component. The shard's labels become the local ids of the result."""
    family = shard.static["family"]
    N = shard.labels.shape[0]
    if N == 0:
        return _occupied(family, shard.X, shard.labels, 0)
    z = payload.remap[shard.labels]
    if z.min() < 0:
        raise RuntimeError(f"shard {shard.index}: a point has a local label the master does not know")
    rng = shard.rng
    # visit points in a fresh uniform order, gathered into that order first so that the
    # sweep reads memory sequentially
    order = rng.permutation(N)
    uniforms = rng.random(N)
    X = take_rows(shard.X, order)
    z = np.ascontiguousarray(z[order])
    capacity = sweep_with_globals(family, X, z, payload.stats, uniforms, payload.log_alpha,
                                  _log_prior_predictive(shard)[order])
    shard.labels[order] = z
    return _occupied(family, X, z, capacity)


# ---- the master's bookkeeping ---------------------------------------------------------------

@dataclass
class Atoms:
    """The local components the workers last reported, in canonical (creation) order."""

    rows: np.ndarray  #: (A, W) flattened statistics
    worker: np.ndarray  #: (A,) worker holding the atom's points
    local: np.ndarray  #: (A,) the points' label on that worker
    gid: np.ndarray  #: (A,) global component (ids are never reused); -1 until consolidated

    def groups(self):
        """(gids, index, sums): the global components in id order, every atom's position
        among them (-1 if unconsolidated) and their summed rows."""
        assigned = self.gid >= 0
        gids, inv = np.unique(self.gid[assigned], return_inverse=True)
        index = np.full(len(self.gid), -1, dtype=np.int64)
        index[assigned] = inv
        rows = self.rows[assigned]
        sums = np.empty((len(gids), rows.shape[1]))
        for w in range(rows.shape[1]):  # a weighted count per column: ~2x faster than np.add.at
            sums[:, w] = np.bincount(inv, rows[:, w], minlength=len(gids))
        return gids, index, sums


class _Sent(NamedTuple):
    gids: np.ndarray  #: the payload's global components (position j -> gid then)
    remap: np.ndarray  #: the worker's local labels -> j


class ConsState(ShardedState):
    """Master state: the shards, the atoms and their grouping into global components."""

    def __init__(self, X, shards, rng, atoms: Atoms, next_gid: int):
        super().__init__(X, shards, rng)
        self.atoms = atoms
        self.next_gid = next_gid  #: the id the next new global component gets
        self.cycles = np.zeros(shards.n_shards, dtype=np.int64)  #: completed cycles per worker
        self.merged_into: dict[int, int] = {}  #: gid -> gid it was merged into (in-flight cycles)

    @property
    def labels(self) -> np.ndarray:
        """The global partition: every point's global component (numbered in id order)."""
        local = self.shards.gather_labels()
        _gids, index, _ = self.atoms.groups()
        out = np.empty_like(local)
        offsets = self.shards.offsets
        for w in range(self.shards.n_shards):
            mine = self.atoms.worker == w
            part = local[offsets[w]:offsets[w + 1]]
            if part.size == 0:
                continue
            lookup = np.full(max(int(self.atoms.local[mine].max(initial=-1)), int(part.max())) + 1, -1,
                             dtype=np.int64)
            lookup[self.atoms.local[mine]] = index[mine]
            out[offsets[w]:offsets[w + 1]] = lookup[part]
        return out

    def global_stats(self, family):
        """Statistics of the global components, in the order of :attr:`labels`."""
        return family.rows_to_stats(self.atoms.groups()[2])


# ---- the samplers -----------------------------------------------------------------------------

class _Consolidation(Sampler):
    """Shared machinery of the four consolidation samplers (see the module docstring)."""

    exact = False
    supports_backend = True
    info_columns = {
        **SHARD_INFO_COLUMNS,
        "n_atoms": "worker-local components the master holds (atoms of the global components)",
        "n_new_components": "components the workers created in this iteration",
        "n_merges": "new components merged into existing ones in this iteration, plus accepted pooled merges",
    }
    #: how new components are consolidated: "progressive" or "hungarian"
    policy: ClassVar[str] = "progressive"

    def __init__(self, family, **kwargs):
        super().__init__(family, **kwargs)
        self.model = family_model(family)

    # ---- init ---------------------------------------------------------------------------
    def _init(self, X, labels, rng):
        labels, K = compact(labels)
        shards = self.backend.distribute(X, labels, self.seed, static={"family": self.family},
                                         n_points=self.family.n_points(X))
        results = shards.map(shard_components, None)
        atoms = Atoms(*_atoms_of(self.family, results, range(len(results)), [r.slots for r in results]))
        state = ConsState(X, shards, rng, atoms, next_gid=K)
        state.info = {"n_clusters": K, "n_atoms": len(atoms.gid), **shards.take_stats()}
        return state

    # ---- one worker cycle, seen from the master ------------------------------------------
    def _payloads(self, state, workers) -> list[tuple[CyclePayload, _Sent]]:
        """The next cycle's payload for each of ``workers``, from one grouping of the atoms."""
        gids, index, sums = state.atoms.groups()
        if (index < 0).any():
            raise RuntimeError("an atom is still waiting for consolidation")
        stats, M = self.family.rows_to_stats(sums), state.shards.n_shards
        out = []
        for w in workers:
            mine = np.flatnonzero(state.atoms.worker == w)
            remap = np.full(int(state.atoms.local[mine].max(initial=-1)) + 1, -1, dtype=np.int64)
            remap[state.atoms.local[mine]] = index[mine]
            log_alpha = math.log(state.alpha) - (math.log(M) if state.cycles[w] == 0 else 0.0)
            out.append((CyclePayload(stats, remap, log_alpha), _Sent(gids, remap)))
        return out

    def _resolve(self, state, gid: int) -> int:
        while gid in state.merged_into:
            gid = state.merged_into[gid]
        return gid

    def _integrate(self, state, w: int, sent: _Sent, result: CycleResult) -> int:
        """Replace worker ``w``'s atoms by its new local components; returns how many of
        them are new (left unconsolidated, gid -1).

        A component in a global slot ``j`` continues the worker's previous atoms of ``j``
        (the group of the largest, which pooled moves may have changed meanwhile) or, if
        the worker had none, global component ``j`` itself (followed through merges).
        """
        a = state.atoms
        old = a.worker == w
        old_j = sent.remap[a.local[old]]
        old_gid, old_n = a.gid[old], a.rows[old, 0]
        n_sent = len(sent.gids)
        # per global slot j, the group of the worker's largest previous atom of j (the first
        # of equal ones): sort by (j, -n), keep the first of every j
        valid = np.flatnonzero(old_j >= 0)
        by_slot = valid[np.lexsort((-old_n[valid], old_j[valid]))]
        first = by_slot[np.unique(old_j[by_slot], return_index=True)[1]]
        largest = np.full(n_sent, -1, dtype=np.int64)
        largest[old_j[first]] = old_gid[first]
        slots = np.asarray(result.slots, dtype=np.int64)
        gid = np.full(len(slots), -1, dtype=np.int64)
        sent_slot = slots < n_sent
        gid[sent_slot] = largest[slots[sent_slot]]
        for r in np.flatnonzero(sent_slot & (gid < 0)):  # none of the worker's atoms were in j
            gid[r] = self._resolve(state, int(sent.gids[slots[r]]))
        keep = ~old
        state.atoms = Atoms(np.concatenate([a.rows[keep], self.family.stats_to_rows(result.stats)]),
                            np.concatenate([a.worker[keep], np.full(len(gid), w, dtype=np.int64)]),
                            np.concatenate([a.local[keep], np.asarray(result.slots, dtype=np.int64)]),
                            np.concatenate([a.gid[keep], gid]))
        state.cycles[w] += 1
        return int((gid < 0).sum())

    # ---- consolidation of new components -------------------------------------------------
    def _consolidate(self, state, w: int) -> int:
        """Give worker ``w``'s new components a global component; returns the merges."""
        a = state.atoms
        new = np.flatnonzero((a.gid < 0) & (a.worker == w))
        if new.size == 0:
            return 0
        gids, _, sums = a.groups()
        L = ck.log_marginal_rows(self.model, sums)
        if self.policy == "hungarian":
            return self._hungarian(state, new, gids, sums, L)
        merges = 0
        for p in new:
            row = a.rows[p]
            logw = np.empty(len(gids) + 1)
            ck.log_rho_to_rows(self.model, math.log(state.alpha), sums, L, row, ck.log_marginal_row(self.model, row),
                               logw[:-1])
            logw[-1] = 0.0  # a component of its own
            k = sample_log_weights(logw, len(logw), state.rng.random())
            if k < len(gids):
                a.gid[p] = gids[k]
                sums[k] += row
                L[k] = ck.log_marginal_row(self.model, sums[k])
                merges += 1
            else:
                a.gid[p] = state.next_gid
                state.next_gid += 1
                gids = np.append(gids, a.gid[p])
                sums = np.vstack([sums, row])
                L = np.append(L, ck.log_marginal_row(self.model, row))
        return merges

    def _hungarian(self, state, new, gids, sums, L) -> int:
        """One-to-one matching of the new components to the existing ones or to "new"
        (docs/algorithms.md §8.4): cost ``-log rho`` for a match, 0 for a dummy column."""
        a = state.atoms
        T, G = len(new), len(gids)
        cost = np.zeros((T, G + T))
        for t, p in enumerate(new):
            lr = np.empty(G)
            row = a.rows[p]
            ck.log_rho_to_rows(self.model, math.log(state.alpha), sums, L, row, ck.log_marginal_row(self.model, row), lr)
            cost[t, :G] = -lr
        rows, cols = linear_sum_assignment(cost)
        merges = 0
        for t, c in zip(rows, cols):
            if c < G:
                a.gid[new[t]] = gids[c]
                merges += 1
            else:
                a.gid[new[t]] = state.next_gid
                state.next_gid += 1
        return merges

    def _pooled(self, state, n_steps: int) -> tuple[int, int]:
        """``n_steps`` pooled-consolidation MCMC steps over the atoms (docs/algorithms.md §8.3); returns the
        accepted merges and splits.

        Afterwards every global component takes the id of the old component of its first
        atom, unless an earlier one (by first atom) took it; a component that lost every
        claim is recorded as merged into the one now holding its first atom.
        """
        if n_steps == 0 or len(state.atoms.gid) < 2:
            return 0, 0
        a = state.atoms
        gids, index, _ = a.groups()
        labels = index.copy()
        G, merges, splits = ck.pooled_mcmc(self.model, math.log(state.alpha), a.rows, labels, len(gids), n_steps,
                                           state.rng, ck.workspace(a.rows, len(gids) + n_steps))
        if merges == 0 and splits == 0:
            return 0, 0
        A = len(labels)
        first = np.full(G, A, dtype=np.int64)
        np.minimum.at(first, labels, np.arange(A))
        new_gid = np.empty(G, dtype=np.int64)
        taken = set()
        for c in np.argsort(first):
            g = int(a.gid[first[c]])
            if g in taken:
                g, state.next_gid = state.next_gid, state.next_gid + 1
            taken.add(g)
            new_gid[c] = g
        for g in set(gids.tolist()) - taken:
            state.merged_into[g] = int(new_gid[labels[np.flatnonzero(a.gid == g)[0]]])
        a.gid = new_gid[labels]
        return merges, splits

    # ---- the synchronous iteration --------------------------------------------------------
    def _step(self, state):
        shards = state.shards
        M = shards.n_shards
        sent = self._payloads(state, range(M))
        pending = [shards.submit(w, worker_cycle, sent[w][0]) for w in range(M)]
        # each result is integrated as soon as it is in (in worker order, as if all had been
        # waited for): the master's work on the first overlaps the wait for the others
        n_new = sum(self._integrate(state, w, sent[w][1], shards.results([p])[0]) for w, p in enumerate(pending))
        merges = sum(self._consolidate(state, w) for w in range(M))
        info = {"n_new_components": n_new, "n_merges": merges}
        if self.params.get("mcmc_steps") is not None:
            pooled_merges, splits = self._pooled(state, self.params["mcmc_steps"])
            info.update(n_merges=merges + pooled_merges, n_splits=splits)
        return self._finish(state, info)

    def _n_clusters(self, state):
        # the global components the master holds (its last step's count), not the labels on the shards
        return int(state.info["n_clusters"])

    def _finish(self, state, info):
        state.merged_into.clear()  # no cycle is in flight any more
        state.info = {"n_clusters": len(np.unique(state.atoms.gid)), "n_atoms": len(state.atoms.gid), **info,
                      **state.shards.take_stats()}
        return state


def _atoms_of(family, results, workers, gids):
    rows = [family.stats_to_rows(r.stats) for r in results]
    return (np.concatenate(rows) if rows else np.zeros((0, 0)),
            np.concatenate([np.full(len(r.slots), w, dtype=np.int64) for r, w in zip(results, workers)]),
            np.concatenate([np.asarray(r.slots, dtype=np.int64) for r in results]),
            np.concatenate([np.asarray(g, dtype=np.int64) for g in gids]))


#: fewest pooled-consolidation steps per call in ``cons-async`` (where it has that many)
POOLED_BATCH = 25
_MCMC_STEPS = Option(100, Interval(int, 0), "pooled-consolidation MCMC steps per iteration (docs/algorithms.md §8.3)")


class ProgressiveConsolidation(_Consolidation):
    """Wang & Lin with progressive consolidation (registry name ``cons-prog``)."""

    name = "cons-prog"


class PooledConsolidation(_Consolidation):
    """Wang & Lin with pooled consolidation (registry name ``cons-pooled``): progressive
    consolidation of the new components, then ``mcmc_steps`` merge/split steps over all
    atoms."""

    name = "cons-pooled"
    options = {"mcmc_steps": _MCMC_STEPS}
    info_columns = {**_Consolidation.info_columns,
                    "n_splits": "pooled-consolidation splits accepted in this iteration"}


class HungarianConsolidation(_Consolidation):
    """Wang & Lin's framework with Hungarian matching as the consolidation step (registry
    name ``cons-hung``; Campbell et al. 2015, docs/algorithms.md §8.4)."""

    name = "cons-hung"
    policy = "hungarian"


class AsyncConsolidation(_Consolidation):
    """Wang & Lin's asynchronous schedule (registry name ``cons-async``, §4.3).

    Each worker's deltas are integrated and its new components consolidated progressively
    as soon as they arrive; the worker then pulls the latest global version and starts its
    next cycle at once. The master spreads ``mcmc_steps`` pooled-consolidation steps over
    its waits, so they run while the workers sweep (their result reaches each worker at
    its next pull). An iteration is ``cycles`` cycles of every worker and ends when all are
    integrated. With the serial backend the arrivals come in submission order, so the run
    is reproducible; on Dask they come in completion order.
    """

    name = "cons-async"
    options = {"mcmc_steps": _MCMC_STEPS,
               "cycles": Option(1, Interval(int, 1), "cycles of every worker per iteration (trace row)")}
    info_columns = {**_Consolidation.info_columns,
                    "n_splits": "pooled-consolidation splits accepted in this iteration"}

    def _step(self, state):
        shards = state.shards
        M = shards.n_shards
        cycles, n_steps = self.params["cycles"], self.params["mcmc_steps"]
        owed = np.full(M, cycles)
        in_flight = []  # (worker, what was sent, pending map), oldest first

        def launch(w, payload, sent):
            in_flight.append((w, sent, shards.submit(w, worker_cycle, payload)))
            owed[w] -= 1

        for w, (payload, sent) in enumerate(self._payloads(state, range(M))):
            launch(w, payload, sent)
        waits = M * cycles
        # the pooled steps go in batches of at least POOLED_BATCH, at the first of every
        # ``waits / batches`` waits: a call rebuilds the tables over every atom, about 15
        # steps' work on Wang & Lin's set at 16 workers (docs/algorithms.md §8.3)
        batches = min(waits, max(1, n_steps // POOLED_BATCH))

        def done_before(i):  # pooled steps made before wait i
            return n_steps * -(-i * batches // waits) // batches

        n_new = merges = pooled_merges = splits = 0
        for i in range(waits):
            # consolidation at the centre while the workers sweep
            m, s = self._pooled(state, done_before(i + 1) - done_before(i))
            pooled_merges, splits = pooled_merges + m, splits + s
            w, result = next(iter(shards.as_completed([p for _, _, p in in_flight])))
            position = next(k for k, (v, _, _) in enumerate(in_flight) if v == w)
            _, sent, _ = in_flight.pop(position)
            n_new += self._integrate(state, w, sent, result)
            merges += self._consolidate(state, w)
            if owed[w] > 0:
                launch(w, *self._payloads(state, [w])[0])
        return self._finish(state, {"n_new_components": n_new, "n_merges": merges + pooled_merges,
                                    "n_splits": splits})
