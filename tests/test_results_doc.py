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


def _summary_rows(**notes):
    """A summary.csv with one row per algorithm: R-hat 5.6e15 where the chains are flat."""
    base = {"dataset": "d", "workers": 1, "chains": 3, "failed": 0, "iterations": 20, "s_per_iteration": 0.01,
            "ess_per_s": 12.0, "git_commit": "abc", "cpu_model": "cpu"}
    base |= {f"{q}{s}": 1.0 for q in ("final_log_joint", "final_vi", "final_nmi", "final_n_clusters",
                                      "heldout_lpd", "time_to_target_s") for s in ("", "_lo", "_hi")}
    rows = [base | {"algorithm": name, "registry": name, "rhat_log_joint": rhat} | (
            {} if note is None else {"rhat_note": note}) for name, (rhat, note) in notes.items()]
    return pd.DataFrame(rows)


def _cells(page, name):
    row = next(line for line in page.splitlines() if line.startswith(f"| `{name}` |"))
    return [c.strip() for c in row.strip("|").split("|")]


def test_rhat_of_a_method_that_is_no_sampler_reads_na_with_the_reason(tmp_path):
    from dpmmbench.reports.chains import NOT_A_SAMPLER, STUCK

    summary = _summary_rows(**{"sklearn-bgm": (5609998777727528.0, NOT_A_SAMPLER["variational"]),
                               "search": (float("nan"), NOT_A_SAMPLER["optimiser"]),
                               "gibbs": (1.004, ""), "subc": (float("nan"), STUCK)})
    summary.to_csv(tmp_path / "summary.csv", index=False)  # as the page reads it: empty notes come back NaN
    page = results_doc.render(summary=pd.read_csv(tmp_path / "summary.csv"))
    bgm, search, gibbs, subc = (_cells(page, name) for name in ("sklearn-bgm", "search", "gibbs", "subc"))
    # R-hat and ESS / s columns; notes numbered in the table's order (gibbs, search, sklearn-bgm, subc)
    assert search[10:12] == ["n/a¹", "n/a¹"] and bgm[10:12] == ["n/a²", "n/a²"]
    assert "5,609" not in page and "5609" not in page
    lines = page.splitlines()
    assert f"¹ {NOT_A_SAMPLER['optimiser']}." in lines and f"² {NOT_A_SAMPLER['variational']}." in lines
    assert gibbs[10:12] == ["1.004", "12.0"]
    assert subc[10:12] == ["–³", "12.0"] and f"³ {STUCK}." in lines
    # a summary.csv written before the note: the registry still knows which method is no sampler
    old = _summary_rows(**{"sklearn-bgm": (5609998777727528.0, None), "gibbs": (1.004, None)})
    page = results_doc.render(summary=old)
    assert _cells(page, "sklearn-bgm")[10] == "n/a¹" and _cells(page, "gibbs")[10] == "1.004"


