"""Claim verdicts against constructed run tables: a claim run below its declared scale is
"not decided at this budget" and names what it would take; at scale it is held or not."""
import numpy as np
import pandas as pd
import pytest

from dpmmbench.reports import claims


def _run(i, dataset, algorithm, seed=0, *, points, time_s=10.0, iterations=500, workers=1, final=-1000.0, vi=0.1,
         bytes_=0.0, search_s=np.nan, options=None):
    """One row of the run table of :func:`reports.runs.read_runs` (the columns the claims read)."""
    label = algorithm if workers == 1 else f"{algorithm} ({workers} workers)"
    return {"run": i, "dataset": dataset, "algorithm": algorithm, "variant": algorithm, "label": label,
            "seed": seed, "workers": workers, "options": options or {}, "time_s": time_s, "iterations": iterations,
            "final_log_joint": final, "final_vi": vi, "final_n_clusters": 10, "search_s": search_s,
            "bytes": bytes_, "learned_alpha": False,
            "meta": {"n_points": int(points * 0.9), "heldout_points": points - int(points * 0.9)}}


def _chang(points, iterations, gibbs_final, time_s=10.0):
    """subc at the plateau; fsd stuck far below; gibbs at ``gibbs_final``; two seeds each."""
    dataset = f"synth-chang2013?n={points}"
    finals = {"subc": (-100_000.0, 0.05), "fsd": (-120_000.0, 0.5), "gibbs": (gibbs_final, 0.3)}
    rows = [_run(0, dataset, name, seed, points=points, time_s=time_s, iterations=iterations, final=final, vi=vi)
            for name, (final, vi) in finals.items() for seed in (0, 1)]
    return pd.DataFrame(rows).assign(run=range(len(rows)))


@pytest.mark.parametrize("points, iterations, need", [(20_000, 500, "20,000 points (needs 100,000)"),
                                                       (100_000, 50, "iterations subc 50, fsd 50, gibbs 50 "
                                                                     "(needs 200)")])
def test_chang_below_its_scale_is_not_decided_and_names_the_requirement(points, iterations, need):
    claim = claims.chang2013(_chang(points, iterations, gibbs_final=-110_000.0))
    assert claim.verdict == claims.UNDECIDED == "not decided at this budget"
    assert claim.scope is claims.CHANG_SCOPE
    assert "at least 100,000 points and 200 iterations per chain" in claim.summary
    assert need in claim.summary
    # what was measured there is still shown, marked as not deciding
    assert "subc ended at the plateau" in claim.summary and not claim.table["decides"].any()


def test_chang_at_scale_holds_or_not_as_measured():
    held = claims.chang2013(_chang(100_000, 500, gibbs_final=-110_000.0))
    assert held.verdict == claims.HELD and held.table["decides"].all()
    assert "fsd and gibbs stayed below it" in held.summary
    # gibbs escaping to the plateau refutes the claim at this scale
    failed = claims.chang2013(_chang(100_000, 500, gibbs_final=-100_010.0))
    assert failed.verdict == claims.FAILED and "gibbs reached it too" in failed.summary


def test_chang_counts_only_the_data_sets_at_scale():
    small = _chang(20_000, 500, gibbs_final=-100_005.0)  # would refute it, but below the scale
    large = _chang(100_000, 500, gibbs_final=-110_000.0)
    claim = claims.chang2013(pd.concat([small, large], ignore_index=True).assign(run=lambda r: range(len(r))))
    assert claim.verdict == claims.HELD
    assert "Not counted:" in claim.summary and "20,000 points (needs 100,000)" in claim.summary


def test_chang_counts_the_chains_that_ran_long_enough():
    """The default config's grid: every sampler for 50 iterations (too short to count) and the
    claim's samplers again with its budget, as variants; the budget is in iterations, so a
    chain slowed down by a busy machine still counts (and is the same seeded chain)."""
    brief = _chang(100_000, 50, gibbs_final=-100_001.0)  # gibbs at the plateau, but too briefly to count
    full = _chang(100_000, 200, gibbs_final=-110_000.0, time_s=30.0)
    full["label"] = full["label"] + "-200it"
    claim = claims.chang2013(pd.concat([brief, full], ignore_index=True).assign(run=lambda r: range(len(r))))
    assert claim.verdict == claims.HELD
    assert "not counted, shorter than 200 iterations per chain: subc, fsd and gibbs" in claim.summary
    assert set(claim.table.loc[claim.table["decides"], "algorithm"]) == {"subc-200it", "fsd-200it", "gibbs-200it"}


