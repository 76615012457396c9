"""Wang & Lin (2017)'s sentences on their own variants, read from the config's record (every
method on 1 and 2 workers, 10 seeds): delayed synchronisation "has little impact on the
convergence" (Section 4.1) and Hung "performs similar" to their methods (Section 5, Figure 3).

Delayed synchronisation is what a consolidation sampler does on several workers: each worker
sweeps its points against the others' frozen statistics (docs/algorithms.md §8). On one worker
nothing is frozen, so a method on 1 worker against the same method on 2 is the delay's effect,
per iteration; the asynchronous schedule (Async) delays further, and Async against Prog on 2
workers is that.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...claims import Criterion, decide
from ...entries import Entry
from . import (DATASET, HUNG, ITERATION_FLOOR, NAMES, VI_SLACK, WORKERS, absent, convergence_table, finals,
               iteration_limit, label, missing, reach, restrict, shown, value_at)

#: "little impact on the convergence": the delayed run needs at most this factor times the
#: undelayed run's iterations to CGS's level, and ends within this fraction of its log joint
SLOWER, GAP = "iterations to CGS's level allowed (× undelayed)", "final log joint gap allowed (relative)"
SLOWER_FACTOR, GAP_TOLERANCE = 1.5, 1e-3
#: (delayed, undelayed) pairs: the delay of several workers, then the asynchronous schedule's
PAIRS = ((("cons-prog", WORKERS), ("cons-prog", 1)), (("cons-pooled", WORKERS), ("cons-pooled", 1)),
         (("cons-async", WORKERS), ("cons-prog", WORKERS)))
#: Hung against "our methods": Pooled, the scheme Hung replaces (both consolidate after every cycle)
HUNG_PEER = "cons-pooled"
HUNG_VI = "VI gap allowed (relative)"


def delayed_entry(tables) -> Entry:
    """Section 4.1: delayed synchronisation has little impact on the convergence."""
    item = "Section 4.1 (delayed synchronisation and convergence per iteration)"
    paper = ("\"Delayed synchronization is an approximation, which trades mathematical rigorousness for high "
             "scalability. As shown in our experiments, it has little impact on the convergence performance, but "
             "substantial influence on scalability.\"")
    tables = restrict(tables, DATASET)
    lacking = missing(tables, [("gibbs", 1)] + [key for pair in PAIRS for key in pair])
    if lacking:
        return absent(item, paper, DATASET, lacking)
    _, cgs, level = convergence_table(tables)  # CGS's level, as Figure 2's entry reads it
    reached, final = reach(tables.curves, level), finals(tables)

    def at(key):
        """(iterations to CGS's level, final log joint): medians over seeds of one run."""
        return float(reached.loc[label(*key), "iterations"]), float(final.loc[key, "final_log_joint"])

    rows, slow, gaps, pairs_its = [], [], [], []
    for delayed, undelayed in PAIRS:
        (d_its, d_final), (u_its, u_final) = at(delayed), at(undelayed)
        d = {"iterations to CGS level": d_its, "final log joint": d_final}
        u = {"iterations to CGS level": u_its, "final log joint": u_final}
        factor = d["iterations to CGS level"] / max(u["iterations to CGS level"], 1.0)
        pairs_its.append((d_its, u_its))
        gap = (u["final log joint"] - d["final log joint"]) / abs(u["final log joint"])
        slow.append(factor)
        gaps.append(gap)
        rows.append({"delayed": shown(*delayed), "undelayed": shown(*undelayed),
                     "iterations to CGS level, delayed": d["iterations to CGS level"],
                     "iterations to CGS level, undelayed": u["iterations to CGS level"], "ratio": factor,
                     "final log joint, delayed": d["final log joint"], "final log joint, undelayed": u["final log joint"],
                     "gap below undelayed (relative)": gap})

    def holds(t):
        # the package's "comparable numbers of iterations": the factor, or its floor (the curves
        # resolve the first iterations one by one, and 2 against 1 is one iteration)
        return (all(math.isfinite(d) and d <= iteration_limit(u, u, t[SLOWER]) for d, u in pairs_its)
                and all(g <= t[GAP] for g in gaps))

    criterion = Criterion({SLOWER: SLOWER_FACTOR, GAP: GAP_TOLERANCE}, holds,
                          f"the largest iterations ratio is {max(slow):.2f} (needs at most {SLOWER_FACTOR:g}, or at "
                          f"most {ITERATION_FLOOR} iterations); the largest final gap below the undelayed run "
                          f"{max(gaps):.2g} (needs at most {GAP_TOLERANCE:g})")
    measured = (f"Median over 10 seeds of the iterations to CGS's level (its median final log joint less 0.1 %, "
                f"{level:,.0f} nats) and of the final log joint, of each method on {WORKERS} workers (delayed: each "
                f"worker sweeps against the other's frozen statistics) against the same method on one worker (nothing "
                f"frozen), and of Async (the asynchronous schedule) against Prog on {WORKERS} workers: "
                + "; ".join(f"{r['delayed']} {r['iterations to CGS level, delayed']:.0f} against "
                            f"{r['undelayed']} {r['iterations to CGS level, undelayed']:.0f} iterations"
                            for r in rows) + ".")
    reason = ("Delaying the synchronisation leaves the iterations to CGS's level and the level reached within the "
              "criterion, as the paper says." if holds(criterion.thresholds) else
              "A delayed run needs more iterations to CGS's level, or ends lower, than the criterion allows.")
    return Entry(item, paper, measured, decide(criterion), reason, table=pd.DataFrame(rows), criterion=criterion)


def hung_entry(tables) -> Entry:
    """Section 5 (Figure 3): Hung performs similar to the authors' methods."""
    item = "Section 5, Figure 3 (Hung \"performs similar\" in VI)"
    paper = ("\"Hung performs similar as compared to our methods.\" (VI against iterations and runtime, Figure 3; "
             "Hung replaces the consolidation step with the Hungarian algorithm of Campbell et al. 2015)")
    tables = restrict(tables, DATASET)
    keys = [(HUNG, WORKERS), (HUNG_PEER, WORKERS)]
    lacking = missing(tables, keys)
    if lacking:
        return absent(item, paper, DATASET, lacking)
    curves = tables.curves
    own = {key: curves[curves["label"] == label(*key)] for key in keys}
    last = min(float(c.groupby("seed")["iteration"].max().min()) for c in own.values())
    # every recorded iteration both reached (the curves are thinned geometrically: early ones one by one)
    grid = sorted(set(own[keys[0]]["iteration"]) & set(own[keys[1]]["iteration"]))
    grid = [i for i in grid if 0 < i <= last]
    vi = {key: np.array([value_at(c, "vi", i) for i in grid]) for key, c in own.items()}
    rel = np.abs(vi[keys[0]] - vi[keys[1]]) / np.maximum(vi[keys[1]], 1e-12)
    final = rel[-1]
    criterion = Criterion({HUNG_VI: VI_SLACK}, lambda t: bool(final <= t[HUNG_VI]),
                          f"Hung's median VI at iteration {grid[-1]:.0f} differs from {NAMES[HUNG_PEER]}'s by "
                          f"{100 * final:.1f} % (needs at most {100 * VI_SLACK:g} %)")
    table = pd.DataFrame({"iteration": grid, f"VI, {NAMES[HUNG]}": vi[keys[0]],
                          f"VI, {NAMES[HUNG_PEER]}": vi[keys[1]], "relative difference": rel})
    table = table[table["iteration"].isin([grid[0], *grid[len(grid) // 4::max(len(grid) // 4, 1)], grid[-1]])]
    measured = (f"Median VI to the truth over 10 seeds, {NAMES[HUNG]} against {NAMES[HUNG_PEER]} (the scheme it "
                f"replaces), both on {WORKERS} workers, at every recorded iteration both reached: at iteration "
                f"{grid[-1]:.0f} {vi[keys[0]][-1]:.3g} against {vi[keys[1]][-1]:.3g} nats; the largest relative "
                f"difference after iteration 10 is {100 * rel[np.asarray(grid) > 10].max():.1f} %. Criterion: the "
                f"VIs at the last common iteration differ by at most {100 * VI_SLACK:g} % (the Figure 3 entry's slack).")
    reason = ("Hung's VI tracks Pooled's, as the paper says." if criterion.holds(dict(criterion.thresholds)) else
              "Hung's VI differs from Pooled's by more than the criterion allows.")
    return Entry(item, paper, measured, decide(criterion), reason, table=table, criterion=criterion)
