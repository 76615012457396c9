"""Every docstring example of the package runs, and shows what it says (one test per module).

Modules are found by walking the four layers with :mod:`pkgutil` (benchmarks and tests are not
part of the package). Examples run in an empty namespace, not the module's: each imports what
it uses by its ``dpmmbench.`` name, as a reader copying it would. An example that cannot run
where the tests run is marked ``# doctest: +SKIP`` with the reason beside it. Not run:

* an optional peer's adapter whose library is not installed (skipped, naming the library);
* a ``__main__`` module: importing it runs the command line; the test checks it holds no examples.
"""
from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
from pathlib import Path

import pytest

from dpmmbench.algorithms import _registry

LAYERS = ("algorithms", "datasets", "reports", "workflows")


def _module_names() -> list[str]:
    names = ["dpmmbench"]
    for layer in LAYERS:
        package = importlib.import_module(f"dpmmbench.{layer}")
        names.append(package.__name__)
        names += [info.name for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")]
    return sorted(names)


def _optional_libraries() -> dict[str, str]:
    """Adapter module -> the library it needs, for the optional peers."""
    return {entry.split(":")[0]: library for entry, library, _ in _registry._OPTIONAL.values()}


MODULES = _module_names()


def test_the_walk_finds_the_package():
    """The walk sees every layer's modules (an empty list would make this file pass vacuously)."""
    for name in ("dpmmbench.algorithms._registry", "dpmmbench.algorithms.families.niw",
                 "dpmmbench.datasets.fetch", "dpmmbench.reports.traces", "dpmmbench.workflows.cluster"):
        assert name in MODULES
    assert not [m for m in MODULES if m.split(".")[1:2] in (["tests"], ["benchmarks"])]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    if name.rpartition(".")[2] == "__main__":
        path = Path(importlib.util.find_spec(name).origin)
        # not imported (importing it runs the command line): checked to hold no examples instead
        assert ">>>" not in path.read_text(encoding="utf-8"), \
            f"{name} is not imported here (importing it runs the command line): move its examples"
        return
    library = _optional_libraries().get(name)
    if library is not None and importlib.util.find_spec(library) is None:
        pytest.skip(f"optional peer: the {library!r} library is not installed")
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    for test in finder.find(module, name, globs={}):
        runner.run(test, out=report.append)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, "".join(report)