def test_the_page_opens_with_the_answer_from_the_traces(tmp_path):
    """With the workflow's traces (a folder of them), docs/results.md opens with the first
    screen, generated: one table whose best log joint is the highest median over chains among
    the settled methods at the equal budget, with a `settled` column of code spans; a variant
    with its own budget is left to the per-data-set lists; then the figure (a PNG beside the
    page) and a paragraph; at most 250 words outside the table."""
    folder = tmp_path / "traces"
    ds = datasets.load("synth-chang2013?n=300")
    finals = {}
    for name, seed, budget in [(n, s, (30.0, 120)) for n in ("gibbs", "subc", "search") for s in (0, 1)] + [
            ("gibbs", s, (60.0, 6)) for s in (0, 1)]:
        variant = name if budget[1] == 120 else "gibbs-6it"
        sampler = algorithms.make(name, family=ds.family, seed=seed)
        trace = run_chain(sampler, ds.X, budget[1], truth=ds.labels, dataset="chang-300", warmup=False, name=variant)
        finals.setdefault(variant, []).append(trace["log_joint"].iloc[-1])
        write_trace(trace, folder / variant / f"seed{seed}.parquet",
                    meta={"algorithm": name, "time_budget": budget[0], "iterations_requested": budget[1],
                          "dataset_meta": ds.meta})
    out = tmp_path / "results.md"
    cmd = [sys.executable, "-m", "dpmmbench.reports.results_doc", "--traces", str(folder), "--out", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    screen = page.split("## The answer in one screen", 1)[1].split("\n## ", 1)[0]
    table = [line for line in screen.splitlines() if line.startswith("|")]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    assert header[4] == "settled"
    row = next(line for line in table if line.startswith("| `chang-300`"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "`chang-300` (300 points × 2 dims)" and cells[1] == "30 s or 120 iterations; 2 chains"
    settled = cells[4].split(", ")
    assert settled and all(name.startswith("`") and name.endswith("`") for name in settled)
    assert "`search`" not in settled  # an optimiser is n/a: never ranked
    medians = {name: np.median(v) for name, v in finals.items() if f"`{name}`" in settled}
    (top, value), *rest = sorted(medians.items(), key=lambda kv: -kv[1])
    assert cells[2].startswith(f"`{top}` {value:,.1f}; ")
    if rest:
        assert f"{rest[0][1] - value:,.1f}".lstrip("-") in cells[2] and f"over `{rest[0][0]}`" in cells[2]
    assert "gibbs-6it" not in screen and "`gibbs-6it` (60 s or 6 iterations)" in page
    # the figure follows the table, the paragraph the figure; the figure is a PNG beside the page
    figure = screen.index("](results-quality-time.png)")
    assert screen.index(table[-1]) < figure < screen.index("**What this run can and cannot tell you.**")
    assert (tmp_path / "results-quality-time.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    prose = [line for line in screen.splitlines() if not line.startswith("|")]
    assert len(" ".join(prose).split()) <= 250

    empty = subprocess.run(cmd[:3] + ["--traces", str(tmp_path / "none"), "--out", str(out)],
                           capture_output=True, text=True)
    assert empty.returncode == 2 and "none" in empty.stderr and "Traceback" not in empty.stderr


def test_update_replaces_the_given_inputs_sections_and_keeps_the_rest(tmp_path):
    page = tmp_path / "results.md"
    perf = tmp_path / "perf.json"
    perf.write_text(json.dumps({"machine": {"commit": "c1", "cpus": 2, "numba": "x", "numba_threads": 2,
                                            "numpy": "y", "python": "z", "date": "d"}, "repeat": 3,
                                "rows": [{"benchmark": "subc step", "problem": "p", "seconds": 0.5, "rate": 2.0,
                                          "rate_unit": "M points/s"}]}))
    table = tmp_path / "t.csv"
    table.write_text("a,b\n1,2\n")
    args = ["--scaling", str(tmp_path / "none"), "--out", str(page)]
    assert results_doc.main(["--table", f"Extra={table}", *args]) == 0
    assert results_doc.main(["--perf", str(perf), "--update", *args]) == 0
    text = page.read_text()
    # the kernel-speed section joins in its place, the table from the first run stays
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["## Kernel speed (`python -m benchmarks.report`)", "## Extra"]
    assert "| subc step | p | 500.0 |" in text and "| 1 | 2 |" in text
    # again with a new number: replaced, not added twice
    perf.write_text(perf.read_text().replace('"seconds": 0.5', '"seconds": 0.25'))
    assert results_doc.main(["--perf", str(perf), "--update", *args]) == 0
    text = page.read_text()
    assert text.count("## Kernel speed") == 1 and "| subc step | p | 250.0 |" in text and "500.0" not in text
    assert results_doc.splice(text, text) == text


#: the machine line of a peers record
MACHINE = dict(commit="abc1234", date="2026-11-27 00:00:00", python="3.12", machine="x86_64", cpus=2, numba_threads=2,
               numpy="2", numba="0.6")


def test_equal_time_names_the_best_fit_and_the_leaders_apart():
    """The equal-time table scores each last state under the suite's model: the page names the
    best fit, and a leader on held-out points or NMI whose partition scores below it."""
    def row(method, nmi, lpd, joint):
        return dict(method=method, options={}, status="budget", iterations=10, time_s=1.0, nmi=nmi, n_clusters=5,
                    heldout_lpd=lpd, heldout_draws=10, log_joint=joint)

    block = dict(dataset="d", n_train=90, n_test=10, dim=2,
                 rows=[row("subc", 0.61, -305.3, -2_827_100.0), row("sklearn-bgm", 0.63, -303.9, -2_845_009.0)])
    equal = dict(budget_s=1.0, test_fraction=0.1, split_seed=0, heldout_draws=10, datasets=[block])
    page = results_doc.peers_section({"equal_time": equal, "machine": MACHINE})
    assert "| held-out log predictive | log joint | note |" in page and "| -2,827,100 |" in page
    assert ("- Best fit to the suite's model: `subc` (log joint -2,827,100); best held-out log predictive: "
            "`sklearn-bgm` (-303.900 against -305.300), whose partition scores 17,909 nats below it under the "
            "suite's model; best NMI: `sklearn-bgm` (0.630 against 0.610), whose partition scores 17,909 nats "
            "below it under the suite's model.") in page
    # one method best on all three; a record from before the column has neither
    block["rows"][1].update(nmi=0.5, heldout_lpd=-310.0)
    assert "`subc` (log joint -2,827,100); best held-out log predictive too (-305.300); best NMI too (0.610)." \
        in results_doc.peers_section({"equal_time": equal, "machine": MACHINE})
    for r in block["rows"]:
        del r["log_joint"]
    page = results_doc.peers_section({"equal_time": equal, "machine": MACHINE})
    assert "log joint" not in page and "Best fit" not in page


def test_the_relay_from_a_peers_partition_is_shown_apart_with_what_the_model_did_to_it():
    """``benchmarks.peers``' relay (subc from the best-NMI peer's last partition) is a row of its
    own, named by where it started, kept out of the equal-time leaders, and read in one line:
    a log joint that rose as the NMI fell says the model, not the search, holds the NMI back."""
    def row(method, nmi, lpd, joint, k=20, **extra):
        return dict(method=method, options={}, status="budget", iterations=10, time_s=20.1, nmi=nmi, n_clusters=k,
                    heldout_lpd=lpd, heldout_draws=10, log_joint=joint, **extra)

    peer = row("sklearn-bgm", 0.629, -303.861, -2_845_382.0)
    start = {key: peer[key] for key in ("method", "options", "nmi", "n_clusters", "log_joint", "heldout_lpd")}
    relay = row("subc", 0.607, -303.298, -2_829_660.0, k=44, start=start)
    block = dict(dataset="d", n_train=90, n_test=10, dim=2, rows=[row("subc", 0.611, -304.842, -2_826_977.0, k=35),
                                                                   peer, relay])
    equal = dict(budget_s=20.0, test_fraction=0.1, split_seed=0, heldout_draws=10, datasets=[block])
    page = results_doc.peers_section({"equal_time": equal, "machine": MACHINE})
    assert "| `subc` | defaults, from `sklearn-bgm`'s last partition | 10 | 20.1 | 0.607 | 44 |" in page
    # the relay's held-out score is not counted as a lead at equal time (it had the peer's 20 s first)
    assert "best held-out log predictive: `sklearn-bgm` (-303.861 against -304.842)" in page
    assert ("- `subc` from `sklearn-bgm`'s last partition (NMI 0.629, K 20, held-out -303.861): after 20.1 s NMI "
            "0.607, K 44, held-out -303.298, log joint +15,722 nats against that partition's: the suite's model "
            "puts its mass on partitions with a lower NMI than that peer's") in page
    relay.update(nmi=0.64)  # the model kept the peer's NMI: only the numbers
    line = next(x for x in results_doc.peers_section({"equal_time": equal, "machine": MACHINE}).splitlines()
                if x.startswith("- `subc` from"))
    assert line.endswith("log joint +15,722 nats against that partition's.")
