"""``mh-single-site``: random-site Metropolis updates of one label at a time.

Each proposal picks a point ``i`` uniformly and proposes, uniformly, one of the clusters of the
other points or a new cluster. That set of choices does not depend on ``i``'s own label, so the
proposal is symmetric and the acceptance ratio is the ratio of the collapsed conditionals
``p(z_i = c | z_-i, X)``, proportional to ``n_c * p(x_i | x_c)`` (``alpha * p(x_i)`` for a new
cluster). The chain therefore leaves the DP mixture posterior invariant: the sampler declares
``exact = True``, which ``dpmmbench check mh-single-site`` tests against the enumerated posterior.

It uses only the public family interface (``stats``, ``log_predictive``) and recomputes the
other points' statistics for each proposal: O(N) per proposal, written for clarity, not speed.
"""
from __future__ import annotations

import numpy as np

from dpmmbench.algorithms import Sampler, State


class SingleSiteMetropolis(Sampler):
    """Random-site Metropolis-within-Gibbs for the DP mixture (registry name ``mh-single-site``)."""

    name = "mh-single-site"
    exact = True
    info_columns = {"accepted": "fraction of the step's proposals that were accepted"}

    def _init(self, X, labels, rng):
        return State(X, labels, rng)

    def _step(self, state):
        X, labels, rng = state.X, state.labels.copy(), state.rng
        n = self.family.n_points(X)
        accepted = 0
        for i in rng.integers(n, size=n):  # one step = n proposals
            others = np.delete(np.arange(n), i)
            present = np.unique(labels[others])  # the other points' clusters, in label order
            k = len(present)
            # statistics of those clusters plus one empty cluster (the "new" choice, index k)
            stats = self.family.stats(X[others], np.searchsorted(present, labels[others]), k + 1)
            log_pred = self.family.log_predictive(X[i:i + 1], stats)[0]
            with np.errstate(divide="ignore"):
                log_weight = np.log(np.append(np.bincount(labels[others])[present], state.alpha)) + log_pred
            where = np.searchsorted(present, labels[i])
            current = where if where < k and present[where] == labels[i] else k
            proposed = rng.integers(k + 1)
            if np.log(rng.random()) < log_weight[proposed] - log_weight[current]:
                accepted += proposed != current
                labels[i] = present[proposed] if proposed < k else labels.max() + 1
        state.labels = np.unique(labels, return_inverse=True)[1].astype(np.int64)  # ids 0..K-1
        state.info = {"accepted": accepted / n}
        return state
