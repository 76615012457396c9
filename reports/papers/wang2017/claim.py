"""Wang & Lin (2017)'s headline claim, checked against the runs of a grid: the consolidation
samplers move orders of magnitude fewer bytes across workers than auxiliary variables and
sub-clusters (see :mod:`reports.claims`)."""
from __future__ import annotations

import pandas as pd

from ...claims import Claim, DRAW_RULE, Draw, Scope, UNCHECKED, UNDECIDED, absence, and_list, draw_label, over_draws, points_of

#: Wang & Lin (2017): consolidation samplers against auxiliary variables and sub-clusters
WANG_CONSOLIDATION = ("cons-prog", "cons-pooled", "cons-async", "cons-hung")
WANG_COMPARATORS = ("auxvar", "subc")
#: "orders of magnitude fewer bytes": at least this factor
WANG_FACTOR = 10.0
#: Wang & Lin: traffic between workers needs workers; auxvar's traffic grows with the data (it
#: moves clusters with their points), the consolidation samplers' with the clusters only
WANG_SCOPE = Scope(points=12_800, workers=2,
                   why="traffic between workers needs two or more of them, and the auxiliary-variable sampler's "
                       "traffic grows with the data while consolidation's does not: a tenth of the paper's "
                       "synthetic set of 128,000 points at least")


def check(runs: pd.DataFrame) -> Claim:
    """Consolidation moves orders of magnitude fewer bytes than auxiliary variables and
    sub-clusters across workers, on each draw of the data."""
    paper = "Wang & Lin 2017, Scalable distributed inference of DP mixture models (consolidation)"
    claim = ("Across workers, the consolidation samplers (Prog, Pooled, Async, Hung) move orders of magnitude fewer "
             "bytes per iteration than the auxiliary-variable sampler (AV) and sub-clusters (SubC).")
    criterion = (f"Bytes per iteration (sent + received, median over seeds of each chain's mean) of the runs on "
                 f"{WANG_SCOPE.workers} or more workers, on each draw of {WANG_SCOPE.describe()} where both kinds "
                 f"ran so: the draw holds when every comparator moves at least {WANG_FACTOR:g}x the bytes of every "
                 f"consolidation sampler. {DRAW_RULE}")
    # the claim is about traffic between workers: a 1-worker run's bytes go to its one shard
    # (and auxvar moves no cluster there), so only runs on enough workers are compared
    kind = runs["algorithm"].map(_wang_kind)
    talking = runs[kind.notna() & (runs["bytes"].fillna(0) > 0) & (runs["workers"] >= WANG_SCOPE.workers)]
    found, rows = [], []
    for dataset in dict.fromkeys(talking["dataset"]):
        here = talking[talking["dataset"] == dataset]
        rows += [{"dataset": dataset, "draw": draw_label(dataset), "run": r.label,
                  "kind": kind[r.Index], "seed": int(r.seed), "workers": int(r.workers),
                  "bytes / iteration": float(r.bytes)} for r in here.itertuples()]
        c_bytes = here[kind[here.index] == "consolidation"].groupby("label", sort=False)["bytes"].median()
        o_bytes = here[kind[here.index] == "comparator"].groupby("label", sort=False)["bytes"].median()
        if not len(c_bytes) or not len(o_bytes):
            found.append(Draw(dataset, None, "", f"no {'consolidation sampler' if not len(c_bytes) else 'comparator'}"
                                                  f" ran on it on {WANG_SCOPE.workers} or more workers",
                               compared=False))
            continue
        ratio = float(o_bytes.min() / c_bytes.max())
        text = (f"the least-communicating comparator, {o_bytes.idxmin()} at {o_bytes.min():,.0f} bytes per iteration, "
                f"moves {ratio:.3g}x the bytes of the most-communicating consolidation sampler, {c_bytes.idxmax()} at "
                f"{c_bytes.max():,.0f}")
        numbers = {"least comparator (bytes / iteration)": float(o_bytes.min()),
                   "most consolidation (bytes / iteration)": float(c_bytes.max()), "ratio": ratio}
        short = WANG_SCOPE.shortfall(points_of(runs[runs["dataset"] == dataset]), {})
        reason = (f"every comparator moves at least {WANG_FACTOR:g}x the consolidation samplers' bytes"
                  if ratio >= WANG_FACTOR else f"{o_bytes.idxmin()} moves only {ratio:.2g}x the bytes of "
                                               f"{c_bytes.idxmax()}, not {WANG_FACTOR:g}x")
        found.append(Draw(dataset, None if short else ratio >= WANG_FACTOR, text,
                           f"below the claim's scale: {'; '.join(short)}" if short else "", numbers, reason=reason))
    table = pd.DataFrame(rows) if rows else None
    decided = over_draws(found, WANG_SCOPE)
    if decided:
        verdict, summary, draws = decided
        return Claim(paper, claim, verdict, summary, criterion, table, WANG_SCOPE, draws)
    few = runs[kind.notna() & (runs["workers"] < WANG_SCOPE.workers)]
    if set(kind[few.index]) == {"consolidation", "comparator"}:
        below = [f"{and_list(sorted(set(few['label'])))} ran on fewer than {WANG_SCOPE.workers} workers only."]
        return Claim(paper, claim, UNDECIDED, WANG_SCOPE.undecided(below), criterion, table, WANG_SCOPE)
    parts = ["No data set has both a consolidation sampler and a comparator that sent bytes across workers."]
    for names, kind_name in ((WANG_CONSOLIDATION, "Consolidation samplers"), (WANG_COMPARATORS, "Comparators")):
        absent = [n for n in names if n not in set(talking["algorithm"])]
        if absent:
            parts.append(f"{kind_name}: {absence(absent, runs, 'ran on one worker only, or sent no bytes')}.")
    return Claim(paper, claim, UNCHECKED, " ".join(parts), criterion, table, WANG_SCOPE)


def _wang_kind(algorithm: str):
    """'consolidation', 'comparator' or None: the role of a registry name in Wang & Lin's claim."""
    if algorithm.startswith("cons-"):
        return "consolidation"
    if any(algorithm == c or algorithm.startswith(c + "-") for c in WANG_COMPARATORS):
        return "comparator"
    return None
