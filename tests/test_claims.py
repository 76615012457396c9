"""Claim verdicts over draws of a data set, from trace files written and read as a workflow's
are: a claim is decided on every draw (the same data set generated with another seed) within
its declared scale, held on at least 2 of 3 draws, not decided on fewer than 3, and a claim run
below its scale is "not decided at this budget" and names what it would take."""
import itertools

import numpy as np
import pandas as pd
import pytest

from dpmmbench.reports import claims
from dpmmbench.reports.papers import check_claims
from dpmmbench.reports.papers.chang2013 import claim as chang_claim
from dpmmbench.reports.papers.daume2007 import claim as daume_claim
from dpmmbench.reports.papers.wang2017 import claim as wang_claim
from dpmmbench.reports.runs import read_runs
from dpmmbench.reports.traces import TRACE_COLUMNS, write_trace


class Grid:
    """Trace files of a grid of runs, written with :func:`reports.traces.write_trace` (the
    driver's writer) and read back with :func:`reports.runs.read_runs` (the report's reader)."""

    def __init__(self, folder):
        self.folder, self.paths, self.count = folder, [], itertools.count()

    def add(self, dataset, algorithm, seed=0, *, points, time_s=10.0, iterations=500, workers=1, final=-1000.0,
            vi=0.1, bytes_=0, search_s=None, options=None, name=None, steps=()):
        """One run: from a log joint far below at iteration 0 (one cluster) to ``final`` at
        ``iterations`` and ``time_s``; ``steps`` adds (iteration, time, log joint) rows between;
        ``bytes_`` per step, half sent and half received; a search searches in its one step."""
        rows = [(0, 0.0, final - 1e5), *steps, (iterations, time_s if search_s is None else search_s, final)]
        trace = pd.DataFrame([dict.fromkeys(TRACE_COLUMNS, 0) | {
            "algorithm": algorithm, "name": name or algorithm, "dataset": dataset, "seed": seed, "workers": workers, "iteration": it,
            "time_s": t, "log_joint": lj, "n_clusters": 1 if it == 0 else 10, "vi": vi if it else 2.0,
            "bytes_sent": bytes_ // 2 if it else 0, "bytes_received": bytes_ - bytes_ // 2 if it else 0,
            "messages": 2 * workers if it else 0, "alpha": 1.0, "nmi": 0.9} for it, t, lj in rows])
        if search_s is not None:
            trace["states_popped"] = [0] + [100] * (len(rows) - 1)
        meta = {"algorithm": algorithm, "options": options or {}, "alpha_prior": None,
                "n_points": int(points * 0.9), "heldout_points": points - int(points * 0.9)}
        self.paths.append(write_trace(trace, self.folder / f"run{next(self.count)}.parquet", meta))

    def read(self):
        """(frame, runs) of every run added."""
        return read_runs(self.paths)


@pytest.fixture
def grid(tmp_path):
    return Grid(tmp_path)


# ---- what a draw is ---------------------------------------------------------------------------
def test_draws_are_the_same_data_set_with_another_seed():
    # with and without a seed (the default seed is a draw too)
    assert claims.draw_of("synth-chang2013") == ("synth-chang2013", 0)
    assert claims.draw_of("synth-chang2013?seed=0") == ("synth-chang2013", 0)
    assert claims.draw_of("synth-chang2013?seed=2") == ("synth-chang2013", 2)
    assert claims.draw_of("synth-wang2017?scale=0.1") == ("synth-wang2017?scale=0.1", 101)
    assert claims.draw_of("synth-wang2017?seed=2&scale=0.1") == ("synth-wang2017?scale=0.1", 2)
    assert claims.draw_of("mnist10k?n=3000&pca=50&seed=1") == ("mnist10k?n=3000", 1)
    # another size or scale is another data set, not a draw
    assert claims.draw_of("synth-chang2013?n=20000&seed=1") == ("synth-chang2013?n=20000", 1)
    assert claims.draw_of("synth-wang2017?scale=0.2&seed=2")[0] != claims.draw_of("synth-wang2017?scale=0.1")[0]
    # no seed parameter: one draw; a name this build does not know: its own data set
    assert claims.draw_of("reuters?drop_top=10&vocab=1000") == ("reuters?drop_top=10&vocab=1000", None)
    # a corpus's seed picks a subset of its documents: another draw only when the subset is not all of them
    assert claims.draw_of("reuters?seed=2") == ("reuters", None)
    assert claims.draw_of("reuters?n=120&seed=2") == ("reuters?n=120", 2)
    assert claims.draw_of("plugin-set?seed=3") == ("plugin-set?seed=3", None)


