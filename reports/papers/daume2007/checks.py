"""Daumé (2007)'s claims that need a small measurement of their own, not the config's chains:
the artificial-data study (every heuristic and beam size on small 2-D Gaussian sets), the
search's data order over many random orders (the NIPS table's "random order" is one draw) and
the samplers' sensitivity to their initialisation (the talk's "Personal Observation").
``python -m dpmmbench.workflows.scripts.paper_checks daume2007`` runs them and keeps them, with
their commit and machine, in ``docs/reproductions/daume2007/checks.json``; the entries below
read that record.
"""
from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd

from dpmmbench import algorithms, datasets
from dpmmbench.algorithms import runner
from dpmmbench.algorithms.search import map_search

from ...claims import Criterion, decide
from ...entries import Entry, not_measured, rerun_text
from ...metrics import log_joint, vi

#: the command that writes this module's record
COMMAND = "python -m dpmmbench.workflows.scripts.paper_checks daume2007"
#: the config's corpora (the talk's NIPS recipe: the 10 most frequent words dropped, the next 1,000 kept)
CORPORA = {"reuters?drop_top=10&vocab=1000": "Reuters-395", "nyt?drop_top=10&vocab=1000": "NYT-8447",
           "wikipedia?drop_top=10&vocab=1000": "Wikipedia-7961"}
#: the config's search: inadmissible heuristic, beam 100, alpha 1
SEARCH = {"heuristic": "inadmissible", "beam": 100}
ALPHA = 1.0
#: random orders per corpus (the talk's table has one)
RANDOM_ORDERS = 12
#: the initialisation study: Gibbs on the smallest corpus, from three starts, these seeds and sweeps
INIT_DATA, INIT_SWEEPS, INIT_SEEDS = "reuters?drop_top=10&vocab=1000", 100, (0, 1, 2, 3)
INIT_STARTS = ("one cluster", "50 random clusters", "the search's partition")
#: "very sensitive": the spread of the starts' median final log joints at least this many times
#: the spread of chains that share a start (the seeds)
SPREAD = "between-start spread (× within-start)"
SPREAD_FACTOR = 1.0


def measure_orders(corpora=tuple(CORPORA), orders: int = RANDOM_ORDERS) -> dict:
    """The search's log joint on each corpus in the increasing and decreasing orders and in
    ``orders`` random orders (seeds 0 to orders - 1).

    Returns
    -------
    dict
        Settings and, per corpus, ``increasing``, ``decreasing``, ``random`` (a list) and the
        CPU seconds of the searches.
    """
    out = {"search": SEARCH, "alpha": ALPHA, "seeds": list(range(orders)), "corpora": {}}
    for name in corpora:
        ds = datasets.load(name)
        scores, cpu = {"random": []}, 0.0
        runs = [("increasing", None), ("decreasing", None)] + [("random", s) for s in range(orders)]
        for order, seed in runs:
            start = time.process_time()
            result = map_search(ds.X, ds.family, ALPHA, order=order,
                                rng=None if seed is None else np.random.default_rng(seed), **SEARCH)
            cpu += time.process_time() - start
            score = float(log_joint(ds.X, result.labels, ds.family, ALPHA))
            if order == "random":
                scores["random"].append(score)
            else:
                scores[order] = score
        out["corpora"][ds.name] = {**scores, "documents": int(ds.family.n_points(ds.X)), "search_cpu_s": cpu}
    return out


def measure_initialisation(dataset: str = INIT_DATA, sweeps: int = INIT_SWEEPS, seeds=INIT_SEEDS) -> dict:
    """Collapsed Gibbs for ``sweeps`` sweeps from each start of :data:`INIT_STARTS` and seed.

    Returns
    -------
    dict
        Settings and ``finals``: start -> {seed: [final log joint, final clusters]}.
    """
    ds = datasets.load(dataset)
    searched = map_search(ds.X, ds.family, ALPHA, **SEARCH).labels
    finals = {}
    for start in INIT_STARTS:
        finals[start] = {}
        for seed in seeds:
            sampler = algorithms.make("gibbs", family=ds.family, alpha=ALPHA, seed=seed)
            begin = ({"labels": searched} if start == "the search's partition"
                     else {"init_clusters": 1 if start == "one cluster" else 50})
            chain = runner.run_sampler(sampler, ds.X, iterations=sweeps, time_budget=None, **begin)
            labels = chain.state.labels
            finals[start][str(seed)] = [float(log_joint(ds.X, labels, ds.family, ALPHA)), int(len(np.unique(labels)))]
    return {"dataset": ds.name, "documents": int(ds.family.n_points(ds.X)), "sweeps": sweeps, "seeds": list(seeds),
            "alpha": ALPHA, "sampler": "gibbs", "finals": finals}


