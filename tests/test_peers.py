"""Peers (docs/design.md "Peers"): other libraries' methods behind the sampler contract, run
through the driver and scored by the suite's own scorer, their settings in the run metadata."""
import json

import numpy as np
import pytest

from dpmmbench import algorithms
from dpmmbench.algorithms.families import DirichletMultinomial, NormalInverseWishart, NormalKnownCovariance
from dpmmbench.reports.metrics import log_joint, vi
from dpmmbench.workflows import driver

NIW = NormalInverseWishart(np.zeros(2), 1.0, 4.0, np.eye(2))


def four_blobs(n=150, seed=0):
    """Four well-separated 2-D Gaussian blobs and their labels."""
    rng = np.random.default_rng(seed)
    centres = np.array([[-4.0, -4.0], [4.0, 4.0], [-4.0, 4.0], [4.0, -4.0]])
    X = np.concatenate([rng.normal(c, 0.5, size=(n, 2)) for c in centres])
    return X, np.repeat(np.arange(4), n)


def test_peers_are_external_and_not_exact():
    assert "sklearn-bgm" in algorithms.available()
    for name in algorithms.available():
        cls = algorithms.get(name)
        assert cls.external == name.startswith(("sklearn-", "bnpy-", "dpgmm", "bmcc"))
        if cls.external:
            assert not cls.exact


def _choices():
    """(peer, option, value) for every value of every option of an installed peer that declares
    its values (a fixed set): each is a setting a user can pick, so each must run."""
    from dpmmbench.algorithms.constraints import OneOf

    return [(name, option, value) for name in algorithms.available() if algorithms.get(name).external
            for option, spec in algorithms.get(name).options.items() if isinstance(spec.constraint, OneOf)
            for value in spec.constraint.values]


@pytest.mark.parametrize("name, option, value", _choices())
def test_every_declared_choice_of_a_peer_runs(name, option, value):
    """A value an adapter offers is one its library accepts (bnpy once offered an initialisation
    its Gaussian model rejects)."""
    X, truth = four_blobs(n=20)
    s = algorithms.make(name, family=NIW, seed=0, **{option: value})
    state = s.step(s.init(X))
    assert len(state.labels) == len(X) and state.labels.min() == 0
    assert s.settings()["initialisation"]


def test_missing_optional_peers_say_how_to_get_them():
    missing = algorithms.missing()
    assert not set(missing) & set(algorithms.available())
    for name, hint in missing.items():
        assert "pip install" in hint
        with pytest.raises(ValueError, match=f"{name}.*not installed.*pip install"):
            algorithms.get(name)


def test_sklearn_bgm_recovers_separated_blobs_and_reports_its_objective():
    X, truth = four_blobs()
    s = algorithms.make("sklearn-bgm", family=NIW, alpha=1.0, seed=0)
    state = s.init(X, init_clusters=1)
    objectives = [state.info["peer_objective"]]
    for _ in range(30):
        state = s.step(state)
        objectives.append(state.info["peer_objective"])
    assert state.iteration == 30 and state.alpha == 1.0
    assert state.info["n_clusters"] == 4 and vi(state.labels, truth) < 1e-9
    assert state.info["peer_converged"]
    # coordinate ascent: the lower bound never decreases (up to rounding)
    assert np.all(np.diff(objectives) > -1e-6 * np.abs(objectives[1:]))
    assert np.isfinite(log_joint(X, state.labels, NIW, 1.0))


def test_sklearn_bgm_is_deterministic_from_the_seed():
    X, _ = four_blobs(n=40)

    def chain(seed):
        s = algorithms.make("sklearn-bgm", family=NIW, seed=seed, init_params="random", n_components=8)
        state = s.init(X)
        out = [state.labels.copy()]
        for _ in range(3):
            out.append(s.step(state).labels.copy())
        return np.array(out), state.info["peer_objective"]

    (a, fa), (b, fb), (c, _) = chain(3), chain(3), chain(4)
    np.testing.assert_array_equal(a, b)
    assert fa == fb
    assert not np.array_equal(a, c)


