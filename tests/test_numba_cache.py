"""numba's disk cache of the package's kernels follows edits across modules (algorithms/_numba_cache)."""
import shutil
import subprocess
import sys
from pathlib import Path

from dpmmbench.algorithms import _numba_cache
from dpmmbench.algorithms._numerics import sample_log_weights

ROOT = Path(__file__).resolve().parents[1]

CALLEE = "from numba import njit\n\n\n@njit(cache=True)\ndef value():\n    return {}\n"
CALLER = ("from numba import njit\n\nfrom ._probe_callee import value\n\n\n"
          "@njit(cache=True)\ndef twice():\n    return 2 * value()\n")
RUN = "from algorithms._probe_caller import twice; print(twice(), sum(twice.stats.cache_hits.values()))"


def test_package_kernels_use_the_package_stamp():
    locator = sample_log_weights._cache._impl.locator
    assert isinstance(locator, _numba_cache.PackageStampLocator)
    assert locator.get_source_stamp()[1] == _numba_cache.package_digest()


def test_editing_a_callee_in_another_module_recompiles_the_caller(tmp_path):
    """numba alone checks a cached function against its own file only: after this edit it
    loads the caller's stale binary and prints 2."""
    package = tmp_path / "algorithms"
    shutil.copytree(ROOT / "algorithms", package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "_probe_callee.py").write_text(CALLEE.format(1))
    (package / "_probe_caller.py").write_text(CALLER)

    def run():
        done = subprocess.run([sys.executable, "-c", RUN], cwd=tmp_path, capture_output=True, text=True,
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
    from numba.core.caching import IndexDataCacheFile

    stamp = ("numba's own stamp", _numba_cache.package_digest())
    writers = [IndexDataCacheFile(str(tmp_path), "kernel-1.py311", stamp) for _ in range(2)]
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
    reader = IndexDataCacheFile(str(tmp_path), "kernel-1.py311", stamp)
    assert reader.load(("sig-b",)) == "binary for b"
    assert reader.load(("sig-a",)) in (None, "binary for a")  # lost index update: a recompiles
    assert len(list(tmp_path.glob("*.nbc"))) == 2


def test_other_functions_keep_numbas_own_cache_files(tmp_path):
    from numba.core.caching import IndexDataCacheFile

    foreign = IndexDataCacheFile(str(tmp_path), "theirs-1.py311", "numba's own stamp")
    foreign.save(("sig",), "binary")
    assert [p.name for p in tmp_path.glob("*.nbc")] == ["theirs-1.py311.1.nbc"]
