"""Shared tiny problems: small enough to enumerate every partition, spread enough that the
posterior covers many of them (two or three groups plus an ambiguous point)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from dpmmbench.algorithms.families import DirichletMultinomial, NormalInverseWishart, NormalKnownCovariance


def niw_problem():
    X = np.array([[-1.0, -0.8], [-1.3, -1.1], [1.1, 0.9], [0.8, 1.2], [0.1, 0.0], [1.4, 1.0]])
    fam = NormalInverseWishart(mu0=np.zeros(2), kappa0=0.5, nu0=4.0, psi0=0.6 * np.eye(2))
    return X, fam, 1.0


def known_problem():
    X = np.array([[-2.1], [-1.7], [0.1], [1.9], [2.4], [0.6]])
    return X, NormalKnownCovariance(sigma=1.0, mu0=[0.0], sigma0=2.0), 1.3


def multinomial_problem():
    X = sp.csr_matrix(np.array([[3, 1, 0, 0], [2, 2, 0, 1], [0, 0, 3, 1], [0, 1, 2, 2],
                                [1, 1, 1, 1], [4, 0, 0, 1]], dtype=float))
    return X, DirichletMultinomial(gamma=0.7, vocab_size=4), 0.8


PROBLEMS = {"niw-2d": niw_problem, "known-1d": known_problem, "dirmult": multinomial_problem}


#: ``state.info`` keys that measure wall-clock time: never reproducible from the seed
TIMING_KEYS = ("compute_s", "compute_max_s")


def untimed(info: dict) -> dict:
    """``info`` without its :data:`TIMING_KEYS`."""
    return {k: v for k, v in info.items() if k not in TIMING_KEYS}


def record_chain(name, X, family, alpha, backend, seed, steps, init_clusters, **options):
    """Labels and info (without timings) after init and after every step of registered
    sampler ``name``, and the last state (for the sharded samplers' determinism and
    Dask-vs-serial tests)."""
    from dpmmbench import algorithms

    s = algorithms.make(name, family=family, alpha=alpha, seed=seed, backend=backend, **options)
    state = s.init(X, init_clusters=init_clusters)
    labels, infos = [state.labels.copy()], [untimed(state.info)]
    for _ in range(steps):
        state = s.step(state)
        labels.append(state.labels.copy())
        infos.append(untimed(state.info))
    return labels, infos, state


@pytest.fixture(scope="module")
def client():
    """A real Dask cluster for the tests of a module: the workflow's own embedded cluster
    (2 worker processes x 1 thread on the loopback interface, numerical libraries sized to
    1 thread, the workers' malloc settings)."""
    from dpmmbench.workflows.cluster import dask_client

    with dask_client(workers=2, threads=1) as client:
        yield client


@pytest.fixture(params=sorted(PROBLEMS))
def problem(request):
    return (request.param,) + PROBLEMS[request.param]()


def report_exactness(request, name, problem, res, exact=True, note=""):
    """Add a harness result to the terminal summary (travels with the test's report, so it
    reaches the summary from pytest-xdist's worker processes too)."""
    row = (f"{name:<22} {problem:<9} exact={str(exact):<5} TV={res.tv:.4f}  MC threshold={res.threshold:.4f} "
           f"(inflation {res.inflation:.2f}, {res.n_samples} samples{note})")
    request.node.user_properties.append(("exactness", row))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, keep the tests that share a module- or session-scoped fixture (a
    Dask cluster, a workflow run) in one worker process, so the fixture is built once."""
    for item in items:
        fixtures = getattr(item, "_fixtureinfo", None)
        definitions = fixtures.name2fixturedefs.values() if fixtures is not None else ()
        if any(d[-1].scope in ("module", "package") for d in definitions):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    rows = [value for reports in terminalreporter.stats.values() for r in reports
            if getattr(r, "when", None) == "call" for key, value in getattr(r, "user_properties", ())
            if key == "exactness"]
    if rows:
        terminalreporter.section("exactness harness: TV distance to the exact posterior")
        for row in sorted(rows):
            terminalreporter.write_line(row)
