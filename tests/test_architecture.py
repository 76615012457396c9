"""The shape of the package: one namespace, layers that point one way, no import cycles.

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


def _modules() -> dict[str, Path]:
    """Module name -> source file for every module of the package."""
    mods = {PACKAGE: ROOT / "__init__.py"}
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
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
