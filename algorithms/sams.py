"""Collapsed Gibbs interleaved with sequentially-allocated merge-split moves (SAMS; Dahl 2003,
docs/algorithms.md §1). Exact.

One step = ``sweeps`` collapsed Gibbs sweeps (the ``gibbs`` sampler's step) followed by
``moves`` SAMS updates. An update picks two anchors ``i``, ``j`` uniformly. If they share a
cluster ``C``, the other points of ``C`` are allocated one by one, in a fresh uniform order,
to the group of ``i`` or of ``j`` with probability proportional to ``size x posterior
predictive`` -- a data-driven split proposal made in a single pass -- and the split is
accepted with the Metropolis-Hastings ratio. If they do not, the merge of their clusters is
proposed; its reverse probability is that of the allocation that reproduces the *actual*
current split (forced choices), never of a freshly sampled one (docs/algorithms.md §1 pitfall).
"""
from __future__ import annotations

from ._splitmerge_kernels import PairSet, Proposal, SplitMergeGibbs


def sams_proposal(pairset: PairSet, uniforms=None, target=None) -> Proposal:
    """Evaluate the SAMS proposal on ``pairset`` (its ``rest`` is the allocation order).

    Parameters
    ----------
    pairset : PairSet
        Anchors and the other points of their cluster(s), in allocation order.
    uniforms : (m,) array, optional
        Uniforms that draw the allocation of a split (indexed like ``pairset.members``).
    target : (m,) int array, optional
        For a split: evaluate this allocation instead of drawing one. Ignored for a merge,
        whose allocation is always forced to the current split.

    Returns
    -------
    Proposal
        ``log_q`` is the log probability of the split's allocation (for a merge: of the
        allocation that would recreate the current split); ``log_accept`` the log MH ratio.
    """
    if pairset.split:
        part, log_q, log_rho = pairset.allocate(uniforms=uniforms, target=target)
        # alpha Gamma(n_i) Gamma(n_j) m(x_i) m(x_j) / (Gamma(n_C) m(x_C)) / q(split)
        return Proposal(True, part, log_q, -log_rho - log_q)
    part, log_q, log_rho = pairset.allocate(target=pairset.current)
    return Proposal(False, part, log_q, log_rho + log_q)


class GibbsSAMS(SplitMergeGibbs):
    """Collapsed Gibbs sweeps + SAMS merge-split updates (registry name ``gibbs-sams``).

    Options: ``moves`` SAMS updates and ``sweeps`` Gibbs sweeps per step, Gibbs ``scan``.
    """

    name = "gibbs-sams"
    exact = True

    def _propose(self, ctx, labels, i, j, others, rng):
        # a fresh uniform allocation order per proposal, drawn independently of the state
        pairset = ctx.pairset(labels, i, j, rng.permutation(others))
        return pairset, sams_proposal(pairset, uniforms=rng.random(len(pairset)))
