"""One reader of traces (reports/runs.py): summary.csv, runs.csv and the report's run table say
the same about the same traces, and a method that is no sampler gets no R-hat."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpmmbench import algorithms
from dpmmbench.reports import chains, report
from dpmmbench.reports.summary import current_names, read_runs, runs_table, summary_table
from dpmmbench.reports.traces import read_trace, trace_frame, write_trace


def _trace(algorithm, name, seed, workers, log_joint, step_s, **columns):
    """Trace rows of one chain: row 0 the initial state (0.5 s of init), then one row per step."""
    times = 0.5 + np.r_[0.0, np.cumsum(step_s)]
    rows = [{"algorithm": algorithm, "name": name, "dataset": "d", "seed": seed, "workers": workers, "iteration": i,
             "time_s": t, "log_joint": lj, "n_clusters": 3, "vi": 0.1, "bytes_sent": 0, "bytes_received": 0,
             "messages": 0, "alpha": 1.0, "nmi": 0.9} | {k: v[i] for k, v in columns.items()}
            for i, (t, lj) in enumerate(zip(times, log_joint))]
    return trace_frame(rows)


def _options(algorithm, **changed):
    return {k: opt.default for k, opt in algorithms.get(algorithm).options.items()} | changed


def _write(tmp_path, trace, meta):
    name = f"{trace['name'].iloc[0]}-{meta.get('options', {}).get('beam', '')}-w{trace['workers'].iloc[0]}"
    return write_trace(trace, tmp_path / f"{name}-{trace['seed'].iloc[0]}.parquet",
                       {"status": "completed", "git_commit": "abc", **meta})


def _mixed_traces(tmp_path):
    """Gibbs on 1 and 2 workers, a search with a non-default beam under its registry name and a
    workflow's named search variant; 3 seeds each."""
    rng = np.random.default_rng(0)
    paths = []
    for seed in range(3):
        for workers in (1, 2):
            lj = np.r_[-2000.0, -1000 + rng.normal(size=12)]
            paths.append(_write(tmp_path, _trace("gibbs", "gibbs", seed, workers, lj, 0.01 * (1 + rng.random(12))),
                                {"algorithm": "gibbs", "options": {}}))
        # a search does its work in its first step; the later ones return at once
        popped = np.r_[0, 500 + seed, np.zeros(6)]
        searched = {"states_popped": popped, "states_pushed": 2 * popped, "states_generated": 3 * popped,
                    "queue_max": np.r_[0, 10, np.zeros(6)]}
        lj = np.r_[-2000.0, np.full(7, -1010.0 - seed)]
        steps = np.r_[2.0 + seed, np.full(6, 1e-4)]
        paths.append(_write(tmp_path, _trace("search", "search[beam=10]", seed, 1, lj, steps, **searched),
                            {"algorithm": "search", "options": _options("search", beam=10)}))
        paths.append(_write(tmp_path, _trace("search", "search-decreasing", seed, 1, lj, steps, **searched),
                            {"algorithm": "search", "options": _options("search", order="decreasing")}))
    return paths


def test_summary_csv_and_the_report_agree_on_the_same_traces(tmp_path):
    paths = _mixed_traces(tmp_path)
    # the files, as `dpmmbench summarize` writes and a user reads them
    frame, runs = read_runs(paths)
    runs_table(runs).to_csv(tmp_path / "runs.csv", index=False)
    summary_table(frame, runs).to_csv(tmp_path / "summary.csv", index=False)
    per_run, summary = pd.read_csv(tmp_path / "runs.csv"), pd.read_csv(tmp_path / "summary.csv")
    # the report's run table, as build_report reads it
    r_frame, r_runs = report.read_runs(paths)

    # the same names: the run's name, the registry name beside it
    assert set(per_run["name"]) == set(summary["name"]) == set(r_runs["name"]) == {
        "gibbs", "search[beam=10]", "search-decreasing"}
    assert dict(zip(per_run["name"], per_run["algorithm"])) == dict(zip(r_runs["name"], r_runs["algorithm"]))
    # the same per-run numbers
    key = ["dataset", "name", "workers", "seed"]
    both = per_run.merge(r_runs, on=key, suffixes=("_csv", "_report"), validate="one_to_one")
    assert len(both) == len(per_run) == len(r_runs) == 12
    for column in ("algorithm", "iterations", "time_s", "s_per_iteration", "final_log_joint", "best_log_joint",
                   "final_n_clusters", "final_vi", "final_nmi", "alpha", "status"):
        np.testing.assert_array_equal(both[f"{column}_csv"], both[f"{column}_report"], err_msg=column)
    # a search's time per step is the step that searched, in the files as in the report
    search = per_run[per_run["name"] == "search[beam=10]"].sort_values("seed")
    np.testing.assert_allclose(search["s_per_iteration"], [2.0, 3.0, 4.0])

    # summary.csv's groups are the report's labels, with the same chain statistics
    r_stats = chains.chain_statistics(r_frame, r_runs, ["dataset", "label"]).set_index("label")
    for row in summary.to_dict("records"):
        label = row["name"] if row["workers"] == 1 else f"{row['name']} ({row['workers']} workers)"
        members = r_runs[r_runs["label"] == label]
        assert row["chains"] == len(members) == 3
        assert row["s_per_iteration"] == pytest.approx(members["s_per_iteration"].median(), rel=1e-12)
        for column in ("final_log_joint", "rhat_log_joint", "ess_bulk_log_joint", "time_to_target_s"):
            assert row[column] == pytest.approx(r_stats.loc[label, column], rel=1e-12, nan_ok=True), column


