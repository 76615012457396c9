"""Plugins (docs/design.md "Plugins"): a sampler and a dataset from another distribution run
through every entry point of the suite, and a broken one is left out, named, without harm.

The example plugin (``examples/plugin/``) is installed by CI; where it is not, its tests skip
and say how to install it. The broken plugins are a real distribution written into a temporary
folder (its ``.dist-info`` with ``entry_points.txt``, beside its modules) that a subprocess
finds on ``PYTHONPATH``: entry points are read exactly as for an installed package.
"""
from __future__ import annotations

import ast
import os
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hostile_cli import run_cli
from sklearn.metrics import normalized_mutual_info_score
from test_workflow import snakemake

from dpmmbench import DPMM, algorithms, datasets
from dpmmbench.algorithms import plugin_discovery
from dpmmbench.reports.traces import read_trace
from dpmmbench.workflows.cli import main

SAMPLER, DATASET = "mh-single-site", "ring-blobs"
DISTRIBUTION = "dpmmbench-example-plugin 0.1.0"
needs_example = pytest.mark.skipif(
    SAMPLER not in algorithms.plugins() or DATASET not in datasets.plugins(),
    reason="the example plugin is not installed: pip install --no-deps ./examples/plugin")


@needs_example
def test_the_example_plugin_is_listed_with_its_distribution(capsys):
    assert algorithms.plugins() == {SAMPLER: DISTRIBUTION} and datasets.plugins() == {DATASET: DISTRIBUTION}
    assert SAMPLER in algorithms.available() and SAMPLER not in algorithms.available(plugins=False)
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert f"  {SAMPLER:<20} exact=True  plugin from {DISTRIBUTION}" in out
    assert f"(plugin from {DISTRIBUTION})" in out.split(f"  {DATASET} ")[1].splitlines()[0]
    assert "plugins left out" not in out


