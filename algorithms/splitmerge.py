"""Collapsed Gibbs interleaved with restricted-Gibbs split-merge moves (Jain & Neal 2004,
docs/algorithms.md §2). Exact.

One step = ``sweeps`` collapsed Gibbs sweeps (the ``gibbs`` sampler's step) followed by
``moves`` split-merge updates -- Jain & Neal's schedule ``(intermediate_scans, moves,
sweeps)``, e.g. their "(5,1,1)". An update picks two anchors ``i``, ``j`` uniformly and
builds a *launch state* for the other points ``S`` of their cluster(s): a random half to
each anchor, then ``intermediate_scans`` restricted Gibbs scans (each point of ``S`` moves
between the anchors' two groups only). If ``i`` and ``j`` share a cluster, one more sampled
restricted scan proposes the split; otherwise the merge is proposed, and the probability of
the reverse split is that of a restricted scan from the launch state forced to the current
split. ``S`` is always scanned in sorted order: an order that depended on the direction of
the move (e.g. the merge's "cluster of i, then cluster of j") would bias the chain (docs/algorithms.md §0.5).
"""
from __future__ import annotations

import numpy as np

from ._splitmerge_kernels import PairSet, Proposal, SplitMergeGibbs
from .constraints import Interval, Option


def launch_state(pairset: PairSet, rng: np.random.Generator, n_scans: int) -> tuple[np.ndarray, tuple]:
    """Random halves, then ``n_scans`` sampled restricted scans; returns (part, its table).

    Its law depends only on the anchors and the set of points, never on how they are
    currently split, so it cancels from the acceptance ratio.
    """
    m = len(pairset)
    part = rng.integers(2, size=m)
    part[:2] = (0, 1)
    table = pairset.table(part)
    for _ in range(n_scans):
        pairset.scan(table, part, uniforms=rng.random(m))
    return part, table


def jain_neal_proposal(pairset: PairSet, launch, uniforms=None, target=None, table=None) -> Proposal:
    """Evaluate the Jain-Neal proposal on ``pairset`` from the launch state ``launch``.

    Parameters
    ----------
    pairset : PairSet
        Anchors and the other points of their cluster(s), in sorted order.
    launch : (m,) int array
        The launch state (a part, after the intermediate scans); not modified.
    uniforms : (m,) array, optional
        Uniforms that draw the final restricted scan of a split.
    target : (m,) int array, optional
        For a split: evaluate this outcome of the final scan instead of drawing one.
        Ignored for a merge, whose final scan is always forced to the current split.
    table : tuple, optional
        The kernel table of ``launch`` if the caller has it (it is then updated in place).

    Returns
    -------
    Proposal
        ``log_q`` is the log probability of the final scan's choices (for a merge: of the
        scan that would recreate the current split); ``log_accept`` the log MH ratio.
    """
    part = np.array(launch, dtype=np.int64)
    table = pairset.table(part) if table is None else table
    if pairset.split:
        log_q = pairset.scan(table, part, uniforms=uniforms, target=target)
        return Proposal(True, part, log_q, -pairset.log_merge_ratio(part) - log_q)
    log_q = pairset.scan(table, part, target=pairset.current)
    return Proposal(False, part, log_q, pairset.log_merge_ratio(part) + log_q)


class GibbsSplitMerge(SplitMergeGibbs):
    """Collapsed Gibbs sweeps + Jain-Neal restricted-Gibbs split-merge updates
    (registry name ``gibbs-splitmerge``)."""

    name = "gibbs-splitmerge"
    exact = True
    options = {
        **SplitMergeGibbs.options,
        "intermediate_scans": Option(5, Interval(int, 0), "restricted Gibbs scans building the launch state (t)"),
    }

    def _propose(self, ctx, labels, i, j, others, rng):
        pairset = ctx.pairset(labels, i, j, others)  # canonical (sorted) scan order
        launch, table = launch_state(pairset, rng, self.params["intermediate_scans"])
        return pairset, jain_neal_proposal(pairset, launch, uniforms=rng.random(len(pairset)), table=table)