def _in_older_format(paths, folder):
    """The traces as written before the ``name`` column: the run's name in ``algorithm``, the
    registry name in the metadata only; a named variant kept its name, a run under its
    registry name was written under that name alone."""
    older = []
    for path in paths:
        trace, meta = read_trace(path)
        trace = trace.drop(columns="name").assign(algorithm=trace["name"].replace({"search[beam=10]": "search"}))
        older.append(write_trace(trace, folder / path.with_suffix(".csv").name, meta))
    return older


def test_older_traces_without_a_name_give_the_same_run_table(tmp_path):
    paths = _mixed_traces(tmp_path)
    older = _in_older_format(paths, tmp_path / "older")
    assert "name" not in read_trace(older[0])[0] and set(read_trace(older[2])[0]["algorithm"]) == {"search"}
    frame, runs = read_runs(paths)
    old_frame, old_runs = read_runs(older)
    pd.testing.assert_frame_equal(old_runs.drop(columns="path"), runs.drop(columns="path"))
    pd.testing.assert_frame_equal(old_frame[list(frame.columns)], frame)
    pd.testing.assert_frame_equal(summary_table(old_frame, old_runs), summary_table(frame, runs))
    pd.testing.assert_frame_equal(runs_table(old_runs), runs_table(runs))
    assert set(runs["name"]) == {"gibbs", "search[beam=10]", "search-decreasing"}
    assert set(runs["algorithm"]) == {"gibbs", "search"}


def test_older_summary_files_are_read_in_todays_names(tmp_path):
    frame, runs = read_runs(_mixed_traces(tmp_path))
    summary, per_run = summary_table(frame, runs), runs_table(runs)
    # as `dpmmbench summarize` wrote them before: the run's name in `algorithm`, `registry` beside it
    older = {"algorithm": "registry", "name": "algorithm"}
    for table in (summary, per_run):
        pd.testing.assert_frame_equal(current_names(table.rename(columns=older)), table)
        assert current_names(table) is table
    # a reproduction's curves and scaling tables named the run `variant`
    curves = runs[["dataset", "name", "label", "algorithm"]]
    pd.testing.assert_frame_equal(current_names(curves.rename(columns={"name": "variant"})), curves)


def test_two_traces_of_one_run_are_refused_by_every_reader(tmp_path):
    paths = _mixed_traces(tmp_path)
    copy = tmp_path / "copy.parquet"
    copy.write_bytes(paths[0].read_bytes())
    with pytest.raises(ValueError, match="same run"):
        read_runs([*paths, copy])


def _flat_traces(tmp_path, name, levels, noise=0.0):
    """Chains that climb and then sit at their own level (plus ``noise``), one per level."""
    rng = np.random.default_rng(3)
    paths = []
    for seed, level in enumerate(levels):
        lj = np.r_[-5000.0, -2000.0, level + noise * rng.normal(size=20)]
        paths.append(_write(tmp_path, _trace(name, name, seed, 1, lj, np.full(21, 0.1)),
                            {"algorithm": name, "options": {}}))
    return paths


def test_a_variational_peer_flat_at_its_optima_has_no_rhat_but_the_reason(tmp_path):
    # sklearn-bgm on digits: each chain flat at its own optimum but for float noise, R-hat ~ 1e15
    frame, runs = read_runs(_flat_traces(tmp_path, "sklearn-bgm", [-1000.0, -1003.0, -1007.0], noise=1e-9))
    assert set(runs["kind"]) == {"variational"}
    row = summary_table(frame, runs).iloc[0]
    assert row["name"] == row["algorithm"] == "sklearn-bgm"
    assert row["rhat_note"] == chains.NOT_A_SAMPLER["variational"] and row["rhat_note"].startswith("n/a")
    for column in ("rhat_log_joint", "rhat_n_clusters", "ess_bulk_log_joint", "ess_tail_log_joint", "ess_per_s"):
        assert math.isnan(row[column]), column
    assert pd.isna(row["converged"])
    assert chains.convergence_verdict(row) == (chains.NOT_A_SAMPLER["variational"], False)
    # the same chains from a sampler: not converged
    stats = chains.chain_statistics(frame, runs.assign(kind="sampler"), ["dataset", "name"]).iloc[0]
    assert stats["rhat_log_joint"] > 2 and stats["rhat_note"] == "" and not stats["converged"]
    assert chains.convergence_verdict(stats) == ("not converged", True)


def test_the_method_kind_comes_from_the_registry():
    assert {name: algorithms.get(name).kind for name in ("gibbs", "subc", "search")} == {
        "gibbs": "sampler", "subc": "sampler", "search": "optimiser"}
    assert {name: algorithms.get(name).kind for name in algorithms.available() if algorithms.get(name).external} \
        == {name: "variational" if name in ("sklearn-bgm", "bnpy-memovb") else "sampler"
            for name in algorithms.available() if algorithms.get(name).external}


def test_the_method_kind_recorded_by_the_run_wins_where_the_method_is_not_installed(tmp_path):
    # a peer that is not installed where the report is built: its traces still say what it is
    paths = _flat_traces(tmp_path, "not-installed-here", [-1000.0, -1003.0, -1007.0], noise=1e-9)
    assert set(read_runs(paths)[1]["kind"]) == {""}
    for path in paths:
        trace, meta = read_trace(path)
        write_trace(trace, path, {**meta, "kind": "variational"})
    frame, runs = read_runs(paths)
    assert set(runs["kind"]) == {"variational"}
    assert summary_table(frame, runs).iloc[0]["rhat_note"] == chains.NOT_A_SAMPLER["variational"]
