"""A run request is a value (workflows/driver.py RunSpec, algorithms/runner.py StopRule): its
stop rule is checked once, when it is built; it goes to JSON and back without losing anything;
the trace's metadata records it and the reports read the stop rule back from there, from older
traces too."""
from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpmmbench.algorithms.runner import StopRule
from dpmmbench.workflows import driver
from dpmmbench.workflows.driver import RunSpec

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20).filter(str.strip)
FINITE = st.floats(allow_nan=False, allow_infinity=False)
#: option values as a config or the command line give them (JSON's own types)
OPTION = st.one_of(st.integers(-10**6, 10**6), FINITE, TEXT, st.booleans())
SEED = st.integers(0, 2**63 - 1)


@st.composite
def run_specs(draw):
    return RunSpec(
        draw(TEXT), draw(TEXT), draw(st.integers(0, 10**9)),
        seed=draw(SEED), workers=draw(st.integers(1, 64)), threads=draw(st.integers(1, 64)),
        scheduler=draw(st.none() | st.just("tcp://127.0.0.1:8786")),
        time_budget=draw(st.none() | st.floats(1e-9, 1e9)),
        alpha=draw(st.floats(1e-6, 1e6)),
        alpha_prior=draw(st.none() | st.tuples(st.floats(1e-3, 1e3), st.floats(1e-3, 1e3))),
        init_clusters=draw(st.integers(1, 10**6)),
        options=draw(st.dictionaries(TEXT, OPTION, max_size=4)),
        name=draw(st.none() | TEXT), data_file=draw(st.none() | TEXT),
        test_fraction=draw(st.floats(0, 0.5)), split_seed=draw(SEED),
        heldout_draws=draw(st.integers(1, 1000)), warmup=draw(st.booleans()))


@settings(max_examples=200, deadline=None)
@given(run_specs())
def test_a_run_spec_goes_to_json_and_back_without_loss(spec):
    back = RunSpec.from_json(spec.to_json())
    assert back == spec and back.options == spec.options and back.stop == spec.stop
    assert back.to_json() == spec.to_json()
    assert all(type(getattr(back, key)) is type(getattr(spec, key)) for key in spec.to_dict() if key != "stop")


def test_the_stop_rule_is_one_checked_value():
    spec = RunSpec("gibbs", "synth-chang2013?n=50", 40, time_budget=3)
    assert spec.stop == StopRule(iterations=40, seconds=3.0) and spec.time_budget == 3.0
    assert spec.to_dict()["stop"] == {"iterations": 40, "seconds": 3.0}
    with pytest.raises(ValueError, match="time_budget must be > 0"):
        StopRule(seconds=0)
    with pytest.raises(ValueError, match="iterations must be >= 0"):
        StopRule(iterations=-1)
    with pytest.raises(TypeError, match="target must be callable"):
        StopRule(target=3)
    with pytest.raises(TypeError, match="cannot be written as JSON"):
        StopRule(5, target=lambda state: True).to_dict()


@pytest.mark.parametrize("bad, error, words", [
    ('[1, 2]', TypeError, "a JSON object"),
    ('{"algorithm": "gibbs", "dataset": "d"}', TypeError, "stop must be a mapping"),
    ('{"algorithm": "gibbs", "dataset": "d", "stop": {"iterations": 3, "minutes": 1}}', ValueError, "minutes"),
    ('{"algorithm": "gibbs", "dataset": "d", "stop": {"iterations": 3}, "colour": 1}', TypeError, "colour"),
    ('{"algorithm": "gibbs", "dataset": "d", "stop": {"iterations": 3, "seconds": -1}}', ValueError,
     "time_budget must be > 0"),
])
def test_a_bad_spec_in_json_names_the_problem(bad, error, words):
    with pytest.raises(error, match=words):
        RunSpec.from_json(bad)


def test_the_reports_read_the_stop_rule_from_new_and_older_metadata():
    spec = RunSpec("gibbs", "synth-chang2013?n=50", 40, time_budget=3)
    assert StopRule.from_meta({"spec": spec.to_dict()}) == spec.stop
    assert StopRule.from_meta({"time_budget": 3, "iterations_requested": 40}) == spec.stop  # before the spec
    assert StopRule.from_meta({}) == StopRule() and StopRule().describe() == "not recorded"


