"""Where a run's and a workflow's time goes: the driver's scoring and held-out seconds, the
job files Snakemake's ``benchmark:`` writes, each run's start-up and the workflow's sampling
share (reports/runs.py, reports/timing.py; docs/design.md "Where the time goes")."""
from __future__ import annotations

import json
import math
import time
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from dpmmbench import algorithms, datasets
from dpmmbench.algorithms.runner import StopRule, warm_up
from dpmmbench.reports.runs import job_file, read_runs
from dpmmbench.reports.timing import timing_rows, workflow_timing
from dpmmbench.reports.traces import trace_frame, write_trace
from dpmmbench.workflows import driver


# ---- the driver's bookkeeping -------------------------------------------------------------
def test_run_records_its_scoring_heldout_and_finish(scheduler):
    trace, meta = driver.run(driver.RunSpec("gibbs", "synth-chang2013?n=200", 4, seed=1, test_fraction=0.2,
                                            scheduler=scheduler))
    assert meta["score_s"] > 0 and meta["heldout_s"] > 0
    # the parts the run measured are disjoint pieces of its own wall time
    assert meta["time_s"] + meta["score_s"] + meta["heldout_s"] < meta["wall_s"]
    started = datetime.fromisoformat(meta["started_utc"])
    finished = datetime.fromisoformat(meta["finished_utc"])
    assert finished.utcoffset().total_seconds() == 0 and "." in meta["finished_utc"]  # UTC, to the ms
    assert started <= finished
    json.dumps(meta)

    _, nothing = driver.run(driver.RunSpec("gibbs", "synth-chang2013?n=200", 2, seed=1, test_fraction=0,
                                           scheduler=scheduler))
    assert nothing["heldout_s"] == 0.0 and nothing["score_s"] > 0  # nothing held out: no held-out time


def test_held_out_points_scored_where_the_chain_ran_score_as_its_draws_would():
    """A serial chain's task scores the held-out points itself (its last states then stay
    where they are): the same number as the draws scored where the run is driven."""
    from dpmmbench.datasets import holdout

    train, test = holdout(datasets.load("synth-chang2013?n=400"), 0.1, 0)
    spec = driver.RunSpec("gibbs", "synth-chang2013?n=400", 12, seed=2)
    args = {"truth": train.labels, "progress": False, "dataset": "d"}

    def chain(**extra):
        sampler = algorithms.make("gibbs", family=train.family, seed=2)
        return driver._chain_task(sampler, train.X, spec, dict(args, **extra))

    there, here = chain(test=test.X), chain()
    assert there.draws == [] and len(here.draws) == spec.heldout_draws
    lpd, n_draws, seconds = there.heldout
    assert n_draws == spec.heldout_draws and seconds > 0
    assert lpd == driver.heldout_lpd(train.family, train.X, here.draws, test.X) and math.isfinite(lpd)


def test_scoring_time_is_the_callbacks_and_not_the_samplers(monkeypatch):
    """Every state's scoring is counted in ``score_s`` and never in ``time_s``: a scorer made
    slow by a known pause per state shows it in the one and not in the other."""
    pause, iterations = 0.2, 3
    real_score = driver.StateScorer.__call__

    def slow_score(self, *args, **kwargs):
        time.sleep(pause)
        return real_score(self, *args, **kwargs)

    monkeypatch.setattr(driver.StateScorer, "__call__", slow_score)
    data = datasets.load("synth-chang2013?n=100")
    sampler = algorithms.make("gibbs", family=data.family, seed=0)
    warm_up(sampler, data.X)  # as the driver does: loading compiled kernels is no sampler time either
    rows, timing = [], {}
    result = driver._scored_chain(sampler, data.X, StopRule(iterations), rows, timing=timing)
    assert len(rows) == iterations + 1
    assert timing["score_s"] >= pause * (iterations + 1)
    assert result.sampler_s == rows[-1]["time_s"] < pause  # the pauses are not sampler time


def test_a_failed_chain_keeps_its_scoring_time():
    class Failing:
        """A gibbs sampler whose second step raises."""

        def __init__(self, inner):
            self.inner, self.steps = inner, 0

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def step(self, state):
            self.steps += 1
            if self.steps == 2:
                raise RuntimeError("second step fails")
            return self.inner.step(state)

    data = datasets.load("synth-chang2013?n=100")
    sampler = Failing(algorithms.make("gibbs", family=data.family, seed=0))
    rows, timing = [], {}
    with pytest.raises(RuntimeError, match="second step"):
        driver._scored_chain(sampler, data.X, StopRule(5), rows, timing=timing)
    assert len(rows) == 2 and timing["score_s"] > 0
    assert np.isfinite(timing["score_s"])


