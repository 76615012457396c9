"""Daumé (2007)'s headline claim, checked against the runs of a grid: beam search with the
inadmissible heuristic finds a higher log joint than Gibbs and split-merge Gibbs in the same time
(see :mod:`reports.claims`)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpmmbench import algorithms

from ...claims import Claim, DRAW_RULE, Draw, Scope, UNCHECKED, absence, draw_label, over_draws, points_of

#: Daumé (2007): beam search with the inadmissible heuristic against these samplers
DAUME_SEARCH, DAUME_HEURISTIC = "search", "inadmissible"
DAUME_BASELINES = ("gibbs", "gibbs-splitmerge")
#: Daumé: the paper's smallest data set (3,000 MNIST images); the time is the search's own,
#: so a baseline counts only when its chains ran at least as long as the search
DAUME_SCOPE = Scope(points=3_000, why="the paper's smallest data set, 3,000 MNIST images, with baseline chains that "
                                      "run at least as long as the search; on fewer points a Gibbs sweep is so "
                                      "cheap that equal time means many sweeps")


def check(frame: pd.DataFrame, runs: pd.DataFrame) -> Claim:
    """Beam search with the inadmissible heuristic reaches a higher log joint than Gibbs and
    Gibbs with split-merge given the same time, on each draw of the data."""
    paper = "Daumé 2007, Fast search for Dirichlet process mixture models"
    claim = ("Beam search for the MAP partition with the inadmissible heuristic finds a partition of higher log "
             "joint than collapsed Gibbs (and Gibbs with split-merge moves) reach in the same wall time.")
    criterion = ("On each draw, each baseline chain is read at the search's finishing time (median over the search's "
                 "seeds): its log joint is that of its last iteration completed by then; a baseline with a chain that "
                 "had completed no sweep by then is inconclusive (its state is the starting one), and the time each "
                 "baseline needs to pass the search is given. The draw holds when the "
                 "search's median log joint is above every baseline's median there; draws of "
                 f"{DAUME_SCOPE.describe()} count. A baseline whose chains all ended before that time counts only "
                 f"against the claim: when its median final log joint is not below the search's, the search "
                 f"did not find a higher one although it took longer; otherwise it is inconclusive (it was "
                 f"given less time than the search). {DRAW_RULE}")
    search = runs[(runs["algorithm"] == DAUME_SEARCH) & runs["search_s"].notna()]
    search = search[pd.Series([_option(r, "heuristic") == DAUME_HEURISTIC for r in search.itertuples()],
                              index=search.index, dtype=bool)]
    found, rows = [], []
    for dataset, searches in search.groupby("dataset", sort=False):
        draw, chains = _daume_draw(frame, runs[runs["dataset"] == dataset], searches)
        found.append(draw)
        rows += chains
    table = pd.DataFrame(rows) if rows else None
    decided = over_draws(found, DAUME_SCOPE)
    if decided:
        verdict, summary, draws = decided
        return Claim(paper, claim, verdict, summary, criterion, table, DAUME_SCOPE, draws)
    if search.empty:
        why = ("its runs used another heuristic" if DAUME_SEARCH in set(runs["algorithm"])
               else absence([DAUME_SEARCH], runs))
        missing = f"no {DAUME_SEARCH} run with heuristic={DAUME_HEURISTIC} ({why})"
    else:
        searched = set(runs.loc[runs["dataset"].isin(search["dataset"]), "algorithm"])
        absent = [n for n in DAUME_BASELINES if n not in searched]
        missing = (f"no {' or '.join(DAUME_BASELINES)} run on the searched data set(s) "
                   f"({absence(absent, runs, 'ran, but not on the searched data')})")
    return Claim(paper, claim, UNCHECKED, missing.capitalize() + ".", criterion, table, DAUME_SCOPE)


def _daume_draw(frame: pd.DataFrame, ds_runs: pd.DataFrame, searches: pd.DataFrame):
    """Daumé's criterion on the runs of one draw (``searches``: its searches with the
    heuristic): its :class:`Draw` and the rows of its chains (one per method and seed)."""
    dataset = str(ds_runs["dataset"].iloc[0])
    short = DAUME_SCOPE.shortfall(points_of(ds_runs), {})
    baselines = ds_runs[ds_runs["algorithm"].isin(DAUME_BASELINES)]
    chains, pairs = [], []  # pairs: (result True/False/None, margin in nats, outcome in words, baseline)
    for s_label, s_runs in searches.groupby("label", sort=False):
        at = float(s_runs["search_s"].median())
        value = float(s_runs["final_log_joint"].median())
        chains += [{"dataset": dataset, "draw": draw_label(dataset), "run": s_label, "role": "search",
                    "seed": int(r.seed), "compared with": "", "compared at (s)": float(r.search_s),
                    "log joint at that time": float(r.final_log_joint), "chain ran to (s)": float(r.time_s)}
                   for r in s_runs.itertuples()]
        for label, b_runs in baselines.groupby("label", sort=False):
            values, lengths, unswept, passes = [], [], 0, []
            for r in b_runs.itertuples():
                chain = frame[frame["run"] == r.run].sort_values("iteration")
                done = chain[chain["time_s"] <= at]
                # a chain with no completed sweep by then holds its starting state: no evidence
                unswept += int(not (done["iteration"] >= 1).any())
                values.append(float((done if len(done) else chain.iloc[:1])["log_joint"].iloc[-1]))
                lengths.append(float(chain["time_s"].iloc[-1]))
                above = chain.loc[chain["log_joint"] > value, "time_s"]
                passes.append(float(above.iloc[0]) if len(above) else math.inf)
                chains.append({"dataset": dataset, "draw": draw_label(dataset), "run": label,
                               "role": "baseline", "seed": int(r.seed), "compared with": s_label,
                               "compared at (s)": at, "log joint at that time": values[-1],
                               "chain ran to (s)": lengths[-1]})
            b_value = float(np.median(values))
            passed = float(np.median(passes))
            passed_text = (f"{label} passes the search after {passed:.3g} s" if math.isfinite(passed)
                           else f"{label} never passes the search in its {max(lengths):.3g} s")
            if unswept and max(lengths) >= at:
                pairs.append((None, math.nan, f"{s_label} vs {label} inconclusive: {unswept} of {len(values)} "
                                              f"{label} chains had not completed one sweep at {at:.3g} s ({passed_text})",
                              label))
                continue
            if max(lengths) < at:  # given less time: it can only tell against the claim
                pairs.append((None, math.nan, f"{s_label} vs {label} inconclusive: {label} ran only "
                                              f"{max(lengths):.3g} s, less than the search", label)
                             if b_value < value else
                             (False, value - b_value, f"{s_label} vs {label}: {value:,.1f} at {at:.3g} s vs "
                                                      f"{b_value:,.1f} nats in {max(lengths):.3g} s, {label} "
                                                      "not lower in less time", label))
                continue
            if value > b_value:
                outcome = f"{s_label} higher by {value - b_value:,.1f} nats"
            elif value == b_value:
                outcome = "tie: the same log joint (not higher)"
            else:
                outcome = f"{label} higher by {b_value - value:,.1f} nats"
            pairs.append((value > b_value, value - b_value,
                          f"{s_label} vs {label} at {at:.3g} s: {value:,.1f} vs {b_value:,.1f} nats, {outcome}; "
                          f"{passed_text}", label))
    if baselines.empty:
        return Draw(dataset, None, "", f"no {' or '.join(DAUME_BASELINES)} ran on it", compared=False), chains
    text = "; ".join(p[2] for p in pairs)
    conclusive = [p for p in pairs if p[0] is not None]
    numbers = {"compared at (s)": float(searches["search_s"].median()),
               "smallest margin (nats)": min((p[1] for p in conclusive), default=math.nan)}
    if short:  # inconclusive or not, the scale it fell short of is named
        return Draw(dataset, None, text, f"below the claim's scale: {'; '.join(short)}", numbers=numbers), chains
    if not conclusive:
        unswept = any("had not completed one sweep" in p[2] for p in pairs)
        return Draw(dataset, None, text, "inconclusive: a baseline chain had no completed sweep at the search's "
                                          "finishing time" if unswept else "every baseline ran less time than the "
                                          "search", numbers=numbers), chains
    worst = min(conclusive, key=lambda p: p[1])
    reason = (f"{worst[3]} was {'higher' if worst[1] < 0 else 'as high'} at the search's finishing time"
              if not worst[0]
              else "the search was higher than every baseline at its finishing time")
    return Draw(dataset, all(p[0] for p in conclusive), text, numbers=numbers, reason=reason), chains


def _option(run, key):
    """An option of a run: from its metadata, else the registry default."""
    options = run.options or {}
    if key in options:
        return options[key]
    try:
        return algorithms.get(run.algorithm).options[key].default
    except (ValueError, KeyError, ImportError):
        return None