# ---- behaviour unchanged -------------------------------------------------------------------
#: runs on synth-chang2013?n=300, 6 steps: (algorithm, seed, workers, options)
BEFORE_RUNS = [("gibbs", 3, 1, {}), ("subc", 1, 2, {}), ("fsd", 0, 1, {"truncation": 20})]
#: what those runs gave before the run request became a value (commit 331a88e, the same
#: driver.run calls): states' cluster counts, log joints and held-out scores to 10 digits,
#: and the final partitions
BEFORE = {'gibbs-w1-seed3': {'n_clusters': [1, 2, 4, 5, 5, 5, 5],
                             'log_joint': ['-1974.840307',
                                           '-1978.533678',
                                           '-1936.423492',
                                           '-1923.481908',
                                           '-1866.167574',
                                           '-1870.481437',
                                           '-1883.561887'],
                             'heldout_lpd': '-6.458092621',
                             'final_partition': {'encoding': 'zlib-base64-uint32-first-appearance',
                                                 'n': 270,
                                                 'data': 'eJyNklEOgDAIQ2Fy/zMboyTNs0z7AxsUOljEjYRd4h/PWdHxKUYsuXecCwV+mhzHUy45ib4Bn/Uq3tjpmXqpnTRPKNgLqpe7ap/7KvRXP+P7PX91qi6dgWpP5C7Ev9D8fpPjMta8klzutzmcpdbX3lqPuWH6O+z+Rp/dP+z7Kebqs9bEdTPlXnS3J843AN8='}},
          'subc-w2-seed1': {'n_clusters': [1, 1, 1, 1, 1, 1, 1],
                            'log_joint': ['-1974.840307',
                                          '-1974.840307',
                                          '-1974.840307',
                                          '-1974.840307',
                                          '-1974.840307',
                                          '-1974.840307',
                                          '-1974.840307'],
                            'heldout_lpd': '-7.18326605',
                            'final_partition': {'encoding': 'zlib-base64-uint32-first-appearance',
                                                'n': 270,
                                                'data': 'eJxjYBgFo2AUjALSAAAEOAAB'}},
          'fsd-w1-seed0': {'n_clusters': [1, 3, 2, 3, 4, 4, 4],
                           'log_joint': ['-1974.840307',
                                         '-1989.261089',
                                         '-1983.946516',
                                         '-1989.370761',
                                         '-1999.460718',
                                         '-2009.735835',
                                         '-1994.298374'],
                           'heldout_lpd': '-7.14359439',
                           'final_partition': {'encoding': 'zlib-base64-uint32-first-appearance',
                                               'n': 270,
                                               'data': 'eJxjYEAFjEhsJoaBBYxkylHbLhigZ3gw45HD5lZSw4MWfqF2nFATkOI2Uv0xmP1NTYCcZgA3vAAW'}}}


@pytest.mark.slow
@pytest.mark.parametrize("algorithm, seed, workers, options", BEFORE_RUNS)
def test_the_same_seeds_give_the_traces_of_before(scheduler, algorithm, seed, workers, options):
    spec = RunSpec(algorithm, "synth-chang2013?n=300", 6, seed=seed, workers=workers, options=options,
                   scheduler=None if workers > 1 else scheduler)
    trace, meta = driver.run(spec)
    before = BEFORE[f"{algorithm}-w{workers}-seed{seed}"]
    assert [int(k) for k in trace["n_clusters"]] == before["n_clusters"]
    assert [f"{v:.10g}" for v in trace["log_joint"]] == before["log_joint"]
    assert f"{meta['heldout_lpd']:.10g}" == before["heldout_lpd"]
    assert meta["final_partition"] == before["final_partition"]


# ---- a cancelled run -----------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("algorithm, workers", [("gibbs", 1), ("subc", 2)])
def test_a_cancelled_run_stops_at_its_next_step_with_its_rows(algorithm, workers):
    """Cancelled through the chain's callback, a chain in a worker (gibbs) or here (subc's
    master loop) stops within seconds, and the run returns its rows so far, status cancelled."""
    began = {}

    def cancelled():
        began.setdefault("t", time.monotonic())  # asked first once the chain has started
        return time.monotonic() - began["t"] > 2.0

    spec = RunSpec(algorithm, "synth-chang2013?n=2000", 10**6, seed=1, workers=workers, time_budget=600)
    trace, meta = driver.run(spec, cancelled=cancelled)
    assert meta["status"] == "cancelled" and meta["heldout_lpd"] is None
    assert len(trace) > 1 and list(trace["iteration"]) == list(range(len(trace)))
    assert meta["iterations"] == len(trace) - 1 < 10**6
    assert time.monotonic() - began["t"] < 2.0 + driver.CANCEL_POLL * 2 + 10  # the next step, not the budget
