"""Chang & Fisher (2013)'s headline claim, checked against the runs of a grid: from one cluster
on their synthetic data the sub-cluster samplers reach the true clusters and the plateau of the
log joint, while FSD, collapsed Gibbs and super-cluster Gibbs stay stuck (see :mod:`reports.claims`)."""
from __future__ import annotations

import pandas as pd

from ...claims import Claim, DRAW_RULE, Draw, Scope, UNCHECKED, absence, and_list, draw_label, median_count, over_draws, points_of

#: Chang & Fisher (2013): their samplers, the baselines they report stuck, and their data
CHANG_SUBCLUSTER = ("subc", "subc-supc")
CHANG_BASELINES = ("fsd", "gibbs", "gibbs-supercluster")
CHANG_DATA = "synth-chang2013"
#: a chain is at the plateau when its final log joint is within this fraction of |best| of
#: the best final log joint of any run on the draw
PLATEAU_RTOL = 1e-3
#: Chang & Fisher: the paper's synthetic set has 100,000 points; from one cluster there, every
#: sub-cluster chain measured here was within 0.1 % of the plateau after at most ~150
#: iterations. Counted in iterations, not seconds: a seeded chain of so many iterations is the
#: same chain on a busy machine and an idle one, so the verdict does not depend on the load
#: (docs/design.md "Claims and verdicts")
CHANG_SCOPE = Scope(points=100_000, iterations=200,
                    why="the paper's synthetic set has 100,000 points, and from one cluster the sub-cluster "
                        "samplers need up to about 150 iterations of splits to reach the plateau there; a shorter "
                        "chain does not count, and counting iterations rather than seconds keeps the verdict "
                        "independent of the machine's speed and load")


def check(runs: pd.DataFrame) -> Claim:
    """Sub-cluster samplers reach the true clusters and the plateau; FSD, Gibbs and
    super-cluster Gibbs stay stuck (their synthetic experiment), on each draw of the data."""
    paper = "Chang & Fisher 2013, Parallel sampling of DP mixture models using sub-cluster splits"
    claim = ("On synthetic 2-D Gaussian data started from one cluster, the sub-cluster samplers (subc, subc-supc) "
             "reach the true clusters and the plateau of the log joint, while FSD, collapsed Gibbs and "
             "super-cluster Gibbs stay stuck below it.")
    criterion = (f"On each draw: plateau = best final log joint of any run on the draw; a chain is at the plateau "
                 f"when its final log joint is within {PLATEAU_RTOL:g} x |plateau| of it. The draw holds when every "
                 f"sub-cluster sampler's median chain is at the plateau, every baseline's median chain is below it, "
                 f"and every sub-cluster sampler's median final VI to the truth is below every baseline's; draws of "
                 f"{CHANG_SCOPE.describe()} count. {DRAW_RULE}")
    data = runs[runs["dataset"].str.startswith(CHANG_DATA) & runs["final_vi"].notna()]
    if data.empty:
        return Claim(paper, claim, UNCHECKED, f"No run on Chang & Fisher's synthetic data ({CHANG_DATA}) with "
                                               "ground truth in this grid.", criterion)
    found, rows = [], []
    for dataset, ds_runs in data.groupby("dataset", sort=False):
        draw, chains = _chang_draw(dataset, ds_runs)
        found.append(draw)
        rows += chains
    missing = absence([n for n in CHANG_SUBCLUSTER + CHANG_BASELINES if n not in set(data["algorithm"])], runs)
    table = pd.DataFrame(rows) if rows else None
    absent = f" Missing from this grid: {missing}." if missing else ""
    decided = over_draws(found, CHANG_SCOPE)
    if decided:
        verdict, summary, draws = decided
        return Claim(paper, claim, verdict, summary + absent, criterion, table, CHANG_SCOPE, draws)
    return Claim(paper, claim, UNCHECKED, f"A sub-cluster sampler and a baseline are both needed on {CHANG_DATA} "
                                           f"data with ground truth. Missing: {missing or 'none'}.", criterion, table,
                 CHANG_SCOPE)


