"""numba's disk cache of the package's kernels (algorithms/numba_cache): follows edits across
modules, keeps concurrent writers apart, leaves numba's own classes alone, and steps aside where
it cannot work (an unverified numba, a read-only install)."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numba
import pytest
from numba.core import caching

from conftest import build_wheel
from dpmmbench.algorithms import numba_cache
from dpmmbench.algorithms._numerics import sample_log_weights

ROOT = Path(__file__).resolve().parents[1]

CALLEE = "from .numba_cache import kernel\n\n\n@kernel\ndef value():\n    return {}\n"
CALLER = ("from .numba_cache import kernel\nfrom ._probe_callee import value\n\n\n"
          "@kernel\ndef twice():\n    return 2 * value()\n")
RUN = "from algorithms._probe_caller import twice; print(twice(), sum(twice.stats.cache_hits.values()))"

# two gibbs and two subc steps on a small data set: labels, and what the cache did
CHAIN = r"""
import json, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import dpmmbench
    from dpmmbench import algorithms, datasets
    from dpmmbench.algorithms._numerics import sample_log_weights
    ds = datasets.load("synth-chang2013?n=300")
    labels = {}
    for name in ("gibbs", "subc"):
        sampler = algorithms.make(name, family=ds.family, seed=0)
        state = sampler.init(ds.X, init_clusters=3)
        for _ in range(2):
            state = sampler.step(state)
        labels[name] = state.labels.tolist()
print(json.dumps({"labels": labels, "package": dpmmbench.__file__,
                  "cache_path": sample_log_weights.stats.cache_path,
                  "warnings": [str(w.message) for w in caught if "dpmmbench" in str(w.message)]}))
