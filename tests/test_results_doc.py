"""docs/results.md is rendered from outputs, never typed: the generator shows what they hold."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd

from dpmmbench import algorithms, datasets
from dpmmbench.reports import results_doc
from dpmmbench.reports.summary import read_runs, summarize, summary_table
from dpmmbench.reports.traces import write_trace
from dpmmbench.workflows.driver import run_chain


def _traces(tmp_path):
    ds = datasets.load("synth-chang2013?n=300")
    paths = []
    for name in ("gibbs", "fsd"):
        for seed in (0, 1):
            sampler = algorithms.make(name, family=ds.family, seed=seed)
            trace = run_chain(sampler, ds.X, 3, truth=ds.labels, dataset="chang-300", warmup=False)
            paths.append(write_trace(trace, tmp_path / f"{name}-{seed}.csv", meta={"git_commit": "abc123"}))
    return paths


def test_summary_table_holds_the_medians_of_the_runs(tmp_path):
    ds = datasets.load("synth-chang2013?n=300")
    failed = run_chain(algorithms.make("gibbs", family=ds.family, seed=2), ds.X, 1, dataset="chang-300",
                       warmup=False)
    failed_path = write_trace(failed, tmp_path / "failed.csv", meta={"status": "failed", "error": "X: y"})
    frame, runs = read_runs([*_traces(tmp_path), failed_path])
    page = results_doc.render(summary=summary_table(frame, runs))
    gibbs = runs[(runs["algorithm"] == "gibbs") & (runs["status"] != "failed")]
    row = next(line for line in page.splitlines() if line.startswith("| `gibbs` |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:4] == ["1", "2", "3"]  # workers, chains, iterations
    lo, hi = np.quantile(gibbs["final_log_joint"], [0.05, 0.95])
    assert cells[5] == f"{gibbs['final_log_joint'].median():,.0f} [{lo:,.0f}, {hi:,.0f}]"
    assert cells[8].split(" [")[0] == f"{gibbs['final_n_clusters'].median():,.0f}"
    assert "### chang-300" in page and "commit abc123" in page and "(1 failed, left out)" in page
    assert page.startswith(results_doc.HEADER)


def test_cli_renders_every_input_and_refuses_missing_ones(tmp_path):
    summary = tmp_path / "summary.csv"
    summarize(_traces(tmp_path)).to_csv(summary, index=False)
    exactness = tmp_path / "exactness.json"
    exactness.write_text(json.dumps({"environment": {"git_commit": "abc123"}, "rows": [
        {"sampler": "gibbs", "problem": "niw-2d", "exact": True, "tv": 0.031, "threshold": 0.05},
        {"sampler": "fsd", "problem": "niw-2d", "exact": False, "tv": 0.2, "threshold": 0.05}]}))
    extra = tmp_path / "extra.csv"
    pd.DataFrame({"data": ["a", "b"], "score": [1.5, np.nan]}).to_csv(extra, index=False)
    out = tmp_path / "results.md"
    cmd = [sys.executable, "-m", "dpmmbench.reports.results_doc", "--summary", str(summary),
           "--exactness", str(exactness), "--table", f"Extra={extra}", "--out", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    assert "| `gibbs` | yes | 0.031 (0.050) |" in page and "| `fsd` | no | 0.200 (0.050) |" in page
    assert "## Extra" in page and "| b |  |" in page

    missing = subprocess.run(cmd[:-2] + ["--perf", str(tmp_path / "nope.json"), "--out", str(tmp_path / "x.md")],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "nope.json" in missing.stderr and "Traceback" not in missing.stderr
    assert not (tmp_path / "x.md").exists()