def _chang_draw(dataset: str, ds_runs: pd.DataFrame):
    """Chang & Fisher's criterion on the runs of one draw: its :class:`Draw` and the rows of
    its chains (one per method and seed)."""
    plateau = float(ds_runs["final_log_joint"].max())
    leader = ds_runs.loc[ds_runs["final_log_joint"].idxmax()]
    tol = PLATEAU_RTOL * abs(plateau)
    groups, members = {}, []
    for role, names in (("sub-cluster", CHANG_SUBCLUSTER), ("baseline", CHANG_BASELINES)):
        for label, g in ds_runs[ds_runs["algorithm"].isin(names)].groupby("label", sort=False):
            entry = {"run": label, "role": role, "iterations": median_count(g["iterations"].median()),
                     "sampler time (s)": float(g["time_s"].median()),
                     "final log joint": float(g["final_log_joint"].median()),
                     "final VI": float(g["final_vi"].median())}
            groups.setdefault(role, []).append(entry)
            members.append((entry, g))
    subs, bases = groups.get("sub-cluster", []), groups.get("baseline", [])
    head = f"plateau {plateau:,.1f} nats (reached by {leader['label']}, chain seed {leader['seed']}; within {tol:,.1f}): "
    # a chain shorter than the claim's budget does not count; the draw decides when it is large
    # enough and a sub-cluster sampler and a baseline both ran long enough on it
    short = CHANG_SCOPE.shortfall(points_of(ds_runs), {})
    for entry in subs + bases:
        entry["decides"] = not short and CHANG_SCOPE.long_enough(entry["sampler time (s)"], entry["iterations"])
    chains = [{"dataset": dataset, "draw": draw_label(dataset), "run": entry["run"],
               "role": entry["role"], "seed": int(r.seed), "iterations": int(r.iterations),
               "sampler time (s)": float(r.time_s), "final log joint": float(r.final_log_joint),
               "gap to plateau": float(r.final_log_joint) - plateau,
               "at plateau": "yes" if r.final_log_joint >= plateau - tol else "no",
               "final clusters": int(r.final_n_clusters), "final VI": float(r.final_vi), "decides": entry["decides"]}
              for entry, g in members for r in g.itertuples()]
    if not subs or not bases:
        return Draw(dataset, None, "", f"no {'sub-cluster sampler' if not subs else 'baseline'} ran on it",
                     compared=False), chains
    counted_subs, counted_bases = [e for e in subs if e["decides"]], [e for e in bases if e["decides"]]
    if counted_subs and counted_bases:
        ok, text = _chang_outcome(counted_subs, counted_bases, plateau, tol)
        brief = [e["run"] for e in subs + bases if not e["decides"]]
        if brief:
            text += f" (not counted, shorter than {CHANG_SCOPE.chain_length()}: {and_list(brief)})"
        return Draw(dataset, ok, head + text, numbers=_chang_numbers(counted_subs, counted_bases, plateau, tol),
                     reason=_chang_reason(counted_subs, counted_bases, plateau, tol)), chains
    short = CHANG_SCOPE.shortfall(points_of(ds_runs), {e["run"]: (e["sampler time (s)"], e["iterations"])
                                                    for e in subs + bases})
    return Draw(dataset, None, head + _chang_outcome(subs, bases, plateau, tol)[1],
                 f"below the claim's scale: {'; '.join(short)}",
                 numbers=_chang_numbers(subs, bases, plateau, tol)), chains


def _chang_numbers(subs, bases, plateau, tol) -> dict:
    """The numbers that decide Chang & Fisher's claim on a draw: the plateau, the tolerance,
    the farthest sub-cluster sampler's and the closest baseline's gap, and their VIs."""
    return {"plateau": plateau, "tolerance": tol,
            "sub-cluster gap (worst)": min(e["final log joint"] for e in subs) - plateau,
            "baseline gap (closest)": max(e["final log joint"] for e in bases) - plateau,
            "sub-cluster VI (worst)": max(e["final VI"] for e in subs),
            "baseline VI (best)": min(e["final VI"] for e in bases)}


def _chang_outcome(subs, bases, plateau, tol):
    """Whether Chang & Fisher's claim held among these sub-cluster and baseline entries, and
    what happened, in words, with each median chain's distance to the plateau."""
    def gaps(entries):
        return " and ".join(f"{plateau - e['final log joint']:,.1f}" for e in entries)

    at = [e for e in subs if e["final log joint"] >= plateau - tol]
    short = [e for e in subs if e["final log joint"] < plateau - tol]
    reached = [e for e in bases if e["final log joint"] >= plateau - tol]
    stuck = [e for e in bases if e["final log joint"] < plateau - tol]
    vi_worse = [(s, b) for s in subs for b in bases if not s["final VI"] < b["final VI"]]
    text = (f"{and_list(e['run'] for e in at)} ended at the plateau" if at
            else "no sub-cluster sampler reached the plateau")
    if short:
        text += f"; {and_list(e['run'] for e in short)} ended below it (by {gaps(short)} nats)"
    if stuck:
        text += f"; {and_list(e['run'] for e in stuck)} stayed below it (by {gaps(stuck)} nats)"
    if reached:
        text += f"; {and_list(e['run'] for e in reached)} reached it too"
    if vi_worse:
        text += "; VI not lower for " + ", ".join(f"{s['run']} vs {b['run']} ({s['final VI']:.3g} vs "
                                                  f"{b['final VI']:.3g})" for s, b in vi_worse)
    return not short and not reached and not vi_worse, text


def _chang_reason(subs, bases, plateau, tol) -> str:
    """The main reason Chang & Fisher's claim held on a draw or did not, in a few words."""
    reached = [e["run"] for e in bases if e["final log joint"] >= plateau - tol]
    short = [e["run"] for e in subs if e["final log joint"] < plateau - tol]
    if reached:
        return f"{and_list(reached)} also reached the plateau"
    if short:
        return f"{and_list(short)} ended below the plateau"
    if any(not s["final VI"] < b["final VI"] for s in subs for b in bases):
        return "a sub-cluster sampler's VI to the truth was not lower than a baseline's"
    return "the sub-cluster samplers reached the plateau and no baseline did"