@needs_example
def test_the_example_sampler_is_certified_by_the_command(capsys):
    assert main(["check", SAMPLER, "--samples", "400", "--chains", "6", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "conformance and bad input: 18 of 18 checks passed" in out and "verdict: exact as declared" in out


@needs_example
def test_the_estimator_fits_the_example_plugin_on_its_dataset():
    ds = datasets.load(f"{DATASET}?n=90&radius=12")
    model = DPMM(algorithm=SAMPLER, n_iter=250, random_state=0).fit(ds.X)
    # six unit-variance blobs twelve from the centre: a sampler that works finds them (from one
    # cluster, its single-site moves take a few hundred steps where Gibbs takes tens; NMI 0.99-1.0
    # over seeds 0-4)
    assert normalized_mutual_info_score(ds.labels, model.labels_) > 0.95
    assert 6 <= model.n_clusters_ <= 8 and np.isfinite(model.score(ds.X))


@needs_example
def test_the_example_plugin_runs_through_the_command(tmp_path):
    out = tmp_path / "t.parquet"
    res = run_cli(["run", "--algorithm", SAMPLER, "--dataset", f"{DATASET}?n=120", "--iterations", "4",
                   "--seed", "3", "--out", str(out)], cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    trace, meta = read_trace(out)
    assert meta["algorithm"] == SAMPLER and meta["dataset"] == f"{DATASET}?n=120"
    assert trace["iteration"].tolist() == [0, 1, 2, 3, 4] and trace["accepted"].iloc[1:].between(0, 1).all()


@needs_example
@pytest.mark.slow
def test_the_example_plugin_runs_through_the_workflow_into_the_report(tmp_path):
    config = {"datasets": {"ring": f"{DATASET}?n=150"}, "algorithms": ["gibbs", SAMPLER], "seeds": [0, 1],
              "iterations": 5, "time_budget": 30, "dask": {"workers": 1, "threads": 1}}
    path = tmp_path / "plugin.yaml"
    path.write_text(yaml.safe_dump(config))
    res = snakemake(tmp_path, "--configfile", str(path))
    assert res.returncode == 0, res.stderr[-3000:]
    summary = pd.read_csv(tmp_path / "results/summary.csv")
    assert set(summary["algorithm"]) == {"gibbs", SAMPLER} and (summary["chains"] == 2).all()
    assert summary["final_log_joint"].notna().all() and summary["final_vi"].notna().all()
    trace, meta = read_trace(tmp_path / f"results/traces/ring/{SAMPLER}/w1/seed1.parquet")
    assert meta["algorithm"] == SAMPLER and meta["dask"]["shared"] and len(trace) == 6
    report = (tmp_path / "results/report/index.html").read_text()
    assert report.count(SAMPLER) >= 3 and DATASET in report


# ---- broken plugins --------------------------------------------------------------------

#: modules of the broken distribution, by file name
MODULES = {
    "broken_plugins_fails.py": "raise ImportError('needs libfoo, which is not installed')\n",
    "broken_plugins_exits.py": "import sys\nsys.exit('this plugin exits when imported')\n",
    "broken_plugins_ok.py": textwrap.dedent('''\
        from dpmmbench.algorithms.gibbs import CollapsedGibbs
        from dpmmbench.datasets import registry


        def not_a_class():
            return None


        class Shadow(CollapsedGibbs):
            name = "gibbs"


        class Misnamed(CollapsedGibbs):
            name = "something-else"


        class TripledNewCluster(CollapsedGibbs):
            """A valid chain of the wrong posterior: the new-cluster term alpha m(x) is three times
            too large, yet it declares itself exact."""

            name = "tripled"

            def __init__(self, family, alpha=1.0, **kwargs):
                super().__init__(family, alpha=3.0 * alpha, **kwargs)


        DIGITS = registry.REGISTRY["digits"]
        '''),
}
ENTRY_POINTS = {
    "dpmmbench.algorithms": {"fails-to-import": "broken_plugins_fails:Sampler", "exits": "broken_plugins_exits:S",
                             "not-a-sampler":
                             "broken_plugins_ok:not_a_class", "gibbs": "broken_plugins_ok:Shadow",
                             "misnamed": "broken_plugins_ok:Misnamed", "Bad_Name": "broken_plugins_ok:Shadow",
                             "tripled": "broken_plugins_ok:TripledNewCluster",
                             "twice": "broken_plugins_ok:TripledNewCluster"},
    "dpmmbench.datasets": {"digits": "broken_plugins_ok:DIGITS", "not-a-builder": "broken_plugins_ok:not_a_class"},
}
#: plugin -> what its one line says
REFUSED = {
    "fails-to-import": "failed to import 'broken_plugins_fails:Sampler': ImportError: needs libfoo",
    "exits": "failed to import 'broken_plugins_exits:S': SystemExit: this plugin exits when imported",
    "not-a-sampler": "is not a subclass of dpmmbench.algorithms.Sampler",
    "gibbs": "clashes with the built-in algorithm of that name",
    "misnamed": "declares name = 'something-else', not its entry point's 'misnamed'",
    "Bad_Name": "a name must be lower-case letters",
    "twice": "2 distributions register this name",
    "digits": "clashes with the built-in dataset of that name",
    "not-a-builder": "is not a dpmmbench.datasets.base.Builder",
}


def write_distribution(folder, name, version, entry_points, modules=None):
    """Write a distribution as an installer leaves it: ``NAME-VERSION.dist-info`` with its
    metadata and entry points, and its modules beside it."""
    info = folder / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in eps.items()) + "\n"
        for group, eps in entry_points.items()))
    for file, source in (modules or {}).items():
        (folder / file).write_text(source)


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    """``PYTHONPATH`` for a subprocess that sees the broken distributions."""
    folder = tmp_path_factory.mktemp("site")
    write_distribution(folder, "broken-plugins", "0.1", ENTRY_POINTS, MODULES)
    write_distribution(folder, "other-plugins", "0.2", {"dpmmbench.algorithms": {"twice": "broken_plugins_ok:Shadow"}})
    return {"PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


def test_broken_plugins_are_named_once_and_left_out(broken, tmp_path):
    res = run_cli(["list"], cwd=tmp_path, env=broken, timeout=120)
    assert res.returncode == 0, res.stderr
    listed, left_out = res.stdout.split("plugins left out:\n")
    for name, says in REFUSED.items():
        lines = [line for line in res.stderr.splitlines() if f"plugin {name!r} (" in line]
        assert len(lines) == 1 and says in lines[0], (name, res.stderr)  # one line, logged once
        assert lines[0].startswith("dpmmbench: ") and lines[0][len("dpmmbench: "):] in left_out
    assert "(broken-plugins 0.1)" in left_out and "(broken-plugins 0.1, other-plugins 0.2)" in left_out
    # the rest of the registry is whole: the built-in gibbs is listed as itself, the valid plugin joins
    assert f"  {'gibbs':<20} exact=True\n" in listed
    assert f"  {'tripled':<20} exact=True  plugin from broken-plugins 0.1" in listed
    assert f"  {'subc':<20}" in listed and "  digits " in listed and "not-a-builder" not in listed


def test_a_command_naming_a_broken_plugin_gets_its_reason(broken, tmp_path):
    res = run_cli(["run", "--algorithm", "fails-to-import", "--dataset", "synth-chang2013?n=100", "--iterations", "2",
                   "--seed", "0", "--out", str(tmp_path / "t.parquet")], cwd=tmp_path, env=broken, timeout=120)
    assert res.returncode == 2 and not (tmp_path / "t.parquet").exists()
    assert "algorithm 'fails-to-import' is not available: algorithm plugin 'fails-to-import' (broken-plugins 0.1): " \
           "failed to import" in res.stderr
    res = run_cli(["run", "--algorithm", "gibbs", "--dataset", "not-a-builder", "--iterations", "2", "--seed", "0",
                   "--out", str(tmp_path / "t.parquet")], cwd=tmp_path, env=broken, timeout=120)
    assert res.returncode == 3 and "dataset 'not-a-builder' is not available: dataset plugin" in res.stderr


def test_a_plugin_that_declares_exact_but_is_not_is_caught_by_the_command(broken, tmp_path):
    res = run_cli(["check", "tripled", "--samples", "400", "--chains", "6", "--no-progress"], cwd=tmp_path, env=broken,
                  timeout=300)
    assert res.returncode == 1, res.stderr
    assert "verdict: declares exact but is not" in res.stdout


def test_discovery_reads_entry_points_and_checks_what_they_load():
    """In-process, from entry points built by hand (no distribution: its name is unknown)."""
    from importlib.metadata import EntryPoint

    eps = [EntryPoint("ok", "dpmmbench.algorithms.gibbs:CollapsedGibbs", "dpmmbench.algorithms"),
           EntryPoint("nope", "dpmmbench.algorithms.gibbs:NoSuchThing", "dpmmbench.algorithms")]
    found, refused = plugin_discovery.discover("algorithms", [], lambda name, obj: None, entry_points=eps)
    assert list(found) == ["ok"] and found["ok"].distribution == "an unknown distribution"
    assert "failed to import" in refused["nope"] and "AttributeError" in refused["nope"]
    found, refused = plugin_discovery.discover("algorithms", [], lambda name, obj: "is not welcome", entry_points=eps[:1])
    assert not found and refused["ok"].endswith("is not welcome; left out")


def test_the_example_plugin_uses_only_the_public_interface():
    """What CI installs is a package of its own (its pyproject names both entry points) that
    imports no private module of dpmmbench: what a third party may rely on."""
    root = Path(__file__).resolve().parents[1] / "examples" / "plugin"
    project = (root / "pyproject.toml").read_text(encoding="utf-8")
    assert f'{SAMPLER} = "dpmmbench_example_plugin.sampler:SingleSiteMetropolis"' in project
    assert f'{DATASET} = "dpmmbench_example_plugin.dataset:BUILDER"' in project
    imported = set()
    for path in (root / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
    ours = {name for name in imported if name.split(".")[0] == "dpmmbench"}
    assert ours and not [name for name in ours if any(part.startswith("_") for part in name.split("."))]
