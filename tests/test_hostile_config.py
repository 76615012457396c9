"""Hostile run parameters, workflow configs and dataset specs: each ends in a clear error
naming the culprit (before any job runs, for a workflow config) or in a bounded run, never in
a crash, a hang or exhausted memory. Untrusted cases run in a child interpreter under a memory
limit (tests/hostile_config.py)."""
from __future__ import annotations

import copy
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from dpmmbench import algorithms
from dpmmbench.algorithms.constraints import check_parameter
from dpmmbench.algorithms.families import NormalKnownCovariance
from dpmmbench.algorithms.slice_mr import break_sticks
from dpmmbench.datasets.split import heldout_count
from dpmmbench.workflows._config import check_values

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


# ---- workflow configs ----------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "workflows" / "config" / "smoke.yaml"
SCHEMA = ROOT / "workflows" / "schemas" / "config.schema.yaml"
SAFE_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
NAN, INF = float("nan"), float("inf")

#: (edit of the smoke config, what the error message must name)
BAD_CONFIGS = [
    ({"alpha": NAN}, "'alpha'"),
    ({"alpha": INF}, "'alpha'"),
    ({"alpha": -INF}, "'alpha'"),
    ({"time_budget": NAN}, "'time_budget'"),
    ({"time_budget": INF}, "'time_budget'"),
    ({"iterations": 10.0}, "'iterations'"),
    ({"iterations": 2.5}, "'iterations'"),
    ({"init_clusters": 301}, "'init_clusters'"),  # the smoke config's chang2013-tiny has 300 points
    ({"seeds": [0, 3.0]}, "seeds[1]"),
    ({"variants": {"v": {"algorithm": "gibbs", "time_budget": NAN}}}, "variants: v: time_budget"),
    ({"variants": {"v": {"algorithm": "gibbs", "iterations": 4.0}}}, "variants: v: iterations"),
    ({"variants": {"v": {"algorithm": "gibbs", "seeds": [0, 3.0]}}}, "variants: v: seeds[1]"),
    ({"dask": {"threads": 2.0}}, "dask: threads"),
    ({"datasets": {"..": "synth-chang2013?n=50"}}, "'..'"),
    ({"datasets": {".": "synth-chang2013?n=50"}}, "'.'"),
    ({"datasets": {"a/b": "synth-chang2013?n=50"}}, "'a/b'"),
    ({"datasets": {"../x": "synth-chang2013?n=50"}}, "'../x'"),
    ({"datasets": {".hidden": "synth-chang2013?n=50"}}, "'.hidden'"),
    ({"datasets": {"x": "synth-chang2013?n=-5"}}, "parameter 'n'"),
    ({"datasets": {"x": "synth-chang2013?n=1e99"}}, "parameter 'n'"),
    ({"datasets": {"x": "synth-chang2013?n=99999999999999999999"}}, "parameter 'n'"),
    ({"datasets": {"x": "synth-multinomial?n=1000000&vocab=100000"}}, "n x vocab"),
    ({"datasets": {"x": "synth-chang2013?colour=red"}}, "unknown parameter 'colour'"),
    ({"alpha_prior": [NAN, 1.0]}, "'alpha_prior'"),
    ({"alpha_prior": [1.0, INF]}, "'alpha_prior'"),
    ({"alpha_prior": [1.0, 2.0, 3.0]}, "alpha_prior"),
    ({"alpha_prior": "1 1"}, "alpha_prior"),
    ({"variants": {"v": {"algorithm": "gibbs", "alpha_prior": [NAN, 1.0]}}}, "variants: v: alpha_prior"),
    ({"variants": {"v": {"algorithm": "gibbs", "alpha": NAN}}}, "variants: v: alpha"),
    ({"test_fraction": NAN}, "'test_fraction'"),
    ({"test_fraction": 0.6}, "test_fraction"),
    ({"split_seed": 1.0}, "'split_seed'"),
    ({"heldout_draws": 2.0}, "'heldout_draws'"),
    ({"test_fraction": 0.5, "init_clusters": 151}, "'init_clusters'"),  # chang2013-tiny trains on 150 points
    ({"variants": {"v": {"algorithm": "gibbs", "init_clusters": 2.0}}}, "variants: v: init_clusters"),
    ({"variants": {"v": {"algorithm": "gibbs", "init_clusters": 301}}}, "'variants: v: init_clusters'"),
    ({"reproduces": "chang2031"}, "unknown paper 'chang2031'"),
]


def smoke_config(edit: dict) -> dict:
    config = yaml.safe_load(SMOKE.read_text())
    config.update(copy.deepcopy(edit))
    return config


def check_config(config: dict) -> None:
    """What the workflow does before any job: the schema (shape, keys), then the values."""
    validate(config, str(SCHEMA))
    check_values(config)


@pytest.mark.parametrize("edit, named", BAD_CONFIGS, ids=[str(e) for e, _ in BAD_CONFIGS])
def test_bad_config_value_is_refused_naming_the_key(edit, named):
    with pytest.raises((WorkflowError, ValueError, TypeError)) as info:
        check_config(smoke_config(edit))
    assert named in str(info.value)


