"""Shared test helpers. The tiny problems (small enough to enumerate every partition, spread
enough that the posterior covers many of them) are the package's own,
``dpmmbench.algorithms.certify.PROBLEMS``: `dpmmbench check` runs on them too."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import settings

from dpmmbench.algorithms.certify import PROBLEMS  # noqa: F401 (the tests import it from here)

# Property tests explore new examples on every local run; under CI they replay one fixed
# sequence, so that a landing is decided by the code, not by the draw (what a local run finds
# becomes a named case or a fix).
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


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


#: what a wheel build copies no part of (outputs, environments, caches)
_NOT_SOURCE = (".git", ".venv", ".asv", ".snakemake", "results", "data", "build", "dist", "__pycache__",
               "*.egg-info", "*.nbi", "*.nbc", ".pytest_cache")


def build_wheel(tmp_path) -> Path:
    """Build the project's wheel from a copy of the source tree (setuptools writes build
    folders into the tree it builds: two tests building in the checkout at once collide)."""
    import shutil
    import subprocess
    import sys

    src = tmp_path / "src"
    shutil.copytree(Path(__file__).resolve().parents[1], src, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                          "-w", str(tmp_path / "wheel"), str(src)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    (wheel,) = (tmp_path / "wheel").glob("dpmmbench-*.whl")
    return wheel


@pytest.fixture(scope="module")
def isolated():
    """Runs untrusted-input cases in a child interpreter (tests/isolation.py): a crash or a
    hang fails the test that caused it, not the whole run."""
    from isolation import Isolated

    runner = Isolated()
    yield runner
    runner.close()


@pytest.fixture(scope="module")
def client():
    """A real Dask cluster for the tests of a module: the workflow's own embedded cluster
    (2 worker processes x 1 thread on the loopback interface, numerical libraries sized to
    1 thread, the workers' malloc settings)."""
    from dpmmbench.workflows.cluster import dask_client

    with dask_client(workers=2, threads=1) as client:
        yield client


def needs(*names):
    """Mark a test that runs the registered algorithms ``names`` to skip where one of them is
    an optional peer whose library is missing (CI installs them all); the reason names each
    such peer and the command that installs it. Names that are no optional peer are ignored."""
    from dpmmbench import algorithms

    missing = algorithms.missing()
    reasons = [f"{name} is not installed: {missing[name]}" for name in dict.fromkeys(names) if name in missing]
    return pytest.mark.skipif(bool(reasons), reason="; ".join(reasons))


def needs_config(path):
    """:func:`needs` for every algorithm the workflow config at ``path`` names."""
    import yaml

    from dpmmbench.workflows._config import algorithm_names

    return needs(*algorithm_names(yaml.safe_load(Path(path).read_text())))


@pytest.fixture(scope="module")
def scheduler(client):
    """The address of the module's cluster (:func:`client`), for driver runs that need a
    cluster, not one of their own: an embedded cluster takes seconds to start, and the
    tests of the embedded ones (tests/test_cluster.py, the command-line tests) start theirs."""
    return client.scheduler.address


def refuse(what: str):
    """A stand-in for a function that a test forbids (e.g. ``cluster._local_cluster``): calling
    it fails the test, saying ``what`` happened. It raises pytest's failure, a BaseException,
    so that no ``except Exception`` of the code under test can take it for an error of its own."""
    def refused(*args, **kwargs):
        pytest.fail(what, pytrace=False)

    return refused


def python_lines(fn, *args, **kwargs) -> tuple[object, int]:
    """``fn(*args, **kwargs)`` and the number of Python source lines the interpreter executed
    for it (in every Python function it called; none in compiled code). A loop over points in
    Python executes at least one line per point: work done in array operations executes a
    number of lines that does not grow with the data."""
    import sys

    count = 0

    def trace(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        result = fn(*args, **kwargs)
    finally:
        sys.settrace(previous)
    return result, count


def fits(name, family) -> bool:
    """Whether the registered sampler ``name`` takes ``family`` (a peer may fit some only)."""
    from dpmmbench import algorithms

    families = algorithms.get(name).families
    return families is None or isinstance(family, families)


@pytest.fixture(params=sorted(PROBLEMS))
def problem(request):
    return (request.param,) + PROBLEMS[request.param]()


def report_exactness(request, name, problem, res, exact=True, note=""):
    """Add a harness result to the terminal summary and to ``--exactness-json`` (it travels with
    the test's report, so it reaches them from pytest-xdist's worker processes too)."""
    row = {"sampler": name, "problem": problem, "exact": bool(exact), "tv": float(res.tv),
           "threshold": float(res.threshold), "inflation": float(res.inflation),
           "n_samples": int(res.n_samples), "note": note}
    if not math.isnan(res.alpha_exact):  # a learned alpha: its pooled mean against the exact one
        row.update(alpha_mean=float(res.alpha_mean), alpha_exact=float(res.alpha_exact),
                   alpha_threshold=float(res.alpha_threshold))
    request.node.user_properties.append(("exactness", row))


def pytest_addoption(parser):
    parser.addoption("--exactness-json", metavar="PATH", default=None,
                     help="write the exactness harness results to this JSON file (input of docs/results.md)")


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
    if not rows:
        return
    rows.sort(key=lambda r: (r["sampler"], r["problem"]))
    terminalreporter.section("exactness harness: TV distance to the exact posterior")
    for r in rows:
        terminalreporter.write_line(
            f"{r['sampler']:<22} {r['problem']:<9} exact={str(r['exact']):<5} TV={r['tv']:.4f}  "
            f"MC threshold={r['threshold']:.4f} (inflation {r['inflation']:.2f}, {r['n_samples']} samples{r['note']})"
            + (f"  alpha={r['alpha_mean']:.4f} exact={r['alpha_exact']:.4f} threshold={r['alpha_threshold']:.4f}"
               if "alpha_exact" in r else ""))
    path = config.getoption("--exactness-json")
    if path:
        from dpmmbench.reports.traces import atomic_write
        from dpmmbench.workflows.provenance import environment

        payload = json.dumps({"environment": environment(), "rows": rows}, indent=1, default=str).encode()
        atomic_write(Path(path), lambda f: f.write(payload))
