"""Where a run's and a workflow's time goes: the driver's scoring and held-out seconds, the
job files Snakemake's ``benchmark:`` writes, each run's start-up and the workflow's sampling
share (reports/runs.py, reports/timing.py; docs/design.md "Where the time goes")."""
from __future__ import annotations

import json
import time
from datetime import datetime

import numpy as np
import pytest

from dpmmbench import algorithms, datasets
from dpmmbench.workflows import driver


# ---- the driver's bookkeeping -------------------------------------------------------------
def test_run_records_its_scoring_heldout_and_finish(scheduler):
    trace, meta = driver.run(driver.RunSpec("gibbs", "synth-chang2013?n=200", 4, seed=1, test_fraction=0.2,
                                            scheduler=scheduler))
    assert meta["score_s"] > 0 and meta["heldout_s"] > 0
    # the parts the run measured are disjoint pieces of its own wall time
    assert meta["time_s"] + meta["score_s"] + meta["heldout_s"] < meta["wall_s"]
    started = datetime.fromisoformat(meta["started_utc"])
    finished = datetime.fromisoformat(meta["finished_utc"])
    assert finished.utcoffset().total_seconds() == 0 and "." in meta["finished_utc"]  # UTC, to the ms
    assert started <= finished
    json.dumps(meta)

    _, nothing = driver.run(driver.RunSpec("gibbs", "synth-chang2013?n=200", 2, seed=1, test_fraction=0,
                                           scheduler=scheduler))
    assert nothing["heldout_s"] == 0.0 and nothing["score_s"] > 0  # nothing held out: no held-out time


def test_scoring_time_is_the_callbacks_and_not_the_samplers(monkeypatch):
    """Every state's scoring is counted in ``score_s`` and never in ``time_s``: a scorer made
    slow by a known pause per state shows it in the one and not in the other."""
    pause, iterations = 0.05, 3
    real_log_joint = driver.log_joint

    def slow_log_joint(*args, **kwargs):
        time.sleep(pause)
        return real_log_joint(*args, **kwargs)

    monkeypatch.setattr(driver, "log_joint", slow_log_joint)
    data = datasets.load("synth-chang2013?n=100")
    sampler = algorithms.make("gibbs", family=data.family, seed=0)
    rows, timing = [], {}
    result = driver._scored_chain(sampler, data.X, iterations, None, rows, timing=timing)
    assert len(rows) == iterations + 1
    assert timing["score_s"] >= pause * (iterations + 1)
    assert result.sampler_s == rows[-1]["time_s"] < pause  # the pauses are not sampler time


def test_a_failed_chain_keeps_its_scoring_time():
    class Failing:
        """A gibbs sampler whose second step raises."""

        def __init__(self, inner):
            self.inner, self.steps = inner, 0

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def step(self, state):
            self.steps += 1
            if self.steps == 2:
                raise RuntimeError("second step fails")
            return self.inner.step(state)

    data = datasets.load("synth-chang2013?n=100")
    sampler = Failing(algorithms.make("gibbs", family=data.family, seed=0))
    rows, timing = [], {}
    with pytest.raises(RuntimeError, match="second step"):
        driver._scored_chain(sampler, data.X, 5, None, rows, timing=timing)
    assert len(rows) == 2 and timing["score_s"] > 0
    assert np.isfinite(timing["score_s"])
