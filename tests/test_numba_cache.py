"""numba's disk cache of the package's kernels follows edits across modules (algorithms/_numba_cache)."""
import shutil
import subprocess
import sys
from pathlib import Path

from algorithms import _numba_cache
from algorithms._numerics import sample_log_weights

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