# ---- job files and start-up (reports/runs.py) -----------------------------------------------
FINISH = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


def _chain(name, seed, workers, time_s):
    """A two-row trace whose sampler time ends at ``time_s``."""
    return trace_frame([{"algorithm": name, "dataset": "d", "seed": seed, "workers": workers, "iteration": i,
                         "time_s": t, "log_joint": -10.0, "n_clusters": 2, "vi": 0.1, "bytes_sent": 0,
                         "bytes_received": 0, "messages": 0, "alpha": 1.0, "nmi": 0.9}
                        for i, t in enumerate((time_s / 2, time_s))])


def _workflow_run(results, name, seed, *, time_s, score_s, heldout_s, finished_after, workers=1, threads=1,
                  job_wall=None, cluster=("tcp://127.0.0.1:1", 2, 1), **meta):
    """A run as the workflow leaves it: its trace under results/traces and, when ``job_wall``
    is given, its job file under results/jobs, written by Snakemake's own writer."""
    from snakemake.benchmark import BenchmarkRecord, write_benchmark_records

    trace = results / "traces" / "d" / name / f"w{workers}" / f"seed{seed}.parquet"
    scheduler, n_workers, per_worker = cluster
    finished = (FINISH + timedelta(seconds=finished_after)).isoformat(timespec="milliseconds")
    write_trace(_chain(name, seed, workers, time_s), trace,
                {"algorithm": "gibbs", "status": "completed", "score_s": score_s, "heldout_s": heldout_s,
                 "wall_s": time_s + (score_s or 0) + (heldout_s or 0), "finished_utc": finished, "threads": threads,
                 "workers": workers, "dask": {"scheduler": scheduler, "n_workers": n_workers,
                                              "threads_per_worker": per_worker}} | meta)
    if job_wall is not None:
        job = results / "jobs" / "d" / name / f"w{workers}" / f"seed{seed}.tsv"
        assert job == job_file(trace)
        job.parent.mkdir(parents=True, exist_ok=True)
        write_benchmark_records([BenchmarkRecord(running_time=job_wall)], str(job), False)
    return trace


def test_startup_is_the_job_wall_time_less_sampler_and_scoring(tmp_path):
    results = tmp_path / "results"
    paths = [_workflow_run(results, "gibbs", 0, time_s=2.0, score_s=0.25, heldout_s=0.05, job_wall=3.0,
                           finished_after=3.0),
             _workflow_run(results, "gibbs", 1, time_s=1.0, score_s=0.1, heldout_s=0.0, job_wall=1.5,
                           finished_after=4.0),
             _workflow_run(results, "gibbs", 2, time_s=1.0, score_s=0.1, heldout_s=0.0, finished_after=5.0)]
    assert "\ts\t" not in paths[0].read_bytes().decode(errors="replace")  # a parquet, not the job file
    _, runs = read_runs(paths)
    assert list(runs["job_wall_s"][:2]) == [3.0, 1.5]
    assert runs["startup_s"][0] == pytest.approx(3.0 - 2.0 - 0.25 - 0.05)
    assert runs["startup_s"][1] == pytest.approx(1.5 - 1.0 - 0.1)
    assert list(runs["timing_note"][:2]) == ["", ""]
    # a run whose job left no file (or a run outside Snakemake): NaN, and the row says why
    assert math.isnan(runs["job_wall_s"][2]) and math.isnan(runs["startup_s"][2])
    assert runs["timing_note"][2].startswith("no job file") and "seed2.tsv" in runs["timing_note"][2]


@pytest.mark.parametrize("text, needle", [
    ("", "not a Snakemake benchmark table"),
    ("s\th:m:s\n", "has no row"),
    ("\n", "has no column 's'"),
    ("seconds\th:m:s\n1.5\t0:00:01\n", "has no column 's'"),
    ("s\th:m:s\nNA\t0:00:01\n", "'NA' seconds, not a duration"),
    ("s\th:m:s\n-1.00\t0:00:01\n", "'-1.00' seconds"),
    ("s\th:m:s\n1.5\t0:00:01\tnot\tthis\tshape\n", "not a Snakemake benchmark table"),
    (b"\xff\xfe\x00garbage", "not a Snakemake benchmark table"),
])
def test_a_malformed_job_file_never_breaks_reading(tmp_path, text, needle):
    results = tmp_path / "results"
    good = _workflow_run(results, "gibbs", 0, time_s=2.0, score_s=0.2, heldout_s=0.0, job_wall=3.0,
                         finished_after=3.0)
    bad = _workflow_run(results, "fsd", 0, time_s=2.0, score_s=0.2, heldout_s=0.0, finished_after=3.0)
    job = job_file(bad)
    job.parent.mkdir(parents=True, exist_ok=True)
    job.write_bytes(text if isinstance(text, bytes) else text.encode())
    _, runs = read_runs([good, bad])
    assert runs["startup_s"][0] == pytest.approx(0.8)
    assert math.isnan(runs["job_wall_s"][1]) and math.isnan(runs["startup_s"][1])
    assert needle in runs["timing_note"][1] and str(job) in runs["timing_note"][1]