#: the artificial-data study: Chang & Fisher's recipe with five clusters at these sizes, every
#: heuristic at these beams; the admissible heuristic costs O(N^2 K) predictives per state, so it
#: runs only where N^2 x beam stays within the budget
ARTIFICIAL_SIZES, ARTIFICIAL_BEAMS, ADMISSIBLE_BUDGET = (25, 50, 100, 200), (1, 10, 100, 1000), 2.5e5
HEURISTICS = ("trivial", "admissible", "inadmissible")


def measure_artificial(sizes=ARTIFICIAL_SIZES, beams=ARTIFICIAL_BEAMS, admissible_budget: float = ADMISSIBLE_BUDGET,
                       ) -> dict:
    """The talk's artificial-data figures: per size, heuristic and beam, the search's log joint
    against the generating partition's, its CPU seconds and the states it pushed and popped.

    Returns
    -------
    dict
        Settings and ``rows``: one dict per search (``n, heuristic, beam, log_joint,
        log_joint_truth, gap_to_truth, cpu_s, states_pushed, states_popped, n_clusters, vi``).
    """
    rows = []
    for n in sizes:
        ds = datasets.load(f"synth-chang2013?n={n}&n_clusters=5")
        if not rows:  # compile (or load) every heuristic's kernels off the clock
            for heuristic in HEURISTICS:
                map_search(ds.X[:min(30, n)], ds.family, ALPHA, heuristic=heuristic, beam=5)
        truth = log_joint(ds.X, ds.labels, ds.family, ALPHA)
        for heuristic in HEURISTICS:
            for beam in beams:
                if heuristic == "admissible" and n * n * beam > admissible_budget:
                    continue
                start = time.process_time()
                found = map_search(ds.X, ds.family, ALPHA, heuristic=heuristic, beam=beam)
                cpu = time.process_time() - start
                score = log_joint(ds.X, found.labels, ds.family, ALPHA)
                rows.append({"dataset": ds.name, "n": n, "heuristic": heuristic, "beam": beam, "log_joint": score,
                             "log_joint_truth": truth, "gap_to_truth": score - truth, "cpu_s": cpu,
                             "states_pushed": found.states_pushed, "states_popped": found.states_popped,
                             "n_clusters": int(found.labels.max()) + 1, "vi": vi(found.labels, ds.labels)})
    return {"alpha": ALPHA, "sizes": list(sizes), "beams": list(beams), "admissible_budget": admissible_budget,
            "rows": rows}


def artificial_study(tables) -> tuple[pd.DataFrame, str]:
    """The artificial-data study's rows and the entries' rerun line: this record's measurement
    (``checks.json``), else the table an older record kept (``artificial.csv``), else empty."""
    kept = (tables.checks or {}).get("artificial")
    if kept:
        return pd.DataFrame(kept["result"]["rows"]), rerun_text(f"{COMMAND} --only artificial", kept)
    older = tables.extra.get("artificial", pd.DataFrame())
    return older, "" if older.empty else (f"`{COMMAND} --only artificial` (this record's table, `artificial.csv`, was "
                                          "written by the script it replaced)")


def _neg(x: float) -> str:
    """A log joint as the talk writes its scores (as the package's tables do)."""
    return "n/a" if not math.isfinite(x) else f"{-x:.3e}"


#: name -> measurement, in the order the record keeps them
MEASUREMENTS = {"artificial": measure_artificial, "orders": measure_orders,
                "initialisation": measure_initialisation}


