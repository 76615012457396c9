"""Chang & Fisher (2013)'s synthetic claim at a size that takes seconds: started from one
cluster, the sub-cluster sampler reaches the ten generating clusters and the plateau of the
log joint; in the time it needed, FSD, collapsed Gibbs and super-cluster Gibbs do not."""
import numpy as np
import pandas as pd
import pytest

from dpmmbench.workflows.scripts.reproduce_chang2013 import compare


@pytest.mark.slow
def test_subclusters_reach_the_plateau_first(tmp_path):
    n = 100_000
    subc = compare(n=n, budget=30.0, names=("subc",), out=tmp_path)
    trace = pd.read_parquet(tmp_path / "subc.parquet")
    truth = subc["log_joint"].iloc[0] - subc["gap_to_truth"].iloc[0]
    at_plateau = (trace["log_joint"] > truth - 1e-3 * abs(truth)) & (trace["vi"] < 0.15)
    assert at_plateau.any(), trace[["iteration", "time_s", "n_clusters", "vi", "log_joint"]].tail()
    first = trace[at_plateau].iloc[0]
    assert first["n_clusters"] >= 10
    budget = float(first["time_s"])

    others = compare(n=n, budget=budget, names=("gibbs", "fsd", "gibbs-supercluster"))
    for row in others.itertuples():
        # in the same time, none is at the plateau
        assert row.log_joint < truth - 1e-3 * abs(truth), (row, budget)
    assert np.isfinite(others["vi"]).all()