def test_a_job_file_shorter_than_its_run_is_not_its_run(tmp_path):
    """A job file left by an older job (the trace rewritten since, outside Snakemake) would give
    a negative start-up: it is refused, not subtracted."""
    results = tmp_path / "results"
    stale = _workflow_run(results, "gibbs", 0, time_s=2.0, score_s=0.2, heldout_s=0.0, job_wall=1.0,
                          finished_after=3.0)
    _, runs = read_runs([stale])
    assert math.isnan(runs["startup_s"][0]) and "not this run's job" in runs["timing_note"][0]


def test_runs_before_scoring_was_timed_and_outside_the_workflow(tmp_path):
    old = _workflow_run(tmp_path / "results", "gibbs", 0, time_s=2.0, score_s=None, heldout_s=None, job_wall=3.0,
                        finished_after=3.0)
    outside = write_trace(_chain("gibbs", 1, 1, 1.0), tmp_path / "run.parquet", {"algorithm": "gibbs"})
    _, runs = read_runs([old, outside])
    assert runs["job_wall_s"][0] == 3.0 and math.isnan(runs["startup_s"][0])
    assert "predates" in runs["timing_note"][0]
    assert math.isnan(runs["startup_s"][1]) and "outside the workflow" in runs["timing_note"][1]


# ---- the workflow's timing (reports/timing.py) ---------------------------------------------------
def test_sampling_share_is_sampler_core_seconds_over_the_run_phase(tmp_path):
    """Three timed runs on one shared cluster of 2 cores, one of them on both (2 workers), and
    one run without a job file, which no figure counts."""
    results = tmp_path / "results"
    paths = [
        # job 0: [0, 3], job 1: [1, 4], job 2 (2 workers): [4, 10]
        _workflow_run(results, "gibbs", 0, time_s=2.0, score_s=0.5, heldout_s=0.0, job_wall=3.0, finished_after=3.0),
        _workflow_run(results, "gibbs", 1, time_s=2.5, score_s=0.2, heldout_s=0.1, job_wall=3.0, finished_after=4.0),
        _workflow_run(results, "subc", 0, time_s=5.0, score_s=0.3, heldout_s=0.1, job_wall=6.0, finished_after=10.0,
                      workers=2),
        _workflow_run(results, "fsd", 0, time_s=50.0, score_s=0.3, heldout_s=0.1, finished_after=60.0),
    ]
    _, runs = read_runs(paths)
    timing = workflow_timing(runs)
    assert (timing.runs, timing.timed_runs, timing.cores, timing.clusters) == (4, 3, 2, 1)
    assert timing.span_s == pytest.approx(10.0)
    startups = [3.0 - 2.5, 3.0 - 2.8, 6.0 - 5.4]
    assert timing.startup_median_s == pytest.approx(np.median(startups))
    assert timing.startup_p90_s == pytest.approx(np.percentile(startups, 90))
    assert timing.sampler_s == pytest.approx(9.5) and timing.scoring_s == pytest.approx(1.2)
    assert timing.job_wall_s == pytest.approx(12.0) and timing.startup_s == pytest.approx(sum(startups))
    # sampler core-seconds 2 + 2.5 + 2 x 5 over 2 cores x 10 s
    assert timing.sampling_share == pytest.approx(14.5 / 20)
    assert timing.job_sampling_share == pytest.approx(9.5 / 12)
    assert timing.startup_met is False and timing.sampling_met is False
    rows = {row[0]: row[1] for row in timing_rows(timing)}
    assert rows["runs timed"] == "3 of 4" and rows["sampling share"].startswith("72 % (goal ≥ 80 %: not met)")
    # given cores win over the clusters' size
    assert workflow_timing(runs, cores=4).sampling_share == pytest.approx(14.5 / 40)


