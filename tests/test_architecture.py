"""The shape of the package: one namespace, layers that point one way, no import cycles, no
module importing the ``__init__`` of a package it sits in.

Layers (each may import only itself and those before it)::

    algorithms  <-  datasets  <-  reports  <-  workflows

Every import statement counts, at module level or inside a function: an import deferred into a
function still makes the two modules depend on each other.
"""
from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import build_wheel

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "dpmmbench"
LAYERS = ("algorithms", "datasets", "reports", "workflows")


def _modules(root: Path = ROOT, layers=LAYERS) -> dict[str, Path]:
    """Module name -> source file for every module of the package (mapped onto ``root``)."""
    mods = {PACKAGE: root / "__init__.py"}
    for layer in layers:
        for path in sorted((root / layer).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join((PACKAGE, *parts))] = path
    return mods


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Modules of the package that ``name`` imports (including the packages that run on the way)."""
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.append(sub if sub in modules else base)
        for target in targets:
            if not (target == PACKAGE or target.startswith(PACKAGE + ".")):
                continue
            # importing a.b.c runs a and a.b first (but not the packages this module sits in:
            # they are running already); naming its own package is an import of it all the same
            if target != name:
                found.add(target)
            parts = target.split(".")
            for i in range(1, len(parts)):
                prefix = ".".join(parts[:i])
                if prefix in modules and prefix != name and not name.startswith(prefix + "."):
                    found.add(prefix)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 else len(LAYERS)


def test_layers_point_one_way():
    bad = sorted(f"{src} imports {dst}" for src, dsts in _graph().items() for dst in dsts
                 if _layer(dst) > _layer(src))
    assert not bad, "\n".join(bad)


def test_no_module_imports_another_packages_private_module():
    """A ``_``-prefixed module is its top-level package's own: another layer (or the package
    root) takes only public names, so a package can change its privates freely."""
    bad = sorted(f"{src} imports {dst}" for src, dsts in _graph().items() for dst in dsts
                 if any(part.startswith("_") for part in dst.split(".")[2:])
                 and dst.split(".")[:2] != src.split(".")[:2])
    assert not bad, "\n".join(bad)


def test_the_run_service_executes_specs_without_the_cli_or_process_tricks():
    """workflows/service.py neither imports the command line nor swaps the process's output
    streams nor raises exceptions in other threads: it executes run specs, and cancels them
    through the chain's callback."""
    source = (ROOT / "workflows" / "service.py").read_text()
    assert "dpmmbench.workflows.cli" not in _graph()["dpmmbench.workflows.service"]
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("#", ">>>")))
    for mechanism in ("SetAsyncExc", "sys.stdout =", "sys.stderr =", "ctypes"):
        assert mechanism not in code, mechanism


def test_a_workflow_job_sends_its_spec_and_rebuilds_no_command_line():
    """A time budget's road (docs/design.md): the workflow builds each run's spec from the
    config (``_config.run_spec``) and its job hands the spec over as JSON; no run flag is
    built in the Snakefiles, and the job's side imports nothing of the command line."""
    rules = "".join((ROOT / "workflows" / name).read_text() for name in ("common.smk", "run.smk"))
    for flag in ("--time-budget", "--iterations", "--algorithm", "--option"):
        assert flag not in rules, flag
    assert "--spec" in rules and "_config.run_spec(" in rules
    assert "dpmmbench.workflows.cli" not in _graph()["dpmmbench.workflows.service_client"]


def test_no_import_cycles():
    graph = _graph()
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert not cycles, "\n".join(cycles)


def _own_package_imports(modules: dict[str, Path]) -> list[str]:
    """Every import, at module level or inside a function, by which a module takes something
    from the ``__init__`` of a package it sits in (its own package or any package above it).

    The rule, for a module M (a package's ``__init__`` counts as the package itself) and a
    package P that contains M (P is a proper prefix of M's dotted name):

    * ``import P`` (with or without ``as``) breaks it: it binds P's ``__init__`` namespace;
      ``import P.sub`` does not (it names the module ``P.sub``);
    * ``from P import x`` breaks it unless ``P.x`` is a module of the package (a submodule
      or subpackage) that does not contain M: then ``x`` is that module, not a name defined
      by P's ``__init__`` (``from dpmmbench import algorithms`` inside ``algorithms/`` names
      the ``__init__`` of M's own package, and breaks it); relative imports are resolved first, so ``from . import x`` in ``P/m.py`` and
      ``from .. import x`` in ``P/sub/m.py`` are ``from P import x``;
    * importing from a package that does not contain M (a sibling subpackage, a lower layer)
      is not covered by this rule (the layer rule governs it);
    * a package's ``__main__`` is exempt: it is the package's command-line entry point, run
      (``python -m P``) after Python has imported P's ``__init__`` and imported by nothing, so
      it is a client of the package, and no cycle can pass through it.

    Returns ``"module:line: statement"`` for each breach.
    """
    found = []
    for name, path in modules.items():
        if path.name == "__main__.py":
            continue
        is_package = path.name == "__init__.py"
        here = name if is_package else name.rpartition(".")[0]
        parts = name.split(".")
        enclosing = {".".join(parts[:i]) for i in range(1, len(parts))}  # packages M sits in
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{name}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                found += [f"{where}: import {alias.name}" for alias in node.names if alias.name in enclosing]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                if base in enclosing:
                    found += [f"{where}: from {'.' * node.level}{node.module or ''} import {alias.name}"
                              for alias in node.names
                          if f"{base}.{alias.name}" not in modules or f"{base}.{alias.name}" in enclosing]
    return sorted(found)