def test_sklearn_bgm_settings_and_the_family_priors():
    s = algorithms.make("sklearn-bgm", family=NIW, alpha=2.5, n_components=7, tol=1e-4)
    settings = s.settings()
    assert settings["weight_concentration_prior"] == 2.5 and settings["n_components"] == 7
    assert settings["tol"] == 1e-4 and settings["covariance_type"] == "full"
    assert "init_clusters is not used" in settings["initialisation"]
    assert "scikit-learn defaults" in settings["gaussian_priors"]
    json.dumps(settings)
    mapped = algorithms.make("sklearn-bgm", family=NIW, priors="family").settings()["gaussian_priors"]
    assert mapped == {"mean_prior": [0.0, 0.0], "mean_precision_prior": 1.0, "degrees_of_freedom_prior": 4.0,
                      "covariance_prior": [[1.0, 0.0], [0.0, 1.0]]}
    X, truth = four_blobs(n=60)
    state = algorithms.make("sklearn-bgm", family=NIW, priors="family", seed=1).init(X)
    assert state.model.mean_precision_prior_ == 1.0 and state.model.degrees_of_freedom_prior_ == 4.0


def test_sklearn_bgm_refuses_what_it_cannot_honour():
    with pytest.raises(ValueError, match="'sklearn-bgm' fits only the families NormalInverseWishart, "
                                         "NormalKnownCovariance; got DirichletMultinomial"):
        algorithms.make("sklearn-bgm", family=DirichletMultinomial(0.5, 3))
    with pytest.raises(ValueError, match="cannot learn alpha.*alpha_prior must be None"):
        algorithms.make("sklearn-bgm", family=NIW, alpha_prior=(1.0, 1.0))
    with pytest.raises(ValueError, match="priors='family' needs the NormalInverseWishart"):
        algorithms.make("sklearn-bgm", family=NormalKnownCovariance(1.0, [0.0, 0.0], 1.0), priors="family")
    with pytest.raises(ValueError, match="init_params' must be one of"):
        algorithms.make("sklearn-bgm", family=NIW, init_params="spectral")
    with pytest.raises(ValueError, match="n_components"):
        algorithms.make("sklearn-bgm", family=NIW, n_components=0)
    s = algorithms.make("sklearn-bgm", family=NIW)
    with pytest.raises(ValueError, match="'kmeans'.*cannot start from given labels"):
        s.init(np.zeros((4, 2)), labels=[0, 0, 1, 1])
    with pytest.raises(ValueError, match="at least 2 points"):
        s.init(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="NaN"):
        s.init(np.array([[0.0, np.nan], [1.0, 1.0]]))
    with pytest.raises(ValueError, match="2-D"):
        s.init(np.zeros(4))


def test_sklearn_bgm_caps_its_truncation_at_the_number_of_points():
    X, _ = four_blobs(n=2)
    state = algorithms.make("sklearn-bgm", family=NIW, n_components=20).init(X)
    assert state.model.n_components == 8 and state.labels.max() < 8


def test_sklearn_bgm_through_the_driver_records_its_settings(scheduler):
    trace, meta = driver.run(driver.RunSpec("sklearn-bgm", "synth-chang2013?n=400", 4, seed=2, scheduler=scheduler,
                                            options={"n_components": 12}))
    assert meta["external"] and not meta["exact"]
    assert meta["peer_settings"]["n_components"] == 12 and meta["peer_settings"]["weight_concentration_prior"] == 1.0
    assert list(trace["iteration"]) == [0, 1, 2, 3, 4]
    assert trace["peer_objective"].notna().all() and trace["log_joint"].map(np.isfinite).all()
    assert set(trace["peer_converged"]) <= {0, 1}
    assert meta["heldout_lpd"] is not None and np.isfinite(meta["heldout_lpd"])
    json.dumps(meta, default=str)


