"""The papers' reproductions: docs/reproductions.md regenerates identically from the committed
tables; a finished run's small tables are collected, read back and rendered the same twice;
a reproduction's report opens with its paper's entries, in the paper's order; bad input is
named."""
from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from dpmmbench.reports import reproductions
from dpmmbench.reports.entries import NOT_COMPARABLE, VERDICTS, Entry
from dpmmbench.reports.papers import PAPERS
from dpmmbench.reports.report import build_report
from dpmmbench.reports.traces import write_trace
from dpmmbench import datasets
from dpmmbench.workflows import driver

ROOT = Path(__file__).resolve().parents[1]
DATA = "synth-chang2013?n=200"
RUNS = {"gibbs": {}, "gibbs-splitmerge": {}, "search-increasing": {"heuristic": "inadmissible", "beam": 10}}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A workflow-shaped results folder of real tiny runs (a search and two samplers, 2 seeds)."""
    import distributed

    out = tmp_path_factory.mktemp("run") / "results"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        for name, options in RUNS.items():
            algorithm = "search" if name.startswith("search") else name
            for seed in (0, 1):
                spec = driver.RunSpec(algorithm, DATA, 1 if algorithm == "search" else 5, seed=seed,
                                      scheduler=cluster.scheduler_address, options=options, name=name)
                trace, meta = driver.run(spec)
                write_trace(trace, out / "traces" / "chang" / name / "w1" / f"seed{seed}.parquet", meta)
    return out


def test_committed_record_regenerates_identically(tmp_path):
    """docs/reproductions.md is what `render` makes of the committed tables, byte for byte."""
    root = tmp_path / "docs" / "reproductions"
    shutil.copytree(ROOT / "docs" / "reproductions", root)
    # the speed-up entries read the many-core scaling records beside the reproductions
    shutil.copytree(ROOT / "docs" / "scaling", tmp_path / "docs" / "scaling")
    text = reproductions.render(root, tmp_path / "docs" / "reproductions.md")
    assert text == (ROOT / reproductions.DOC).read_text()
    for key, paper in PAPERS.items():  # every paper has its record, and every figure linked is there
        assert (root / key / "record.json").is_file(), key
        assert f"## {paper.TITLE}" in text
    for link in (line.split("](", 1)[1].rstrip(")") for line in text.splitlines() if line.startswith("![")):
        assert (tmp_path / "docs" / link).is_file() and (ROOT / "docs" / link).is_file(), link


def test_collect_load_render(results, tmp_path):
    artificial = tmp_path / "artificial.csv"
    pd.DataFrame({"n": [10, 10], "heuristic": ["admissible", "inadmissible"], "beam": [10, 10],
                  "gap_to_truth": [0.0, -1.0], "cpu_s": [0.1, 0.01], "states_pushed": [300, 40],
                  "states_popped": [90, 10]}).to_csv(artificial, index=False)
    folder = reproductions.collect("daume2007", results, tmp_path / "root" / "daume2007", 12.5, [artificial])
    names = {p.name for p in folder.iterdir()}
    assert {"summary.csv", "runs.csv", "curves.csv", "communication.csv", "scaling.csv", "claims.json",
            "record.json", "artificial.csv"} <= names
    record = json.loads((folder / "record.json").read_text())
    assert record["wall_s"] == 12.5 and record["runs"] == 6 and record["failed"] == 0
    assert "/" not in "".join(record["git_commit"])  # commits, not paths
    # what the runs assumed, from their metadata: the family with its hyper-parameters, the options
    assert record["priors"] == {DATA: repr(datasets.load(DATA).family)}
    assert record["options"] == {"search-increasing": {"heuristic": "inadmissible", "beam": 10}}

    tables = reproductions.load(folder)
    assert len(tables.runs) == 6 and set(tables.runs["name"]) == set(RUNS)
    # each chain is thinned, but keeps its first and last state
    last = tables.curves.groupby(["name", "seed"])["iteration"].max()
    assert set(last.loc[["gibbs", "gibbs-splitmerge"]]) == {5}
    assert {c["paper"].split(" ")[0] for c in tables.claims} >= {"Chang", "Wang"}

    out = tmp_path / "root.md"
    first = reproductions.render(tmp_path / "root", out)
    assert reproductions.render(tmp_path / "root", out) == first == out.read_text()
    entries = PAPERS["daume2007"].entries(tables)
    assert [e.verdict in VERDICTS for e in entries] == [True] * len(entries)
    for entry in entries:  # in the paper's order, each with its verdict
        assert f"### {entry.item}" in first and f"**Verdict: {entry.verdict}.**" in first
    assert first.index(entries[0].item) < first.index(entries[-1].item)
    # the runs this tiny grid lacks are named, never guessed
    assert "Runs missing from this record" in first and "12.5" not in first and "0.2 min" in first
    assert (f"Priors and hyper-parameters: `{DATA}`: NormalInverseWishart(" in first
            and "concentration α 1;" in first and "search-increasing: beam=10, heuristic=inadmissible." in first)
    for key in set(PAPERS) - {"daume2007"}:
        assert f"Not run yet: `{PAPERS[key].CONFIG}` has no record in `root/{key}/`" in first


def test_a_reproduction_report_opens_with_the_paper(results, tmp_path):
    paths = sorted((results / "traces").rglob("*.parquet"))
    out = build_report(paths, tmp_path / "index.html", config={"reproduces": "daume2007"})
    page = out.read_text()
    assert page.index("id='reproduction'") < page.index("id='answer'") < page.index("id='claims'")
    from dpmmbench.reports.runs import read_runs

    tables = reproductions.tables_from_runs(*read_runs(paths), record={})
    items = [e.item for e in PAPERS["daume2007"].entries(tables)]
    positions = [page.index(html.escape(item, quote=True).replace("&#x27;", "&#39;")) for item in items]
    assert positions == sorted(positions)
    plain = build_report(paths, tmp_path / "plain.html", config={}).read_text()
    assert "id='reproduction'" not in plain


def test_bad_input_is_named(results, tmp_path, capsys):
    with pytest.raises(ValueError, match="unknown paper 'chang2031'"):
        reproductions.collect("chang2031", results, tmp_path / "x", 10.0)
    for wall in (0.0, float("nan"), -3.0):
        with pytest.raises(ValueError, match="wall_s"):
            reproductions.collect("chang2013", results, tmp_path / "x", wall)
    with pytest.raises(ValueError, match="no traces under"):
        reproductions.collect("chang2013", tmp_path, tmp_path / "x", 10.0)
    assert not (tmp_path / "x").exists()  # nothing half-written
    assert reproductions.main(["collect", "chang2013", "--results", str(tmp_path), "--wall-s", "5"]) == 2
    assert "no traces under" in capsys.readouterr().err
    with pytest.raises(ValueError, match="verdict 'held'"):
        Entry("Figure 1", "x", "y", "held", "z")
    assert Entry("Figure 1", "x", "y", NOT_COMPARABLE, "z").verdict == NOT_COMPARABLE


def test_thin_keeps_first_and_last_rows():
    frame = pd.DataFrame({"run": [0] * 500 + [1] * 3, "iteration": list(range(500)) + [0, 1, 2]})
    thin = reproductions.thin(frame, points=20)
    for run, rows in thin.groupby("run"):
        full = frame[frame["run"] == run]
        assert rows["iteration"].iloc[0] == full["iteration"].iloc[0]
        assert rows["iteration"].iloc[-1] == full["iteration"].iloc[-1]
        assert len(rows) <= 22 and rows["iteration"].is_monotonic_increasing
    assert len(thin[thin["run"] == 1]) == 3