def test_goals_met_and_clusters_counted_per_run(tmp_path):
    """One embedded cluster per run (the workflow before its shared cluster): each is counted,
    and the cores are the machine's that the runs could use (no metadata holds --cores)."""
    results = tmp_path / "results"
    paths = [_workflow_run(results, "gibbs", seed, time_s=0.9, score_s=0.05, heldout_s=0.0, job_wall=1.0,
                           finished_after=float(seed + 1), cluster=(f"tcp://127.0.0.1:{seed + 1}", 1, 1),
                           cores_available=2)
             for seed in range(3)]
    _, runs = read_runs(paths)
    timing = workflow_timing(runs)
    assert (timing.cores, timing.clusters, timing.span_s) == (2, 3, pytest.approx(3.0))
    assert timing.startup_median_s == pytest.approx(0.05) and timing.startup_met
    assert timing.sampling_share == pytest.approx(2.7 / 6.0) and not timing.sampling_met
    assert workflow_timing(runs, cores=1).sampling_share == pytest.approx(2.7 / 3.0)
    assert workflow_timing(runs, cores=1).sampling_met
    # without the machine's cores in the metadata, the largest cluster's
    _, older = read_runs([_workflow_run(tmp_path / "older", "gibbs", seed, time_s=0.9, score_s=0.05, heldout_s=0.0,
                                        job_wall=1.0, finished_after=float(seed + 1),
                                        cluster=(f"tcp://127.0.0.1:{seed + 1}", 1, 1)) for seed in range(2)])
    assert workflow_timing(older).cores == 1


def test_no_timed_run_gives_no_figures_and_bad_cores_are_refused(tmp_path):
    outside = write_trace(_chain("gibbs", 1, 1, 1.0), tmp_path / "run.parquet", {"algorithm": "gibbs"})
    _, runs = read_runs([outside])
    timing = workflow_timing(runs)
    assert timing.timed_runs == 0 and math.isnan(timing.sampling_share) and math.isnan(timing.startup_median_s)
    assert timing.startup_met is None and timing.sampling_met is None
    assert dict((r[0], r[1]) for r in timing_rows(timing))["sampling share"].startswith("– (goal ≥ 80 %: unknown)")
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="cores must be a positive integer"):
            workflow_timing(runs, cores=bad)


def test_the_report_shows_where_the_time_went(tmp_path):
    from html.parser import HTMLParser

    from dpmmbench.reports.report import build_report

    results = tmp_path / "results"
    paths = [_workflow_run(results, "gibbs", seed, time_s=0.9, score_s=0.05, heldout_s=0.0, job_wall=1.0,
                           finished_after=float(seed + 1), cluster=("tcp://127.0.0.1:1", 1, 1))
             for seed in range(3)]
    out = results / "report" / "index.html"
    build_report(paths, out)

    class Environment(HTMLParser):
        """The text of the page's Environment section."""

        def __init__(self):
            super().__init__()
            self.inside, self.text = False, []

        def handle_starttag(self, tag, attrs):
            if tag == "section":
                self.inside = dict(attrs).get("id") == "environment"

        def handle_data(self, data):
            if self.inside:
                self.text.append(data)

    page = Environment()
    page.feed(out.read_text(encoding="utf-8"))
    text = " ".join(" ".join(page.text).split())
    assert "Where the time went" in text
    assert "runs timed 3 of 3" in text
    assert "start-up per run, median 0.05 s (goal ≤ 0.3 s: met)" in text
    assert "sampling share 90 % (goal ≥ 80 %: met)" in text  # 2.7 sampler-seconds over 1 core x 3 s


def test_results_md_says_where_the_time_went(tmp_path):
    from dpmmbench.reports import results_doc

    results = tmp_path / "results"
    for seed in range(2):
        _workflow_run(results, "gibbs", seed, time_s=0.9, score_s=0.05, heldout_s=0.0, job_wall=1.0,
                      finished_after=float(seed + 1), cluster=("tcp://127.0.0.1:1", 1, 1))
    out = tmp_path / "results.md"
    assert results_doc.main(["--traces", str(results / "traces"), "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    section = page.split("## Where the time went (the workflow's job files)", 1)[1].split("\n## ", 1)[0]
    assert "| runs timed | 2 of 2 |" in section
    assert "| start-up per run, median | 0.05 s (goal ≤ 0.3 s: met) |" in section
    assert "| sampling share | 90 % (goal ≥ 80 %: met) |" in section  # 1.8 sampler-seconds over 1 core x 2 s


def test_a_small_share_is_not_shown_as_zero():
    from dpmmbench.reports.timing import WorkflowTiming

    small = WorkflowTiming(66, 66, 3.1, 5.3, 1.34, 7.4, 239.0, 231.0, 121.0, 2, 66, 0.0055, 0.0056, False, False)
    rows = {row[0]: row[1] for row in timing_rows(small)}
    assert rows["sampling share"] == "0.55 % (goal ≥ 80 %: not met)" and rows["sampling share of the jobs"] == "0.56 %"