# ---- bnpy-memovb (the peers extra; .ci/run installs it) -----------------------------------
def needs(name):
    """Skip a test of the optional peer ``name`` where its library is missing (CI installs them all)."""
    return pytest.mark.skipif(name not in algorithms.available(),
                              reason=f"{name} is not installed: " + algorithms.missing().get(name, ""))


needs_bnpy = needs("bnpy-memovb")


@needs_bnpy
def test_bnpy_memovb_recovers_separated_blobs_one_lap_per_step():
    import gc

    import logging

    X, truth = four_blobs(n=150)
    s = algorithms.make("bnpy-memovb", family=NIW, alpha=1.0, seed=0)
    handlers = list(logging.getLogger().handlers)
    state = s.init(X, init_clusters=1)
    assert logging.getLogger().handlers == handlers  # bnpy empties them; the adapter puts them back
    assert state.info["peer_laps"] == 0.0
    for lap in range(1, 31):
        state = s.step(state)
        if state.info["peer_converged"]:
            break
        assert state.info["peer_laps"] == lap
    assert state.info["n_clusters"] == 4 and vi(state.labels, truth) < 1e-9
    assert np.isfinite(state.info["peer_objective"])
    # a chain that ends while bnpy is still paused lets its thread go
    fit = algorithms.make("bnpy-memovb", family=NIW, seed=1).init(X).fit
    gc.collect()
    fit._thread.join(timeout=10)
    assert not fit._thread.is_alive()


@needs_bnpy
def test_bnpy_memovb_is_deterministic_from_the_seed_and_records_its_settings():
    X, _ = four_blobs(n=40)

    def chain(seed):
        s = algorithms.make("bnpy-memovb", family=NIW, seed=seed, K=3)
        state = s.init(X)
        out = [state.labels.copy()]
        for _ in range(3):
            out.append(s.step(state).labels.copy())
        return np.array(out)

    np.testing.assert_array_equal(chain(5), chain(5))
    settings = algorithms.make("bnpy-memovb", family=NIW, alpha=0.5, K=3).settings()
    assert settings["gamma0"] == 0.5 and settings["initial_K"] == 3 and settings["library"].startswith("bnpy ")
    assert "birth" in settings["moves"] and "init_clusters is not used" in settings["initialisation"]
    json.dumps(settings)
    with pytest.raises(ValueError, match="fits only the families"):
        algorithms.make("bnpy-memovb", family=DirichletMultinomial(0.5, 3))
    with pytest.raises(ValueError, match="cannot learn alpha"):
        algorithms.make("bnpy-memovb", family=NIW, alpha_prior=(1.0, 1.0))


@needs_bnpy
def test_bnpy_memovb_through_the_driver(scheduler):
    trace, meta = driver.run(driver.RunSpec("bnpy-memovb", "synth-chang2013?n=400", 3, seed=0, scheduler=scheduler))
    assert meta["external"] and meta["peer_settings"]["method"].startswith("memoized VB")
    assert list(trace["iteration"]) == [0, 1, 2, 3] and trace["log_joint"].map(np.isfinite).all()
    assert np.isfinite(meta["heldout_lpd"])


def test_list_marks_peers_and_says_how_to_get_a_missing_one(capsys, monkeypatch):
    from dpmmbench.workflows.cli import main

    monkeypatch.setattr(algorithms._registry, "_installed", lambda library: False)
    assert "bnpy-memovb" not in algorithms.available()
    with pytest.raises(ValueError, match="'bnpy-memovb' needs the 'bnpy' library.*pip install --no-deps bnpy"):
        algorithms.get("bnpy-memovb")
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "sklearn-bgm          exact=False  peer" in out
    assert "bnpy-memovb          peer, not installed: install it with pip install -e '.[peers]'" in out


# ---- bmcc (built from source in CI, .ci/run) -----------------------------------------------
needs_bmcc = needs("bmcc")