def _daume(points, gibbs_values, gibbs_ends=(5.0, 5.0)):
    """A search finishing at 1 s with log joint -500 and two gibbs chains (log joint read at 1 s)."""
    dataset = f"mnist10k?n={points}"
    runs = [_run(0, dataset, "search", points=points, time_s=1.0, final=-500.0, search_s=1.0,
                 options={"heuristic": "inadmissible"})]
    rows = [{"run": 0, "iteration": 0, "time_s": 1.0, "log_joint": -500.0}]
    for seed, (value, end) in enumerate(zip(gibbs_values, gibbs_ends)):
        run = len(runs)
        runs.append(_run(run, dataset, "gibbs", seed, points=points, time_s=end, final=value + 50))
        rows += [{"run": run, "iteration": 0, "time_s": 0.0, "log_joint": -900.0},
                 {"run": run, "iteration": 1, "time_s": min(0.9, end), "log_joint": value},
                 {"run": run, "iteration": 2, "time_s": end, "log_joint": value + 50}]
    return pd.DataFrame(rows), pd.DataFrame(runs)


def test_daume_below_its_scale_or_budget_is_not_decided():
    claim = claims.daume2007(*_daume(1_000, (-600.0, -610.0)))
    assert claim.verdict == claims.UNDECIDED
    assert "at least 3,000 points" in claim.summary and "1,000 points (needs 3,000)" in claim.summary
    assert "search higher by" in claim.summary  # measured, not counted
    # at scale, but the baseline stopped before the search finished: its budget is too small
    short = claims.daume2007(*_daume(10_000, (-600.0, -610.0), gibbs_ends=(0.5, 0.5)))
    assert short.verdict == claims.UNDECIDED and "ran only 0.5 s, less than the search" in short.summary


@pytest.mark.parametrize("values, verdict", [((-600.0, -610.0), claims.HELD), ((-400.0, -410.0), claims.FAILED)])
def test_daume_at_scale_holds_or_not_as_measured(values, verdict):
    claim = claims.daume2007(*_daume(10_000, values))
    assert claim.verdict == verdict


def _wang(points, workers, comparator_bytes):
    dataset = f"synth-wang2017?n={points}"
    rows = [_run(0, dataset, "cons-prog", points=points, workers=workers, bytes_=1_000.0),
            _run(1, dataset, "auxvar", points=points, workers=workers, bytes_=comparator_bytes)]
    return pd.DataFrame(rows)


def test_wang_below_its_scale_is_not_decided():
    one = claims.wang2017(_wang(50_000, 1, 50_000.0))
    assert one.verdict == claims.UNDECIDED and "runs on 2 or more workers" in one.summary
    assert "auxvar and cons-prog ran on fewer than 2 workers only" in one.summary
    small = claims.wang2017(_wang(2_000, 2, 50_000.0))
    assert small.verdict == claims.UNDECIDED and "2,000 points (needs 12,800)" in small.summary
    assert "moves 50x the bytes" in small.summary


@pytest.mark.parametrize("comparator_bytes, verdict", [(50_000.0, claims.HELD), (5_000.0, claims.FAILED)])
def test_wang_at_scale_holds_or_not_as_measured(comparator_bytes, verdict):
    assert claims.wang2017(_wang(50_000, 2, comparator_bytes)).verdict == verdict


def test_missing_runs_are_still_could_not_be_checked():
    runs = _wang(50_000, 2, 50_000.0).assign(algorithm="gibbs", label="gibbs")
    frame = pd.DataFrame({"run": [0, 1], "iteration": 0, "time_s": 0.0, "log_joint": -1.0})
    found = claims.check_claims(frame, runs)
    assert [c.verdict for c in found] == [claims.UNCHECKED] * 3
