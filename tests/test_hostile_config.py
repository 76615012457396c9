"""Hostile run parameters, workflow configs and dataset specs: each ends in a clear error
naming the culprit (before any job runs, for a workflow config) or in a bounded run, never in
a crash, a hang or exhausted memory. Untrusted cases run in a child interpreter under a memory
limit (tests/hostile_config.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from dpmmbench import algorithms
from dpmmbench.algorithms.families import NormalKnownCovariance
from dpmmbench.algorithms.slice_mr import break_sticks

HUGE_ALPHAS = [1e6, 1e9, 1e12]


# ---- samplers with a huge concentration ----------------------------------------------------

@pytest.mark.parametrize("alpha", HUGE_ALPHAS)
def test_slice_mr_with_a_huge_alpha_stops_with_an_error_naming_the_cap(isolated, alpha):
    """The stick-breaking needs about alpha log(w_*/u*) new components: past the cap the
    iteration raises (a truncation would change the stationary distribution), in bounded
    time and memory."""
    out = isolated.run("hostile_config:run_sampler", "slice-mr", alpha)
    assert out.clear_error, out
    assert "max_new_components=10000" in out.message and f"alpha={alpha:g}" in out.message
    assert "lower alpha" in out.message


def test_slice_mr_cap_is_an_option_with_a_declared_constraint(isolated):
    out = isolated.run("hostile_config:run_sampler", "slice-mr", 50.0, max_new_components=5)
    assert out.clear_error and "max_new_components=5 " in out.message, out
    with pytest.raises(ValueError, match="max_new_components"):
        algorithms.make("slice-mr", family=NormalKnownCovariance(1.0, [0.0], 1.0), max_new_components=0)
    out = isolated.run("hostile_config:run_sampler", "slice-mr", 2.0, max_new_components=10 ** 6)
    assert out.kind == "returned", out


def test_break_sticks_under_its_limit_draws_exactly_what_it_draws_without_one():
    """A run that never reaches the cap is the uncapped chain, draw for draw (so slice-mr
    stays exact); at the cap it raises instead of truncating."""
    reached = 0
    for seed in range(300):
        alpha = 10.0 ** (seed % 4 - 1)
        log_u_star = math.log(10.0 ** -(1 + seed % 5))
        free = break_sticks(math.log(0.5), log_u_star, alpha, np.random.default_rng(seed))
        rng = np.random.default_rng(seed)
        if len(free) <= 20:
            assert break_sticks(math.log(0.5), log_u_star, alpha, rng, limit=20) == free
            assert rng.bit_generator.state == _after(seed, len(free))
        else:
            reached += 1
            with pytest.raises(ValueError, match="max_new_components=20 "):
                break_sticks(math.log(0.5), log_u_star, alpha, rng, limit=20)
    assert reached > 10


def _after(seed, draws):
    rng = np.random.default_rng(seed)
    rng.random(draws)
    return rng.bit_generator.state


@pytest.mark.parametrize("name", ["fsd", "auxvar", "subc", "cons-pooled", "cons-async", "gibbs-supercluster"])
def test_samplers_that_instantiate_components_stay_bounded_with_a_huge_alpha(isolated, name):
    """fsd has its truncation; the others instantiate at most one component per point."""
    for alpha in HUGE_ALPHAS:
        out = isolated.run("hostile_config:run_sampler", name, alpha)
        assert out.kind == "returned", out
        assert out.value["n_clusters"] <= 300