@needs_bmcc
def test_bmcc_recovers_separated_blobs_deterministically():
    X, truth = four_blobs(n=100)

    def chain(seed):
        s = algorithms.make("bmcc", family=NIW, alpha=1.0, seed=seed)
        state = s.init(X, init_clusters=1)
        assert state.info["n_clusters"] == 1
        for _ in range(100):  # plain Gibbs under bmcc's broad prior: it takes a while to split
            state = s.step(state)
        return state

    a, b = chain(4), chain(4)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert a.info["n_clusters"] == 4 and vi(a.labels, truth) < 1e-9
    settings = algorithms.make("bmcc", family=NIW, alpha=0.5).settings()
    assert settings["alpha"] == 0.5 and "empirical Bayes turned off" in settings["alpha_update"]
    json.dumps(settings)
    state = algorithms.make("bmcc", family=NIW).init(X, labels=truth)  # it starts from a given partition
    np.testing.assert_array_equal(state.labels, truth)
    with pytest.raises(ValueError, match="positive definite"):
        algorithms.make("bmcc", family=NIW).init(np.ones((5, 2)))


@needs_bmcc
def test_bmcc_through_the_driver(scheduler):
    trace, meta = driver.run(driver.RunSpec("bmcc", "synth-chang2013?n=400", 3, seed=0, scheduler=scheduler))
    assert meta["external"] and meta["peer_settings"]["method"].startswith("collapsed Gibbs")
    assert list(trace["iteration"]) == [0, 1, 2, 3] and trace["log_joint"].map(np.isfinite).all()


# ---- dpgmm (PyTorch; .ci/run installs a CPU torch, then dpgmm) -------------------------------
needs_dpgmm = needs("dpgmm")


@needs_dpgmm
@pytest.mark.slow  # dpgmm's sweeps take seconds each (PyTorch per point)
def test_dpgmm_recovers_separated_blobs_and_reports_its_objective_and_alpha():
    from sklearn.metrics import normalized_mutual_info_score

    X, truth = four_blobs(n=50)
    s = algorithms.make("dpgmm", family=NIW, alpha=1.0, seed=0)
    state = s.init(X, init_clusters=1)
    assert state.info["n_clusters"] == 10  # dpgmm's own random start (max_clusters_num), not init_clusters
    for _ in range(25):
        state = s.step(state)
    assert state.iteration == 25 and state.alpha == 1.0  # the suite's alpha scores; dpgmm's is its own
    assert normalized_mutual_info_score(truth, state.labels) > 0.9
    assert np.isfinite(state.info["peer_objective"]) and state.info["peer_alpha"] > 0
    assert state.info["n_clusters"] == len(np.unique(state.labels)) == state.labels.max() + 1


@needs_dpgmm
@pytest.mark.filterwarnings("ignore:Singular sample detected:UserWarning")  # dpgmm's own fit, unfiltered
def test_dpgmm_steps_are_the_sweeps_of_its_own_fit_seeded_from_the_chain():
    import random

    import torch
    from dpgmm.samplers import FullCovarianceCollapsedGibbsSampler

    from dpmmbench.algorithms.partitions import compact

    X, _ = four_blobs(n=20)

    def chain(seed, batch_size=1):
        s = algorithms.make("dpgmm", family=NIW, seed=seed, batch_size=batch_size)
        state = s.init(X)
        for _ in range(3):
            state = s.step(state)
        return state

    host = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    a, b, c = chain(3), chain(3), chain(4)
    # the chain's generators are its own: the host's are as they were
    assert random.getstate() == host[0] and torch.equal(torch.get_rng_state(), host[2])
    assert all(np.array_equal(x, y) for x, y in zip(np.random.get_state(), host[1]))
    np.testing.assert_array_equal(a.labels, b.labels)
    assert a.info == b.info and not np.array_equal(a.labels, c.labels)
    for batch_size in (1, 7):
        state = chain(3, batch_size)
        # dpgmm's own fit of three sweeps, its process-wide generators seeded as the chain's
        random.seed(state.seed)
        np.random.seed(state.seed)
        torch.manual_seed(state.seed)
        library = FullCovarianceCollapsedGibbsSampler(init_strategy="init_data_stats", max_clusters_num=10,
                                                      batch_size=batch_size, verbose=False)
        fit = library.fit(3, torch.as_tensor(X, dtype=torch.float32))
        np.testing.assert_array_equal(state.labels,
                                      compact(library.get_examples_assignment(fit["cluster_assignment"]))[0])
        assert state.info["peer_alpha"] == fit["alpha"]
    random.setstate(host[0])
    np.random.set_state(host[1])
    torch.set_rng_state(host[2])