def test_the_rule_is_two_thirds_of_at_least_three_draws_rounded_up():
    assert claims.MIN_DRAWS == 3 and claims.HOLD_FRACTION == pytest.approx(2 / 3)
    assert [claims.draws_needed(n) for n in range(3, 8)] == [2, 3, 4, 4, 5]
    for check in (chang_claim.check, wang_claim.check):
        assert "held on at least 2 of 3 draws" in check(pd.DataFrame(columns=["dataset", "algorithm", "final_vi",
                                                                              "bytes", "workers", "label"])).criterion


# ---- Chang & Fisher 2013 ----------------------------------------------------------------------
def _chang(grid, dataset, points=100_000, iterations=500, gibbs_final=-110_000.0, time_s=10.0, suffix=""):
    """subc at the plateau; fsd stuck far below; gibbs at ``gibbs_final``; two seeds each."""
    finals = {"subc": (-100_000.0, 0.05), "fsd": (-120_000.0, 0.5), "gibbs": (gibbs_final, 0.3)}
    for name, (final, vi) in finals.items():
        for seed in (0, 1):
            grid.add(dataset, name, seed, points=points, time_s=time_s, iterations=iterations, final=final, vi=vi,
                     name=name + suffix)


DRAWS = ("synth-chang2013", "synth-chang2013?seed=1", "synth-chang2013?seed=2")


@pytest.mark.parametrize("held, verdict", [(3, claims.HELD), (2, claims.HELD), (1, claims.FAILED),
                                           (0, claims.FAILED)])
def test_chang_is_decided_over_three_draws(grid, held, verdict):
    """gibbs stays stuck on ``held`` of the three draws and escapes to the plateau on the others."""
    for i, dataset in enumerate(DRAWS):
        _chang(grid, dataset, gibbs_final=-110_000.0 if i < held else -100_010.0)
    claim = chang_claim.check(grid.read()[1])
    assert claim.verdict == verdict
    # the first sentence: the verdict, on how many draws, and the main reason
    first = claim.summary.split(". ", 1)[0] + "."
    if verdict == claims.HELD:
        assert first == (f"Held on {held} of 3 draws: the sub-cluster samplers reached the plateau and no "
                         f"baseline did.")
    else:
        assert first == f"Did not hold on {3 - held} of 3 draws: gibbs also reached the plateau."
    assert f"On synth-chang2013, held on {held} of 3 draws (seed=0: " in claim.summary
    assert f"{verdict} (needs 2 of 3)" in claim.summary
    # each draw's outcome with the numbers that decided it
    assert claim.draws["draw"].tolist() == ["seed=0", "seed=1", "seed=2"]
    assert claim.draws["outcome"].tolist() == [claims.HELD] * held + [claims.FAILED] * (3 - held)
    closest = claim.draws["baseline gap (closest)"].tolist()
    assert closest == pytest.approx([-10_000.0] * held + [-10.0] * (3 - held))
    assert claim.draws["tolerance"].tolist() == pytest.approx([100.0] * 3)
    if held < 3:
        assert "seed=2: did not hold, plateau -100,000.0 nats" in claim.summary
        assert "gibbs reached it too" in claim.summary
    # and a row per draw, method and seed: the chains behind it
    assert len(claim.table) == 3 * 3 * 2
    assert set(zip(claim.table["draw"], claim.table["run"], claim.table["seed"])) == {
        (f"seed={d}", a, s) for d in range(3) for a in ("subc", "fsd", "gibbs") for s in (0, 1)}
    at = claim.table.set_index(["draw", "run", "seed"])["at plateau"]
    assert at["seed=0", "subc", 0] == "yes" and at["seed=0", "fsd", 1] == "no"
    assert at["seed=2", "gibbs", 0] == ("no" if held == 3 else "yes")


