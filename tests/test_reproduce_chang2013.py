"""Chang & Fisher (2013)'s synthetic claim at a size that takes seconds: started from one
cluster, the sub-cluster sampler reaches the ten generating clusters and the plateau of the
log joint; in the time it needed, FSD, collapsed Gibbs and super-cluster Gibbs do not.

The chains run through the suite's driver (``workflows.driver.run_chain``: sampler time only,
metrics off the clock), as the paper's config does (``workflows/config/chang2013.yaml``, the
one route to its reproduction)."""
import numpy as np
import pytest

from dpmmbench import algorithms, datasets
from dpmmbench.reports.metrics import log_joint
from dpmmbench.workflows.driver import run_chain

N = 100_000


def _chain(ds, name, budget):
    """``name``'s trace from one cluster for ``budget`` seconds of sampler time (alpha 1, seed 0)."""
    sampler = algorithms.make(name, family=ds.family, alpha=1.0, seed=0)
    return run_chain(sampler, ds.X, iterations=100_000, truth=ds.labels, time_budget=budget, init_clusters=1,
                     dataset=ds.name)


@pytest.mark.slow
def test_subclusters_reach_the_plateau_first():
    ds = datasets.load(f"synth-chang2013?n={N}")
    truth = log_joint(ds.X, ds.labels, ds.family, 1.0)
    trace = _chain(ds, "subc", 30.0)
    at_plateau = (trace["log_joint"] > truth - 1e-3 * abs(truth)) & (trace["vi"] < 0.15)
    assert at_plateau.any(), trace[["iteration", "time_s", "n_clusters", "vi", "log_joint"]].tail()
    first = trace[at_plateau].iloc[0]
    assert first["n_clusters"] >= 10
    budget = float(first["time_s"])

    for name in ("gibbs", "fsd", "gibbs-supercluster"):
        last = _chain(ds, name, budget).iloc[-1]
        # in the same time, none is at the plateau
        assert last["log_joint"] < truth - 1e-3 * abs(truth), (name, last, budget)
        assert np.isfinite(last["vi"])
