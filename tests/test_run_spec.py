"""A run request is a value (workflows/driver.py RunSpec, algorithms/runner.py StopRule): its
stop rule is checked once, when it is built; it goes to JSON and back without losing anything;
the trace's metadata records it and the reports read the stop rule back from there, from older
traces too."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpmmbench.algorithms.runner import StopRule
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