def test_chang_on_two_draws_is_not_decided_and_says_it_needs_three(grid):
    for dataset in DRAWS[:2]:
        _chang(grid, dataset)
    claim = chang_claim.check(grid.read()[1])
    assert claim.verdict == claims.UNDECIDED
    assert "a verdict needs at least 3 draws" in claim.summary
    assert "held on 2 of 2 draws (seed=0: held, " in claim.summary and "; seed=1: held, " in claim.summary
    assert "run 1 more, e.g. synth-chang2013?seed=2" in claim.summary
    assert claim.draws["outcome"].tolist() == [claims.HELD, claims.HELD]


def test_chang_on_one_draw_is_not_decided(grid):
    """What the claim had been decided on before it was decided over draws: one data set."""
    _chang(grid, "synth-chang2013")
    claim = chang_claim.check(grid.read()[1])
    assert claim.verdict == claims.UNDECIDED
    assert "held on 1 of 1 draw (seed=0: held, " in claim.summary and "fsd and gibbs stayed below it" in claim.summary
    assert "run 2 more, e.g. synth-chang2013?seed=1 and synth-chang2013?seed=2" in claim.summary


def test_chang_draws_out_of_scope_are_listed_and_do_not_count(grid):
    """Three draws, but on one of them every chain is too short: two draws in scope."""
    _chang(grid, DRAWS[0])
    _chang(grid, DRAWS[1])
    _chang(grid, DRAWS[2], iterations=50, gibbs_final=-100_010.0)
    claim = chang_claim.check(grid.read()[1])
    assert claim.verdict == claims.UNDECIDED and "held on 2 of 2 draws" in claim.summary
    assert "Not counted: On synth-chang2013?seed=2: " in claim.summary
    assert "iterations subc 50, fsd 50, gibbs 50 (needs 200)" in claim.summary
    assert claim.draws.set_index("draw").loc["seed=2", "outcome"].startswith("not counted: below the claim's scale")
    assert not claim.table.loc[claim.table["draw"] == "seed=2", "decides"].any()
    # a third draw in scope decides it
    _chang(grid, "synth-chang2013?seed=3")
    assert chang_claim.check(grid.read()[1]).verdict == claims.HELD


@pytest.mark.parametrize("points, iterations, need", [(20_000, 500, "20,000 points (needs 100,000)"),
                                                       (100_000, 50, "iterations subc 50, fsd 50, gibbs 50 "
                                                                     "(needs 200)")])
def test_chang_below_its_scale_is_not_decided_and_names_the_requirement(grid, points, iterations, need):
    for seed in (0, 1, 2):
        _chang(grid, f"synth-chang2013?n={points}&seed={seed}", points=points, iterations=iterations)
    claim = chang_claim.check(grid.read()[1])
    assert claim.verdict == claims.UNDECIDED == "not decided at this budget"
    assert claim.scope is chang_claim.CHANG_SCOPE
    assert "at least 100,000 points and 200 iterations per chain" in claim.summary
    assert need in claim.summary
    # what was measured there is still shown, marked as not deciding
    assert "subc ended at the plateau" in claim.summary and not claim.table["decides"].any()
    assert len(claim.draws) == 3 and claim.draws["outcome"].str.startswith("not counted").all()