@pytest.mark.slow
@pytest.mark.parametrize("edit, named", BAD_CONFIGS, ids=[str(e) for e, _ in BAD_CONFIGS])
def test_bad_config_value_stops_a_dry_run_before_any_job(tmp_path, edit, named):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(smoke_config(edit)))
    res = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory",
                          str(tmp_path), "--cores", "1", "-n", "--configfile", str(path)],
                         capture_output=True, text=True, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and named in out, out[-2000:]
    assert "run_chain" not in out  # no job planned
    assert not (tmp_path / "results").exists() and not (tmp_path.parent / "x").exists()


@pytest.mark.parametrize("case", [0, 7, 12], ids=["alpha-nan", "init_clusters", "dotdot-key"])
def test_a_real_dry_run_refuses_a_bad_config(tmp_path, case):
    """The end-to-end path of three of the cases above (all of them run with the slow tests)."""
    test_bad_config_value_stops_a_dry_run_before_any_job(tmp_path, *BAD_CONFIGS[case])


_SCALAR = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10 ** 20, 10 ** 20),
                    st.integers(0, 400), st.floats(0, 1), st.booleans(), st.none(), st.text(max_size=4))
ANY_VALUE = st.one_of(_SCALAR, st.lists(_SCALAR, max_size=3))  # lists: alpha_prior's [shape, rate]
RUN_KEYS = {"alpha": "alpha", "time_budget": "time_budget", "iterations": "iterations", "init_clusters": "init_clusters",
            "alpha_prior": "alpha_prior", "test_fraction": "test_fraction", "split_seed": "split_seed",
            "heldout_draws": "heldout_draws"}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.dictionaries(st.sampled_from(sorted(RUN_KEYS)), ANY_VALUE, min_size=1),
       seeds=st.one_of(st.none(), st.lists(ANY_VALUE, min_size=1, max_size=3)),
       key=st.one_of(st.none(), st.text(max_size=6), st.sampled_from([".", "..", "a/b", "x.y", "_a", "-a", "a-1"])))
def test_random_config_values_are_valid_runs_or_named_errors(values, seeds, key):
    edit = dict(values)
    if seeds is not None:
        edit["seeds"] = seeds
    if key is not None:
        edit["datasets"] = {key: "synth-chang2013?n=50"}
    config = smoke_config(edit)
    try:
        check_config(config)
    except (WorkflowError, ValueError, TypeError) as exc:
        message = str(exc)
        assert any(name in message for name in [*values, "seeds", "datasets"]), message
        return
    # accepted: every value is a valid run parameter, written as its type, and the key is safe
    for name, value in values.items():
        if name == "alpha_prior" and value is not None:
            assert check_parameter(name, value) == tuple(value) and bool not in map(type, value)
            continue
        assert check_parameter(name, value) == value and type(value) is not bool
        if name in ("iterations", "init_clusters", "split_seed", "heldout_draws"):
            assert type(value) is int
    assert all(type(s) is int and check_parameter("seed", s) == s for s in config["seeds"])
    if key is not None:
        assert SAFE_KEY.fullmatch(key) and "/" not in key and key not in (".", "..")
    smallest = 50 if key is not None else 60  # the smallest dataset, of which the chains see the training part
    assert config.get("init_clusters", 1) <= smallest - heldout_count(smallest, config.get("test_fraction", 0.1))


# ---- dataset specs -------------------------------------------------------------------------

SYNTH = {"synth-chang2013": ["n", "n_clusters", "seed"], "synth-wang2017": ["n_clusters", "scale", "seed"],
         "synth-multinomial": ["n", "vocab", "n_clusters", "doc_length", "gamma", "seed"]}
SPEC_VALUE = st.one_of(
    st.integers(-10, 300).map(str),
    st.integers(-10 ** 30, 10 ** 30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["1e99", "nan", "inf", "-0", "0x10", "1_000", "", " 5", "5 ", "1e-320", "0.5", "1.0"]),
    st.text(max_size=5),
)


@st.composite
def dataset_specs(draw):
    base = draw(st.sampled_from([*SYNTH, "digits", "nope", ""]))
    names = SYNTH.get(base, ["pca"]) + ["bogus", ""]
    items = draw(st.lists(st.tuples(st.sampled_from(names), SPEC_VALUE), max_size=3))
    query = "&".join(f"{k}={v}" for k, v in items)
    return base + ("?" + query if query or draw(st.booleans()) else "")


@settings(max_examples=80, deadline=None)
@given(spec=dataset_specs())
def test_random_dataset_specs_give_a_clear_error_or_a_valid_dataset(isolated, spec):
    out = isolated.run("hostile_config:parse_or_load", spec)
    assert out.kind == "returned" or out.clear_error, out
    if out.kind == "returned":
        assert out.value["n"] >= 1


@pytest.mark.parametrize("spec", ["synth-chang2013?n=99999999999999", "synth-chang2013?n=1e99",
                                  "synth-chang2013?n=-5", "synth-chang2013?n_clusters=100000000",
                                  "synth-wang2017?n_clusters=1000000000", "synth-multinomial?n=1000000&vocab=100000",
                                  "synth-multinomial?n_clusters=10000&vocab=100000",
                                  "synth-multinomial?doc_length=10000000000", "synth-chang2013?n=" + "9" * 5000])
def test_absurd_dataset_sizes_are_refused_before_anything_is_allocated(isolated, spec):
    out = isolated.run("hostile_config:parse_or_load", spec)
    assert out.clear_error, out