@needs_dpgmm
def test_dpgmm_settings_and_what_it_refuses():
    settings = algorithms.make("dpgmm", family=NIW, max_clusters_num=5, batch_size=16, a=2.0, b=0.5).settings()
    assert settings["library"].startswith("dpgmm 0.2.0") and settings["batch_size"] == 16
    assert "Gamma(a=2.0, b=0.5)" in settings["alpha"] and settings["component_prior"]["kappa_0"] == 0.01
    assert "uniform over 5 labels" in settings["initialisation"]
    assert "init_clusters is not used" in settings["initialisation"]
    json.dumps(settings)
    with pytest.raises(ValueError, match="'dpgmm' fits only the families NormalInverseWishart, "
                                         "NormalKnownCovariance; got DirichletMultinomial"):
        algorithms.make("dpgmm", family=DirichletMultinomial(0.5, 3))
    with pytest.raises(ValueError, match="cannot learn alpha.*alpha_prior must be None"):
        algorithms.make("dpgmm", family=NIW, alpha_prior=(1.0, 1.0))
    with pytest.raises(ValueError, match="batch_size"):
        algorithms.make("dpgmm", family=NIW, batch_size=0)
    s = algorithms.make("dpgmm", family=NIW)
    with pytest.raises(ValueError, match="dpgmm's random partition.*cannot start from given labels"):
        s.init(np.zeros((4, 2)), labels=[0, 0, 1, 1])
    with pytest.raises(ValueError, match="at least 2 points"):
        s.init(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="positive variance in every coordinate"):
        s.init(np.array([[0.0, 1.0], [1.0, 1.0], [2.0, 1.0]]))


@needs_dpgmm
@pytest.mark.slow  # a worker imports PyTorch for it (seconds)
def test_dpgmm_through_the_driver_and_in_the_list(capsys, scheduler):
    from dpmmbench.workflows.cli import main

    trace, meta = driver.run(driver.RunSpec("dpgmm", "synth-chang2013?n=400", 3, seed=0, options={"batch_size": 4},
                                            scheduler=scheduler))
    assert meta["external"] and not meta["exact"]
    settings = meta["peer_settings"]
    assert settings["method"].startswith("collapsed Gibbs") and settings["batch_size"] == 4
    assert "random partition" in settings["initialisation"]
    assert list(trace["iteration"]) == [0, 1, 2, 3] and trace["log_joint"].map(np.isfinite).all()
    assert trace["peer_objective"].map(np.isfinite).all() and (trace["peer_alpha"] > 0).all()
    assert (trace["alpha"] == 1.0).all() and np.isfinite(meta["heldout_lpd"])
    json.dumps(meta, default=str)
    assert main(["list"]) == 0
    assert "dpgmm                exact=False  peer" in capsys.readouterr().out


@needs_dpgmm
def test_dpgmm_refuses_data_whose_variance_single_precision_rounds_to_zero():
    # found by the hostile-data property test: positive in float64, zero in dpgmm's float32,
    # where its prior's Cholesky factorisation failed with torch's own error
    X = np.array([[0.0], [4.144181491279191e-53]])
    sampler = algorithms.make("dpgmm", family=NormalInverseWishart.default_for(np.array([[0.0], [1.0]])), seed=0)
    with pytest.raises(ValueError, match="single precision"):
        sampler.init(X)