def test_chang_counts_only_the_data_sets_at_scale(grid):
    for seed in (0, 1, 2):  # would refute it, but below the scale
        _chang(grid, f"synth-chang2013?n=20000&seed={seed}", points=20_000, gibbs_final=-100_005.0)
    for dataset in DRAWS:
        _chang(grid, dataset)
    claim = chang_claim.check(grid.read()[1])
    assert claim.verdict == claims.HELD and "On synth-chang2013, held on 3 of 3 draws" in claim.summary
    assert "Not counted:" in claim.summary and "20,000 points (needs 100,000)" in claim.summary
    # different sizes are different data sets, not draws of one
    assert set(claim.draws["data set"]) == {"synth-chang2013?n=20000", "synth-chang2013"}


def test_chang_counts_the_chains_that_ran_long_enough(grid):
    """The default config's grid: every sampler for 50 iterations (too short to count) and the
    claim's samplers again with its budget, as variants; the budget is in iterations, so a
    chain slowed down by a busy machine still counts (and is the same seeded chain)."""
    for dataset in DRAWS:
        _chang(grid, dataset, iterations=50, gibbs_final=-100_001.0)  # at the plateau, but too briefly to count
        _chang(grid, dataset, iterations=200, time_s=30.0, suffix="-200it")
    claim = chang_claim.check(grid.read()[1])
    assert claim.verdict == claims.HELD
    assert "not counted, shorter than 200 iterations per chain: subc, fsd and gibbs" in claim.summary
    assert set(claim.table.loc[claim.table["decides"], "run"]) == {"subc-200it", "fsd-200it", "gibbs-200it"}


# ---- Daumé 2007 -------------------------------------------------------------------------------
def _daume(grid, dataset, points, gibbs_values, gibbs_ends=(5.0, 5.0)):
    """A search finishing at 1 s with log joint -500 and two gibbs chains (log joint read at 1 s)."""
    grid.add(dataset, "search", points=points, iterations=1, final=-500.0, search_s=1.0,
             options={"heuristic": "inadmissible"})
    for seed, (value, end) in enumerate(zip(gibbs_values, gibbs_ends)):
        grid.add(dataset, "gibbs", seed, points=points, iterations=2, time_s=end, final=value + 50,
                 steps=[(1, min(0.9, end), value)])


MNIST = ("mnist10k?n=3000", "mnist10k?n=3000&seed=1", "mnist10k?n=3000&seed=2")


def test_daume_below_its_scale_or_budget_is_not_decided(grid, tmp_path):
    for seed in (0, 1, 2):
        _daume(grid, f"mnist10k?n=1000&seed={seed}", 1_000, (-600.0, -610.0))
    claim = daume_claim.check(*grid.read())
    assert claim.verdict == claims.UNDECIDED
    assert "at least 3,000 points" in claim.summary and "1,000 points (needs 3,000)" in claim.summary
    assert "search higher by" in claim.summary  # measured, not counted
    # at scale, but the baseline stopped before the search finished: its budget is too small
    short = Grid(tmp_path / "short")
    for dataset in MNIST:
        _daume(short, dataset, 3_000, (-600.0, -610.0), gibbs_ends=(0.5, 0.5))
    short = daume_claim.check(*short.read())
    assert short.verdict == claims.UNDECIDED and "ran only 0.5 s, less than the search" in short.summary
    assert short.draws["outcome"].eq("not counted: every baseline ran less time than the search").all()
    # a baseline that ran less time than the search and still is not below it: against the claim
    ahead = Grid(tmp_path / "ahead")
    for dataset in MNIST:
        _daume(ahead, dataset, 3_000, (-400.0, -410.0), gibbs_ends=(0.5, 0.5))
    ahead = daume_claim.check(*ahead.read())
    assert ahead.verdict == claims.FAILED and "gibbs not lower in less time" in ahead.summary


