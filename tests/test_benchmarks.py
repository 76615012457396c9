"""The asv suite stays runnable: ``asv check`` passes, and every benchmark class runs on
its ``tiny_params`` (setup + one call of each benchmark method) in a few seconds."""
from __future__ import annotations

import importlib
import inspect
import math
import os
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # ``benchmarks`` is not an installed package
    sys.path.insert(0, str(REPO))

import benchmarks  # noqa: E402

#: method-name prefixes asv treats as benchmarks
BENCH_PREFIXES = ("time_", "timeraw_", "track_", "mem_", "peakmem_")


def asv_executable() -> str | None:
    """The ``asv`` next to the running interpreter (a venv's bin/), else the one on PATH."""
    local = Path(sys.executable).with_name("asv")
    return str(local) if local.exists() else shutil.which("asv")


def run_asv(*args, home: Path) -> subprocess.CompletedProcess:
    # HOME -> tmp so nothing global (e.g. ~/.asv-machine.json) is read or written
    env = dict(os.environ, HOME=str(home))
    return subprocess.run([asv_executable(), *args, "--config", str(REPO / "asv.conf.json")],
                          cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow  # asv imports every benchmark module in a subprocess (~5 s)
@pytest.mark.skipif(asv_executable() is None, reason="the asv executable is not installed")
def test_asv_check_passes(tmp_path):
    check = run_asv("check", "-E", f"existing:{sys.executable}", home=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "No problems found" in check.stdout, check.stdout + check.stderr


def benchmark_classes():
    """(module name, class) of every class in ``benchmarks/bench_*.py`` with benchmark methods."""
    found = []
    for info in pkgutil.iter_modules(benchmarks.__path__):
        if not info.name.startswith("bench_"):
            continue
        module = importlib.import_module(f"benchmarks.{info.name}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and bench_methods(cls):
                # the speed-up benchmark starts a Dask cluster per worker count: a slow test
                slow = [pytest.mark.slow] if name == "DaskSpeedup" else []
                found.append(pytest.param(cls, id=f"{info.name}.{name}", marks=slow))
    return found


def bench_methods(cls) -> list[str]:
    return [name for name in dir(cls) if name.startswith(BENCH_PREFIXES)]


def test_benchmark_classes_are_discovered():
    modules = {p.id.split(".")[0] for p in benchmark_classes()}
    assert {"bench_families", "bench_gibbs", "bench_fsd"} <= modules


@pytest.mark.parametrize("cls", benchmark_classes())
def test_benchmark_runs_on_tiny_params(cls):
    assert getattr(cls, "tiny_params", None), f"{cls.__name__} needs a tiny_params list for this smoke test"
    for params in cls.tiny_params:
        assert len(params) == len(cls.param_names), f"{cls.__name__}.tiny_params {params} vs {cls.param_names}"
        bench = cls()
        bench.setup(*params)
        try:
            for name in bench_methods(cls):
                value = getattr(bench, name)(*params)
                if name.startswith("track_"):
                    assert isinstance(value, float) and math.isfinite(value) and value > 0, (name, params, value)
        finally:
            if hasattr(bench, "teardown"):
                bench.teardown(*params)


@pytest.mark.slow  # the peers benchmark end to end
def test_peers_side_by_side_runs_reports_and_renders(tmp_path, monkeypatch):
    """``python -m benchmarks.peers``'s core on a tiny problem: two methods to the target, one at
    equal time with its held-out score, the optional peers reported as not installed (here the
    registry is told none is), everything in the JSON and in results_doc's section."""
    import json

    from benchmarks import peers
    from dpmmbench import algorithms
    from dpmmbench.reports import results_doc

    monkeypatch.setattr(algorithms._registry, "_installed", lambda library: False)
    runs, missing = peers.methods("target")
    assert runs == [("subc", {}), ("sklearn-bgm", {})] and set(missing) == {"bnpy-memovb", "dpgmm", "bmcc"}
    dataset = "synth-chang2013?n=2000&n_clusters=4"
    result = {"machine": peers.machine_info(),
              "time_to_target": peers.time_to_target(dataset, cap=2.0, runs=runs, missing=missing),
              # the million-point measurement's recipe, small: 10-D, its own K
              "time_to_target_scale": peers.time_to_target("synth-chang2013?n=3000&n_clusters=3&dim=10", cap=5.0,
                                                           k_target=3, measurement="scale", runs=runs[:1],
                                                           missing={}),
              "equal_time": peers.equal_time([dataset], budget=0.5, runs=runs, missing={})}
    result = json.loads(json.dumps(result, default=peers._plain))  # what the JSON file holds

    rows = {r["method"]: r for r in result["time_to_target"]["rows"]}
    assert rows["subc"]["status"] == "reached" and rows["subc"]["nmi"] >= 0.99 and rows["subc"]["n_clusters"] == 4
    assert rows["sklearn-bgm"]["settings"]["n_components"] == 20 and rows["sklearn-bgm"]["iterations"] >= 1
    for name in missing:
        assert rows[name]["status"] == "not installed" and rows[name]["install"] == missing[name]
    subc, bgm_equal, relay = result["equal_time"]["datasets"][0]["rows"]
    assert subc["status"] == "budget" and subc["time_s"] > 0.5 and math.isfinite(subc["heldout_lpd"])
    assert subc["heldout_draws"] == 10 and math.isfinite(subc["log_joint"]) and subc["log_joint"] < 0
    # subc once more, from the peer's last partition (the only peer here); no partition is recorded
    assert relay["method"] == "subc" and relay["start"]["method"] == "sklearn-bgm" and relay["iterations"] >= 1
    assert relay["start"]["log_joint"] == bgm_equal["log_joint"] and math.isfinite(relay["log_joint"])
    assert not any("last_labels" in r for r in result["equal_time"]["datasets"][0]["rows"])
    assert "| log joint | note |" in results_doc.render(peers=result)

    page = results_doc.render(peers=result)
    assert "## Side by side with peers" in page and "| `subc` | defaults |" in page
    assert "| `dpgmm` | defaults | not installed |" in page and missing["dpgmm"] in page
    scale = result["time_to_target_scale"]
    assert scale["dim"] == 10 and scale["k_target"] == 3 and scale["rows"][0]["status"] == "reached"
    assert result["time_to_target"]["peers"] == ["bmcc", "bnpy-memovb", "dpgmm", "sklearn-bgm"]
    # subc's lead over the peers in words, from the rows: sklearn-bgm ran on the 2-D set only
    bgm = rows["sklearn-bgm"]
    lead = (f"the fastest peer that reached it, `sklearn-bgm` ({bgm['time_s']:.2f} s)" if bgm["status"] == "reached"
            else "faster than `sklearn-bgm` (not there within 2 s)")
    assert lead in page and page.count("- `subc` (") == 1
    assert f"### {dataset} (1,800 training + 200 held-out points, 2-D)" in page
    source, out = tmp_path / "peers.json", tmp_path / "results.md"
    source.write_text(json.dumps(result))
    # no scaling records: the page is the peers section alone (results_doc reads docs/scaling by default)
    assert results_doc.main(["--peers", str(source), "--scaling", str(tmp_path / "no-records"),
                             "--out", str(out)]) == 0
    assert out.read_text() == page
