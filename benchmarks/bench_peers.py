"""Time to target beside the peers: seconds from ``init`` (included) to the first state with
NMI >= 0.99 and K = 4 on 100k x 2-D points from four well-separated Gaussians, for ``subc`` and
each peer (issue 17's goal: ``subc`` at least as fast as the fastest peer). The same measurement
as ``python -m benchmarks.peers`` (``benchmarks/peers.py``), one method per benchmark; NaN when a
method does not get there within the cap; a peer that is not installed is skipped.
"""
from __future__ import annotations

import math

from dpmmbench import algorithms, datasets

from . import peers


class TimeToTarget:
    """Seconds to NMI >= 0.99 with K = 4, each chain in its own process (``peers.run_isolated``)."""

    params = ([peers.TARGET_DATASET], ["subc", "sklearn-bgm", "bnpy-memovb", "dpgmm"])
    param_names = ["problem", "method"]
    tiny_params = [("synth-chang2013?n=2000&n_clusters=4", "subc")]
    #: seconds a method gets to reach the target
    cap = 60.0
    timeout = 300
    number, repeat = 1, 1

    def setup(self, problem, method):
        if method not in algorithms.available():
            raise NotImplementedError(f"{method} is not installed")  # asv skips the benchmark
        self.data = datasets.load(problem)

    def track_seconds_to_target(self, problem, method):
        ds = self.data
        row = peers.run_isolated(method, {}, ds.X, ds.labels, ds.family, self.cap,
                                 target=(peers.TARGET_NMI, peers.TARGET_K))
        return float(row["time_s"]) if row["status"] == "reached" else math.nan

    track_seconds_to_target.unit = "seconds"