@pytest.mark.parametrize("values, verdict", [((-600.0, -610.0), claims.HELD), ((-400.0, -410.0), claims.FAILED)])
def test_daume_at_scale_holds_or_not_as_measured(grid, values, verdict):
    for dataset in MNIST:
        _daume(grid, dataset, 3_000, values)
    claim = daume_claim.check(*grid.read())
    assert claim.verdict == verdict and "On mnist10k?n=3000, held on" in claim.summary
    assert claim.summary.startswith("Held on 3 of 3 draws: the search was higher than every baseline at its "
                                    "finishing time. " if verdict == claims.HELD else
                                    "Did not hold on 3 of 3 draws: gibbs was higher at the search's finishing time. ")
    # gibbs read at the search's 1 s: its median there is the middle of -600/-610 (or -400/-410)
    margin = -500.0 - float(np.median(values))
    assert claim.draws["smallest margin (nats)"].tolist() == pytest.approx([margin] * 3)
    assert "search vs gibbs at 1 s: -500.0 vs " in claim.summary
    gibbs = claim.table[claim.table["run"] == "gibbs"]
    assert len(gibbs) == 6 and sorted(set(gibbs["log joint at that time"])) == sorted(values)


def test_daume_one_bad_draw_of_three_does_not_decide_it(grid):
    _daume(grid, MNIST[0], 3_000, (-400.0, -410.0))  # the baseline is higher on this draw only
    for dataset in MNIST[1:]:
        _daume(grid, dataset, 3_000, (-600.0, -610.0))
    claim = daume_claim.check(*grid.read())
    assert claim.verdict == claims.HELD and "held on 2 of 3 draws" in claim.summary
    assert "seed=0: did not hold, search vs gibbs at 1 s: -500.0 vs -405.0 nats, gibbs higher by 95.0 nats" \
        in claim.summary


def test_daume_on_a_data_set_without_seed_has_one_draw(grid):
    """A text corpus has no seed: its one draw never decides; the MNIST draws beside it do."""
    _daume(grid, "reuters?drop_top=10&vocab=1000", 5_000, (-400.0, -410.0))
    alone = daume_claim.check(*grid.read())
    assert alone.verdict == claims.UNDECIDED and "held on 0 of 1 draw" in alone.summary
    assert "this data set has no seed: it has one draw, so it cannot decide the claim" in alone.summary
    for dataset in MNIST:
        _daume(grid, dataset, 3_000, (-600.0, -610.0))
    both = daume_claim.check(*grid.read())
    assert both.verdict == claims.HELD and "On mnist10k?n=3000, held on 3 of 3 draws" in both.summary
    assert both.draws["draw"].tolist() == ["reuters?drop_top=10&vocab=1000", "seed=0", "seed=1", "seed=2"]


# ---- Wang & Lin 2017 --------------------------------------------------------------------------
WANG = ("synth-wang2017?scale=0.1", "synth-wang2017?scale=0.1&seed=1", "synth-wang2017?scale=0.1&seed=2",
        "synth-wang2017?scale=0.1&seed=3")


def _wang(grid, dataset, points, workers, comparator_bytes, seeds=(0,)):
    for seed in seeds:
        grid.add(dataset, "cons-prog", seed, points=points, workers=workers, bytes_=1_000)
        grid.add(dataset, "auxvar", seed, points=points, workers=workers, bytes_=comparator_bytes)


def test_wang_below_its_scale_is_not_decided(grid, tmp_path):
    for dataset in WANG[:3]:
        _wang(grid, dataset, 50_000, 1, 50_000)
    one = wang_claim.check(grid.read()[1])
    assert one.verdict == claims.UNDECIDED and "runs on 2 or more workers" in one.summary
    assert "auxvar and cons-prog ran on fewer than 2 workers only" in one.summary
    small = Grid(tmp_path / "small")
    for seed in (0, 1, 2):
        _wang(small, f"synth-wang2017?scale=0.02&seed={seed}", 2_000, 2, 50_000)
    small = wang_claim.check(small.read()[1])
    assert small.verdict == claims.UNDECIDED and "2,000 points (needs 12,800)" in small.summary
    assert "moves 50x the bytes" in small.summary


