"""The chain diagnosis (reports/diagnosis.py) on chains of known behaviour: a stationary AR(1)
chain settles, a trending one is still climbing, two stationary chains at different levels
settled in different modes, a constant one is stuck; and the final partitions' VI, the
too-slow rule and the columns chain_statistics adds."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpmmbench.reports import chains as chain_stats
from dpmmbench.reports.diagnosis import MIN_ITERATIONS, TREND_Z, chain_state, diagnose
from dpmmbench.reports.metrics import vi
from dpmmbench.reports.traces import decode_partition, encode_partition

STEPS = 400
#: seconds per step: the slope in nats per second is the slope per step over this
STEP_S = 0.02
TIMES = STEP_S * np.arange(1, STEPS + 1)


def ar1(n: int, phi: float, level: float, sd: float, seed: int) -> np.ndarray:
    """A stationary AR(1) chain: level + x, x_t = phi x_{t-1} + N(0, sd^2), started in its
    stationary distribution."""
    rng = np.random.default_rng(seed)
    x = np.empty(n)
    x[0] = rng.normal(scale=sd / math.sqrt(1 - phi ** 2))
    for t in range(1, n):
        x[t] = phi * x[t - 1] + rng.normal(scale=sd)
    return level + x


def test_a_stationary_ar1_chain_settles_and_a_trending_one_climbs():
    """Over 50 seeds, an AR(1) chain (phi 0.5) at a level settles on at least 48 (the trend
    test's false alarms are about 1 in 100); the same chains plus a climb of 0.05 nats per step
    (10 nats over the last half, about nine stationary standard deviations) are still climbing on every
    seed, with the slope it has (within four standard errors of the noise's)."""
    settled = climbing = 0
    for seed in range(50):
        flat = ar1(STEPS, 0.5, -5000.0, 1.0, seed)
        state = chain_state(flat, TIMES)
        settled += state.state == "settled"
        if state.state == "settled":
            assert state.z <= TREND_Z and state.plateau == pytest.approx(np.median(flat[STEPS // 2:]))
            # it stays in its final band (the range of its last half) from its time to settle on
            band = flat[TIMES >= state.settle_s]
            assert band.min() >= flat[STEPS // 2:].min() and band.max() <= flat[STEPS // 2:].max()
        rising = chain_state(flat + 0.05 * np.arange(STEPS), TIMES)
        climbing += rising.state == "climbing"
        assert rising.slope == pytest.approx(0.05 / STEP_S, rel=0.2)
    assert settled >= 48 and climbing == 50


def test_a_chain_that_dips_and_comes_back_has_stopped_climbing():
    """A stationary chain with a dip over part of its last half (a split that a later merge
    undoes) and one drifting down have stopped climbing: settled, not "still climbing"."""
    dip = ar1(STEPS, 0.5, -5000.0, 1.0, 3)
    dip[250:330] -= 15.0
    assert chain_state(dip, TIMES).state == "settled"
    down = ar1(STEPS, 0.5, -5000.0, 1.0, 4) - 0.05 * np.arange(STEPS)
    state = chain_state(down, TIMES)
    assert state.state == "settled" and state.z < -TREND_Z and state.slope < 0


def test_two_stationary_chains_at_different_levels_settle_in_different_modes():
    """Four settled chains, two at each of two levels 30 nats apart: settled in different
    modes, R-hat across them far above the threshold, the plateaus' spread 30 nats; the same
    four chains at one level: the chains agree."""
    modes = diagnose([(ar1(STEPS, 0.5, -5000.0 - 30.0 * (i % 2), 1.0, i), TIMES) for i in range(4)])
    assert modes.outcome == "modes" and modes.settled == 4 and modes.is_settled
    assert modes.rhat > 1.5 and modes.spread == pytest.approx(30.0, abs=1.0)
    assert "settled in different modes (4 of 4 chains; plateaus 30 nats apart" in modes.describe()
    agree = diagnose([(ar1(STEPS, 0.5, -5000.0, 1.0, i), TIMES) for i in range(4)])
    assert agree.outcome == "agree" and agree.rhat <= chain_stats.RHAT_THRESHOLD
    assert agree.describe().startswith("chains agree (4 of 4 chains settled; R̂ ")


def test_a_constant_chain_is_stuck_and_a_method_of_them_too():
    """A chain whose log joint never moves is stuck, and so is a method most of whose chains
    are; an optimiser's or a variational method's flat chains are n/a, not stuck."""
    flat = np.full(STEPS, -123.0)
    assert chain_state(flat, TIMES).state == "stuck"
    found = diagnose([(flat, TIMES)] * 3 + [(ar1(STEPS, 0.5, -100.0, 1.0, 0), TIMES)])
    assert found.outcome == "stuck" and found.stuck == 3 and not found.is_settled
    assert diagnose([(flat, TIMES)] * 4, kind="optimiser").outcome == "n/a"
    assert diagnose([(flat, TIMES)] * 4, kind="variational").describe() == "n/a"


def test_three_of_four_chains_must_settle():
    """Three settled chains of four make a settled method (its R-hat over those three); two of
    four do not: the method is still climbing, with the climbing chains' slope."""
    steady = [(ar1(STEPS, 0.5, -5000.0, 1.0, i), TIMES) for i in range(4)]
    rising = (ar1(STEPS, 0.5, -5000.0, 1.0, 9) + 0.5 * np.arange(STEPS), TIMES)
    three = diagnose(steady[:3] + [rising])
    assert three.outcome == "agree" and (three.settled, three.chains) == (3, 4)
    two = diagnose(steady[:2] + [rising, rising])
    assert two.outcome == "climbing" and two.settled == 2
    assert two.slope == pytest.approx(0.5 / STEP_S, rel=0.05)
    assert two.describe().startswith("still climbing (+25") and two.describe().endswith("; 2 of 4 chains settled)")


def test_fewer_than_the_minimum_iterations_is_too_slow():
    """A method whose chains completed fewer than MIN_ITERATIONS steps (median) is too slow
    at its budget, with the number of iterations; a chain that short alone says nothing."""
    short = MIN_ITERATIONS - 1
    found = diagnose([(ar1(short, 0.5, -10.0, 1.0, i), TIMES[:short]) for i in range(4)])
    assert found.outcome == "too slow" and found.describe() == f"too slow at this budget ({short} iterations)"
    assert chain_state(np.arange(short, dtype=float), TIMES[:short]).state == "short"


def test_the_vi_between_modes_is_that_of_the_final_partitions():
    """The VI between settled chains' modes is the median over pairs of the VI between their
    final partitions, read back from their encoded form."""
    rng = np.random.default_rng(0)
    parts = [rng.integers(0, k, 300) for k in (2, 3, 4, 5)]
    stored = [decode_partition(encode_partition(p)) for p in parts]
    chains = [(ar1(STEPS, 0.5, -5000.0 - 30.0 * (i % 2), 1.0, i), TIMES) for i in range(4)]
    found = diagnose(chains, partitions=stored)
    pairs = [vi(parts[i], parts[j]) for i in range(4) for j in range(i + 1, 4)]
    assert found.vi == pytest.approx(float(np.median(pairs)))
    assert math.isnan(diagnose(chains).vi)  # not recorded: not made up


def test_bad_input_is_refused_once_with_what_is_wrong():
    """A chain with a NaN log joint, or times of another length, or a partition of another
    encoding, is refused with a message that names the problem."""
    with pytest.raises(ValueError, match="finite"):
        chain_state(np.r_[np.zeros(30), np.nan], TIMES[:31])
    with pytest.raises(ValueError, match="one length"):
        chain_state(np.zeros(30), TIMES[:29])
    with pytest.raises(ValueError, match="final_partition"):
        decode_partition({"encoding": "csv", "data": "1,2"})


def test_chain_statistics_carries_the_diagnosis():
    """chain_statistics adds each group's outcome and its words, from the traces as given:
    a data set with one method settled in two modes and one stuck."""
    rows, runs = [], []
    for run in range(8):
        label = "moving" if run < 4 else "frozen"
        values = ar1(STEPS, 0.5, -800.0 - 40.0 * (run % 2), 1.0, run) if run < 4 else np.full(STEPS, -900.0)
        trace = pd.DataFrame({"run": run, "iteration": np.arange(STEPS + 1), "time_s": np.r_[0.0, TIMES],
                              "log_joint": np.r_[-5000.0, values], "n_clusters": 3})
        rows.append(trace)
        runs.append({"run": run, "dataset": "d", "label": label, "learned_alpha": False, "kind": "sampler"})
    stats = chain_stats.chain_statistics(pd.concat(rows), pd.DataFrame(runs), ["dataset", "label"])
    by = stats.set_index("label")
    assert by.loc["moving", "outcome"] == "modes" and by.loc["moving", "settled_chains"] == 4
    assert by.loc["moving", "plateau_spread"] == pytest.approx(40.0, abs=1.0)
    assert by.loc["frozen", "outcome"] == "stuck" and by.loc["frozen", "diagnosis"].startswith("stuck (4 of 4")