"""


def _chain(prelude="", **run):
    done = subprocess.run([sys.executable, "-c", prelude + CHAIN], capture_output=True, text=True, timeout=600, **run)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_package_kernels_use_the_package_stamp():
    locator = sample_log_weights._cache._impl.locator
    assert locator.get_source_stamp()[1] == numba_cache.package_digest()
    assert sample_log_weights.stats.cache_path is not None


def _plain():
    return 1


def test_numba_itself_is_left_alone():
    """Only the package's dispatchers get the package's cache: numba's class-wide locator list
    and cache file class are numba's own, and a plain ``njit(cache=True)`` gets numba's cache."""
    assert all(cls.__module__ == "numba.core.caching" for cls in caching.CacheImpl._locator_classes)
    assert caching.IndexDataCacheFile.save.__module__ == "numba.core.caching"
    foreign = numba.njit(cache=True)(_plain)
    assert type(foreign._cache) is caching.FunctionCache
    assert type(foreign._cache._cache_file) is caching.IndexDataCacheFile


def test_kernel_refuses_a_cache_option():
    with pytest.raises(TypeError, match="cache"):
        numba_cache.kernel(cache=False)


def test_editing_a_callee_in_another_module_recompiles_the_caller(tmp_path):
    """numba alone checks a cached function against its own file only: after this edit it
    loads the caller's stale binary and prints 2."""
    package = tmp_path / "algorithms"
    shutil.copytree(ROOT / "algorithms", package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "_probe_callee.py").write_text(CALLEE.format(1))
    (package / "_probe_caller.py").write_text(CALLER)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}  # in-tree cache

    def run():
        done = subprocess.run([sys.executable, "-c", RUN], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert run() == ["2", "0"]  # compiled and cached
    assert run() == ["2", "1"]  # loaded from the cache
    (package / "_probe_callee.py").write_text(CALLEE.format(5))
    assert run() == ["10", "0"]  # the callee's edit reached the caller
    assert run() == ["10", "1"]


def test_concurrent_writers_never_share_a_data_file(tmp_path):
    """Two processes that both read the index before either saved (numba's race: each took
    data file number 1, and one's index then named the other's binary) keep their entries
    apart; the data is on disk before any index names it."""
    cache_file = type(sample_log_weights._cache._cache_file)
    stamp = ("numba's own stamp", numba_cache.package_digest())
    writers = [cache_file(str(tmp_path), "kernel-1.py311", stamp) for _ in range(2)]
    snapshot = writers[0]._load_index()  # both read the (empty) index ...
    order = []
    for w, tag in zip(writers, "ab"):
        w._load_index = lambda snapshot=snapshot: dict(snapshot)  # ... before either saved
        save_data, save_index = w._save_data, w._save_index
        w._save_data = lambda name, data, f=save_data, tag=tag: (order.append(("data", tag)), f(name, data))
        w._save_index = lambda index, f=save_index, tag=tag: (order.append(("index", tag)), f(index))
    writers[0].save(("sig-a",), "binary for a")
    writers[1].save(("sig-b",), "binary for b")
    assert order == [("data", "a"), ("index", "a"), ("data", "b"), ("index", "b")]
    reader = cache_file(str(tmp_path), "kernel-1.py311", stamp)
    assert reader.load(("sig-b",)) == "binary for b"
    assert reader.load(("sig-a",)) in (None, "binary for a")  # lost index update: a recompiles
    assert len(list(tmp_path.glob("*.nbc"))) == 2


def test_numba_versions_checked():
    assert numba_cache.numba_verified(numba.__version__)
    assert numba_cache.numba_verified("0.60.0") and numba_cache.numba_verified("0.68.1")
    assert not numba_cache.numba_verified("0.59.1")
    assert not numba_cache.numba_verified("0.69.0rc1")
    assert not numba_cache.numba_verified("1.0.0")
    assert not numba_cache.numba_verified("unknown")


@pytest.mark.slow
def test_unverified_numba_compiles_per_process_with_one_warning(tmp_path):
    """Outside the verified numba versions: no disk cache, one warning, the same chains."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    cached = _chain(cwd=tmp_path, env=env)
    unverified = _chain("import numba\nnumba.__version__ = '0.99.0'\n", cwd=tmp_path, env=env)
    assert cached["cache_path"] is not None and cached["warnings"] == []
    assert unverified["cache_path"] is None
    assert len(unverified["warnings"]) == 1 and "0.99.0" in unverified["warnings"][0]
    assert unverified["labels"] == cached["labels"]


def _read_only(command, paths):
    """``command`` run with ``paths`` unwritable: file modes for a user, and (file modes do not
    stop root) a read-only bind mount in a private mount namespace for root."""
    for path in paths:
        subprocess.run(["chmod", "-R", "a-w", str(path)], check=True)
    if os.geteuid() != 0:
        return command
    if shutil.which("unshare") is None or subprocess.run(["unshare", "--mount", "true"]).returncode != 0:
        pytest.skip("running as root without a mount namespace: cannot make a directory unwritable")
    mounts = " && ".join(f"mount --bind '{p}' '{p}' && mount -o remount,bind,ro '{p}'" for p in paths)
    return ["unshare", "--mount", "sh", "-c", f'{mounts} && exec "$@"', "sh", *command]


@pytest.mark.slow
def test_read_only_install_with_an_unwritable_home(tmp_path):
    """numba raises "cannot cache function ...: no locator available" where no cache directory
    is writable; the package's kernels then compile in every process instead."""
    wheel = build_wheel(tmp_path)
    install, home, work = tmp_path / "ro" / "site", tmp_path / "ro" / "home", tmp_path / "work"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(install), str(wheel)],
                   check=True, capture_output=True)
    home.mkdir()
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "PYTHON", "XDG_"))}
    env.update(PYTHONPATH=str(install), HOME=str(home))
    command = _read_only([sys.executable, "-c", CHAIN], [tmp_path / "ro"])
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(found["package"]).is_relative_to(install), found["package"]
    assert found["cache_path"] is None
    assert len(found["warnings"]) == 1 and "NUMBA_CACHE_DIR" in found["warnings"][0]
    assert not list(install.rglob("*.nb[ic]"))


def test_provenance_counts_the_kernels_without_scanning_the_heap(monkeypatch):
    """The run service runs several runs in threads: a heap scan (gc.get_objects) in one made
    another's tuple() fail with SystemError (a tuple still being built, handed out by the scan).
    The provenance counts the kernels that kernel() built instead."""
    import gc

    from dpmmbench.algorithms import numba_cache
    from dpmmbench.workflows.provenance import process_facts

    square = numba_cache.kernel(lambda x: x * x)
    assert square(3.0) == 9.0 and square in numba_cache.kernels()

    def refuse():
        raise AssertionError("process_facts scanned the heap")

    monkeypatch.setattr(gc, "get_objects", refuse)
    facts = process_facts()
    assert facts["numba_cache_hits"] + facts["numba_cache_misses"] >= 0 and facts["pid"] > 0