@pytest.mark.parametrize("comparator_bytes, verdict", [(50_000, claims.HELD), (5_000, claims.FAILED)])
def test_wang_at_scale_holds_or_not_as_measured(grid, comparator_bytes, verdict):
    for dataset in WANG[:3]:
        _wang(grid, dataset, 50_000, 2, comparator_bytes, seeds=(0, 1))
    claim = wang_claim.check(grid.read()[1])
    assert claim.verdict == verdict
    assert claim.summary.startswith(
        "Held on 3 of 3 draws: every comparator moves at least 10x the consolidation samplers' bytes. "
        if verdict == claims.HELD else
        f"Did not hold on 3 of 3 draws: auxvar (2 workers) moves only {comparator_bytes / 1_000:.2g}x the bytes of "
        f"cons-prog (2 workers), "
        f"not 10x. "), claim.summary[:200]
    assert claim.draws["draw"].tolist() == ["seed=101", "seed=1", "seed=2"]
    assert claim.draws["ratio"].tolist() == pytest.approx([comparator_bytes / 1_000] * 3)
    # a row per draw, method and seed
    assert len(claim.table) == 3 * 2 * 2 and set(claim.table["seed"]) == {0, 1}


@pytest.mark.parametrize("held, verdict", [(3, claims.HELD), (2, claims.FAILED)])
def test_wang_on_four_draws_needs_three(grid, held, verdict):
    """On 4 draws, 2/3 rounded up is 3: two of four is not enough."""
    for i, dataset in enumerate(WANG):
        _wang(grid, dataset, 50_000, 2, 50_000 if i < held else 5_000)
    claim = wang_claim.check(grid.read()[1])
    assert claim.verdict == verdict and f"held on {held} of 4 draws" in claim.summary
    assert "(needs 3 of 4)" in claim.summary


def test_missing_runs_are_still_could_not_be_checked(grid):
    for dataset in WANG[:3]:
        _wang(grid, dataset, 50_000, 2, 50_000)
    frame, runs = grid.read()
    runs = runs.assign(algorithm="gibbs", label="gibbs")
    found = check_claims(frame, runs)
    assert [c.verdict for c in found] == [claims.UNCHECKED] * 3


# ---- where the draws are shown ----------------------------------------------------------------
def test_report_and_results_doc_show_a_row_per_draw(grid):
    from dpmmbench.reports import _sections, results_doc

    for i, dataset in enumerate(DRAWS):
        _chang(grid, dataset, gibbs_final=-110_000.0 if i < 2 else -100_010.0)
    _chang(grid, "synth-chang2013?seed=3", iterations=50)
    chang = chang_claim.check(grid.read()[1])
    shown = _sections.claims([chang])[0]
    assert [row[1].parts[0] for row in shown["draws"].rows] == ["seed=0", "seed=1", "seed=2", "seed=3"]
    assert [row[2].parts[0] for row in shown["draws"].rows][:3] == ["held", "held", "did not hold"]
    assert len(shown["table"].rows) == 4 * 3 * 2  # and the chains behind them
    # docs/results.md: the claims decided on the same trace files, with their draws table
    page = results_doc.render(claims=results_doc.trace_sections([grid.folder])["claims"])
    section = page.split("## Claims of the papers", 1)[1]
    assert f"### {chang.paper}: held" in section and "held on 2 of 3 draws" in section
    assert "| synth-chang2013 | seed=2 | did not hold | -100,000.0 | 100.0 | 0 | -10 |" in section
    assert "| synth-chang2013 | seed=3 | not counted: below the claim's scale: iterations subc 50" in section