def test_no_module_imports_the_init_of_its_own_package():
    """A submodule never imports the ``__init__`` of a package it sits in: the ``__init__`` is
    an aggregator that imports its submodules (or may, lazily), so the reverse edge makes a
    cycle that only import order keeps from failing."""
    bad = _own_package_imports(_modules())
    assert not bad, "\n".join(bad)


def test_own_package_rule_catches_each_form(tmp_path):
    """Negative control: a small package with each form of the breach (and the allowed look-alikes)."""
    files = {
        "__init__.py": "",
        "algorithms/__init__.py": "from ._registry import make\nfrom . import base\n",
        "algorithms/_registry.py": "from .base import Sampler\n",
        "algorithms/base.py": "class Sampler: ...\n",
        "algorithms/exact.py": "def f():\n    from dpmmbench import algorithms\n",          # 2
        "algorithms/estimator.py": "def g():\n    from dpmmbench.algorithms import make\n",  # 2
        "algorithms/bad_relative.py": "from . import make\nfrom . import base, _registry\n",  # 1
        "algorithms/bad_import.py": "import dpmmbench.algorithms as a\nimport dpmmbench.algorithms.base\n",  # 1
        "algorithms/peers/__init__.py": "",
        "algorithms/peers/deep.py": "from .. import make\nfrom ..base import Sampler\nfrom . import other\n",  # 1
        "algorithms/peers/other.py": "import dpmmbench\n",  # 1
        "datasets/__init__.py": "def canonical_name(n): ...\n",
        "datasets/store.py": "def h():\n    from . import canonical_name\n",  # 2
        "datasets/fine.py": "from dpmmbench import algorithms\nfrom dpmmbench.algorithms import make\n",
        "datasets/__main__.py": "from . import canonical_name\n",  # the entry point: exempt
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = _own_package_imports(_modules(tmp_path, ("algorithms", "datasets")))
    assert found == sorted([
        "dpmmbench.algorithms.exact:2: from dpmmbench import algorithms",
        "dpmmbench.algorithms.estimator:2: from dpmmbench.algorithms import make",
        "dpmmbench.algorithms.bad_relative:1: from . import make",
        "dpmmbench.algorithms.bad_import:1: import dpmmbench.algorithms",
        "dpmmbench.algorithms.peers.deep:1: from .. import make",
        "dpmmbench.algorithms.peers.other:1: import dpmmbench",
        "dpmmbench.datasets.store:2: from . import canonical_name",
    ]), found


def test_no_old_top_level_names():
    """Nothing imports the folders by their old top-level names (no shim keeps them alive)."""
    old = []
    files = [*ROOT.glob("*.py"), ROOT / "Snakefile", *ROOT.glob("workflows/*.smk")]
    for folder in (*LAYERS, "tests", "benchmarks"):
        files += (ROOT / folder).rglob("*.py")
    for path in files:
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            words = line.split()
            if words[:1] in (["import"], ["from"]) and len(words) > 1 and words[1].split(".")[0] in LAYERS:
                old.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert not old, "\n".join(old)


@pytest.mark.slow
def test_wheel_holds_dpmmbench_only(tmp_path):
    names = zipfile.ZipFile(build_wheel(tmp_path)).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert top == {PACKAGE}, top
    for layer in LAYERS:
        assert f"{PACKAGE}/{layer}/__init__.py" in names
    assert f"{PACKAGE}/workflows/config/default.yaml" in names
    # the report renders from its templates: package data, or an installed report cannot be made
    assert {f"{PACKAGE}/reports/templates/report.html.j2", f"{PACKAGE}/reports/templates/report.css"} <= set(names)
    # each paper's entries are a package of their own (docs/reproductions.md renders from them)
    assert f"{PACKAGE}/reports/papers/chang2013/__init__.py" in names
    assert not [n for n in names if n.startswith(f"{PACKAGE}/tests/") or n.startswith(f"{PACKAGE}/benchmarks/")]


def test_runs_beside_an_unrelated_package_named_datasets(tmp_path):
    """A package called ``datasets`` (as Hugging Face's) first on the path shadows nothing of ours."""
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "__init__.py").write_text("UNRELATED = True\n")
    code = (
        "import datasets\n"
        "assert datasets.UNRELATED\n"
        "from dpmmbench import algorithms, datasets as ours\n"
        "ds = ours.load('synth-chang2013?n=300')\n"
        "s = algorithms.make('gibbs', family=ds.family, seed=0)\n"
        "state = s.step(s.init(ds.X))\n"
        "assert len(state.labels) == 300\n"
        "import datasets\n"
        "assert datasets.UNRELATED\n"
        "print('ok')\n"
    )
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr
