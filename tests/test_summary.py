"""Statistics over repeated chains (reports/chains.py) and the workflow's tables
(reports/summary.py), on constructed traces whose answers are known."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from arviz_stats.base import array_stats

from dpmmbench.reports import chains
from dpmmbench.reports.summary import RUN_COLUMNS, read_runs, runs_table, summary_table
from dpmmbench.reports.traces import trace_frame, write_trace


def _chain(log_joint, n_clusters=None, alpha=1.0, time_step=0.5, **fixed):
    """Trace rows of one chain: row 0 the initial state, then one row per value."""
    log_joint = np.asarray(log_joint, float)
    k = np.full(len(log_joint), 3) if n_clusters is None else np.asarray(n_clusters)
    alpha = np.broadcast_to(np.asarray(alpha, float), log_joint.shape)
    base = {"algorithm": "a", "dataset": "d", "seed": 0, "workers": 1, "bytes_sent": 0, "bytes_received": 0,
            "messages": 0, "vi": math.nan, "nmi": math.nan} | fixed
    return trace_frame([dict(base, iteration=i, time_s=time_step * i, log_joint=lj, n_clusters=int(kk), alpha=a)
                        for i, (lj, kk, a) in enumerate(zip(log_joint, k, alpha))])


def _frames(traces, **run_columns):
    """(frame, runs) as read_runs gives them, for traces built in memory."""
    frame = pd.concat([t.assign(run=i) for i, t in enumerate(traces)], ignore_index=True)
    runs = []
    for i, t in enumerate(traces):
        last = t.iloc[-1]
        runs.append({"run": i, "dataset": last["dataset"], "algorithm": last["algorithm"], "workers": 1,
                     "seed": int(last["seed"]), "learned_alpha": False, "final_log_joint": last["log_joint"],
                     "final_vi": math.nan, "final_nmi": math.nan, "final_n_clusters": last["n_clusters"],
                     "heldout_lpd": math.nan, "time_s": last["time_s"], "status": "completed"}
                    | {k: v[i] for k, v in run_columns.items()})
    return frame, pd.DataFrame(runs)


def _stats(traces, **run_columns):
    frame, runs = _frames(traces, **run_columns)
    return chain_row(chains.chain_statistics(frame, runs, ["dataset", "algorithm"]))


def chain_row(table):
    assert len(table) == 1
    return table.iloc[0]


def test_chains_from_one_distribution_have_rhat_near_one_and_arviz_agrees():
    rng = np.random.default_rng(0)
    values = -1000 + rng.normal(size=(4, 400))
    row = _stats([_chain(np.r_[-2000.0, v], n_clusters=3 + rng.integers(0, 3, 401), seed=s)
                  for s, v in enumerate(values)])
    assert row["rhat_log_joint"] < 1.01 and row["converged"]
    assert row["draws"] == 200  # the second half of 400 steps
    second = values[:, 200:]
    assert row["rhat_log_joint"] == pytest.approx(array_stats.rhat(second, chain_axis=0, draw_axis=1))
    assert row["ess_bulk_log_joint"] == pytest.approx(array_stats.ess(second, chain_axis=0, draw_axis=1))
    tail = array_stats.ess(second, method="tail", prob=(0.05, 0.95), chain_axis=0, draw_axis=1)
    assert row["ess_tail_log_joint"] == pytest.approx(tail)
    assert 400 < row["ess_bulk_log_joint"] <= 1000  # independent draws: about all 800 of them
    # ESS per second: 4 chains x 400 steps x 0.5 s
    assert row["ess_per_s"] == pytest.approx(row["ess_bulk_log_joint"] / (4 * 400 * 0.5))
    assert np.isnan(row["rhat_alpha"]) and np.isnan(row["ess_bulk_alpha"])  # fixed alpha: nothing to diagnose


def test_chains_stuck_at_different_levels_are_not_converged():
    rng = np.random.default_rng(1)
    traces = [_chain(np.r_[-5000.0, -1000 - 50 * s + rng.normal(size=100)], seed=s) for s in range(4)]
    row = _stats(traces)
    assert row["rhat_log_joint"] > 1.5 and not row["converged"]
    assert chains.not_converged(row["rhat_log_joint"], row["rhat_n_clusters"])


def test_constant_chains_have_no_ess_and_one_chain_no_rhat():
    # a deterministic method: the same value every step, in every chain
    row = _stats([_chain([-2000.0] + [-1000.0] * 10, seed=s) for s in range(3)])
    assert np.isnan(row["rhat_log_joint"]) and np.isnan(row["ess_bulk_log_joint"]) and np.isnan(row["ess_per_s"])
    assert pd.isna(row["converged"])
    # constant at different levels: the chains disagree, R-hat is infinite
    row = _stats([_chain([-2000.0] + [-1000.0 - s] * 10, seed=s) for s in range(3)])
    assert row["rhat_log_joint"] == math.inf and not row["converged"]
    # one chain: no R-hat, but an ESS, and no crash
    rng = np.random.default_rng(2)
    row = _stats([_chain(np.r_[-2000.0, -1000 + rng.normal(size=50)])])
    assert row["chains"] == 1 and np.isnan(row["rhat_log_joint"]) and row["ess_bulk_log_joint"] > 0


def test_draws_cut_chains_to_the_shortest_and_keep_the_second_half():
    long, short = _chain(np.arange(21.0)), _chain(np.arange(11.0) + 100)  # 20 and 10 steps
    d = chains.draws([long, short], "log_joint")
    np.testing.assert_array_equal(d, [[6, 7, 8, 9, 10], [106, 107, 108, 109, 110]])
    # a short chain keeps at least MIN_DRAWS draws; fewer steps than that: all of them
    assert chains.draws([_chain(np.arange(6.0))], "log_joint").shape == (1, chains.MIN_DRAWS)
    assert chains.draws([_chain(np.arange(3.0))], "log_joint").shape == (1, 2)
    row = _stats([_chain(np.arange(3.0), seed=s) for s in range(2)])
    assert np.isnan(row["rhat_log_joint"]) and np.isnan(row["ess_bulk_log_joint"])  # too few draws: NaN


def test_time_to_target_on_hand_made_traces():
    # best log joint on the dataset: -1000; target within 0.1 %: -1001
    fast = _chain([-3000, -1500, -1000.5, -1000.0], time_step=1.0, algorithm="fast", seed=0)
    slow = _chain([-3000, -1500, -1200, -1100, -1000.9], time_step=1.0, algorithm="fast", seed=1)
    never = _chain([-3000, -1500, -1200], time_step=1.0, algorithm="stuck", seed=0)
    frame, runs = _frames([fast, slow, never])
    table = chains.chain_statistics(frame, runs, ["dataset", "algorithm"]).set_index("algorithm")
    assert table.loc["fast", "target_log_joint"] == pytest.approx(-1001.0)
    assert chains.time_to_target(fast, -1001.0) == 2.0 and chains.time_to_target(slow, -1001.0) == 4.0
    assert table.loc["fast", "time_to_target_s"] == pytest.approx(3.0)  # median of 2 s and 4 s
    assert table.loc["fast", "time_to_target_s_lo"] == pytest.approx(2.1)
    assert table.loc["fast", "time_to_target_s_hi"] == pytest.approx(3.9)
    assert table.loc["fast", "reached"] == 2
    assert table.loc["stuck", "time_to_target_s"] == math.inf and table.loc["stuck", "reached"] == 0
    # a looser tolerance (25 %): the stuck chain gets there at its second step
    loose = chains.chain_statistics(frame, runs, ["dataset", "algorithm"], tolerance=0.25).set_index("algorithm")
    assert loose.loc["stuck", "time_to_target_s"] == 2.0
    # runs that learn alpha neither set the target nor chase it
    frame, runs = _frames([fast, _chain([-3000, -10.0], algorithm="learned")], learned_alpha=[False, True])
    table = chains.chain_statistics(frame, runs, ["dataset", "algorithm"]).set_index("algorithm")
    assert table.loc["fast", "target_log_joint"] == pytest.approx(-1001.0)
    assert np.isnan(table.loc["learned", "time_to_target_s"])
    for bad in (-0.1, 1.0, math.nan, "0.1", True):
        with pytest.raises(ValueError, match="target tolerance"):
            chains.chain_statistics(frame, runs, ["dataset", "algorithm"], tolerance=bad)


def test_intervals_over_chains():
    assert chains.interval([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx((3.0, 1.2, 4.8))
    assert chains.interval([7.0]) == (7.0, 7.0, 7.0)
    assert all(np.isnan(chains.interval([math.nan, math.nan])))
    assert chains.interval([1.0, math.nan, 3.0]) == pytest.approx((2.0, 1.1, 2.9))  # NaN = not measured
    # inf = never reached: counts, and a quantile next to it is inf
    assert chains.interval([1.0, 2.0, math.inf, math.inf]) == pytest.approx((math.inf, 1.15, math.inf))
    assert chains.interval([1.0, 2.0, 3.0, math.inf]) == pytest.approx((2.5, 1.15, math.inf))
    assert chains.interval([math.inf, math.inf]) == (math.inf, math.inf, math.inf)
    # final values over chains land in the summary's median and bounds
    rng = np.random.default_rng(3)
    finals = [-1000.0 - s for s in range(5)]
    traces = [_chain(np.r_[-2000, -1500 + rng.normal(size=8), f], seed=s) for s, f in enumerate(finals)]
    row = _stats(traces, heldout_lpd=[-3.0, -2.0, -1.0, -4.0, -5.0])
    assert (row["final_log_joint"], row["final_log_joint_lo"], row["final_log_joint_hi"]) == pytest.approx(
        (-1002.0, -1003.8, -1000.2))
    assert (row["heldout_lpd"], row["heldout_lpd_lo"], row["heldout_lpd_hi"]) == pytest.approx((-3.0, -4.8, -1.2))


def test_failed_runs_are_counted_and_left_out():
    rng = np.random.default_rng(4)
    traces = [_chain(np.r_[-2000, -1000 + rng.normal(size=20)], seed=s) for s in range(3)]
    traces.append(_chain([-2000.0, -1.0], seed=3))  # failed at its first step, after a wild value
    row = _stats(traces, status=["completed"] * 3 + ["failed"])
    assert row["chains"] == 3 and row["failed"] == 1
    assert row["target_log_joint"] < -900  # the failed run's value set no target
    row = _stats(traces[:2], status=["failed", "failed"])  # nothing left: NaN, not a crash
    assert row["chains"] == 0 and row["failed"] == 2 and row["draws"] == 0
    assert np.isnan(row["rhat_log_joint"]) and np.isnan(row["final_log_joint"]) and np.isnan(row["time_to_target_s"])


def test_summary_and_runs_tables_from_trace_files(tmp_path):
    rng = np.random.default_rng(5)
    paths = []
    for algorithm, level in (("a", -1000.0), ("b", -1100.0)):
        for seed in range(3):
            trace = _chain(np.r_[-2000, level + rng.normal(size=30)], algorithm=algorithm, seed=seed,
                           nmi=0.5 + 0.1 * seed)
            paths.append(write_trace(trace, tmp_path / f"{algorithm}{seed}.csv",
                                     {"status": "completed", "heldout_lpd": -2.0 - seed, "git_commit": "abc"}))
    frame, runs = read_runs(paths)
    summary = summary_table(frame, runs)
    assert list(summary["name"]) == list(summary["algorithm"]) == ["a", "b"] and (summary["chains"] == 3).all()
    for column in ("rhat_log_joint", "rhat_n_clusters", "ess_bulk_log_joint", "ess_tail_log_joint", "ess_per_s",
                   "time_to_target_s", "time_to_target_s_lo", "time_to_target_s_hi", "heldout_lpd",
                   "heldout_lpd_lo", "heldout_lpd_hi", "final_nmi", "final_nmi_lo", "final_nmi_hi"):
        assert column in summary, column
    assert summary.loc[0, "heldout_lpd"] == pytest.approx(-3.0) and summary.loc[0, "final_nmi"] == pytest.approx(0.6)
    assert summary.loc[1, "time_to_target_s"] == math.inf and summary.loc[0, "reached"] >= 1
    assert summary.loc[0, "git_commit"] == "abc"
    per_run = runs_table(runs)
    assert list(per_run.columns) == list(RUN_COLUMNS) and len(per_run) == 6
    # the CSV round trip keeps never-reached as inf
    summary.to_csv(tmp_path / "summary.csv", index=False)
    back = pd.read_csv(tmp_path / "summary.csv")
    assert back.loc[1, "time_to_target_s"] == math.inf


def test_an_optimisers_flat_chains_have_no_rhat_but_the_reason():
    # a search: each chain at its own optimum, never moving again
    traces = [_chain([-2000.0] + [-1000.0 - s] * 10, seed=s) for s in range(3)]
    row = _stats(traces, kind=["optimiser"] * 3)
    assert row["rhat_note"] == chains.NOT_A_SAMPLER["optimiser"] and row["rhat_note"].startswith("n/a: optimiser")
    assert all(np.isnan(row[f"{stat}_{x}"]) for stat in ("rhat", "ess_bulk", "ess_tail")
               for x in ("log_joint", "n_clusters", "alpha"))
    assert np.isnan(row["ess_per_s"]) and pd.isna(row["converged"])
    assert not chains.not_converged(row["rhat_log_joint"], row["rhat_n_clusters"])  # the leaderboard's test
    assert chains.convergence_verdict(row) == (chains.NOT_A_SAMPLER["optimiser"], False)


def test_a_samplers_mixing_chains_keep_a_finite_rhat():
    rng = np.random.default_rng(4)
    traces = [_chain(np.r_[-2000.0, -1000 + rng.normal(size=200)], n_clusters=3 + rng.integers(0, 2, 201), seed=s)
              for s in range(4)]
    row = _stats(traces, kind=["sampler"] * 4)
    assert row["rhat_note"] == "" and math.isfinite(row["rhat_log_joint"]) and row["rhat_log_joint"] < 1.01
    assert row["ess_bulk_log_joint"] > 100 and row["converged"]
    assert chains.convergence_verdict(row) == ("", False)


def test_a_stuck_samplers_constant_chains_say_so_and_are_not_converged():
    traces = [_chain([-2000.0] + [-1000.0] * 10, seed=s) for s in range(3)]  # all at one level
    row = _stats(traces, kind=["sampler"] * 3)
    assert row["rhat_note"] == chains.STUCK and not pd.isna(row["converged"]) and not row["converged"]
    assert chains.convergence_verdict(row) == (chains.STUCK, True)
    # stuck at different levels: R-hat says it too
    row = _stats([_chain([-2000.0] + [-1000.0 - s] * 10, seed=s) for s in range(3)], kind=["sampler"] * 3)
    assert row["rhat_log_joint"] == math.inf and row["rhat_note"] == chains.STUCK and not row["converged"]
    # a method not known here: the chains alone cannot say whether it is stuck or done
    row = _stats([_chain([-2000.0] + [-1000.0] * 10, seed=s) for s in range(3)], kind=[""] * 3)
    assert row["rhat_note"] == chains.STILL and pd.isna(row["converged"])


def test_chains_that_all_keep_the_same_number_of_clusters_agree_on_it():
    """Every chain at the same number of clusters throughout (a sampler that found them all):
    R-hat of the number of clusters is 1, not arviz-stats' 0 / 0, and the log joint decides;
    at different numbers it is infinite, and a log joint that never moves is not vouched for."""
    rng = np.random.default_rng(3)
    moving = [np.r_[-2000.0, -1000 + rng.normal(size=100)] for _ in range(4)]
    row = _stats([_chain(v, n_clusters=np.full(101, 10), seed=s) for s, v in enumerate(moving)])
    assert row["rhat_n_clusters"] == 1.0 and np.isnan(row["ess_bulk_n_clusters"])
    assert row["rhat_log_joint"] < 1.05 and row["converged"]
    row = _stats([_chain(v, n_clusters=np.full(101, 10 + (s == 3)), seed=s) for s, v in enumerate(moving)])
    assert row["rhat_n_clusters"] == math.inf and not row["converged"]
    assert np.isnan(chains.diagnostics(np.full((3, 10), -1000.0))["rhat"])
