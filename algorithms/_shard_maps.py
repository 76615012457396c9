"""Map functions shared by the sharded samplers (``slice-mr``, ``subc`` on a backend).

A map function runs where a shard lives, on its points and labels (``shard.X``,
``shard.labels``) with the family in ``shard.static["family"]``; it returns what the master
needs, usually per-component sufficient statistics that the master sums over shards with
:meth:`Family.sum_stats <dpmmbench.algorithms.families.Family.sum_stats>`.
"""
from __future__ import annotations


def component_stats(shard, n_components: int):
    """Counts and sufficient statistics of the shard's components ``0..n_components-1``."""
    return shard.static["family"].stats(shard.X, shard.labels, n_components)
