"""The one chain runner (``algorithms.runner``) and the one record of a run (``workflows.driver.RunSpec``).

Timing is checked with an injected clock that only the sampler advances (and, where it must
not count, the callback), never against the wall clock.
"""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from dpmmbench import algorithms
from dpmmbench.algorithms.families import NormalKnownCovariance
from dpmmbench.algorithms.runner import STOP_REASONS, ChainResult, run_sampler, warm_up
from dpmmbench.reports.metrics import n_clusters
from dpmmbench.workflows import driver
from dpmmbench.workflows.driver import RunSpec


def two_clusters(n=30, seed=0):
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(-3.0, 0.5, (n, 2)), rng.normal(3.0, 0.5, (n, 2))])
    return X, NormalKnownCovariance(sigma=0.5, mu0=[0.0, 0.0], sigma0=3.0)


class FakeClock:
    """Seconds that pass only when something advances them."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Costed:
    """A real sampler whose ``init`` and steps cost fixed seconds on a fake clock."""

    def __init__(self, sampler, clock, init_cost=0.5, step_cost=1.0):
        self.sampler, self.clock, self.init_cost, self.step_cost = sampler, clock, init_cost, step_cost
        self.calls = []

    def init(self, X, init_clusters=1, labels=None):
        self.calls.append("init")
        self.clock.now += self.init_cost
        return self.sampler.init(X, init_clusters=init_clusters, labels=labels)

    def step(self, state):
        self.calls.append("step")
        self.clock.now += self.step_cost
        return self.sampler.step(state)


def costed(name="gibbs", seed=0, **kwargs):
    X, fam = two_clusters()
    clock = FakeClock()
    return Costed(algorithms.make(name, family=fam, seed=seed), clock, **kwargs), X, clock


# ---- the three stop rules -----------------------------------------------------------------
def test_it_stops_after_the_iterations_and_calls_back_for_every_state():
    sampler, X, clock = costed()
    seen = []
    result = run_sampler(sampler, X, iterations=4, clock=clock,
                         callback=lambda it, state, seconds: seen.append((it, state.iteration, seconds)))
    assert isinstance(result, ChainResult) and result.stopped == "completed" and result.iterations == 4
    assert seen == [(0, 0, 0.5), (1, 1, 1.5), (2, 2, 2.5), (3, 3, 3.5), (4, 4, 4.5)]
    assert sampler.calls == ["init"] + ["step"] * 4
    assert (result.init_s, result.sampler_s) == (0.5, 4.5) and result.state.iteration == 4


def test_no_step_runs_for_zero_iterations():
    sampler, X, clock = costed()
    result = run_sampler(sampler, X, iterations=0, clock=clock)
    assert (result.stopped, result.iterations, sampler.calls) == ("completed", 0, ["init"])


def test_it_stops_at_the_first_step_past_the_time_budget():
    sampler, X, clock = costed()
    # init 0.5 s, then 1 s per step: 1.5, 2.5 (> 2.2, the last step) -> two steps
    result = run_sampler(sampler, X, iterations=100, time_budget=2.2, clock=clock)
    assert (result.stopped, result.iterations, result.sampler_s) == ("time budget", 2, 2.5)
    # an init that uses up the budget leaves no step
    sampler, X, clock = costed(init_cost=3.0)
    result = run_sampler(sampler, X, time_budget=2.2, clock=clock)
    assert (result.stopped, result.iterations, sampler.calls) == ("time budget", 0, ["init"])


def test_it_stops_at_the_first_state_that_reaches_the_target():
    """A real target: collapsed Gibbs from one cluster on two separated blobs finds both."""
    X, fam = two_clusters()
    ks = []
    result = run_sampler(algorithms.make("gibbs", family=fam, seed=0), X, iterations=50,
                         target=lambda state: n_clusters(state.labels) == 2,
                         callback=lambda it, state, seconds: ks.append(n_clusters(state.labels)))
    assert result.stopped == "target" and n_clusters(result.state.labels) == 2
    assert ks[-1] == 2 and 2 not in ks[:-1] and len(ks) == result.iterations + 1 < 51


def test_the_rules_are_checked_in_order_target_iterations_budget():
    assert STOP_REASONS == ("target", "completed", "time budget")
    sampler, X, clock = costed(init_cost=5.0)
    result = run_sampler(sampler, X, iterations=0, time_budget=1.0, target=lambda state: True, clock=clock)
    assert result.stopped == "target"
    sampler, X, clock = costed(init_cost=5.0)
    assert run_sampler(sampler, X, iterations=0, time_budget=1.0, clock=clock).stopped == "completed"


# ---- what is timed -----------------------------------------------------------------------
def test_the_callback_and_the_target_are_off_the_clock():
    sampler, X, clock = costed()

    def slow_scoring(iteration, state, seconds):
        clock.now += 100.0  # a callback that takes a long time

    def slow_target(state):
        clock.now += 10.0
        return False

    result = run_sampler(sampler, X, iterations=3, target=slow_target, callback=slow_scoring, clock=clock)
    assert (result.init_s, result.sampler_s) == (0.5, 3.5)  # the sampler's own seconds only
    assert clock.now == 3.5 + 4 * 110.0


def test_a_given_state_is_continued_without_init_on_the_clock():
    sampler, X, clock = costed()
    start = sampler.init(X)
    result = run_sampler(sampler, start=start, time_budget=1.5, clock=clock)
    assert (result.init_s, result.sampler_s, result.iterations) == (0.0, 2.0, 2)
    assert sampler.calls == ["init", "step", "step"] and result.stopped == "time budget"


# ---- determinism ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gibbs", "subc", "fsd"])
def test_seeded_chains_are_the_chain_of_init_and_step(name):
    X, fam = two_clusters()
    a = run_sampler(algorithms.make(name, family=fam, seed=7), X, iterations=6, init_clusters=3)
    b = run_sampler(algorithms.make(name, family=fam, seed=7), X, iterations=6, init_clusters=3)
    sampler = algorithms.make(name, family=fam, seed=7)
    state = sampler.init(X, init_clusters=3)
    for _ in range(6):
        state = sampler.step(state)
    np.testing.assert_array_equal(a.state.labels, b.state.labels)
    np.testing.assert_array_equal(a.state.labels, state.labels)


def test_warm_up_leaves_the_sampler_untouched():
    X, fam = two_clusters()
    sampler = algorithms.make("subc", family=fam, seed=3)
    before = pickle.dumps(sampler)
    assert warm_up(sampler, X) >= 0
    assert pickle.dumps(sampler) == before
    assert warm_up(sampler, np.full((5, 3), 1.0)) is None  # best effort: a bad warm-up is no error
    plain = run_sampler(algorithms.make("subc", family=fam, seed=3), X, iterations=5)
    warm = run_sampler(copy.deepcopy(sampler), X, iterations=5)
    np.testing.assert_array_equal(plain.state.labels, warm.state.labels)


# ---- bad parameters ------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, error, message", [
    ({"iterations": -1}, ValueError, "iterations must be >= 0, got -1"),
    ({"iterations": 2.5}, TypeError, "iterations must be an integer"),
    ({"iterations": 3, "time_budget": 0}, ValueError, "time_budget must be > 0"),
    ({"iterations": 3, "time_budget": float("nan")}, ValueError, "time_budget must be a finite number"),
    ({}, ValueError, "a chain needs a stop rule"),
    ({"iterations": 3, "callback": "print"}, TypeError, "callback must be callable"),
    ({"iterations": 3, "target": 0.99}, TypeError, "target must be callable"),
    ({"iterations": 3, "clock": None}, TypeError, "clock must be callable"),
])
def test_bad_parameters_are_refused_before_the_sampler_runs(kwargs, error, message):
    sampler, X, clock = costed()
    with pytest.raises(error, match=message):
        run_sampler(sampler, X, **kwargs)
    assert sampler.calls == []


def test_a_chain_starts_from_data_or_from_a_state():
    sampler, X, clock = costed()
    with pytest.raises(TypeError, match="give X .* or start"):
        run_sampler(sampler, iterations=1)
    with pytest.raises(TypeError, match="give X .* or start"):
        run_sampler(sampler, X, iterations=1, start=sampler.sampler.init(X))
    with pytest.raises(ValueError, match="init_clusters must be between 1 and N = 60"):
        run_sampler(sampler, X, iterations=1, init_clusters=61)


# ---- the record of a run -------------------------------------------------------------------
def test_a_run_spec_holds_checked_values_and_the_declared_defaults():
    spec = RunSpec("gibbs", "synth-chang2013?n=50", 3.0, alpha_prior=[2, 1], options=None, data_file=None)
    assert spec.iterations == 3 and type(spec.iterations) is int
    assert spec.alpha_prior == (2.0, 1.0) and spec.options == {} and spec.warmup is True
    assert (spec.seed, spec.workers, spec.threads, spec.heldout_draws, spec.test_fraction) == (0, 1, 1, 10, 0.1)
    with pytest.raises(AttributeError):
        spec.iterations = 5  # frozen
    options = {"truncation": 20}
    spec = RunSpec("fsd", "synth-chang2013?n=50", 3, options=options)
    options["truncation"] = 5
    assert spec.options == {"truncation": 20}  # a copy
    assert pickle.loads(pickle.dumps(spec)) == spec  # it travels to a Dask worker
    with pytest.raises(TypeError):
        RunSpec("gibbs", "synth-chang2013?n=50", 3, 0)  # only the three leading fields are positional


@pytest.mark.parametrize("kwargs, error, message", [
    ({"iterations": -2}, ValueError, "iterations must be >= 0"),
    ({"seed": -1}, ValueError, "seed must be"),
    ({"workers": 0}, ValueError, "workers must be >= 1"),
    ({"threads": 1.5}, TypeError, "threads must be an integer"),
    ({"time_budget": -1.0}, ValueError, "time_budget must be > 0"),
    ({"alpha": 0.0}, ValueError, "alpha must be > 0"),
    ({"alpha_prior": (1.0,)}, TypeError, "alpha_prior must be a pair"),
    ({"init_clusters": 0}, ValueError, "init_clusters must be >= 1"),
    ({"test_fraction": 0.9}, ValueError, "test_fraction must be in"),
    ({"split_seed": "0"}, TypeError, "split_seed must be an integer"),
    ({"heldout_draws": 0}, ValueError, "heldout_draws must be >= 1"),
    ({"algorithm": ""}, ValueError, "algorithm must be a non-empty string"),
    ({"dataset": None}, ValueError, "dataset must be a non-empty string"),
    ({"name": " "}, ValueError, "name must be a non-empty string"),
    ({"options": [("truncation", 3)]}, TypeError, "options must be a dict"),
    ({"data_file": 3}, TypeError, "data_file must be a path"),
    ({"warmup": "no"}, TypeError, "warmup must be True or False"),
])
def test_a_bad_run_spec_names_the_parameter(kwargs, error, message):
    given = {"algorithm": "gibbs", "dataset": "synth-chang2013?n=50", "iterations": 3, **kwargs}
    with pytest.raises(error, match=message):
        RunSpec(**given)


def test_run_takes_a_run_spec():
    with pytest.raises(TypeError, match="run takes a RunSpec, got str"):
        driver.run("gibbs")


def test_warm_up_compiles_what_a_threaded_samplers_timed_steps_take(monkeypatch):
    """A threaded sampler's warm-up runs on a second head of ``THREADED_WARMUP_POINTS`` rows (its
    kernels' parallel variants start at ``PARALLEL_MIN_WORK`` rows x components, which the
    200-point head never reaches), or on all the rows where there are fewer; a serial sampler's
    only on the 200. After it, the parallel fused pass of ``subc`` is compiled in this process."""
    from dpmmbench.algorithms import runner
    from dpmmbench.algorithms._numerics import PARALLEL_MIN_WORK
    from dpmmbench.algorithms.families import niw
    from dpmmbench.datasets import load

    assert runner.THREADED_WARMUP_POINTS >= PARALLEL_MIN_WORK
    heads, real = [], runner.run_sampler
    monkeypatch.setattr(runner, "run_sampler", lambda s, X, **kw: heads.append((s.name, len(X))) or real(s, X, **kw))
    big, small = load("synth-chang2013?n=50000"), load("synth-chang2013?n=1000")
    for name, data, expected in (("subc", big, [200, runner.THREADED_WARMUP_POINTS]), ("fsd", small, [200, 1000]),
                                 ("gibbs", big, [200])):
        heads.clear()
        assert warm_up(algorithms.make(name, family=data.family, seed=0), data.X) is not None
        assert heads == [(name, n) for n in expected]
    assert niw._NATURAL_SUBCLUSTER_DRAW[1].signatures  # the parallel variant, loaded or compiled