def orders_entry(checks: dict) -> Entry:
    """The NIPS table's data orders, over many random orders."""
    item = "Real data: NIPS papers, data order over 12 random orders (slide Real Data: NIPS Papers)"
    paper = ("Search 2.441e6 with the examples ordered by increasing marginal likelihood, 2.474e6 in reverse order, "
             "2.449e6 in random order (one random order): the increasing order scores best.")
    check = checks.get("orders")
    if check is None:
        return not_measured(item, paper, "orders", COMMAND)
    res = check["result"]
    rows, leads = [], []
    for name, c in res["corpora"].items():
        rand = np.asarray(c["random"])
        beaten = int((rand > c["increasing"]).sum())
        lead = c["increasing"] - max(c["decreasing"], float(np.median(rand)))
        leads.append((lead, CORPORA.get(name, name)))
        rows.append({"corpus": CORPORA.get(name, name), "documents": c["documents"],
                     "increasing: -log p": _neg(c["increasing"]), "decreasing: -log p": _neg(c["decreasing"]),
                     "random, best: -log p": _neg(rand.max()), "random, median: -log p": _neg(np.median(rand)),
                     "random, worst: -log p": _neg(rand.min()),
                     f"random orders above increasing (of {len(rand)})": beaten,
                     "random spread (% of median)": 100 * float(rand.max() - rand.min()) / abs(float(np.median(rand)))})
    worst = min(leads)
    criterion = Criterion({}, lambda t: all(lead > 0 for lead, _ in leads),
                          f"the increasing order's smallest lead over the better of the decreasing order and the "
                          f"median random order is {worst[0]:+,.0f} nats ({worst[1]}; needs > 0)")
    measured = (f"The config's search (inadmissible heuristic, beam {SEARCH['beam']}, α = {res['alpha']:g}) on each "
                f"corpus in the increasing and decreasing orders and in {len(res['seeds'])} random orders (seeds "
                f"{res['seeds'][0]}-{res['seeds'][-1]}), scored by the suite's log joint. Criterion: reproduced when, "
                "on every corpus, the increasing order scores above the decreasing order and above the median random "
                "order.")
    held = criterion.holds({})
    reason = ("As in the talk, ordering the documents by increasing marginal likelihood beats the reverse and a "
              "typical random order on every corpus." if held else
              f"On {worst[1]} the increasing order is not above both the decreasing order and the median random "
              "order: the order's effect depends on the corpus, and one random order (the talk's table) does not "
              "say where a typical one falls.")
    return Entry(item, paper, measured, decide(criterion), reason, table=pd.DataFrame(rows), criterion=criterion,
                 rerun=rerun_text(f"{COMMAND} --only orders", check))


def initialisation_entry(checks: dict) -> Entry:
    """The talk's "Personal Observation": samplers are very sensitive to initialisation."""
    item = "Personal observation: samplers very sensitive to initialization (slide 2)"
    paper = "\"Samplers slow on huge data sets (10k+ elements) / Very sensitive to initialization\" (no number given)."
    check = checks.get("initialisation")
    if check is None:
        return not_measured(item, paper, "initialisation", COMMAND)
    res = check["result"]
    finals = {start: np.asarray([v[0] for v in by_seed.values()]) for start, by_seed in res["finals"].items()}
    clusters = {start: [v[1] for v in by_seed.values()] for start, by_seed in res["finals"].items()}
    medians = {start: float(np.median(v)) for start, v in finals.items()}
    between = max(medians.values()) - min(medians.values())
    within = float(np.median([v.max() - v.min() for v in finals.values()]))
    ratio = between / within if within > 0 else math.inf
    criterion = Criterion({SPREAD: SPREAD_FACTOR}, lambda t: ratio >= t[SPREAD],
                          f"the starts' median final log joints span {between:,.0f} nats, {ratio:.2f}× the median "
                          f"span of chains sharing a start ({within:,.0f} nats; needs {SPREAD_FACTOR:g}×)")
    table = pd.DataFrame([{"start": start, "chains": len(v), "median final log joint": medians[start],
                           "best": float(v.max()), "worst": float(v.min()), "span (nats)": float(v.max() - v.min()),
                           "median clusters": float(np.median(clusters[start]))} for start, v in finals.items()])
    best = max(medians, key=medians.get)
    measured = (f"Collapsed Gibbs (the talk's Gibbs) on {res['dataset']} ({res['documents']} documents, α = "
                f"{res['alpha']:g}) for {res['sweeps']} sweeps from three starts (one cluster; 50 random clusters; "
                f"the search's partition, the talk's advice) with seeds {', '.join(map(str, res['seeds']))}: the "
                f"starts' median final log joints span {between:,.0f} nats (best from {best}), chains sharing a start "
                f"span a median {within:,.0f} nats. Criterion: reproduced when the start moves the end more than "
                "the seed does.")
    held = criterion.holds(dict(criterion.thresholds))
    reason = (f"Where a chain ends after {res['sweeps']} sweeps depends on where it started more than on its random "
              "numbers." if held else
              f"After {res['sweeps']} sweeps the start moves the end less than the seed does on this corpus.")
    return Entry(item, paper, measured, decide(criterion), reason, table=table, criterion=criterion,
                 rerun=rerun_text(f"{COMMAND} --only initialisation", check))


def entries(tables) -> list:
    """The entries of this module's record (``tables.checks``)."""
    return [orders_entry(tables.checks), initialisation_entry(tables.checks)]
