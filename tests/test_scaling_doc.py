"""Measured scaling: ``python -m benchmarks.scaling`` writes a record of real iterations in
worker x thread layouts, and ``reports.scaling_doc`` renders the committed records into
docs/results.md and docs/deploy.md (regenerated here and compared), with the cost model's
prediction beside each measured Dask row; ``python -m benchmarks.quality`` records clusters and
NMI against time of the sharded samplers from one cluster, rendered beside them."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import quality, scaling  # noqa: E402
from dpmmbench.reports import results_doc, scaling_doc  # noqa: E402


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    """A real quick record: subc in-process at 1 and 2 threads, subc and cons-prog on 1 and 2
    single-threaded Dask workers."""
    out = tmp_path_factory.mktemp("scaling") / "2-core.json"
    code = scaling.main(["--quick", "--cores", "2", "--only", "subc", "cons-prog", "--layouts", "1x1,2x1",
                         "--out", str(out), "--commit", "abc123"])
    assert code == 0
    return out


def test_record_has_the_schema_and_real_rows(record):
    data = json.loads(record.read_text())
    assert set(data) >= {"machine", "commit", "versions", "rows"} and data["commit"] == "abc123"
    assert set(data["machine"]) >= {"cores", "cpu", "memory_gb"} and data["machine"]["cores"] >= 1
    layouts = {(r["algorithm"], r["backend"], r["workers"], r["threads"]) for r in data["rows"]}
    assert layouts == {("subc", "in-process", 1, 1), ("subc", "in-process", 1, 2), ("subc", "dask", 1, 1),
                       ("subc", "dask", 2, 1), ("cons-prog", "dask", 1, 1), ("cons-prog", "dask", 2, 1)}
    for row in data["rows"]:
        assert row["seconds_per_iteration"] > 0 and row["iterations"] == 2
        # started at the truth of 10 well-separated clusters: no layout destroys them
        assert row["nmi"] > 0.9 and 8 <= row["n_clusters"] <= 14
        if row["backend"] == "dask":
            assert 0 <= row["serial_share"] <= 1 and row["compute_s"] > 0 and row["messages"] >= 2 * row["workers"]


def test_blocks_render_speedups_and_model_errors(record):
    [loaded] = scaling_doc.load_records(record.parent)
    table = scaling_doc.speedups(loaded).set_index("algorithm")
    # subc's one core is the in-process sampler on one thread
    subc = [r for r in loaded["rows"] if r["algorithm"] == "subc" and r["backend"] == "in-process"
            and r["threads"] == 1]
    assert table.loc["subc", "one_core_s"] == subc[0]["seconds_per_iteration"]
    text = scaling_doc.results_block([loaded])
    assert "| `subc` |" in text and "2 cores" in text and "outside shards" in text
    model = scaling_doc.model_rows(loaded)
    assert set(model["algorithm"]) == {"subc", "cons-prog"} and model["fitted"].all()
    # fitted on its two worker counts, the model gives back what it was fitted on: one master
    # share for both counts and non-negative compute terms, so right on average (the same
    # criterion as tests/test_costmodel.py on traces)
    for _, g in model.groupby("algorithm"):
        assert g["model_s"].mean() == pytest.approx(g["measured_s"].mean(), rel=0.15)
    assert "(fitted)" in scaling_doc.deploy_block([loaded])


def test_committed_records_are_what_the_pages_show(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert scaling_doc.load_records(), "docs/scaling/ holds no record"
    assert scaling_doc.main(["--check"]) == 0


def test_results_doc_renders_the_scaling_section(tmp_path, record):
    out = tmp_path / "results.md"
    assert results_doc.main(["--scaling", str(record.parent), "--table", f"t={_csv(tmp_path)}",
                             "--out", str(out)]) == 0
    text = out.read_text()
    assert "## Scaling, measured" in text and scaling_doc.BEGIN in text and scaling_doc.END in text


def _csv(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a,b\n1,2\n")
    return path


@pytest.mark.parametrize("content, message", [("{", "not a scaling record"),
                                              ('{"machine": {"cores": 2}, "rows": []}', "no rows"),
                                              ('{"machine": {"cores": 2}, "rows": [{"algorithm": "subc"}]}',
                                               "rows lack backend")])
def test_a_bad_record_is_named(tmp_path, content, message):
    (tmp_path / "bad.json").write_text(content)
    with pytest.raises(ValueError, match=message) as info:
        scaling_doc.load_records(tmp_path)
    assert "bad.json" in str(info.value)


@pytest.mark.parametrize("argv, message", [(["--layouts", "2x"], "layouts are WORKERSxTHREADS"),
                                           (["--layouts", "4x4", "--cores", "2"], "a layout of 16 cores on 2"),
                                           (["--iterations", "0"], "must be >= 1"),
                                           (["--datasets", "synth-chang2013"], "nothing to measure")])
def test_bad_arguments_get_a_clear_error(argv, message, capsys, tmp_path):
    assert scaling.main(["--quick", "--out", str(tmp_path / "x.json"), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


@pytest.fixture(scope="module")
def quality_record(tmp_path_factory):
    """A real quick quality record: subc, slice-mr and cons-prog from one cluster on 1 and 2 Dask
    workers."""
    out = tmp_path_factory.mktemp("quality") / "2-core.json"
    assert quality.main(["--quick", "--workers", "1,2", "--only", "subc", "slice-mr", "cons-prog",
                         "--out", str(out)]) == 0
    return out


def test_quality_record_holds_real_trajectories(quality_record):
    data = json.loads(quality_record.read_text())
    cap = quality.QUICK["iterations"]
    assert data["truth_k"] == 10 and data["n_points"] == 4000 and data["iterations_cap"] == cap
    assert {(r["algorithm"], r["workers"]) for r in data["runs"]} == {("subc", 1), ("subc", 2), ("slice-mr", 1),
                                                                     ("slice-mr", 2), ("cons-prog", 1),
                                                                     ("cons-prog", 2)}
    for run in data["runs"]:
        times = [t for t, _, _ in run["trajectory"]]
        # from one cluster at time 0 (after init), then forward in time, one point a step; the
        # check's runs end at their step count (their budget only bounds a stalled run)
        assert run["trajectory"][0][1] == 1 and times == sorted(times) and times[-1] < data["budget_s"]
        assert run["iterations"] == cap and len(run["trajectory"]) == cap + 1 <= quality.POINTS
        assert (run["n_clusters"], run["nmi"]) == tuple(run["trajectory"][-1][1:])
    # subc finds the ten well-separated clusters within its steps on either layout: a seeded
    # chain of a fixed number of steps, the same whatever else the machine is doing
    assert all(r["nmi"] > 0.9 for r in data["runs"] if r["algorithm"] == "subc")
    # a consolidation sampler counts its workers' new components and the merged ones; from one
    # cluster, every cluster beyond the first was a new component that was not merged
    for run in data["runs"]:
        if run["algorithm"] == "cons-prog":
            assert run["new_components"] >= run["merged"] >= 0
            assert run["new_components"] - run["merged"] >= run["n_clusters"] - 1
        else:
            assert "new_components" not in run and "merged" not in run


def test_quality_block_says_when_the_truth_was_reached_or_where_it_was_going(quality_record, tmp_path):
    [loaded] = scaling_doc.load_quality(quality_record.parent)
    text = scaling_doc.quality_block([loaded])
    assert "| `subc` | 1 |" in text and "| `slice-mr` | 2 |" in text and "Fewer clusters with more workers (more than 30% fewer" in text
    assert f"{quality.QUICK['iterations']} steps per run (at most" in text
    cons = next(r for r in loaded["runs"] if r["algorithm"] == "cons-prog" and r["workers"] == 2)
    assert f"| {cons['new_components']} / {cons['merged']} |" in text and "*new / merged*" in text
    assert "| – |" in text  # the samplers without new components at the master
    # a made-up run that never gets there is described by its second half
    run = {"algorithm": "x", "workers": 1, "iterations": 3, "n_clusters": 3, "nmi": 0.5,
           "trajectory": [[0.0, 1, 0.0], [1.0, 2, 0.3], [2.0, 3, 0.5]]}
    assert scaling_doc.reached_at(run, 10) is None and scaling_doc.reached_at(run, 4) == 2.0
    assert "still rising: K 2 -> 3" in scaling_doc._course(run)
    record = {**loaded, "runs": [run, {**run, "workers": 2, "n_clusters": 1,
                                       "trajectory": [[0.0, 1, 0.0], [2.0, 1, 0.0]]}], "truth_k": 3}
    assert "`x` (1: K 3, 2: K 1)" in scaling_doc.quality_block([record])
    # beside the scaling records, results_block adds the section
    assert "### Quality at scale" in scaling_doc.results_block(scaling_doc.load_records(ROOT / "docs" / "scaling"),
                                                               [loaded])


@pytest.mark.parametrize("content", ["{", '{"machine": {"cores": 2}, "truth_k": 10, "budget_s": 1, "runs": [{}]}'])
def test_a_bad_quality_record_is_named(tmp_path, content):
    (tmp_path / "bad.json").write_text(content)
    with pytest.raises(ValueError, match="bad.json: not a quality record"):
        scaling_doc.load_quality(tmp_path)


@pytest.mark.parametrize("argv, message", [(["--workers", "0"], "--workers takes counts >= 1"),
                                           (["--only", "gibbs"], "not sharded samplers: ['gibbs']"),
                                           (["--budget", "0"], "--budget must be > 0"),
                                           (["--iterations", "0"], "--iterations must be >= 1")])
def test_quality_bad_arguments_get_a_clear_error(argv, message, capsys, tmp_path):
    assert quality.main(["--quick", "--out", str(tmp_path / "q.json"), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "q.json").exists()
